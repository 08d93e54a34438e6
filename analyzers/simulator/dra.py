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
nowhere else: no event, no PodScheduled condition. A claim absent from a
snapshot that holds no ResourceClaim at all is not judged (it may not have been
collected).
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
            if claims:
                return ClaimHold(MISSING, name, entry.name, f'could not find ResourceClaim "{ns}/{name}"')
            continue
        if claim.deleted is not None:
            return ClaimHold(DELETING, name, entry.name, f'resourceclaim "{name}" is being deleted')
        if must_own and claim.owner_uid != pod.uid:
            message = f"ResourceClaim {ns}/{name} was not created for pod {ns}/{pod.name} (pod is not owner)"
            return ClaimHold(NOT_OWNED, name, entry.name, message)
    return None
