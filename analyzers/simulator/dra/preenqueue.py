"""DynamicResources' PreEnqueue: a pod whose ResourceClaims are not there yet
never enters kube-scheduler's queue.

pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go (v1.35.4)
``PreEnqueue`` calls ``foreachPodResourceClaim``, which walks
``spec.resourceClaims`` in order and stops at the first entry that fails:

- a claim from a ResourceClaimTemplate that ``status.resourceClaimStatuses``
  does not list yet (k8s.io/dynamic-resource-allocation/resourceclaim ``Name``:
  ``pod "NS/NAME": ResourceClaim not created yet``); an entry listed without a
  claim name is skipped (no claim was needed);
- a claim the scheduler's cache does not hold (assumecache ``NotFoundError``:
  ``could not find ResourceClaim "NS/NAME"``);
- a claim being deleted (``resourceclaim "NAME" is being deleted``);
- a claim from a template that the pod does not control (``IsForPod``).

The rejection is UnschedulableAndUnresolvable, logged at -v=5 and written
nowhere else: no event, no PodScheduled condition.

A claim absent from the snapshot is missing only when the snapshot holds every
ResourceClaim of the pod's namespace (``ClusterSnapshot.holds_every``: the live
agent's and the kubectl plugin's list succeeded, or a dump carries claims or a
claim listing); otherwise it is not judged (it may not have been collected) and
:func:`unjudged_claims` names it.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzers.records import Pod
from analyzers.snapshot import ClusterSnapshot

NOT_CREATED = "resourceclaim-not-created"
MISSING = "missing-resourceclaim"
DELETING = "resourceclaim-being-deleted"
NOT_OWNED = "resourceclaim-not-owned"


@dataclass(frozen=True, slots=True)
class ClaimHold:
    """Why PreEnqueue holds the pod: ``name`` is the claim's (the template's for
    NOT_CREATED), ``entry`` the spec.resourceClaims entry, ``message`` the status."""

    cause: str
    name: str
    entry: str
    message: str


def claim_hold(snapshot: ClusterSnapshot, pod: Pod) -> ClaimHold | None:
    """The first ``spec.resourceClaims`` entry DynamicResources' PreEnqueue refuses, or None."""
    claims = snapshot.resource_claims
    ns = pod.namespace
    for entry in pod.spec.resource_claims:
        if entry.claim_name:
            name, must_own = entry.claim_name, False
        elif entry.template_name:
            if entry.name not in pod.resource_claim_statuses:
                message = f'pod "{ns}/{pod.name}": ResourceClaim not created yet'
                return ClaimHold(NOT_CREATED, entry.template_name, entry.name, message)
            name, must_own = pod.resource_claim_statuses[entry.name], True
            if not name:
                continue
        else:
            continue  # neither field: the API server refuses such a pod
        claim = claims.get((ns, name))
        if claim is None:
            if snapshot.holds_every("ResourceClaim", ns):
                return ClaimHold(MISSING, name, entry.name, f'could not find ResourceClaim "{ns}/{name}"')
            continue  # not collected: cannot tell missing from not read
        if claim.deleted is not None:
            return ClaimHold(DELETING, name, entry.name, f'resourceclaim "{name}" is being deleted')
        if must_own and claim.owner_uid != pod.uid:
            message = f"ResourceClaim {ns}/{name} was not created for pod {ns}/{pod.name} (pod is not owner)"
            return ClaimHold(NOT_OWNED, name, entry.name, message)
    return None


def claim_names(pod: Pod) -> list[str]:
    """The ResourceClaims ``pod`` names (``resourceclaim.Name``): by name, or the
    generated one its status lists for a template entry."""
    names: list[str] = []
    for entry in pod.spec.resource_claims:
        name = entry.claim_name or (
            pod.resource_claim_statuses.get(entry.name) if entry.template_name else None
        )
        if name:
            names.append(name)
    return names


def unjudged_claims(snapshot: ClusterSnapshot) -> list[tuple[Pod, str]]:
    """(pod, claim) for each claim a pending pod names that the snapshot neither holds
    nor can call missing: the claims of its namespace were not collected."""
    out: list[tuple[Pod, str]] = []
    for pod in snapshot.unscheduled_pods():
        if pod.spec.resource_claims and not snapshot.holds_every("ResourceClaim", pod.namespace):
            out.extend(
                (pod, name)
                for name in claim_names(pod)
                if (pod.namespace, name) not in snapshot.resource_claims
            )
    return out
