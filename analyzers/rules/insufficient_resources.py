"""insufficient-resources: no eligible node has room for the pod's requests.

NodeResourcesFit (pkg/scheduler/framework/plugins/noderesources/fit.go,
fitsRequest) rejects a node when ``Too many pods`` (its ``allocatable.pods``
are all taken) or when a request -- cpu, memory, ephemeral-storage or any
scalar resource such as ``nvidia.com/gpu`` -- exceeds the node's allocatable
minus the sum of the *requests* (not the usage) of the pods bound to it.
Allocatable is capacity minus kube-reserved, system-reserved and the eviction
threshold.

The eligible nodes are those passing the pod's node affinity/selector and
taints (the others belong to other rules); on them the shortage is one of:

- **never fits**: the request exceeds every eligible node's allocatable, so no
  amount of waiting or rescheduling helps (since 1.34 kube-scheduler marks
  such nodes UnschedulableAndUnresolvable, #131345);
- **cluster full**: the eligible nodes together have less free than one pod needs;
- **fragmented**: enough free in total, but not on one node.

Remedies: lower requests (the largest request that fits some node,
re-simulated), capacity (verified with a synthetic node shaped like an
eligible one), and for fragmentation a descheduler policy (unverified).
cluster-autoscaler and Karpenter events about the pod are reported; while a
scale-up is under way the finding is informational.
"""

from __future__ import annotations

import heapq
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from analyzers.findings import Finding, ObjectRef, Remedy
from analyzers.quantity import format_units
from analyzers.records import FrozenMap, Pod
from analyzers.rules import _placement as P
from analyzers.rules._describe import names, plural
from analyzers.rules.context import RuleContext
from analyzers.simulator import codes as C
from analyzers.simulator import node_table
from analyzers.simulator.nodeinfo import NodeTable
from analyzers.simulator.resources import checked_requests, is_scalar

RULE_ID = "insufficient-resources"

NEVER = "never fits"
FULL = "cluster full"
FRAGMENTED = "fragmented"
_ORDER = {NEVER: 0, FULL: 1, FRAGMENTED: 2, "": 3}
_LOWERABLE = ("cpu", "memory", "ephemeral-storage")


_POSITIVE = (0).__lt__
_EVIDENCE_ROWS = 100  # the per-node rows of a shortage in the evidence


@dataclass(slots=True)
class Shortage:
    """One resource over the accounting nodes: its columns in the node table's order,
    which is by name (``nodes``, what is ``free`` and ``allocatable`` on each), the
    aggregates computed once, and the rows sorted most free first only as far as they
    are read (:meth:`rows`): a workload can have every node of a 5,000-node cluster
    eligible, and the words and evidence show its first 100 at most."""

    resource: str
    requested: int
    nodes: Sequence[str]
    free: Sequence[int]
    allocatable: Sequence[int]
    kind: str = ""
    max_allocatable: int = 0
    max_free: int = 0
    total_free: int = 0
    most_allocatable: str = ""
    _top: list[tuple[str, int, int]] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.nodes:
            self.max_free = max(self.free)
            self.max_allocatable = max(self.allocatable)
            # The first maximum: the smallest name.
            self.most_allocatable = self.nodes[self.allocatable.index(self.max_allocatable)]
        self.total_free = sum(filter(_POSITIVE, self.free))

    @property
    def count(self) -> int:
        return len(self.nodes)

    def rows(self, limit: int | None = None) -> list[tuple[str, int, int]]:
        """(node, free, allocatable) most free first, then by name; the first ``limit``.
        The positions are ordered by what is free alone: the sort is stable, ``reverse``
        included, and ``heapq.nlargest`` is documented equal to ``sorted(...,
        reverse=True)[:n]``, so equal amounts keep the columns' (name) order. The
        first ``_EVIDENCE_ROWS`` are ordered once: the words show a few, the evidence
        that many."""
        if limit is not None and limit <= _EVIDENCE_ROWS:
            if self._top is None:
                self._top = self._ordered(_EVIDENCE_ROWS)
            return self._top[:limit]
        return self._ordered(limit)

    def _ordered(self, limit: int | None) -> list[tuple[str, int, int]]:
        free = self.free
        positions = range(len(free))
        if limit is None or limit >= len(free):
            order = sorted(positions, key=free.__getitem__, reverse=True)
        else:
            order = heapq.nlargest(limit, positions, key=free.__getitem__)
        nodes, allocatable = self.nodes, self.allocatable
        return [(nodes[i], free[i], allocatable[i]) for i in order]

    def best(self, of: str) -> str:
        if of == "allocatable":
            return self.most_allocatable
        return self.nodes[self.free.index(self.max_free)] if self.nodes else ""


@dataclass(slots=True)
class Analysis:
    nodes: list[str]  # eligible nodes failing only NodeResourcesFit (the accounting set)
    shortages: list[Shortage]
    kind: str
    excluded: dict[str, list[str]] = field(default_factory=dict)  # eligible nodes failing other filters
    tainted_with_room: list[str] = field(default_factory=list)
    node_indices: list[int] = field(default_factory=list)  # ``nodes`` as the node table's indices

    @property
    def resources(self) -> list[str]:
        return [s.resource for s in self.shortages]


def analyze(ctx: RuleContext) -> list[Finding]:
    items = []
    table = node_table(ctx.snapshot)
    groups = P.blocked(ctx, P.RESOURCES)
    per_workload: dict[ObjectRef, int] = {}
    for group in groups:
        per_workload[group.ref] = per_workload.get(group.ref, 0) + len(group.pods)
    # Pods of one spec share a verdict object, and so their analysis.
    shared: dict[tuple[int, int], Analysis] = {}
    for group in groups:
        key = (id(group.verdict), per_workload[group.ref])
        analysis = shared.get(key)
        if analysis is None:
            analysis = shared[key] = _analyse(table, group, per_workload[group.ref])
        if not analysis.shortages:
            continue
        items.append(("resource:" + "+".join(analysis.resources), group, analysis))
    return [_finding(ctx, cause, found) for cause, found in P.merge_by_cause(items)]


def _requests(pod: Pod) -> list[tuple[str, int]]:
    return [("pods", 1), *checked_requests(pod)]


def _free_column(table: NodeTable, nodes: Sequence[int], res: str) -> list[int]:
    """What is free of ``res`` on each of ``nodes`` (0 where no node offers it), a
    column at a time: one analysis can read every node of a 5,000-node cluster."""
    if res == "pods":
        allowed, count = table.allowed_pods, table.pod_count
        return [allowed[i] - count[i] for i in nodes]
    if res not in table.allocatable:
        return [0] * len(nodes)
    free = table.free[res]
    return [free[i] for i in nodes]


def _allocatable_column(table: NodeTable, nodes: Sequence[int], res: str) -> list[int]:
    """The allocatable ``res`` of each of ``nodes`` (0 where no node offers it)."""
    alloc = table.allowed_pods if res == "pods" else table.allocatable.get(res)
    if alloc is None:
        return [0] * len(nodes)
    return [alloc[i] for i in nodes]


def _analyse(table: NodeTable, group: P.Blocked, pending: int) -> Analysis:
    """Node sets are bit sets over the simulator's node order, which is ``table``'s:
    the verdict was simulated on the same snapshot."""
    views = group.views
    nrf = C.NODE_RESOURCES_FIT
    accounting = views.where(lambda p: p <= {nrf}, views.usable)
    if not accounting:
        accounting = views.where(lambda p: nrf in p, views.usable)
    order = [p for p in views.verdict.failing if p != nrf]
    by_plugin: dict[str, int] = {}
    for plugins, mask in views.parts.items():
        rest = mask & views.usable & ~accounting
        first = next((p for p in order if p in plugins), None)
        if rest and first is not None:
            by_plugin[first] = by_plugin.get(first, 0) | rest
    excluded = {
        plugin: views.names_of(mask)
        for plugin, mask in sorted(by_plugin.items(), key=lambda kv: order.index(kv[0]))
    }
    nodes = views.indices(accounting)
    node_names = [table.names[i] for i in nodes]
    shortages = []
    for res, want in _requests(group.pod):
        free = _free_column(table, nodes, res)
        if not nodes or min(free) >= want:
            continue  # NodeResourcesFit rejects no accounting node for it
        s = Shortage(res, want, node_names, free, _allocatable_column(table, nodes, res))
        if want > s.max_allocatable:
            s.kind = NEVER
        elif s.total_free < want * pending:
            s.kind = FULL  # not enough in total for every pending pod: repacking cannot help
        elif s.max_free < want:
            s.kind = FRAGMENTED
        shortages.append(s)
    kind = min((s.kind for s in shortages), key=lambda k: _ORDER[k], default="")
    # No node whose allocatable holds every short resource at once: never fits either.
    if kind != NEVER and shortages and not _one_node_holds_all(shortages):
        kind = NEVER
    if not kind and shortages:
        kind = FRAGMENTED  # each resource fits somewhere, never all of them on one node
    tainted = views.names_of(
        views.where(
            lambda p: bool(p) and p <= {C.TAINT_TOLERATION, C.NODE_UNSCHEDULABLE_PLUGIN}, views.matches
        )
    )
    return Analysis(node_names, shortages, kind, excluded, tainted, nodes)


def _one_node_holds_all(shortages: Sequence[Shortage]) -> bool:
    """Whether the allocatable of one accounting node holds every short resource at once."""
    holds = [True] * shortages[0].count
    for s in shortages:
        want = s.requested
        holds = [h and a >= want for h, a in zip(holds, s.allocatable, strict=True)]
    return any(holds)


# ---------------------------------------------------------------------------
# Words


def _q(res: str, units: int) -> str:
    if res == "pods":
        return f"{units} pod slot" + ("" if units == 1 else "s")
    return f"{P.human(res, units)} {res}"


def _per_node(s: Shortage, limit: int) -> str:
    shown = [f"{n} {P.human(s.resource, max(f, 0))}/{P.human(s.resource, a)}" for n, f, a in s.rows(limit)]
    more = f", {s.count - limit} more with less" if s.count > limit else ""
    return ", ".join(shown) + more


def _renamed_gpus(ctx: RuleContext, analysis: Analysis) -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """For a GPU resource no node offers (``never fits``), the names the nodes do offer
    GPUs under -- the NVIDIA device plugin's MIG profiles (``nvidia.com/mig-1g.10gb``,
    strategy mixed) and time-slicing renamed (``nvidia.com/gpu.shared``) -- and whether
    the GPUs are time-sliced (a request above 1 is refused by the plugin when
    ``failRequestsGreaterThanOne`` is set, the default with renaming)."""
    from analyzers.gpu_capacity import other_gpu_names, time_sliced_nodes

    out: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for sh in analysis.shortages:
        if sh.kind != NEVER:
            continue
        others = other_gpu_names(ctx.snapshot, sh.resource)
        if not others:
            continue
        listed = ", ".join(
            f"{o.resource} ({o.total} on {plural(o.nodes, 'node')}{', MIG' if o.kind == 'mig' else ''}"
            f"{', time-sliced' if o.kind == 'time-sliced' else ''})"
            for o in others
        )
        words = (
            f"No node advertises {sh.resource}, but the nodes offer GPUs under another name: {listed}; "
            f"a request for {sh.resource} never matches those, so request {others[0].resource} instead "
            "(or configure the device plugin to advertise the name the workload asks for)."
        )
        sliced = time_sliced_nodes(ctx.snapshot)
        if sliced and any(o.kind == "time-sliced" for o in others):
            words += (
                f" The GPUs of {names(sorted(sliced))} are time-sliced ({TIME_SLICING_WORDS}); "
                "with time-slicing a request above 1 is refused by the device plugin when failRequestsGreaterThanOne is set."
            )
        out[sh.resource] = (
            words,
            [{"resource": o.resource, "nodes": o.nodes, "total": o.total, "kind": o.kind} for o in others],
        )
    return out


TIME_SLICING_WORDS = "label nvidia.com/gpu.replicas"


def _shortage_words(s: Shortage, pending: int) -> str:
    res, want = s.resource, s.requested
    if res == "pods":
        full = [n for n, f, _ in s.rows() if f <= 0]
        return (
            f"{names(full)} already run{'s' if len(full) == 1 else ''} their maximum number of pods "
            f'(allocatable pods: {names(sorted({str(a) for a in s.allocatable}))}): "Too many pods"'
        )
    limit = 12 if is_scalar(res) else 5
    table = f"free/allocatable per node: {_per_node(s, limit)}"
    if s.kind == NEVER:
        return (
            f"{_q(res, want)} is more than any eligible node can ever offer (largest allocatable "
            f"{_q(res, s.max_allocatable)} on {s.best('allocatable')}); {table}"
        )
    if s.kind == FULL:
        if s.total_free >= want:
            return (
                f"together the eligible nodes have {_q(res, s.total_free)} free, less than the "
                f"{_q(res, want * pending)} the {pending} pending pods need ({_q(res, want)} each), and at most "
                f"{_q(res, s.max_free)} on one node: the cluster is full for them; {table}"
            )
        return (
            f"together the eligible nodes have {_q(res, s.total_free)} free, less than the {_q(res, want)} one "
            f"pod requests: the cluster is full for it; {table}"
        )
    if s.kind == FRAGMENTED:
        return (
            f"together the eligible nodes have {_q(res, s.total_free)} free -- enough in total, but at most "
            f"{_q(res, s.max_free)} on one node ({s.best('free')}): the free {res} is fragmented; {table}"
        )
    return f"{_q(res, want)} fits on some node, but never together with the other requests; {table}"


def _finding(ctx: RuleContext, cause: str, found: list[tuple[P.Blocked, Analysis]]) -> Finding:
    group, analysis = found[0]
    pod = group.pod
    pending = sum(len(g.pods) for g, _ in found)
    requests = ", ".join(_q(r, q) for r, q in checked_requests(pod)) or "no resources"
    # One count of the nodes passing affinity and taints, split into those another
    # filter refuses and the eligible rest (never two counts that contradict each other).
    excluded = sum(len(nodes) for nodes in analysis.excluded.values())
    passing = len(analysis.nodes) + excluded
    if excluded:
        refused = "; ".join(
            f"{names(nodes)} {'is' if len(nodes) == 1 else 'are'} refused by {plugin} whatever "
            f"{'its' if len(nodes) == 1 else 'their'} room"
            for plugin, nodes in sorted(analysis.excluded.items())
        )
        lead = (
            f"{plural(passing, 'node')} pass{'es' if passing == 1 else ''} its node affinity and taints; {refused}; "
            f"on the other {plural(len(analysis.nodes), 'node')} the pod fits on none "
            f"({analysis.kind}):"
        )
    else:
        lead = (
            f"{plural(passing, 'node')} pass{'es' if passing == 1 else ''} its node affinity and taints, and the pod "
            f"fits on none of them ({analysis.kind}):"
        )
    parts = [
        f"{P.kind_word(group.ref)} has {P.pending_words(group, ctx.now)}; each requests {requests}. {lead}"
    ]
    parts.append("; ".join(_shortage_words(s, pending) for s in analysis.shortages) + ".")
    renamed = _renamed_gpus(ctx, analysis)
    parts.extend(words for words, _ in renamed.values())
    if analysis.tainted_with_room:
        parts.append(
            f"{names(analysis.tainted_with_room)} would have room but {'is' if len(analysis.tainted_with_room) == 1 else 'are'} "
            "tainted or cordoned against this pod."
        )
    parts.append(
        "NodeResourcesFit (pkg/scheduler/framework/plugins/noderesources/fit.go) rejects a node when a request "
        "exceeds its allocatable minus the requests of the pods already bound to it -- requests, not real usage."
    )
    parts.append(P.preemption_words(group.verdict).strip())
    events = P.autoscaler_events(ctx.snapshot, group.pods)
    coming = P.scale_up_in_progress(events)
    if coming is not None:
        parts.append(
            f"{coming.source or 'The autoscaler'} is already adding capacity for it ({coming.reason}: {coming.message})."
        )
    explanation = " ".join(p for p in parts if p) + (P.autoscaler_words(events) if coming is None else "")
    remedies = _remedies(ctx, group, analysis, pending, events)
    evidence: dict[str, Any] = {
        "kind": analysis.kind,
        "requests": {r: format_units(r, q) for r, q in checked_requests(pod)},
        "eligible_nodes": analysis.nodes,
        "eligible_node_count": len(analysis.nodes),
        "nodes_passing_affinity_and_taints": len(analysis.nodes)
        + sum(len(nodes) for nodes in analysis.excluded.values()),
        **(
            {"offered_under_other_names": {res: others for res, (_, others) in renamed.items()}}
            if renamed
            else {}
        ),
        "shortages": [
            {
                "resource": s.resource,
                "requested": format_units(s.resource, s.requested),
                "kind": s.kind,
                "total_free": format_units(s.resource, s.total_free),
                "max_free": format_units(s.resource, s.max_free),
                "max_allocatable": format_units(s.resource, s.max_allocatable),
                "per_node": [
                    {
                        "node": n,
                        "free": format_units(s.resource, f),
                        "allocatable": format_units(s.resource, a),
                    }
                    for n, f, a in s.rows(_EVIDENCE_ROWS)
                ],
            }
            for s in analysis.shortages
        ],
        "excluded_by_other_filters": analysis.excluded,
        "tainted_nodes_with_room": analysis.tainted_with_room,
        "scheduler_message": group.verdict.message,
        "pending_pods": [p.name for g, _ in found for p in g.pods],
        "pending_pod_count": sum(len(g.pods) for g, _ in found),
        "autoscaler_events": [{"reason": e.reason, "message": e.message, "source": e.source} for e in events],
        "preemption_candidates": list(group.verdict.preemption.candidates),
    }
    return Finding(
        rule_id=RULE_ID,
        severity=P.severity(ctx, group, capacity_coming=coming is not None),
        subject=group.ref,
        title=f"{group.ref.name}: insufficient {', '.join(analysis.resources)} ({analysis.kind})",
        explanation=explanation,
        evidence=evidence,
        remedies=tuple(remedies),
        cause=cause,
        pods=P.all_pods(found),
    )


# ---------------------------------------------------------------------------
# Remedies


def _round_down(res: str, units: int) -> int:
    if res == "cpu":
        return units - units % 10
    if res in ("memory", "ephemeral-storage") and units >= 2**20:
        return units - units % 2**20
    return units


def _round_up(res: str, units: int) -> int:
    step = 1000 if res == "cpu" else 2**30 if res in ("memory", "ephemeral-storage") else 1
    return -(-units // step) * step


def _remedies(
    ctx: RuleContext, group: P.Blocked, analysis: Analysis, pending: int, events: Sequence[Any]
) -> list[Remedy]:
    out: list[Remedy] = []
    lower = _lower_requests(ctx, group, analysis, pending)
    if lower is not None:
        out.append(lower)
    capacity = _capacity(ctx, group, analysis, events)
    if capacity is not None:
        out.append(capacity)
    if analysis.kind == FRAGMENTED:
        out.append(_descheduler(ctx, analysis))
    out.sort(key=lambda r: not r.verified)
    return out


def _lower_requests(ctx: RuleContext, group: P.Blocked, analysis: Analysis, pending: int) -> Remedy | None:
    if group.ref.kind in ("Pod", "Job") or "pods" in analysis.resources:
        return None
    table = node_table(ctx.snapshot)
    pod = group.pod
    best = _largest_fitting_request(analysis)
    if best is None or best[0] < ctx.thresholds.min_request_fraction:
        return None
    _, node, new = best
    requests = dict(pod.spec.requests) | new
    verdict = P.what_if(ctx, P.with_spec(pod, requests=FrozenMap(requests)))
    slots = _slots(table, analysis.node_indices, requests, [r for r, _ in _requests(pod)])
    multi = pod.spec.container_count > 1
    req_arg = ",".join(f"{r}={format_units(r, v)}" for r, v in sorted(new.items()) if not is_scalar(r))
    lim_arg = ",".join(f"{r}={format_units(r, v)}" for r, v in sorted(new.items()) if is_scalar(r))
    ns = shlex.quote(group.ref.namespace)
    command = f"kubectl set resources {group.ref.kind.lower()}/{shlex.quote(group.ref.name)} -n {ns}"
    if req_arg or lim_arg:
        command += f" --requests={','.join(a for a in (req_arg, lim_arg) if a)}"
    if lim_arg:
        command += f" --limits={lim_arg}"  # extended resources: requests must equal limits
    words = ", ".join(
        f"{r} {format_units(r, pod.spec.requests.get(r, 0))} → {format_units(r, v)}"
        for r, v in sorted(new.items())
    )
    note = (
        f"The largest request that fits a node ({node}); only if {group.ref.name} really needs no more "
        "(check kubectl top pod): a request below real usage throttles CPU or gets the pod OOM-killed."
    )
    if multi:
        note += " The pod has several containers: split these totals across them with -c <container>."
    verification = (
        f"re-simulated {group.pods[0].name} with {words}: {P.outcome(verdict)}; at that size the eligible nodes "
        f"have room for {plural(slots, 'such pod')}, {pending} pending"
        + ("; not verified per container (several containers per pod)" if multi else "")
    )
    return ctx.renderer.command(
        f"Lower the request to what a node can hold: {words}",
        group.ref,
        command,
        note=note,
        verified=verdict.fits and not multi,
        verification=verification,
    )


def _lowered(res: str, requested: int, free: int) -> float | None:
    """What lowering ``res`` to what ``free`` holds keeps of the request: None when the
    request fits as it is, 0.0 when it cannot be lowered to fit."""
    if free >= requested:
        return None
    value = _round_down(res, free)
    if value <= 0 or not (res in _LOWERABLE or is_scalar(res)):
        return 0.0
    return value / requested


_FITS = 2.0  # above every fraction a lowered request keeps (at most 1.0)


def _largest_fitting_request(analysis: Analysis) -> tuple[float, str, dict[str, int]] | None:
    """(fraction kept, node, lowered requests) for the accounting node where lowering the
    short requests keeps the most of them (the least of the fractions over the short
    resources; the first node on a tie); None when no node takes a lowered request.

    A column at a time: each short resource's fraction on every node, then the
    per-node least -- the same fractions as a node-by-node walk, without one call per
    node and resource (one analysis can read every node of a 5,000-node cluster)."""
    if not analysis.nodes or not analysis.shortages:
        return None
    columns = []
    for s in analysis.shortages:
        res, want = s.resource, s.requested
        # Nodes share few distinct amounts free: one fraction per amount.
        fraction = {free: _FITS if (f := _lowered(res, want, free)) is None else f for free in set(s.free)}
        columns.append(list(map(fraction.__getitem__, s.free)))
    kept = list(map(min, *columns)) if len(columns) > 1 else columns[0]
    # A node where every request fits as it is (all _FITS) offers no change.
    offered = [k if 0 < k < _FITS else -1.0 for k in kept]
    ratio = max(offered)
    if ratio < 0:
        return None
    at = offered.index(ratio)  # the first node on a tie
    new = {
        s.resource: _round_down(s.resource, s.free[at])
        for s in analysis.shortages
        if s.free[at] < s.requested
    }
    return ratio, analysis.nodes[at], new


def _slots(
    table: NodeTable, nodes: Sequence[int], requests: Mapping[str, int], resources: Sequence[str]
) -> int:
    """How many pods of ``requests`` fit on ``nodes`` together, each node on its own."""
    columns = []
    for res in resources:
        want = 1 if res == "pods" else requests.get(res, 0)
        if want > 0:
            columns.append([max(free, 0) // want for free in _free_column(table, nodes, res)])
    if not columns:
        return 0
    return sum(map(min, *columns)) if len(columns) > 1 else sum(columns[0])


def _capacity(ctx: RuleContext, group: P.Blocked, analysis: Analysis, events: Sequence[Any]) -> Remedy | None:
    snap = ctx.snapshot
    pool = analysis.node_indices or group.views.indices(group.views.usable)
    if not pool or not analysis.shortages:
        return None
    table = node_table(snap)
    template = snap.nodes.get(table.names[_largest(table, pool, analysis.shortages[0].resource)])
    if template is None:
        return None
    ds = P.daemonset_requests(snap, template.name)
    alloc = dict(template.allocatable)
    bigger = []
    for r, want in _requests(group.pod):
        if r == "pods":
            continue
        needed = want + ds.get(r, 0)
        if alloc.get(r, 0) < needed:
            alloc[r] = _round_up(r, needed)
            bigger.append(f"{_q(r, alloc[r])}")
    effective = {r: v - ds.get(r, 0) for r, v in alloc.items()}
    name = P.synthetic_name(template.name)
    synthetic = P.synthetic_node(template, name, allocatable=effective)
    verdict = P.what_if_nodes(ctx, group.pod, synthetic, share=0.5)
    refused = next((e for e in events if e.reason == "NotTriggerScaleUp"), None)
    if bigger:
        title = f"Add bigger nodes: at least {', '.join(bigger)} allocatable (a node pool shaped like {template.name})"
    else:
        title = f"Add a node like {template.name} to its pool"
    note = "Capacity is added outside Kubernetes objects: the node group's maximum, a Karpenter NodePool's limits, or your IaC."
    if refused is not None:
        note += f" cluster-autoscaler declined so far: {refused.message}"
    ds_words = (
        f", minus its DaemonSet pods' requests ({', '.join(_q(r, v) for r, v in sorted(ds.items()))})"
        if ds
        else ""
    )
    return ctx.renderer.command(
        title,
        None,
        "# add capacity to the node group / NodePool that serves this workload",
        note=note,
        verified=P.fits(verdict),
        verification=(
            f"re-simulated with a synthetic empty node {name} shaped like {template.name} (labels and taints "
            f"copied{', allocatable raised to ' + ', '.join(bigger) if bigger else ''}{ds_words}): "
            f"{P.outcome(verdict)}"
        ),
    )


def _largest(table: NodeTable, pool: Sequence[int], resource: str) -> int:
    """The node of ``pool`` (ascending indices, not empty) with the most allocatable
    ``resource``, the last name on a tie: the table's order is by name."""
    column = _allocatable_column(table, pool, resource)
    return pool[len(column) - 1 - column[::-1].index(max(column))]


def _descheduler(ctx: RuleContext, analysis: Analysis) -> Remedy:
    thresholds = {r: 20 for r in ("cpu", "memory") if r in analysis.resources} or {"cpu": 20, "memory": 20}
    policy = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "defragment",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {"evictLocalStoragePods": False}},
                    {"name": "HighNodeUtilization", "args": {"thresholds": thresholds}},
                ],
                "plugins": {"balance": {"enabled": ["HighNodeUtilization"]}},
            }
        ],
    }
    return ctx.renderer.manifest(
        "Defragment with the descheduler: HighNodeUtilization packs pods off under-used nodes",
        ObjectRef("ConfigMap", "kube-system", "descheduler"),
        "descheduler-policy.yaml.j2",
        verified=False,
        verification=(
            "not simulated: the descheduler evicts pods from nodes below the thresholds so they repack (best with "
            "the scheduler's MostAllocated scoring), leaving whole nodes free; the policy format is the "
            "descheduler's v1alpha2 (its Helm chart reads it from this ConfigMap)"
        ),
        name="descheduler",
        namespace="kube-system",
        policy=policy,
    )
