"""Which workloads a change of the cluster can affect.

The live agent analyses the whole cluster when it must and only the workloads
a change touched when it can (``build_report(scope=...)``): a burst of
FailedScheduling events and new pending pods of one Deployment should not
re-run every rule for every other pending workload.

A change is **cluster-wide** when it alters what the placement of every pod
reads: nodes, pods bound to nodes (their requests, labels and affinity are the
scheduler's NodeInfo; their readiness feeds PodDisruptionBudgets), budgets,
priority classes, namespaces, storage, metrics. Anything else -- pending pods,
workload objects, events about them -- affects only the workload it belongs to.
Comparing two snapshots is by identity: records are immutable, and an
unchanged object is the same record in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from analyzers.findings import ObjectRef
from analyzers.records import Event, Pod
from analyzers.simulator.nodeinfo import DERIVED_KEY, NodeTable
from analyzers.snapshot import KIND_COLLECTIONS, ClusterSnapshot, Origin, bound_node, pods_by_node_updated

Change = tuple[str, Any, Any]  # (collection, old record or None, new record or None)

# Collections whose every change can move any pending pod's verdict or any budget.
CLUSTER_WIDE = frozenset(
    {
        "nodes",
        "pdbs",
        "replication_controllers",  # their replicas change PDB budgets
        "crds",  # custom controllers' scale: PDB budgets too
        "custom_objects",
        "scales",
        "priority_classes",
        "namespaces",
        "pvcs",
        "resource_claims",
        "resource_claim_templates",
        "resource_slices",
        "device_classes",
        "pvs",
        "storage_classes",
        "node_metrics",
        "pod_metrics",
    }
)
_WORKLOAD_KINDS = {
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "daemonsets": "DaemonSet",
    "jobs": "Job",
}


def changes(older: ClusterSnapshot, newer: ClusterSnapshot) -> Iterator[tuple[str, Any, Any]]:
    """``(collection, old, new)`` for every record that differs (``old`` None: added,
    ``new`` None: removed)."""
    for name in KIND_COLLECTIONS.values():
        before, after = getattr(older, name), getattr(newer, name)
        if before is after:
            continue
        kept = 0
        for key, record in after.items():
            old = before.get(key)
            if old is not None:
                kept += 1
            if old is not record:
                yield name, old, record
        if kept < len(before):
            for key, record in before.items():
                if key not in after:
                    yield name, record, None


def affected_workloads(
    older: ClusterSnapshot, newer: ClusterSnapshot, changed: Iterable[Change] | None = None
) -> frozenset[ObjectRef] | None:
    """The workloads (as ``Finding.subject`` names them) whose analysis may differ
    between the two snapshots; None when the change is cluster-wide. ``changed``:
    ``changes(older, newer)`` when the caller has it already."""
    if older.collected != newer.collected:  # e.g. the claims are listed now: a missing one is judged
        return None
    refs: set[ObjectRef] = set()
    for name, old, new in changes(older, newer) if changed is None else changed:
        if name in CLUSTER_WIDE:
            return None
        if name == "pods":
            if bound_node(old) or bound_node(new):
                return None
            for snap, pod in ((older, old), (newer, new)):
                if pod is not None:
                    refs.add(snap.workload_of(pod).ref)
        elif name == "events":
            for snap, ev in ((older, old), (newer, new)):
                if ev is None:
                    continue
                ref = _event_subject(snap, ev)
                if ref is None:
                    return None
                refs.add(ref)
        elif name == "replicasets":
            for rs in (old, new):
                if rs is not None:
                    owner = rs.owner
                    if owner is not None and owner.kind == "Deployment":
                        refs.add(ObjectRef("Deployment", rs.namespace, owner.name))
                    else:
                        refs.add(ObjectRef("ReplicaSet", rs.namespace, rs.name))
        else:
            record = new if new is not None else old
            refs.add(ObjectRef(_WORKLOAD_KINDS[name], record.namespace, record.name))
    return frozenset(refs)


def _event_subject(snap: ClusterSnapshot, ev: Event) -> ObjectRef | None:
    """The workload an event is about; None when it is about the cluster at large (a node)."""
    inv = ev.involved
    ns = inv.namespace or ev.namespace
    if inv.kind == "Pod":
        pod: Pod | None = snap.pods.get((ns, inv.name))
        return snap.workload_of(pod).ref if pod is not None else ObjectRef("Pod", ns, inv.name)
    if inv.kind == "ReplicaSet":
        rs = snap.replicasets.get((ns, inv.name))
        if rs is not None and rs.owner is not None and rs.owner.kind == "Deployment":
            return ObjectRef("Deployment", ns, rs.owner.name)
        return ObjectRef("ReplicaSet", ns, inv.name)
    if inv.kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return ObjectRef(inv.kind, ns, inv.name)
    return None


def scoped(snapshot: ClusterSnapshot, scope: frozenset[ObjectRef]) -> ClusterSnapshot:
    """The snapshot without the pending pods of workloads outside ``scope``: everything
    the analysis of the workloads in scope reads (nodes, bound pods, their own pods,
    budgets, events) is still there, and no time is spent on the others."""
    drop = [
        ("pods", pod.key) for pod in snapshot.unscheduled_pods() if snapshot.workload_of(pod).ref not in scope
    ]
    return snapshot.replace(remove=drop) if drop else snapshot


def carry_over(older: ClusterSnapshot, newer: ClusterSnapshot, changed: Iterable[Change]) -> bool:
    """Give ``newer`` the simulator's node table (and the pods-per-node index) of
    ``older`` updated by ``changed``, instead of a rebuild over every bound pod,
    when ``older`` has them and the change is small enough to follow (see
    ``NodeTable.derive``). The live agent calls it between passes. Returns whether
    the table was carried over."""
    base = older.cached(DERIVED_KEY)
    if base is None or newer.cached(DERIVED_KEY) is not None:
        return False
    by_collection: dict[str, list[tuple[Any, Any]]] = {}
    for name, old, new in changed:
        by_collection.setdefault(name, []).append((old, new))
    origin = Origin(older, {name: tuple(pairs) for name, pairs in by_collection.items()})
    index = older.cached("pods_by_node")
    if index is not None and newer.cached("pods_by_node") is None:
        updated = pods_by_node_updated(index, origin.changes.get("pods", ()))
        newer.derived("pods_by_node", lambda: updated)
    table = NodeTable.derive(base, newer, origin)
    if table is None:
        return False
    newer.derived(DERIVED_KEY, lambda: table)
    return True
