"""ClusterState (updated one object at a time) and ClusterSnapshot (the
immutable view every analyzer reads).

The live agent feeds watch deltas into a ClusterState; ``unstick analyze``
feeds the objects of a dump. Both then call ``snapshot()`` and run the same
analysis. Records are immutable and shared. A snapshot shares each
collection's base with the state (copy on write, ``LayeredView``) and copies
only what changed since the base was last compacted. The state keeps a
change journal (``Interval``): ``ClusterSnapshot.changes_since`` reads what
changed between two of its snapshots without comparing every record. Derived
indexes (pods per node, per workload, pending pods, events per object) are
computed on first use and cached in the snapshot; those in ``CARRIED`` are
updated from the journal into the next snapshot instead of being rebuilt
(``carry_from``) and shared with its scoped views (``view``).
"""

from __future__ import annotations

import weakref
from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass
from math import isqrt
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


# -- copy-on-write collections ------------------------------------------------

_ABSENT: Any = object()


class LayeredView(Mapping[Any, Any]):
    """A mapping that is a frozen ``base`` dict and the changes made since: values set for
    keys of the base (``changed``, kept in place), keys of the base removed (``gone``) and
    keys added after the base (``tail``, in insertion order; a base key removed and added
    again goes there too). It iterates exactly as a dict given the same operations would:
    the base's order, then the additions. A snapshot holds one per collection, sharing
    the base with the state and with other snapshots, so taking a snapshot copies only
    the changes since the last compaction, never the 150,000 pods."""

    __slots__ = ("_base", "_changed", "_gone", "_tail")

    def __init__(
        self,
        base: dict[Any, Any] | None = None,
        changed: dict[Any, Any] | None = None,
        gone: set[Any] | None = None,
        tail: dict[Any, Any] | None = None,
    ) -> None:
        self._base: dict[Any, Any] = {} if base is None else base
        self._changed: dict[Any, Any] = {} if changed is None else changed
        self._gone: set[Any] = set() if gone is None else gone
        self._tail: dict[Any, Any] = {} if tail is None else tail

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key, _ABSENT)
        if value is _ABSENT:
            raise KeyError(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        if self._tail:
            value = self._tail.get(key, _ABSENT)
            if value is not _ABSENT:
                return value
        if self._gone and key in self._gone:
            return default
        if self._changed:
            value = self._changed.get(key, _ABSENT)
            if value is not _ABSENT:
                return value
        return self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        return self.get(key, _ABSENT) is not _ABSENT

    def __len__(self) -> int:
        return len(self._base) - len(self._gone) + len(self._tail)

    def __iter__(self) -> Iterator[Any]:
        gone = self._gone
        if gone:
            yield from (key for key in self._base if key not in gone)
        else:
            yield from self._base
        yield from self._tail

    def values(self) -> ValuesView[Any]:
        return _Values(self)

    def items(self) -> ItemsView[Any, Any]:
        return _Items(self)

    def _iter_items(self) -> Iterator[tuple[Any, Any]]:
        gone, changed = self._gone, self._changed
        if not gone and not changed:
            yield from self._base.items()
        else:
            for key, value in self._base.items():
                if key in gone:
                    continue
                if changed:
                    value = changed.get(key, value)
                yield key, value
        yield from self._tail.items()

    @property
    def overlay_size(self) -> int:
        """How many entries differ from the base (what a snapshot copies)."""
        return len(self._changed) + len(self._gone) + len(self._tail)

    def materialized(self) -> dict[Any, Any]:
        """A plain dict of the same items in the same order (dict operations in C: values
        in place, removals, then additions)."""
        items = dict(self._base)
        items.update(self._changed)
        for key in self._gone:
            del items[key]
        items.update(self._tail)
        return items

    def frozen(self) -> Mapping[Any, Any]:
        """An immutable copy sharing the base (the overlay copied); the base itself, read
        only, when nothing changed since it (lookups then cost what a dict's do)."""
        if not self.overlay_size:
            return MappingProxyType(self._base)
        return LayeredView(self._base, dict(self._changed), set(self._gone), dict(self._tail))


class _Values(ValuesView[Any]):
    _mapping: LayeredView

    def __iter__(self) -> Iterator[Any]:
        view = self._mapping
        if not view._gone and not view._changed:
            yield from view._base.values()
            yield from view._tail.values()
        else:
            for _, value in view._iter_items():
                yield value


class _Items(ItemsView[Any, Any]):
    _mapping: LayeredView

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return self._mapping._iter_items()


class LayeredDict(LayeredView, MutableMapping[Any, Any]):
    """The state's side of a :class:`LayeredView`: written in place, frozen for each
    snapshot, compacted (the overlay folded into a new base) when the overlay grows past
    a few times the square root of the size: a compaction copies the collection once,
    a snapshot copies the overlay, and that bound keeps both small per change."""

    __slots__ = ()

    def __setitem__(self, key: Any, value: Any) -> None:
        tail = self._tail
        if key in tail:
            tail[key] = value
        elif key in self._base and key not in self._gone:
            self._changed[key] = value
        else:  # new, or a removed key of the base put back: it goes last, as in a dict
            tail[key] = value

    def __delitem__(self, key: Any) -> None:
        if self.pop(key, _ABSENT) is _ABSENT:
            raise KeyError(key)

    def pop(self, key: Any, default: Any = _ABSENT) -> Any:
        tail = self._tail
        if key in tail:
            return tail.pop(key)
        if key in self._base and key not in self._gone:
            self._gone.add(key)
            return self._changed.pop(key, self._base[key])
        if default is _ABSENT:
            raise KeyError(key)
        return default

    def compact_if_large(self) -> None:
        size = self.overlay_size
        if size and size > 4 * isqrt(len(self._base)) + 64:
            self.compact()

    def compact(self) -> None:
        """Fold the overlay into a new base (the old one stays as the views hold it)."""
        self._base = self.materialized()
        self._changed, self._gone, self._tail = {}, set(), {}


# -- the change journal ---------------------------------------------------------


class Interval:
    """The changes a :class:`ClusterState` went through between two of its snapshots: per
    collection, the record each touched key had when the interval began (None: absent)
    and the keys (re)inserted during it, in the order of their last insertion (a dict puts
    them last in that order). Sealed when the next snapshot is taken: ``changes`` then
    holds, per collection, the ``(old, new)`` pairs, and ``next`` the interval after."""

    __slots__ = ("before", "changes", "inserted", "next")

    def __init__(self) -> None:
        self.before: dict[str, dict[Any, Any]] = {}
        self.inserted: dict[str, dict[Any, None]] = {}
        self.changes: dict[str, tuple[dict[Any, tuple[Any, Any]], dict[Any, None]]] | None = None
        self.next: Interval | None = None

    def touch(self, collection: str, key: Any, old: Any, inserting: bool) -> None:
        before = self.before.get(collection)
        if before is None:
            before = self.before[collection] = {}
        if key not in before:
            before[key] = old
        if inserting and old is None:  # the key was absent: the dict puts it last
            inserted = self.inserted.get(collection)
            if inserted is None:
                inserted = self.inserted[collection] = {}
            inserted.pop(key, None)
            inserted[key] = None

    def seal(self, collections: Mapping[str, Mapping[Any, Any]]) -> None:
        self.changes = {
            name: (
                {key: (old, collections[name].get(key)) for key, old in before.items()},
                self.inserted.get(name, {}),
            )
            for name, before in self.before.items()
        }
        self.before = {}
        self.inserted = {}


def journal_changes(intervals: Iterable[Interval]) -> list[tuple[str, Any, Any]]:
    """The ``(collection, old, new)`` changes over consecutive sealed intervals: each key
    once, from the record before the first to the record after the last (unchanged keys
    left out). A key that was absent at some point and is present at the end is listed
    as its removal (when it was there before) and an addition, additions last in the
    order a dict holds them, so indexes that keep the state's order can append them."""
    pairs: dict[str, dict[Any, tuple[Any, Any]]] = {}
    inserted: dict[str, dict[Any, None]] = {}
    for interval in intervals:
        assert interval.changes is not None
        for name, (by_key, added) in interval.changes.items():
            merged = pairs.setdefault(name, {})
            for key, (old, new) in by_key.items():
                first = merged.get(key)
                merged[key] = (old if first is None else first[0], new)
            if added:
                order = inserted.setdefault(name, {})
                for key in added:
                    order.pop(key, None)
                    order[key] = None
    out: list[tuple[str, Any, Any]] = []
    for name in KIND_COLLECTIONS.values():
        found = pairs.get(name)
        if not found:
            continue
        order = inserted.get(name, {})
        for key, (old, new) in found.items():
            if key in order and new is not None:
                if old is not None:
                    out.append((name, old, None))
            elif old is not new:
                out.append((name, old, new))
        for key in order:
            new = found[key][1]
            if new is not None:
                out.append((name, None, new))
    return out


class ClusterState:
    """Mutable cluster state: records keyed by (namespace, name) or name."""

    def __init__(self, kube_version: str | None = None) -> None:
        self.decoder = Decoder()
        self.kube_version = kube_version
        self.warnings: list[str] = []
        self.generation = 0
        self._snapshot: ClusterSnapshot | None = None
        self.collections: dict[str, LayeredDict] = {name: LayeredDict() for name in KIND_COLLECTIONS.values()}
        # The change journal: what changed since the last snapshot, kept and sealed by the next
        # snapshot while a snapshot of this state is held (only then can anyone ask what changed
        # since): the initial load of 150,000 pods journals nothing.
        self._interval = Interval()
        self._held: weakref.WeakSet[ClusterSnapshot] = weakref.WeakSet()
        # (kind, namespace) whose every object the state holds ("" namespace: all of them):
        # what tells an object that does not exist from one that was not read.
        self.collected: set[tuple[str, str]] = set()
        # Kinds the input is known to lack altogether (a dump without any of them): an
        # object of them that a pod names is unknown, not missing.
        self.uncollected: set[str] = set()

    # -- updates -------------------------------------------------------------
    def apply(self, record: Record) -> None:
        name = COLLECTIONS[type(record)]
        items = self.collections[name]
        key = record.key
        if self._held:  # else no one can ask what changed (see snapshot())
            self._interval.touch(name, key, items.get(key), True)
        items[key] = record
        self._changed()

    def delete(self, kind: str, namespace: str, name: str) -> bool:
        coll = KIND_COLLECTIONS.get(kind)
        if coll is None:
            return False
        key: Any = (namespace, name) if coll in _NAMESPACED else name
        return self._remove(coll, key)

    def _remove(self, coll: str, key: Any) -> bool:
        removed = self.collections[coll].pop(key, None)
        if removed is None:
            return False
        if self._held:
            self._interval.touch(coll, key, removed, False)
        self._changed()
        return True

    def forget_scales(self, keep: set[tuple[str, str, str, str]]) -> int:
        """Drop the ``/scale`` readings whose key is not in ``keep`` (their controller is
        no longer what a budget needs); returns how many went."""
        scales = self.collections["scales"]
        stale = [key for key in scales if key not in keep]
        for key in stale:
            self._remove("scales", key)
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
            key = record.key
            if self._held:
                self._interval.touch(coll, key, known.get(key), True)  # type: ignore[arg-type]
            known[key] = record
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
        """The state as an immutable snapshot (the same one until the state changes). It
        shares every collection's base with the state and earlier snapshots (copy on
        write, :class:`LayeredView`), and it seals the journal: ``changes_since`` an
        earlier snapshot of this state is read from it, not found by comparison."""
        if self._snapshot is None:
            interval, self._interval = self._interval, Interval()
            if self._held:  # else no snapshot is left to ask what changed since it
                interval.seal(self.collections)
                interval.next = self._interval
            for items in self.collections.values():
                items.compact_if_large()
            self._snapshot = ClusterSnapshot(
                {name: items.frozen() for name, items in self.collections.items()},
                since=self._interval,
                kube_version=self.kube_version,
                warnings=tuple(self.warnings),
                generation=self.generation,
                collected=frozenset(self.collected),
                uncollected=frozenset(self.uncollected),
            )
            self._held.add(self._snapshot)
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
        "__weakref__",
        "_cache",
        "_origin",
        "_shared",
        "_since",
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
        since: Interval | None = None,
        shared: dict[str, Any] | None = None,
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
        # Indexes that do not depend on which pending pods are analysed (CARRIED): shared with
        # the scoped views of this snapshot and carried over to the next snapshot.
        object.__setattr__(self, "_shared", {} if shared is None else shared)
        object.__setattr__(self, "_since", since)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ClusterSnapshot is immutable")

    kube_version: str | None
    warnings: tuple[str, ...]
    generation: int
    collected: frozenset[tuple[str, str]]  # see ClusterState.mark_collected
    uncollected: frozenset[str]  # see ClusterState.mark_uncollected
    _cache: dict[str, Any]
    _origin: Origin | None
    _shared: dict[str, Any]
    _since: Interval | None

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
                source = collections[name]
                items = changed[name] = (
                    source.materialized() if isinstance(source, LayeredView) else dict(source)
                )
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
        return (self._shared if key in CARRIED else self._cache).get(key)

    # -- derived indexes (cached) -------------------------------------------
    def derived(self, key: str, build: Any) -> Any:
        """A value computed once per snapshot from its contents (build() -> value), cached under key."""
        cache = self._shared if key in CARRIED else self._cache
        try:
            return cache[key]
        except KeyError:
            value = cache[key] = build()
            return value

    # -- the journal ----------------------------------------------------------
    def changes_since(self, older: ClusterSnapshot) -> list[tuple[str, Any, Any]] | None:
        """``(collection, old, new)`` for every record that differs from ``older``, read
        from the journal of the state both were taken from (:func:`journal_changes`);
        None when the journal does not lead from ``older`` to this snapshot (another
        state, a what-if, or a newer snapshot)."""
        end, interval = self._since, older._since
        if end is None or interval is None:
            return None
        intervals = []
        while interval is not end:
            if interval is None or interval.changes is None:
                return None
            intervals.append(interval)
            interval = interval.next
        return journal_changes(intervals)

    def carry_from(self, older: ClusterSnapshot, changed: Sequence[tuple[str, Any, Any]]) -> list[str]:
        """Give this snapshot the CARRIED indexes ``older`` has, each updated by ``changed``
        (the changes from ``older`` to this one) instead of rebuilt over every record; an
        index whose carrier cannot follow the change is left to be rebuilt on first use.
        Returns the keys carried."""
        by_collection: dict[str, list[tuple[Any, Any]]] = {}
        for name, old, new in changed:
            by_collection.setdefault(name, []).append((old, new))
        carried = []
        for key, carry in CARRIED.items():
            base = older._shared.get(key)
            if base is None or key in self._shared:
                continue
            value = carry(base, older, self, by_collection)
            if value is not None:
                self._shared[key] = value
                carried.append(key)
        return carried

    def view(self, unscheduled: Sequence[Pod]) -> ClusterSnapshot:
        """This snapshot with only ``unscheduled`` as the pods to analyse
        (``unscheduled_pods``): the same collections (no copy), the CARRIED indexes shared,
        everything else derived afresh. ``pending_pods`` still lists every waiting pod."""
        narrowed = ClusterSnapshot(
            {name: getattr(self, name) for name in KIND_COLLECTIONS.values()},
            kube_version=self.kube_version,
            warnings=self.warnings,
            generation=self.generation,
            collected=self.collected,
            uncollected=self.uncollected,
            shared=self._shared,
        )
        narrowed._cache[UNSCHEDULED_KEY] = tuple(unscheduled)
        return narrowed

    def pods_by_node(self) -> Mapping[str, tuple[Pod, ...]]:
        """Pods bound to each node (terminal pods excluded, as the scheduler's cache does)."""

        def build() -> dict[str, tuple[Pod, ...]]:
            origin = self._origin
            if origin is not None:
                base = origin.parent.cached(PODS_BY_NODE_KEY)
                if base is not None:
                    return pods_by_node_updated(base, origin.changes.get("pods", ()))
            out: dict[str, list[Pod]] = {}
            for pod in self.pods.values():
                if pod.node_name and not pod.finished:
                    out.setdefault(pod.node_name, []).append(pod)
            return {k: tuple(v) for k, v in out.items()}

        result: Mapping[str, tuple[Pod, ...]] = self.derived(PODS_BY_NODE_KEY, build)
        return result

    def pods_in_namespace(self, namespace: str) -> tuple[Pod, ...]:
        def build() -> dict[str, tuple[Pod, ...]]:
            return _grouped(self.pods.values(), _namespace_of)

        index: Mapping[str, tuple[Pod, ...]] = self.derived(PODS_BY_NAMESPACE_KEY, build)
        return index.get(namespace, ())

    def unscheduled_pods(self) -> list[Pod]:
        """Pods waiting for kube-scheduler (other schedulers' pods excluded), in the
        snapshot's order: all of them (``pending_pods``), or those a scoped view
        analyses (:meth:`view`). Found once per snapshot and carried to the next."""
        pending: tuple[Pod, ...] | None = self._cache.get(UNSCHEDULED_KEY)
        return list(self.pending_pods() if pending is None else pending)

    def pending_pods(self) -> tuple[Pod, ...]:
        """Every pod waiting for a scheduler (no node, not finished, not being deleted), in
        the snapshot's order, whatever a scoped view analyses."""

        return selected(self, PENDING_KEY, "pods", _is_unscheduled)

    def workload_of(self, pod: Pod) -> Workload:
        """Follow the owner chain Pod → ReplicaSet → Deployment (Job → CronJob stops at Job)."""
        owner = pod.owner
        if owner is None:
            return Workload(ObjectRef("Pod", pod.namespace, pod.name), pod)
        return self._owner_workload(pod.namespace, owner.kind, owner.name)

    def _owner_workload(self, ns: str, kind: str, name: str) -> Workload:
        """The workload of the pods ``kind``/``name`` (their owner) owns in ``ns``."""
        if kind == "ReplicaSet":
            rs = self.replicasets.get((ns, name))
            if rs is not None and rs.owner is not None and rs.owner.kind == "Deployment":
                dep = self.deployments.get((ns, rs.owner.name))
                return Workload(ObjectRef("Deployment", ns, rs.owner.name), dep if dep is not None else rs)
            if rs is None and "-" in name:
                # ReplicaSet not in the dump: its name is <deployment>-<pod-template-hash>.
                dep_name = name.rsplit("-", 1)[0]
                dep = self.deployments.get((ns, dep_name))
                if dep is not None:
                    return Workload(ObjectRef("Deployment", ns, dep_name), dep)
            return Workload(ObjectRef("ReplicaSet", ns, name), rs)
        collection = {
            "StatefulSet": self.statefulsets,
            "DaemonSet": self.daemonsets,
            "Job": self.jobs,
            "Deployment": self.deployments,
        }.get(kind)
        record = collection.get((ns, name)) if collection is not None else None
        return Workload(ObjectRef(kind, ns, name), record)

    def pods_of_workload(self, ref: ObjectRef) -> tuple[Pod, ...]:
        """The pods of a workload (as ``workload_of`` names it), in the snapshot's order."""

        def build() -> WorkloadPods:
            by_ref: dict[ObjectRef, list[Pod]] = {}
            owners: dict[tuple[str, Any], ObjectRef] = {}  # pods of one owner share their workload
            by_owner: dict[tuple[str, Any], list[Pod]] = {}
            for pod in self.pods.values():
                key = _owner_key(pod)
                pods = by_owner.get(key)
                if pods is None:
                    owners[key] = ref = self.workload_of(pod).ref
                    pods = by_owner[key] = by_ref.setdefault(ref, [])
                pods.append(pod)
            return WorkloadPods({k: tuple(v) for k, v in by_ref.items()}, owners)

        index: WorkloadPods = self.derived(PODS_BY_WORKLOAD_KEY, build)
        return index.pods.get(ref, ())

    def events_for(self, kind: str, namespace: str, name: str) -> tuple[Event, ...]:
        """Events about one object, newest last (by ``lastTimestamp``; events seen at the same
        moment in the snapshot's order)."""

        def build() -> dict[tuple[str, str, str], tuple[Event, ...]]:
            return _grouped(self.events.values(), _involved)

        index: Mapping[tuple[str, str, str], tuple[Event, ...]] = self.derived(EVENTS_BY_OBJECT_KEY, build)
        key = (kind, namespace, name)
        found = index.get(key)
        if found is None or len(found) < 2:
            return () if found is None else found
        newest_last: dict[tuple[str, str, str], tuple[Event, ...]] = self.derived(EVENTS_SORTED_KEY, dict)
        ordered = newest_last.get(key)
        if ordered is None:
            ordered = newest_last[key] = tuple(sorted(found, key=_last_seen))
        return ordered

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


UNSCHEDULED_KEY = "unscheduled_pods"  # a scoped view's pods to analyse (ClusterSnapshot.view)
PENDING_KEY = "pending_pods"
PODS_BY_NODE_KEY = "pods_by_node"
PODS_BY_NAMESPACE_KEY = "pods_by_namespace"
PODS_BY_WORKLOAD_KEY = "pods_by_workload"
EVENTS_BY_OBJECT_KEY = "events_by_object"  # in the snapshot's order; sorted on first use:
EVENTS_SORTED_KEY = "events_by_object.newest_last"
_SELECTED = "selected"

# Derived values a snapshot passes on to the next of its state (ClusterSnapshot.carry_from)
# and shares with its scoped views: key → carrier(value of the older snapshot, older,
# newer, (old, new) pairs per collection) → the newer snapshot's value, or None when it
# must be rebuilt. Filled below and by the modules that own such indexes (the simulator's
# node table, the report's rollout arithmetic).
Carrier = Callable[[Any, "ClusterSnapshot", "ClusterSnapshot", Mapping[str, Sequence[tuple[Any, Any]]]], Any]
CARRIED: dict[str, Carrier] = {}


@dataclass(frozen=True, slots=True)
class WorkloadPods:
    """ClusterSnapshot.pods_of_workload's index: the pods of each workload in the
    snapshot's order, and the workload each owner's pods were found to belong to."""

    pods: Mapping[ObjectRef, tuple[Pod, ...]]
    owners: Mapping[tuple[str, Any], ObjectRef]


def _owner_key(pod: Pod) -> tuple[str, Any]:
    owner = pod.owner
    return (pod.namespace, (owner.kind, owner.name) if owner is not None else pod.name)


def _namespace_of(pod: Pod) -> str:
    return pod.namespace


def _involved(ev: Event) -> tuple[str, str, str]:
    inv = ev.involved
    return (inv.kind, inv.namespace or ev.namespace, inv.name)


def _last_seen(ev: Event) -> float:
    return ev.last_seen or 0.0


def _is_unscheduled(pod: Pod) -> bool:
    return pod.unscheduled


def selected(snapshot: ClusterSnapshot, key: str, collection: str, keep: Callable[[Any], bool]) -> tuple[Any, ...]:
    """The records of ``collection`` that ``keep`` holds for, in the snapshot's order: found
    once per snapshot and cached under ``key``, carried to the next snapshot when ``key``
    was registered with :func:`carry_selection` (the pending pods, the draining nodes)."""

    def build() -> dict[str, tuple[Any, ...]]:
        return _grouped(getattr(snapshot, collection).values(), lambda r: _SELECTED if keep(r) else None)

    index: Mapping[str, tuple[Any, ...]] = snapshot.derived(key, build)
    return index.get(_SELECTED, ())


def carry_selection(key: str, collection: str, keep: Callable[[Any], bool]) -> None:
    """Carry :func:`selected`'s ``key`` over: only the changed records are judged again."""

    def group(record: Any) -> str | None:
        return _SELECTED if keep(record) else None

    CARRIED[key] = lambda base, older, newer, changes: regrouped(base, changes.get(collection, ()), group)


G = TypeVar("G")


def _grouped(pods: Iterable[R], group: Callable[[R], G | None]) -> dict[G, tuple[R, ...]]:
    out: dict[G, list[R]] = {}
    for pod in pods:
        g = group(pod)
        if g is not None:
            out.setdefault(g, []).append(pod)
    return {k: tuple(v) for k, v in out.items()}


def regrouped(
    base: Mapping[G, tuple[Any, ...]],
    changes: Iterable[tuple[Any, Any]],
    group: Callable[[Any], G | None],
) -> dict[G, tuple[Any, ...]] | None:
    """An index of records (pods, events) by group, each group in the collection's order,
    updated by ``(old, new)`` pairs as :func:`journal_changes` lists them: a record
    changed in place keeps its place, an added one goes last, as a rebuild would order
    them. None when a record changed group in place (its place in the new group is its
    place in the whole collection: rebuild)."""
    out = dict(base)
    edits: dict[G, dict[Any, Any]] = {}  # groups changed in place, by key
    appended: dict[G, list[Any]] = {}  # groups only added to (the pending pods, mostly)

    def members(g: G) -> dict[Any, Any]:
        found = edits.get(g)
        if found is None:
            found = edits[g] = {r.key: r for r in (*out.get(g, ()), *appended.pop(g, ()))}
        return found

    for old, new in changes:
        was = group(old) if old is not None else None
        now = group(new) if new is not None else None
        if new is not None and now is not None:
            if old is not None and was != now:
                return None
            if old is None and now not in edits:
                appended.setdefault(now, []).append(new)
            else:
                members(now)[new.key] = new
        elif old is not None and was is not None:
            members(was).pop(old.key, None)
    for g, records in edits.items():
        if records:
            out[g] = tuple(records.values())
        else:
            out.pop(g, None)
    for g, added in appended.items():
        out[g] = (*out.get(g, ()), *added)
    return out


def _carry_pods_by_workload(
    base: WorkloadPods,
    older: ClusterSnapshot,
    newer: ClusterSnapshot,
    changes: Mapping[str, Sequence[tuple[Any, Any]]],
) -> WorkloadPods | None:
    """pods_of_workload's index updated: pods added, changed and removed, as long as no
    owner already seen now resolves to another workload (a ReplicaSet or Deployment
    added, removed or re-owned under existing pods: rare, rebuilt)."""
    owners = base.owners
    suspects: set[tuple[str, Any]] = set()
    for rs_old, rs_new in changes.get("replicasets", ()):
        rs = rs_new if rs_new is not None else rs_old
        suspects.add((rs.namespace, ("ReplicaSet", rs.name)))
    for dep_old, dep_new in changes.get("deployments", ()):
        if (dep_old is None) != (dep_new is None):  # a guess from a missing ReplicaSet's name may change
            dep = dep_new if dep_new is not None else dep_old
            prefix = dep.name + "-"
            suspects.update(
                key
                for key in owners
                if key[0] == dep.namespace and isinstance(key[1], tuple) and key[1][1].startswith(prefix)
            )
    for key in suspects:
        ref = owners.get(key)
        if ref is not None and newer._owner_workload(key[0], *key[1]).ref != ref:
            return None
    pods = changes.get("pods", ())
    if not pods:
        return base
    added: dict[tuple[str, Any], ObjectRef] = {}  # owners seen for the first time

    def ref_of(pod: Pod) -> ObjectRef:
        key = _owner_key(pod)
        ref = owners.get(key) or added.get(key)
        if ref is None:
            ref = added[key] = newer.workload_of(pod).ref
        return ref

    updated = regrouped(base.pods, pods, ref_of)
    if updated is None:
        return None
    return WorkloadPods(updated, {**owners, **added} if added else owners)


CARRIED[PODS_BY_NODE_KEY] = lambda base, older, newer, changes: pods_by_node_updated(
    base, changes.get("pods", ())
)
carry_selection(PENDING_KEY, "pods", _is_unscheduled)
CARRIED[PODS_BY_NAMESPACE_KEY] = lambda base, older, newer, changes: regrouped(
    base, changes.get("pods", ()), _namespace_of
)
CARRIED[PODS_BY_WORKLOAD_KEY] = _carry_pods_by_workload
CARRIED[EVENTS_BY_OBJECT_KEY] = lambda base, older, newer, changes: regrouped(
    base, changes.get("events", ()), _involved
)


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
