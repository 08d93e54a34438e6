"""Which workloads a change of the cluster can affect.

The live agent analyses the whole cluster when it must and only the workloads
a change touched when it can (``build_report(scope=...)``): a burst of
FailedScheduling events and new pending pods of one Deployment should not
re-run every rule for every other pending workload.

A change is **cluster-wide** when it alters what the placement of every pod
reads: pods bound to nodes (their requests, labels and affinity are the
scheduler's NodeInfo; their readiness feeds PodDisruptionBudgets), budgets,
priority classes, namespaces, storage, metrics, nodes added or removed. Anything
else -- pending pods, workload objects, events about them -- affects only the
workload it belongs to. Comparing two snapshots is by identity: records are
immutable, and an unchanged object is the same record in both.

A **changed node** (its taints, conditions, images or ``spec.unschedulable``;
the same node, with the same labels, allocatable and capacity)
affects the pending workloads whose simulated verdict it changes: the pending
pods are grouped by equivalence class (one spec, labels and namespace; the pod
as its Deployment would create it now beside it), each class is simulated
once against the older and once against the newer snapshot, and a workload is
re-analysed when a verdict of one of its classes differs or the pod fits the
changed node in either (a node a pod fits feeds "it fits on …" and the
scores). Findings about running pods read every node too; they are kept exact
by treating the node change as cluster-wide while they can exist: a node is
being drained (cordoned, or tainted for removal), an event reports a refused
eviction, or node and pod metrics are held (requests-missing-load-skew).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from analyzers.findings import ObjectRef
from analyzers.records import Event, Node, Pod
from analyzers.simulator.nodeinfo import DERIVED_KEY, NodeTable
from analyzers.simulator.results import PodVerdict
from analyzers.snapshot import (
    CARRIED,
    KIND_COLLECTIONS,
    ClusterSnapshot,
    Origin,
    bound_node,
)

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


def changes_between(older: ClusterSnapshot, newer: ClusterSnapshot) -> list[Change]:
    """``(collection, old, new)`` for every record that differs: read from the journal of
    the state both snapshots were taken from (``ClusterSnapshot.changes_since``: the keys
    each apply and delete touched), else found by comparing every record (``changes``)."""
    found = newer.changes_since(older)
    return list(changes(older, newer)) if found is None else found


def changes(older: ClusterSnapshot, newer: ClusterSnapshot) -> Iterator[tuple[str, Any, Any]]:
    """``(collection, old, new)`` for every record that differs (``old`` None: added,
    ``new`` None: removed), by comparing every record of the two snapshots."""
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
    older: ClusterSnapshot,
    newer: ClusterSnapshot,
    changed: Iterable[Change] | None = None,
    *,
    kube_version: str | None = None,
) -> frozenset[ObjectRef] | None:
    """The workloads (as ``Finding.subject`` names them) whose analysis may differ
    between the two snapshots; None when the change is cluster-wide. ``changed``:
    ``changes(older, newer)`` when the caller has it already; ``kube_version``: the
    wording the analysis uses (for the verdicts a node change is judged by)."""
    if older.collected != newer.collected:  # e.g. the claims are listed now: a missing one is judged
        return None
    refs: set[ObjectRef] = set()
    nodes: list[tuple[Node, Node]] = []
    regrouped = False
    for name, old, new in changes(older, newer) if changed is None else changed:
        if name == "nodes":
            if not _followed_node_change(old, new):
                return None
            nodes.append((old, new))
        elif name in CLUSTER_WIDE:
            return None
        elif name == "pods":
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
            regrouped |= old is None or new is None or old.owner != new.owner
        else:
            record = new if new is not None else old
            refs.add(ObjectRef(_WORKLOAD_KINDS[name], record.namespace, record.name))
            regrouped |= name == "deployments" and (old is None or new is None)
    if regrouped:  # a ReplicaSet or Deployment came or went: some pods' workload may have changed
        refs |= _moved_workloads(older, newer)
    if nodes:
        by_nodes = node_change_workloads(older, newer, nodes, kube_version)
        if by_nodes is None:
            return None
        refs |= by_nodes
    return frozenset(refs)


def _moved_workloads(older: ClusterSnapshot, newer: ClusterSnapshot) -> set[ObjectRef]:
    """Both workloads of each pending pod whose workload differs between the snapshots (its
    ReplicaSet or the Deployment guessed from its name came or went): the findings move
    from one subject to the other."""
    moved: set[ObjectRef] = set()
    for pod in (*older.pending_pods(), *newer.pending_pods()):
        was, now = older.workload_of(pod).ref, newer.workload_of(pod).ref
        if was != now:
            moved.update((was, now))
    return moved


# The Node fields a narrowed pass follows are the others (taints, unschedulable, conditions,
# images). These are cluster-wide when they differ: allocatable or capacity (every pod's
# NodeResourcesFit numbers and capacity bars), labels (topology domains; findings quote the
# values nodes carry and shape remedy nodes after them), uid or creation (a node re-created);
# so is a node added or removed (every "0/N nodes" count).
_NODE_IDENTITY = ("uid", "created", "allocatable", "capacity", "labels")


def _followed_node_change(old: Node | None, new: Node | None) -> bool:
    return (
        old is not None
        and new is not None
        and all(getattr(old, f) == getattr(new, f) for f in _NODE_IDENTITY)
    )


def node_change_workloads(
    older: ClusterSnapshot,
    newer: ClusterSnapshot,
    nodes: Iterable[tuple[Node, Node]],
    kube_version: str | None = None,
) -> frozenset[ObjectRef] | None:
    """The pending workloads whose analysis the changed ``nodes`` ((old, new) records of
    the same nodes) can alter; None when the change must be treated as cluster-wide
    (module docstring: findings about running pods can exist)."""
    if _running_pod_findings_possible(older) or _running_pod_findings_possible(newer):
        return None
    from analyzers.rules._placement import as_created_now  # rules import this module's users

    changed = {new.name: old.taints != new.taints for old, new in nodes}
    refs: set[ObjectRef] = set()
    verdicts: dict[tuple[Any, ...], bool] = {}  # class → whether the change touches it
    for pod in newer.unscheduled_pods():
        workload = newer.workload_of(pod)
        if workload.ref in refs:
            continue
        for judged in {pod, as_created_now(newer, pod, workload)[0]}:
            key = (judged.namespace, judged.spec, judged.labels, judged.nominated_node)
            touched = verdicts.get(key)
            if touched is None:
                touched = verdicts[key] = _verdict_moves(older, newer, judged, changed, kube_version)
            if touched:
                refs.add(workload.ref)
                break
    # A pending pod that left or arrived is already its workload's own change.
    return frozenset(refs)


TAINT_TOLERATION = "TaintToleration"


def _verdict_moves(
    older: ClusterSnapshot,
    newer: ClusterSnapshot,
    pod: Pod,
    changed: Mapping[str, bool],
    kube_version: str | None,
) -> bool:
    """Whether the change of the ``changed`` nodes (name → whether its taints changed) can
    alter what the analysis says about ``pod``: its simulated verdict differs between the
    snapshots, it fits a changed node in either, or a changed node's taints are what the
    analysis quotes (untolerated-taint lists every untolerated taint of a node, where
    TaintToleration's verdict names the first) or copies (volume-binding and DRA remedies
    shape a node after one of the cluster's)."""
    from analyzers.simulator import simulate

    if any(changed.values()) and (pod.spec.pvc_names or pod.spec.resource_claims):
        return True
    before: PodVerdict = simulate(older, pod, kube_version=kube_version)
    after: PodVerdict = simulate(newer, pod, kube_version=kube_version)
    if (
        before != after
        or before.node_names != after.node_names
        or dict(before.failing) != dict(after.failing)
        or before.allocations != after.allocations
    ):
        return True
    # PodTopologySpread counts the pods on nodes by the nodes' taints too
    # (nodeTaintsPolicy: Honor): any node's verdict may move.
    if pod.spec.topology_spread and before.nodes != after.nodes:
        return True
    for i, name in enumerate(after.node_names):
        taints = changed.get(name)
        if taints is None:
            continue
        was, now = before.node_at(i), after.node_at(i)
        if was != now or was.fits or now.fits:
            return True
        if taints and any(f.plugin == TAINT_TOLERATION for f in (*was.filters, *now.filters)):
            return True
    return False


def _running_pod_findings_possible(snap: ClusterSnapshot) -> bool:
    """Whether a rule about running pods (their drain, their load) can speak: those read
    every node, and a node change is then cluster-wide."""
    if snap.node_metrics and snap.pod_metrics:
        return True  # requests-missing-load-skew
    from analyzers.rules.pdb_blocks_eviction import draining_nodes, eviction_reports

    return bool(draining_nodes(snap) or eviction_reports(snap))


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
    """The snapshot analysing only the pending pods of the workloads in ``scope``
    (``ClusterSnapshot.view``: no collection copied, the carried indexes shared):
    everything the analysis of those workloads reads (nodes, every pod, budgets,
    events) is still there, and no time is spent on the others."""
    pending = snapshot.unscheduled_pods()
    if len(scope) == 1:  # its pods are in the snapshot's order already
        kept = [pod for ref in scope for pod in snapshot.pods_of_workload(ref) if pod.unscheduled]
    else:
        wanted = {id(pod) for ref in scope for pod in snapshot.pods_of_workload(ref) if pod.unscheduled}
        kept = [pod for pod in pending if id(pod) in wanted]
    if len(kept) == len(pending):
        return snapshot
    return snapshot.view(kept)


def carry_over(older: ClusterSnapshot, newer: ClusterSnapshot, changed: Iterable[Change]) -> bool:
    """Give ``newer`` the indexes ``older`` has (pods per node, per workload, per
    namespace, the pending pods, the simulator's node table, the rollout arithmetic:
    ``analyzers.snapshot.CARRIED``) updated by ``changed`` instead of rebuilt over
    every record, where the change is small enough to follow (see ``NodeTable.derive``).
    The live agent calls it between passes. Returns whether the node table was carried
    over."""
    return DERIVED_KEY in newer.carry_from(older, list(changed))


def _carry_node_table(
    base: NodeTable,
    older: ClusterSnapshot,
    newer: ClusterSnapshot,
    changes: Mapping[str, Sequence[tuple[Any, Any]]],
) -> NodeTable | None:
    return NodeTable.derive(base, newer, Origin(older, {name: tuple(p) for name, p in changes.items()}))


CARRIED[DERIVED_KEY] = _carry_node_table
