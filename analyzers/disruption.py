"""PodDisruptionBudget arithmetic and the eviction decision.

``budget_status`` recomputes what the disruption controller writes into a
PDB's status (pkg/controller/disruption/disruption.go: getExpectedPodCount,
getExpectedScale, countHealthyPods, updatePdbStatus): percentages round *up*
(GetScaledValueFromIntOrPercent(..., true)); an int minAvailable counts the
matching pods; a percentage or maxUnavailable uses the controllers' scale;
``disruptionsAllowed = currentHealthy - desiredHealthy`` clamped at 0, and 0
when no pods are expected.

``eviction_verdict`` follows the eviction subresource
(pkg/registry/core/pod/storage/eviction.go): terminal, Pending and terminating
pods ignore PDBs; more than one PDB is an error; an unready pod passes with
``unhealthyPodEvictionPolicy: AlwaysAllow`` or when the budget is already
met (IfHealthyBudget); otherwise disruptionsAllowed must be above 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from analyzers.records import Deployment, Pod, PodDisruptionBudget
from analyzers.rollout import scaled_value
from analyzers.snapshot import ClusterSnapshot

# pkg/registry/core/pod/storage/eviction.go createTooManyRequestsError / checkAndDecrement.
PDB_VIOLATION_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS_MESSAGE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    pdb: PodDisruptionBudget
    pods: tuple[Pod, ...]  # pods the budget selects
    expected_pods: int
    desired_healthy: int
    current_healthy: int
    disruptions_allowed: int
    unhealthy: tuple[Pod, ...]  # selected, not terminating, not Ready
    error: str | None = None  # why the controller could not compute it (it then allows 0)
    unmanaged: tuple[str, ...] = ()  # selected pods without a controller (UnmanagedPods event)

    def as_dict(self) -> dict[str, object]:
        return {
            "namespace": self.pdb.namespace,
            "name": self.pdb.name,
            "expected_pods": self.expected_pods,
            "desired_healthy": self.desired_healthy,
            "current_healthy": self.current_healthy,
            "disruptions_allowed": self.disruptions_allowed,
            "min_available": self.pdb.min_available,
            "max_unavailable": self.pdb.max_unavailable,
            "unhealthy_pod_eviction_policy": self.pdb.unhealthy_pod_eviction_policy,
            "matched_pods": len(self.pods),
            "error": self.error,
            "unmanaged_pods": list(self.unmanaged),
        }


def selected_pods(snapshot: ClusterSnapshot, pdb: PodDisruptionBudget) -> tuple[Pod, ...]:
    """Pods the disruption controller counts for this PDB (nil selector: none)."""
    if pdb.selector is None:
        return ()
    return tuple(p for p in snapshot.pods_in_namespace(pdb.namespace) if pdb.selector.matches(p.labels))


class _NoController(Exception):
    """getExpectedScale's error: a pod's controller cannot be found."""


def _no_controller(pod: Pod) -> _NoController:
    return _NoController(f'found no controllers for pod "{pod.name}"')


def _expected_scale(snapshot: ClusterSnapshot, pods: tuple[Pod, ...], unmanaged: list[str]) -> int:
    """getExpectedScale (pkg/controller/disruption/disruption.go, v1.34.2): the sum of
    spec.replicas of the pods' distinct controllers (ReplicationController,
    Deployment via ReplicaSet, ReplicaSet, StatefulSet; kinds behind the scale
    subresource are not in the snapshot, so their pods fail it as upstream does
    when the scale cannot be read). A pod without a controller is left out of the
    count and its name added to ``unmanaged`` (the controller's ``UnmanagedPods``
    event); a controller that cannot be found raises ``_NoController``. A ReplicaSet
    missing from a dump is resolved to its Deployment by name when that is there."""
    scales: dict[tuple[str, str], int] = {}
    counted: set[tuple[str, str]] = set()  # owners already resolved
    for pod in pods:
        owner = pod.owner
        if owner is None:
            unmanaged.append(pod.name)
            continue
        key = (owner.kind, owner.name)
        if key in counted:
            continue
        counted.add(key)
        ns = pod.namespace
        if owner.kind == "ReplicaSet":
            rs = snapshot.replicasets.get((ns, owner.name))
            if rs is not None and rs.owner is not None and rs.owner.kind == "Deployment":
                dep = snapshot.deployments.get((ns, rs.owner.name))
                if dep is None:
                    raise _no_controller(pod)
                scales[("Deployment", dep.name)] = dep.replicas
            elif rs is not None:
                scales[key] = rs.replicas
            else:
                dep = snapshot.workload_of(pod).record
                if not isinstance(dep, Deployment):
                    raise _no_controller(pod)
                scales[("Deployment", dep.name)] = dep.replicas
        elif owner.kind == "ReplicationController":
            rc = snapshot.replication_controllers.get((ns, owner.name))
            if rc is None:
                raise _no_controller(pod)
            scales[key] = rc.replicas
        elif owner.kind == "StatefulSet":
            sts = snapshot.statefulsets.get((ns, owner.name))
            if sts is None:
                raise _no_controller(pod)
            scales[key] = sts.replicas
        else:
            raise _no_controller(pod)
    return sum(scales.values())


def budget_status(snapshot: ClusterSnapshot, pdb: PodDisruptionBudget) -> BudgetStatus:
    """What the disruption controller's trySync writes into ``pdb``'s status
    (getExpectedPodCount, countHealthyPods, updatePdbStatus; failSafe on an error)."""
    pods = selected_pods(snapshot, pdb)
    unmanaged: list[str] = []
    live = [p for p in pods if p.deleted is None]
    unhealthy = tuple(p for p in live if not p.ready and not p.finished)
    try:
        if pdb.max_unavailable is not None:
            expected = _expected_scale(snapshot, pods, unmanaged)
            desired = max(0, expected - scaled_value(pdb.max_unavailable, expected, True))
        elif isinstance(pdb.min_available, int):
            expected, desired = len(pods), pdb.min_available
        elif pdb.min_available is not None:
            expected = _expected_scale(snapshot, pods, unmanaged)
            desired = scaled_value(pdb.min_available, expected, True)
        else:  # neither field: getExpectedPodCount leaves both counts at zero
            expected = desired = 0
    except _NoController as exc:
        # failSafe: only disruptionsAllowed is set (to 0); the other figures stay
        # what the controller last wrote.
        return BudgetStatus(
            pdb,
            pods,
            pdb.status_expected_pods or 0,
            pdb.status_desired_healthy or 0,
            pdb.status_current_healthy or 0,
            0,
            unhealthy,
            str(exc),
            tuple(unmanaged),
        )
    # countHealthyPods: a pod being deleted is never healthy, whatever its Ready condition.
    healthy = sum(1 for p in live if p.ready)
    # updatePdbStatus: "We require expectedCount to be > 0 so that PDBs which
    # currently match no pods are in a safe state".
    allowed = max(healthy - desired, 0) if expected > 0 else 0
    return BudgetStatus(pdb, pods, expected, desired, healthy, allowed, unhealthy, None, tuple(unmanaged))


def pdbs_for_pod(snapshot: ClusterSnapshot, pod: Pod) -> tuple[PodDisruptionBudget, ...]:
    """PDBs the eviction subresource applies to a pod: same namespace, and a
    selector that is neither nil nor empty ("it should match nothing, not everything")."""
    return tuple(
        pdb
        for pdb in snapshot.pdbs.values()
        if pdb.namespace == pod.namespace
        and pdb.selector is not None
        and not pdb.selector.is_empty
        and pdb.selector.matches(pod.labels)
    )


@dataclass(frozen=True, slots=True)
class EvictionVerdict:
    allowed: bool
    kind: str  # "ignored-pdb", "no-pdb", "allowed", "unhealthy-allowed", "pdb-violation", "multiple-pdbs"
    message: str
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    status: BudgetStatus | None = None


def eviction_verdict(
    snapshot: ClusterSnapshot,
    pod: Pod,
    *,
    pdbs_for: Callable[[ClusterSnapshot, Pod], tuple[PodDisruptionBudget, ...]] = pdbs_for_pod,
    status_of: Callable[[ClusterSnapshot, PodDisruptionBudget], BudgetStatus] = budget_status,
) -> EvictionVerdict:
    """What the eviction subresource answers for ``pod``. ``pdbs_for`` and
    ``status_of`` default to the plain computations; callers asking for many pods
    pass memoised ones (same results, computed once per snapshot)."""
    if pod.finished or pod.phase == "Pending" or pod.deleted is not None:
        return EvictionVerdict(
            True, "ignored-pdb", "terminal, pending or terminating pods are evicted without PDB checks"
        )
    pdbs = pdbs_for(snapshot, pod)
    if len(pdbs) > 1:
        return EvictionVerdict(False, "multiple-pdbs", MULTIPLE_PDBS_MESSAGE, pdbs)
    if not pdbs:
        return EvictionVerdict(True, "no-pdb", "no PodDisruptionBudget selects this pod")
    status = status_of(snapshot, pdbs[0])
    if not pod.ready:
        if pdbs[0].unhealthy_pod_eviction_policy == "AlwaysAllow":
            return EvictionVerdict(True, "unhealthy-allowed", "unready pod; policy AlwaysAllow", pdbs, status)
        if status.current_healthy >= status.desired_healthy and status.desired_healthy > 0:
            return EvictionVerdict(
                True, "unhealthy-allowed", "unready pod; the budget is met (IfHealthyBudget)", pdbs, status
            )
    if status.disruptions_allowed > 0:
        return EvictionVerdict(
            True, "allowed", f"{status.disruptions_allowed} disruption(s) allowed", pdbs, status
        )
    message = (
        f"{PDB_VIOLATION_MESSAGE} The disruption budget {pdbs[0].name} needs {status.desired_healthy} "
        f"healthy pods and has {status.current_healthy} currently"
    )
    return EvictionVerdict(False, "pdb-violation", message, pdbs, status)
