"""ClusterState (updated one object at a time) and ClusterSnapshot (the
immutable view every analyzer reads).

The live agent feeds watch deltas into a ClusterState; ``unstick analyze``
feeds the objects of a dump. Both then call ``snapshot()`` and run the same
analysis. A snapshot copies only the top-level mappings; records are
immutable and shared. Derived indexes (pods per node, owners, events per
object) are computed on first use and cached in the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from analyzers.findings import ObjectRef
from analyzers.ingest import IGNORED_KINDS, Decoder, InputError, describe
from analyzers.records import (
    CustomObject,
    CustomResourceDefinition,
    DaemonSet,
    Deployment,
    DeviceClass,
    Event,
    Job,
    Namespace,
    Node,
    NodeMetrics,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodMetrics,
    PriorityClass,
    Record,
    ReplicaSet,
    ReplicationController,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    ScaleReading,
    StatefulSet,
    StorageClass,
)

K = TypeVar("K")
R = TypeVar("R")

# Record type → the attribute of ClusterState/ClusterSnapshot holding it.
COLLECTIONS: dict[type, str] = {
    Pod: "pods",
    Node: "nodes",
    Deployment: "deployments",
    ReplicaSet: "replicasets",
    ReplicationController: "replication_controllers",
    StatefulSet: "statefulsets",
    DaemonSet: "daemonsets",
    Job: "jobs",
    PodDisruptionBudget: "pdbs",
    PriorityClass: "priority_classes",
    Namespace: "namespaces",
    PersistentVolumeClaim: "pvcs",
    ResourceClaim: "resource_claims",
    ResourceClaimTemplate: "resource_claim_templates",
    ResourceSlice: "resource_slices",
    DeviceClass: "device_classes",
    PersistentVolume: "pvs",
    StorageClass: "storage_classes",
    Event: "events",
    NodeMetrics: "node_metrics",
    PodMetrics: "pod_metrics",
    CustomResourceDefinition: "crds",
    CustomObject: "custom_objects",  # keyed (namespace, group, kind, name)
    ScaleReading: "scales",  # the live agent's /scale reads, keyed like custom_objects
}
KIND_COLLECTIONS: dict[str, str] = {
    "Pod": "pods",
    "Node": "nodes",
    "Deployment": "deployments",
    "ReplicaSet": "replicasets",
    "ReplicationController": "replication_controllers",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
    "Job": "jobs",
    "PodDisruptionBudget": "pdbs",
    "PriorityClass": "priority_classes",
    "Namespace": "namespaces",
    "PersistentVolumeClaim": "pvcs",
    "ResourceClaim": "resource_claims",
    "ResourceClaimTemplate": "resource_claim_templates",
    "ResourceSlice": "resource_slices",
    "DeviceClass": "device_classes",
    "PersistentVolume": "pvs",
    "StorageClass": "storage_classes",
    "Event": "events",
    "NodeMetrics": "node_metrics",
    "PodMetrics": "pod_metrics",
    "CustomResourceDefinition": "crds",
    "CustomObject": "custom_objects",
    "ScaleReading": "scales",
}
# Kinds a dump carries all of once it carries one (kubectl get <kinds> -A lists every one).
COLLECTED_WHEN_SEEN: dict[type, str] = {
    ResourceClaim: "ResourceClaim",
    ResourceClaimTemplate: "ResourceClaimTemplate",
    ResourceSlice: "ResourceSlice",
    DeviceClass: "DeviceClass",
}
# DRA records that keep a validation problem (analyzers.ingest_dra): one warning each.
DRA_VALIDATED = frozenset({ResourceClaim, ResourceClaimTemplate, ResourceSlice, DeviceClass})
_NAMESPACED = frozenset(
    {
        "pods",
        "deployments",
        "replicasets",
        "replication_controllers",
        "statefulsets",
        "daemonsets",
        "jobs",
        "pdbs",
        "pvcs",
        "resource_claims",
        "resource_claim_templates",
        "events",
        "pod_metrics",
    }
)


@dataclass(frozen=True, slots=True)
class Workload:
    """The top of a pod's owner chain (Deployment, StatefulSet, …, or the pod itself)."""

    ref: ObjectRef
    record: Any  # the workload record, or the Pod when it has no known owner


class ClusterState:
    """Mutable cluster state: records keyed by (namespace, name) or name."""

    def __init__(self, kube_version: str | None = None) -> None:
        self.decoder = Decoder()
        self.kube_version = kube_version
        self.warnings: list[str] = []
        self.generation = 0
        self._snapshot: ClusterSnapshot | None = None
        self.collections: dict[str, dict[Any, Any]] = {name: {} for name in KIND_COLLECTIONS.values()}
        # (kind, namespace) whose every object the state holds ("" namespace: all of them):
        # what tells an object that does not exist from one that was not read.
        self.collected: set[tuple[str, str]] = set()
        # Kinds the input is known to lack altogether (a dump without any of them): an
        # object of them that a pod names is unknown, not missing.
        self.uncollected: set[str] = set()

    # -- updates -------------------------------------------------------------
    def apply(self, record: Record) -> None:
        self.collections[COLLECTIONS[type(record)]][record.key] = record
        self._changed()

    def delete(self, kind: str, namespace: str, name: str) -> bool:
        coll = KIND_COLLECTIONS.get(kind)
        if coll is None:
            return False
        key: Any = (namespace, name) if coll in _NAMESPACED else name
        removed = self.collections[coll].pop(key, None) is not None
        if removed:
            self._changed()
        return removed

    def forget_scales(self, keep: set[tuple[str, str, str, str]]) -> int:
        """Drop the ``/scale`` readings whose key is not in ``keep`` (their controller is
        no longer what a budget needs); returns how many went."""
        scales = self.collections["scales"]
        stale = [key for key in scales if key not in keep]
        for key in stale:
            del scales[key]
        if stale:
            self._changed()
        return len(stale)

    def apply_object(self, obj: Mapping[str, Any], source: str = "<input>") -> Record | None:
        """Decode and apply one API object. Raises InputError when it is malformed;
        returns None (with a warning) for kinds unstick does not read.
        An object already held is decoded against its record (see
        ``Decoder.decode``), so a watch update re-decodes only what changed."""
        kind = obj.get("kind")
        coll = KIND_COLLECTIONS.get(kind) if isinstance(kind, str) else None
        known = None if coll is None else self.collections[coll]
        record = self.decoder.decode(obj, source, known)
        if record is None:
            if kind not in IGNORED_KINDS:
                self.warn(f"{source}: {describe(obj)}: kind {kind!r} is not analysed; skipped")
            return None
        if record.__class__ in DRA_VALIDATED and record.problem:  # type: ignore[union-attr]
            self.warn(f"{source}: {describe(obj)}: {record.problem}; its needs are not judged")  # type: ignore[union-attr]
        if known is None or record.__class__ is CustomObject:  # a CR's kind names no collection
            self.apply(record)
        else:  # apply() and _changed(), inlined: this runs for every watch event
            known[record.key] = record
            self.generation += 1
            self._snapshot = None
        return record

    def load(self, objects: Iterable[Mapping[str, Any]], source: str = "<input>") -> int:
        """Apply many objects (a dump); a malformed one becomes a warning. Returns how many
        were used. A dump that carries a ResourceClaim carries all of them (collected)."""
        used = 0
        for obj in objects:
            try:
                record = self.apply_object(obj, source)
            except InputError as exc:
                self.warn(str(exc))
                continue
            if record is not None:
                used += 1
                if record.__class__ in COLLECTED_WHEN_SEEN:
                    self.mark_collected(COLLECTED_WHEN_SEEN[record.__class__])
        return used

    def mark_collected(self, kind: str, namespace: str = "") -> None:
        """Say that the state holds every ``kind`` object of ``namespace`` ("" for all
        namespaces): a list of it succeeded (even an empty one), so an object of it that
        the state lacks does not exist."""
        if (kind, namespace) not in self.collected:
            self.collected.add((kind, namespace))
            self._changed()

    def mark_uncollected(self, kind: str) -> None:
        """Say that the input carries no ``kind`` object at all (a dump made without
        them), so that one a pod names cannot be called missing."""
        if kind not in self.uncollected:
            self.uncollected.add(kind)
            self._changed()

    def warn(self, message: str) -> None:
        if len(self.warnings) < 1000:
            self.warnings.append(message)

    def _changed(self) -> None:
        self.generation += 1
        self._snapshot = None

    # -- the immutable view ---------------------------------------------------
    def snapshot(self) -> ClusterSnapshot:
        if self._snapshot is None:
            self._snapshot = ClusterSnapshot(
                {name: MappingProxyType(dict(items)) for name, items in self.collections.items()},
                kube_version=self.kube_version,
                warnings=tuple(self.warnings),
                generation=self.generation,
                collected=frozenset(self.collected),
                uncollected=frozenset(self.uncollected),
            )
        return self._snapshot


@dataclass(frozen=True, slots=True)
class Origin:
    """How a what-if snapshot was made from another (:meth:`ClusterSnapshot.replace`):
    the parent and, per collection, the ``(old, new)`` record pairs that differ (``old``
    None for an added record, ``new`` None for a removed one). Derived indexes use it to
    update the parent's index instead of rebuilding theirs from every pod."""

    parent: ClusterSnapshot
    changes: Mapping[str, tuple[tuple[Any, Any], ...]]


class ClusterSnapshot:
    """An immutable view of the cluster at one moment."""

    __slots__ = (
        "_cache",
        "_origin",
        "collected",
        "crds",
        "custom_objects",
        "daemonsets",
        "deployments",
        "device_classes",
        "events",
        "generation",
        "jobs",
        "kube_version",
        "namespaces",
        "node_metrics",
        "nodes",
        "pdbs",
        "pod_metrics",
        "pods",
        "priority_classes",
        "pvcs",
        "pvs",
        "replicasets",
        "replication_controllers",
        "resource_claim_templates",
        "resource_claims",
        "resource_slices",
        "scales",
        "statefulsets",
        "storage_classes",
        "uncollected",
        "warnings",
    )

    pods: Mapping[tuple[str, str], Pod]
    nodes: Mapping[str, Node]
    deployments: Mapping[tuple[str, str], Deployment]
    replicasets: Mapping[tuple[str, str], ReplicaSet]
    replication_controllers: Mapping[tuple[str, str], ReplicationController]
    statefulsets: Mapping[tuple[str, str], StatefulSet]
    daemonsets: Mapping[tuple[str, str], DaemonSet]
    jobs: Mapping[tuple[str, str], Job]
    pdbs: Mapping[tuple[str, str], PodDisruptionBudget]
    priority_classes: Mapping[str, PriorityClass]
    namespaces: Mapping[str, Namespace]
    pvcs: Mapping[tuple[str, str], PersistentVolumeClaim]
    resource_claims: Mapping[tuple[str, str], ResourceClaim]
    resource_claim_templates: Mapping[tuple[str, str], ResourceClaimTemplate]
    resource_slices: Mapping[str, ResourceSlice]
    device_classes: Mapping[str, DeviceClass]
    pvs: Mapping[str, PersistentVolume]
    storage_classes: Mapping[str, StorageClass]
    events: Mapping[tuple[str, str], Event]
    node_metrics: Mapping[str, NodeMetrics]
    pod_metrics: Mapping[tuple[str, str], PodMetrics]
    crds: Mapping[str, CustomResourceDefinition]
    custom_objects: Mapping[tuple[str, str, str, str], CustomObject]
    scales: Mapping[tuple[str, str, str, str], ScaleReading]

    def __init__(
        self,
        collections: Mapping[str, Mapping[Any, Any]],
        *,
        kube_version: str | None = None,
        warnings: tuple[str, ...] = (),
        generation: int = 0,
        origin: Origin | None = None,
        collected: frozenset[tuple[str, str]] = frozenset(),
        uncollected: frozenset[str] = frozenset(),
    ) -> None:
        for name in KIND_COLLECTIONS.values():
            object.__setattr__(self, name, collections.get(name, MappingProxyType({})))
        object.__setattr__(self, "kube_version", kube_version)
        object.__setattr__(self, "collected", collected)
        object.__setattr__(self, "uncollected", uncollected)
        object.__setattr__(self, "warnings", warnings)
        object.__setattr__(self, "generation", generation)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_origin", origin)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ClusterSnapshot is immutable")

    kube_version: str | None
    warnings: tuple[str, ...]
    generation: int
    collected: frozenset[tuple[str, str]]  # see ClusterState.mark_collected
    uncollected: frozenset[str]  # see ClusterState.mark_uncollected
    _cache: dict[str, Any]
    _origin: Origin | None

    @classmethod
    def from_records(cls, records: Iterable[Record], kube_version: str | None = None) -> ClusterSnapshot:
        state = ClusterState(kube_version)
        for record in records:
            state.apply(record)
        return state.snapshot()

    @classmethod
    def from_objects(
        cls, objects: Iterable[Mapping[str, Any]], kube_version: str | None = None
    ) -> ClusterSnapshot:
        state = ClusterState(kube_version)
        state.load(objects)
        return state.snapshot()

    def replace(self, *records: Record, remove: Iterable[tuple[str, Any]] = ()) -> ClusterSnapshot:
        """A new snapshot with some records replaced or added (and some removed by
        (collection, key)); used to verify remedies by re-simulating. It remembers
        its :class:`Origin`, so derived indexes can be updated, not rebuilt."""
        collections: dict[str, Mapping[Any, Any]] = {
            name: getattr(self, name) for name in KIND_COLLECTIONS.values()
        }
        changed: dict[str, dict[Any, Any]] = {}
        pairs: dict[str, dict[Any, tuple[Any, Any]]] = {}

        def copy_of(name: str) -> dict[Any, Any]:
            items = changed.get(name)
            if items is None:  # one copy per collection, whatever the number of changes
                items = changed[name] = dict(collections[name])
                pairs[name] = {}
            return items

        for record in records:
            name = COLLECTIONS[type(record)]
            items = copy_of(name)
            old = pairs[name].get(record.key, (items.get(record.key), None))[0]
            items[record.key] = record
            pairs[name][record.key] = (old, record)
        for name, key in remove:
            gone = copy_of(name).pop(key, None)
            if gone is not None:
                old = pairs[name].get(key, (gone, None))[0]
                pairs[name][key] = (old, None)
        collections.update({name: MappingProxyType(items) for name, items in changed.items()})
        origin = Origin(
            self,
            {
                name: tuple((old, new) for old, new in by_key.values() if old is not new)
                for name, by_key in pairs.items()
            },
        )
        return ClusterSnapshot(
            collections,
            kube_version=self.kube_version,
            warnings=self.warnings,
            generation=self.generation,
            origin=origin,
            collected=self.collected,
            uncollected=self.uncollected,
        )

    def lacks(self, kind: str) -> bool:
        """Whether the input carried no ``kind`` object at all (ClusterState.mark_uncollected):
        an object of it that a pod names is unknown, not missing."""
        return kind in self.uncollected

    def holds_every(self, kind: str, namespace: str) -> bool:
        """Whether every ``kind`` object of ``namespace`` is here (its list was read), so
        that one this snapshot lacks does not exist in the cluster."""
        return (kind, "") in self.collected or (kind, namespace) in self.collected

    @property
    def origin(self) -> Origin | None:
        """The snapshot this one was made from by :meth:`replace`, and what changed."""
        return self._origin

    def cached(self, key: str) -> Any:
        """The derived value cached under ``key``, or None when not built (never builds)."""
        return self._cache.get(key)

    # -- derived indexes (cached) -------------------------------------------
    def derived(self, key: str, build: Any) -> Any:
        """A value computed once per snapshot from its contents (build() -> value), cached under key."""
        try:
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = build()
            return value

    def pods_by_node(self) -> Mapping[str, tuple[Pod, ...]]:
        """Pods bound to each node (terminal pods excluded, as the scheduler's cache does)."""

        def build() -> dict[str, tuple[Pod, ...]]:
            origin = self._origin
            if origin is not None:
                base = origin.parent.cached("pods_by_node")
                if base is not None:
                    return pods_by_node_updated(base, origin.changes.get("pods", ()))
            out: dict[str, list[Pod]] = {}
            for pod in self.pods.values():
                if pod.node_name and not pod.finished:
                    out.setdefault(pod.node_name, []).append(pod)
            return {k: tuple(v) for k, v in out.items()}

        result: Mapping[str, tuple[Pod, ...]] = self.derived("pods_by_node", build)
        return result

    def pods_in_namespace(self, namespace: str) -> tuple[Pod, ...]:
        def build() -> dict[str, tuple[Pod, ...]]:
            out: dict[str, list[Pod]] = {}
            for pod in self.pods.values():
                out.setdefault(pod.namespace, []).append(pod)
            return {k: tuple(v) for k, v in out.items()}

        index: Mapping[str, tuple[Pod, ...]] = self.derived("pods_by_namespace", build)
        return index.get(namespace, ())

    def unscheduled_pods(self) -> list[Pod]:
        """Pods waiting for kube-scheduler (other schedulers' pods excluded), in the
        snapshot's order. Found once per snapshot: a pass asks several times, and on a
        large cluster each look is a walk over every pod."""
        pending: tuple[Pod, ...] = self.derived(UNSCHEDULED_KEY, self._unscheduled)
        return list(pending)

    def _unscheduled(self) -> tuple[Pod, ...]:
        return tuple(p for p in self.pods.values() if p.unscheduled)

    def workload_of(self, pod: Pod) -> Workload:
        """Follow the owner chain Pod → ReplicaSet → Deployment (Job → CronJob stops at Job)."""
        owner = pod.owner
        if owner is None:
            return Workload(ObjectRef("Pod", pod.namespace, pod.name), pod)
        ns = pod.namespace
        if owner.kind == "ReplicaSet":
            rs = self.replicasets.get((ns, owner.name))
            if rs is not None and rs.owner is not None and rs.owner.kind == "Deployment":
                dep = self.deployments.get((ns, rs.owner.name))
                return Workload(ObjectRef("Deployment", ns, rs.owner.name), dep if dep is not None else rs)
            if rs is None and "-" in owner.name:
                # ReplicaSet not in the dump: its name is <deployment>-<pod-template-hash>.
                dep_name = owner.name.rsplit("-", 1)[0]
                dep = self.deployments.get((ns, dep_name))
                if dep is not None:
                    return Workload(ObjectRef("Deployment", ns, dep_name), dep)
            return Workload(ObjectRef("ReplicaSet", ns, owner.name), rs)
        collection = {
            "StatefulSet": self.statefulsets,
            "DaemonSet": self.daemonsets,
            "Job": self.jobs,
            "Deployment": self.deployments,
        }.get(owner.kind)
        record = collection.get((ns, owner.name)) if collection is not None else None
        return Workload(ObjectRef(owner.kind, ns, owner.name), record)

    def pods_of_workload(self, ref: ObjectRef) -> tuple[Pod, ...]:
        def build() -> dict[ObjectRef, tuple[Pod, ...]]:
            out: dict[ObjectRef, list[Pod]] = {}
            by_owner: dict[tuple[str, Any], list[Pod]] = {}  # pods of one owner share their workload
            for pod in self.pods.values():
                owner = pod.owner
                key = (pod.namespace, (owner.kind, owner.name) if owner is not None else pod.name)
                pods = by_owner.get(key)
                if pods is None:
                    pods = by_owner[key] = out.setdefault(self.workload_of(pod).ref, [])
                pods.append(pod)
            return {k: tuple(v) for k, v in out.items()}

        index: Mapping[ObjectRef, tuple[Pod, ...]] = self.derived("pods_by_workload", build)
        return index.get(ref, ())

    def events_for(self, kind: str, namespace: str, name: str) -> tuple[Event, ...]:
        """Events about one object, newest last."""

        def build() -> dict[tuple[str, str, str], tuple[Event, ...]]:
            out: dict[tuple[str, str, str], list[Event]] = {}
            for ev in self.events.values():
                inv = ev.involved
                out.setdefault((inv.kind, inv.namespace or ev.namespace, inv.name), []).append(ev)
            return {k: tuple(sorted(v, key=lambda e: e.last_seen or 0.0)) for k, v in out.items()}

        index: Mapping[tuple[str, str, str], tuple[Event, ...]] = self.derived("events_by_object", build)
        return index.get((kind, namespace, name), ())

    def latest_event(self, kind: str, namespace: str, name: str, reason: str) -> Event | None:
        for ev in reversed(self.events_for(kind, namespace, name)):
            if ev.reason == reason:
                return ev
        return None

    def priority_of(self, pod: Pod) -> int:
        """spec.priority as admission set it, else the PriorityClass value, else the global default."""
        if pod.spec.priority is not None:
            return pod.spec.priority
        return self.priority_for_spec_class(pod.spec.priority_class_name)

    def priority_for_spec_class(self, name: str) -> int:
        if name:
            pc = self.priority_classes.get(name)
            if pc is not None:
                return pc.value
            if name == "system-node-critical":
                return 2000001000
            if name == "system-cluster-critical":
                return 2000000000
        for pc in self.priority_classes.values():
            if pc.global_default:
                return pc.value
        return 0

    def __iter__(self) -> Iterator[Record]:
        for name in KIND_COLLECTIONS.values():
            yield from getattr(self, name).values()

    def __repr__(self) -> str:
        return f"<ClusterSnapshot nodes={len(self.nodes)} pods={len(self.pods)} generation={self.generation}>"


UNSCHEDULED_KEY = "unscheduled_pods"  # ClusterSnapshot.unscheduled_pods, cached


def bound_node(pod: Pod | None) -> str | None:
    """The node a pod occupies in the scheduler's view (None: unbound, finished or absent)."""
    if pod is None or not pod.node_name or pod.finished:
        return None
    return pod.node_name


def pods_by_node_updated(
    base: Mapping[str, tuple[Pod, ...]], changes: Iterable[tuple[Pod | None, Pod | None]]
) -> dict[str, tuple[Pod, ...]]:
    """The parent's pods-per-node index with some pods replaced, added or removed. A pod
    replaced on its node keeps its place; an added one goes last (as a rebuild orders them)."""
    out = dict(base)
    for old, new in changes:
        was, now = bound_node(old), bound_node(new)
        if was is not None and was == now and new is not None:
            out[was] = tuple(new if p is old else p for p in out[was])
            continue
        if was is not None:
            rest = tuple(p for p in out.get(was, ()) if p is not old)
            if rest:
                out[was] = rest
            else:
                out.pop(was, None)
        if now is not None and new is not None:
            out[now] = (*out.get(now, ()), new)
    return out
