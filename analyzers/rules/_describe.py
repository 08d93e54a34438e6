"""Shared wording for rules: a simulated verdict in plain words with numbers.

Not a rule (no ``RULE_ID``): helpers the drain, volume and gate rules use to
say *why* a pod cannot be placed ("node-1 and node-2 are cordoned; node-3 has
200m cpu free and the pod needs 500m"), from the simulator's per-node filter
failures, in kube-scheduler's order (the first failing filter of a node is the
one kube-scheduler reports).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from analyzers.quantity import format_units
from analyzers.records import (
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    Record,
    StorageClass,
)
from analyzers.simulator import PodVerdict, simulate
from analyzers.simulator.nodeinfo import DERIVED_KEY as NODE_TABLE_KEY
from analyzers.simulator.nodeinfo import node_table
from analyzers.simulator.results import FilterFailure, NodeVerdict
from analyzers.snapshot import ClusterSnapshot

if TYPE_CHECKING:
    from analyzers.rules.context import RuleContext

# Taints that mark a node as being drained or removed (besides spec.unschedulable).
DRAIN_TAINTS: Mapping[str, str] = {
    "node.kubernetes.io/unschedulable": "cordoned",
    "karpenter.sh/disrupted": "being disrupted by Karpenter",
    "karpenter.sh/disruption": "being disrupted by Karpenter",
    "ToBeDeletedByClusterAutoscaler": "being removed by cluster-autoscaler",
}


def names(items: Iterable[str], limit: int = 3) -> str:
    """``a``, ``a and b``, ``a, b and c``, ``a, b, c and 4 more``."""
    seq = list(items)
    if len(seq) <= 1:
        return "".join(seq)
    if len(seq) <= limit:
        return ", ".join(seq[:-1]) + " and " + seq[-1]
    return ", ".join(seq[:limit]) + f" and {len(seq) - limit} more"


def are(count: int) -> str:
    return "is" if count == 1 else "are"


def plural(count: int, word: str, suffix: str = "s") -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}{suffix}"


def duration(seconds: float) -> str:
    """``45s``, ``12m``, ``3h05m``, ``2d04h``."""
    s = int(max(0, seconds))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 120:
        return f"{m}m"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def draining(node: Node) -> str | None:
    """How a node is being taken out of service, or None."""
    if node.unschedulable:
        return "cordoned"
    for taint in node.taints:
        how = DRAIN_TAINTS.get(taint.key)
        if how is not None and taint.effect in ("NoSchedule", "NoExecute"):
            return how
    return None


def _resource_rows(failure: FilterFailure) -> list[Mapping[str, Any]]:
    rows = failure.detail.get("resources") if failure.detail else None
    if not isinstance(rows, tuple | list):
        return []
    return [r for r in rows if isinstance(r, Mapping)]


def describe_resources(node: str, failure: FilterFailure) -> str:
    """``node-3 has 200m cpu free and the pod needs 500m``."""
    parts = []
    for row in _resource_rows(failure):
        res = str(row.get("resource", ""))
        free, want = int(row.get("free", 0)), int(row.get("requested", 0))
        if free >= want:
            continue
        if res == "pods":
            parts.append(f"{node} already runs its maximum of {row.get('allocatable')} pods")
            continue
        shown_free = format_units(res, max(free, 0))
        parts.append(f"{node} has {shown_free} {res} free and the pod needs {format_units(res, want)}")
    return "; ".join(parts) or f"{node}: {'; '.join(failure.reasons)}"


def describe_verdict(pod: Pod, verdict: PodVerdict, *, limit: int = 3) -> str:
    """Why the pod does not fit, node by node, in plain words with numbers."""
    if verdict.fits:
        return f"{pod.name} fits on {verdict.feasible_nodes} node(s)"
    if verdict.gated is not None:
        if verdict.gated.plugin == "SchedulingGates":
            return f"{pod.name} is held by schedulingGates ({'; '.join(verdict.gated.reasons)})"
        return (
            f"{pod.name} is held out of kube-scheduler's queue by {verdict.gated.plugin} "
            f"({'; '.join(verdict.gated.reasons)})"
        )
    if verdict.prefilter is not None:
        return f"kube-scheduler rejects {pod.name} before trying any node: {'; '.join(verdict.prefilter.reasons)}"
    return describe_nodes(verdict.nodes, limit=limit) or verdict.message


def describe_nodes(nodes: Iterable[NodeVerdict], *, limit: int = 3) -> str:
    """The failing nodes grouped by their first failing filter, with numbers."""
    cordoned: list[str] = []
    resources: list[tuple[str, FilterFailure]] = []
    others: dict[str, list[str]] = {}
    for nv in nodes:
        first = nv.first
        if nv.fits or first is None:
            continue
        if first.plugin == "NodeUnschedulable":
            cordoned.append(nv.node)
        elif first.plugin == "NodeResourcesFit" and _resource_rows(first):
            resources.append((nv.node, first))
        else:
            others.setdefault("; ".join(first.reasons), []).append(nv.node)
    parts: list[str] = []
    if cordoned:
        parts.append(f"{names(cordoned, limit)} {are(len(cordoned))} cordoned (node(s) were unschedulable)")
    for node, failure in resources[:limit]:
        parts.append(describe_resources(node, failure))
    if len(resources) > limit:
        parts.append(f"{len(resources) - limit} more node(s) lack room as well")
    for reason, group in sorted(others.items(), key=lambda kv: -len(kv[1])):
        parts.append(f"{names(group, limit)}: {reason}")
    return "; ".join(parts)


def fitting_nodes(verdict: PodVerdict) -> Sequence[str]:
    return [nv.node for nv in verdict.nodes if nv.fits]


def what_if_verdict(ctx: RuleContext, pod: Pod, snapshot: ClusterSnapshot | None = None) -> PodVerdict:
    """Simulate a what-if pod (a changed copy) or a what-if snapshot, never from the memo:
    ``ctx.verdict`` keys its memo by the ids of a pod's spec and labels, which a short-lived
    copy may share with an earlier, garbage-collected one. A hypothetical pod is scheduled
    against the snapshot as if it had no node (analyzers.simulator.simulate), with the
    filters its profile (``--scheduler-config``) runs."""
    return simulate(
        snapshot if snapshot is not None else ctx.snapshot,
        pod,
        kube_version=ctx.version,
        disabled=ctx.disabled_filters(pod),
        added_affinity=ctx.added_affinity(pod),
        dra_filter_timeout=ctx.dra_filter_timeout(pod),
    )


# Records the simulator's NodeTable does not read (it reads nodes, bound pods, priorities).
_TABLE_FREE = (PersistentVolume, PersistentVolumeClaim, StorageClass, PodDisruptionBudget)


def table_free_what_if(ctx: RuleContext, *records: Record) -> ClusterSnapshot:
    """A what-if snapshot changing only storage objects or PDBs: it shares the base
    snapshot's NodeTable (nodes and bound pods are unchanged) instead of rebuilding it,
    which costs a pass over every pod of a large cluster."""
    if not all(isinstance(r, _TABLE_FREE) for r in records):
        raise TypeError("table_free_what_if only takes PVs, PVCs, StorageClasses and PDBs")
    what_if = ctx.snapshot.replace(*records)
    base = node_table(ctx.snapshot)
    what_if.derived(NODE_TABLE_KEY, lambda: base)
    return what_if


# Up to this many nodes a verdict's feasible nodes are named; beyond, counted (building the
# per-node verdicts of a large cluster costs more than the name is worth).
NAMED_NODES_LIMIT = 50


def where_fits(verdict: PodVerdict) -> str:
    """``node-a and node-b`` on small clusters, ``37 nodes`` on large ones."""
    if not verdict.fits:
        return "no node"
    if verdict.total_nodes <= NAMED_NODES_LIMIT:
        return names([nv.node for nv in verdict.nodes if nv.fits])
    return plural(verdict.feasible_nodes, "node")
