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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from analyzers.records import OwnerRef, Pod, PodDisruptionBudget, Record
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
    # Why the input cannot tell what the controller computes; the figures are then the
    # PDB's status as the controller last wrote it.
    unknown: str | None = None

    @property
    def from_status(self) -> bool:
        """Whether the figures are read from the PDB's status (failSafe or unknown)."""
        return self.error is not None or self.unknown is not None

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
            "unknown": self.unknown,
            "figures": "status" if self.from_status else "computed",
        }


def selected_pods(snapshot: ClusterSnapshot, pdb: PodDisruptionBudget) -> tuple[Pod, ...]:
    """Pods the disruption controller counts for this PDB (nil selector: none)."""
    if pdb.selector is None:
        return ()
    return tuple(p for p in snapshot.pods_in_namespace(pdb.namespace) if pdb.selector.matches(p.labels))


class _SyncError(Exception):
    """An error getExpectedScale returns: trySync fails and the controller fails safe."""


class _Unknown(Exception):
    """What the controller computes cannot be told from the input (an object the dump
    lacks, a /scale the agent may not read)."""


# A found controller: its identity (the UID, else kind/namespace/name) and its scale.
_Found = tuple[object, int]
# Built-in kinds without a scale subresource that own pods, by (group, kind): their
# resource (GroupResource.String()), as the scale finder's error names them.
_NO_SCALE = {
    ("", "Node"): "nodes",  # mirror pods
    ("", "Pod"): "pods",
    ("apps", "DaemonSet"): "daemonsets.apps",
    ("extensions", "DaemonSet"): "daemonsets.extensions",
    ("batch", "Job"): "jobs.batch",
    ("batch", "CronJob"): "cronjobs.batch",
}


def _same_uid(found: str, ref: str) -> bool:
    """The finders' ``X.UID != controllerRef.UID → nil``; hand-written objects that
    omit a UID are taken at their name."""
    return not found or not ref or found == ref


def _group_of(ref: OwnerRef) -> str | None:
    """schema.ParseGroupVersion's group; None when the apiVersion is absent (hand-written
    objects: any group then matches). More than one slash is upstream's parse error."""
    if not ref.api_version:
        return None
    if ref.api_version.count("/") > 1:
        raise _SyncError(f"unexpected GroupVersion string: {ref.api_version}")
    return ref.group


def _is(ref: OwnerRef, kind: str, groups: tuple[str, ...]) -> bool:
    """verifyGroupKind."""
    group = _group_of(ref)
    return ref.kind == kind and (group is None or group in groups)


def _identity(uid: str, kind: str, namespace: str, name: str) -> object:
    return uid or (kind, namespace, name)


def _owned(records: Mapping[tuple[str, str], Any], ref: OwnerRef, ns: str) -> Any:
    """The lister's Get by the controllerRef's name, and its UID check."""
    record = records.get((ns, ref.name))
    return record if record is not None and _same_uid(record.uid, ref.uid) else None


def _scale_of(record: Any, kind: str, ns: str) -> _Found | None:
    return None if record is None else (_identity(record.uid, kind, ns, record.name), record.replicas)


def _find_replication_controller(snap: ClusterSnapshot, ref: OwnerRef, ns: str) -> _Found | None:
    if not _is(ref, "ReplicationController", ("",)):
        return None
    return _scale_of(_owned(snap.replication_controllers, ref, ns), "ReplicationController", ns)


def _find_deployment(snap: ClusterSnapshot, ref: OwnerRef, ns: str) -> _Found | None:
    """getPodDeployment: the pod's ReplicaSet's controlling Deployment. A ReplicaSet
    missing from a dump is resolved to its Deployment by name (``<deployment>-<hash>``)."""
    if not _is(ref, "ReplicaSet", ("apps", "extensions")):
        return None
    if (ns, ref.name) not in snap.replicasets:
        dep = snap.deployments.get((ns, ref.name.rsplit("-", 1)[0])) if "-" in ref.name else None
        return _scale_of(dep, "Deployment", ns)
    rs = _owned(snap.replicasets, ref, ns)
    owner = None if rs is None else rs.owner
    if owner is None or not owner.controller or not _is(owner, "Deployment", ("apps", "extensions")):
        return None
    return _scale_of(_owned(snap.deployments, owner, ns), "Deployment", ns)


def _find_replica_set(snap: ClusterSnapshot, ref: OwnerRef, ns: str) -> _Found | None:
    """getPodReplicaSet: a ReplicaSet no Deployment controls."""
    if not _is(ref, "ReplicaSet", ("apps", "extensions")):
        return None
    rs = _owned(snap.replicasets, ref, ns)
    if rs is not None and rs.owner is not None and rs.owner.controller and rs.owner.kind == "Deployment":
        return None
    return _scale_of(rs, "ReplicaSet", ns)


def _find_stateful_set(snap: ClusterSnapshot, ref: OwnerRef, ns: str) -> _Found | None:
    if not _is(ref, "StatefulSet", ("apps",)):
        return None
    return _scale_of(_owned(snap.statefulsets, ref, ns), "StatefulSet", ns)


def is_custom_kind(group: str) -> bool:
    """Whether a kind of this group may come from a CustomResourceDefinition (whose
    ``spec.group`` must have a dot); the groups without one are Kubernetes' own."""
    return "." in group


def _find_by_scale(snap: ClusterSnapshot, ref: OwnerRef, ns: str) -> _Found | None:
    """getScaleController: the owner's ``/scale`` subresource (autoscaling/v1 Scale).
    Built-in workloads answer from their records (their /scale is their spec.replicas);
    custom resources from the live agent's reading (``snapshot.scales``), else from the
    dumped CR at its CRD's ``specReplicasPath``."""
    group = _group_of(ref) or ""
    builtin: dict[tuple[str, str], Any] = {
        ("", "ReplicationController"): snap.replication_controllers,
        ("apps", "Deployment"): snap.deployments,
        ("apps", "ReplicaSet"): snap.replicasets,
        ("apps", "StatefulSet"): snap.statefulsets,
    }
    records = builtin.get((group, ref.kind))
    if records is not None:
        return _scale_of(_owned(records, ref, ns), ref.kind, ns)
    resource = _NO_SCALE.get((group, ref.kind))
    if resource is not None:
        raise _SyncError(f"{resource} does not implement the scale subresource")
    if not is_custom_kind(group):
        raise _Unknown(
            f'the scale of {ref.kind} "{ref.name}" ({ref.api_version or "no apiVersion"}) is not known'
        )
    reading = snap.scales.get((ns, group, ref.kind, ref.name))
    if reading is not None:
        if reading.unknown is not None:
            raise _Unknown(reading.unknown)
        if reading.problem is not None:
            raise _SyncError(reading.problem)
        if reading.replicas is None or not _same_uid(reading.uid, ref.uid):
            return None
        return _identity(reading.uid, ref.kind, ns, ref.name), reading.replicas
    return _custom_scale(snap, ref, ns, group)


def _custom_scale(snap: ClusterSnapshot, ref: OwnerRef, ns: str, group: str) -> _Found | None:
    """The Scale the API server builds for a custom resource (apiextensions-apiserver
    pkg/registry/customresource/etcd.go scaleFromCustomResource, v0.35.4): spec.replicas
    is the integer at the version's specReplicasPath, 0 when absent."""
    crd = next((c for c in snap.crds.values() if c.group == group and c.kind == ref.kind), None)
    if crd is None:
        raise _Unknown(f'no CustomResourceDefinition for kind "{ref.kind}" in group "{group}" in the input')
    version_name = ref.api_version.rpartition("/")[2]
    version = crd.version(version_name)
    if version is None or not version.served:
        # meta.NoKindMatchError from the RESTMapper
        raise _SyncError(f'no matches for kind "{ref.kind}" in version "{ref.api_version}"')
    if version.spec_replicas_path is None:
        raise _SyncError(f"{crd.plural}.{crd.group} does not implement the scale subresource")
    cr = snap.custom_objects.get((ns if crd.namespaced else "", group, ref.kind, ref.name))
    if cr is None:
        raise _Unknown(f'{ref.kind} "{ref.name}" ({group}) is not in the input')
    if not _same_uid(cr.uid, ref.uid):
        return None
    replicas = _nested_int64(cr.content, version.spec_replicas_path)
    # autoscalingv1.ScaleSpec.Replicas is an int32: int32(specReplicas)
    replicas = (replicas + 2**31) % 2**32 - 2**31
    return _identity(cr.uid, ref.kind, ns, ref.name), replicas


_GO_TYPES = {str: "string", float: "float64", bool: "bool", tuple: "[]interface {}", type(None): "<nil>"}


def _nested_int64(content: Mapping[str, Any], path: str) -> int:
    """unstructured.NestedInt64 at a scale path (splitReplicasPath: ``.spec.replicas`` →
    spec, replicas): 0 when a field on the way is absent; an accessor error (the Scale
    GET fails, so trySync does) when a value has another type."""
    fields = path.removeprefix(".").split(".")
    value: Any = content
    for i, name in enumerate(fields):
        if not isinstance(value, Mapping):
            where = "." + ".".join(fields[:i])
            raise _SyncError(
                f"{where} accessor error: {value} is of the type {_go_type(value)}, expected map[string]interface{{}}"
            )
        if name not in value:
            return 0
        value = value[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _SyncError(f"{path} accessor error: {value} is of the type {_go_type(value)}, expected int64")
    return value


def _go_type(value: Any) -> str:
    if isinstance(value, Mapping):
        return "map[string]interface {}"
    return _GO_TYPES.get(type(value), type(value).__name__)


# pkg/controller/disruption/disruption.go finders(), in its order.
_FINDERS = (
    _find_replication_controller,
    _find_deployment,
    _find_replica_set,
    _find_stateful_set,
    _find_by_scale,
)


def _expected_scale(snapshot: ClusterSnapshot, pods: tuple[Pod, ...], unmanaged: list[str]) -> int:
    """getExpectedScale (pkg/controller/disruption/disruption.go, v1.35.4): the sum of
    the scales of the pods' distinct controllers, each found by the first of the
    finders (ReplicationController, Deployment via ReplicaSet, ReplicaSet, StatefulSet,
    the /scale subresource) that finds it; a found controller whose UID is not the
    controllerRef's is not the pod's. A pod without a controllerRef is left out of the
    count and its name added to ``unmanaged`` (the controller's ``UnmanagedPods``
    event). Raises ``_SyncError`` with upstream's error (``found no controllers for pod
    "NAME"``, a scale that cannot be read), or ``_Unknown`` when the input cannot tell
    (a finder that would fail raises ``_SyncError`` whichever pod comes first)."""
    scales: dict[object, int] = {}
    resolved: set[OwnerRef] = set()
    unknown: _Unknown | None = None
    for pod in pods:
        ref = pod.owner
        if ref is None or not ref.controller:
            unmanaged.append(pod.name)
            continue
        if ref in resolved:
            continue
        try:
            for finder in _FINDERS:
                found = finder(snapshot, ref, pod.namespace)
                if found is not None:
                    scales[found[0]] = found[1]
                    break
            else:
                raise _SyncError(f'found no controllers for pod "{pod.name}"')
        except _Unknown as exc:
            unknown = unknown or exc
            continue
        resolved.add(ref)
    if unknown is not None:
        raise unknown
    return sum(scales.values())


def budget_status(snapshot: ClusterSnapshot, pdb: PodDisruptionBudget) -> BudgetStatus:
    """What the disruption controller's trySync writes into ``pdb``'s status
    (getExpectedPodCount, countHealthyPods, updatePdbStatus; failSafe on an error).
    When the input cannot tell (``unknown``), the figures are the PDB's own status."""
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
    except (_SyncError, _Unknown) as exc:
        failed = isinstance(exc, _SyncError)
        # failSafe: only disruptionsAllowed is set (to 0); the other figures stay what the
        # controller last wrote. Unknown: all of them are what it last wrote.
        return BudgetStatus(
            pdb,
            pods,
            pdb.status_expected_pods or 0,
            pdb.status_desired_healthy or 0,
            pdb.status_current_healthy or 0,
            0 if failed else max(pdb.status_disruptions_allowed or 0, 0),
            unhealthy,
            str(exc) if failed else None,
            tuple(unmanaged),
            unknown=None if failed else str(exc),
        )
    # countHealthyPods: a pod being deleted is never healthy, whatever its Ready condition.
    healthy = sum(1 for p in live if p.ready)
    # updatePdbStatus: "We require expectedCount to be > 0 so that PDBs which
    # currently match no pods are in a safe state".
    allowed = max(healthy - desired, 0) if expected > 0 else 0
    return BudgetStatus(pdb, pods, expected, desired, healthy, allowed, unhealthy, None, tuple(unmanaged))


def scale_sources(snapshot: ClusterSnapshot, namespace: str) -> list[Record]:
    """Every record the finders may read for pods of ``namespace``: its ReplicaSets,
    Deployments, StatefulSets, ReplicationControllers, custom resources (and the
    cluster-scoped ones), /scale readings, and the CustomResourceDefinitions."""
    return [
        *(r for r in snapshot.replicasets.values() if r.namespace == namespace),
        *(d for d in snapshot.deployments.values() if d.namespace == namespace),
        *(s for s in snapshot.statefulsets.values() if s.namespace == namespace),
        *(r for r in snapshot.replication_controllers.values() if r.namespace == namespace),
        *(c for c in snapshot.custom_objects.values() if c.namespace in (namespace, "")),
        *(r for r in snapshot.scales.values() if r.namespace == namespace),
        *snapshot.crds.values(),
    ]


def scale_targets(snapshot: ClusterSnapshot) -> frozenset[tuple[str, OwnerRef]]:
    """``(namespace, controllerRef)`` of the custom controllers whose ``/scale`` a budget's
    arithmetic needs: controllers of pods selected by a PDB with ``maxUnavailable`` or a
    percentage ``minAvailable`` (getExpectedPodCount reads the scale only then)."""

    def build() -> frozenset[tuple[str, OwnerRef]]:
        targets: set[tuple[str, OwnerRef]] = set()
        for pdb in snapshot.pdbs.values():
            if pdb.max_unavailable is None and not isinstance(pdb.min_available, str):
                continue
            for pod in selected_pods(snapshot, pdb):
                ref = pod.owner
                if (
                    ref is not None
                    and ref.controller
                    and is_custom_kind(ref.group)
                    and ref.api_version.count("/") == 1
                ):
                    targets.add((pod.namespace, ref))
        return frozenset(targets)

    found: frozenset[tuple[str, OwnerRef]] = snapshot.derived("disruption:scale_targets", build)
    return found


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
