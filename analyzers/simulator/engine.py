"""One scheduling attempt, simulated: PreEnqueue, PreFilter, Filter over every
node in the default plugin order, then DefaultPreemption, then the message.

Plugin order: pkg/scheduler/apis/config/v1/default_plugins.go (SchedulingGates,
NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
NodeResourcesFit, VolumeRestrictions, ...Limits, VolumeBinding, VolumeZone,
PodTopologySpread, InterPodAffinity, DefaultPreemption). The framework stops
at a node's first failing filter (RunFilterPlugins); the simulator evaluates
them all and keeps that order, so the first one is what kube-scheduler reports.
"""

from __future__ import annotations

from collections.abc import Mapping

from analyzers.records import EMPTY_MAP, FrozenMap, Pod
from analyzers.simulator import codes as C
from analyzers.simulator.basic import NodeAffinity, NodeName, NodePorts, NodeUnschedulable, TaintToleration
from analyzers.simulator.dra import claim_hold
from analyzers.simulator.dra.plugin import ALLOCATIONS, FILTER_ERROR, DynamicResources
from analyzers.simulator.framework import Cycle, Outcome, Plugin, detail, failure
from analyzers.simulator.interpod import InterPodAffinity
from analyzers.simulator.nodeinfo import NodeTable, bits, has, mask_of, node_table
from analyzers.simulator.preemption import NOT_ATTEMPTED, preempt
from analyzers.simulator.render import fit_error
from analyzers.simulator.resources import NodeResourcesFit
from analyzers.simulator.results import FilterFailure, NodeVerdict, PodVerdict, PreemptionVerdict
from analyzers.simulator.spread import PodTopologySpread
from analyzers.simulator.versions import wording_for
from analyzers.simulator.volumes import VolumeBinding, VolumeRestrictions
from analyzers.snapshot import ClusterSnapshot

FILTERS: tuple[Plugin, ...] = (
    NodeUnschedulable(),
    NodeName(),
    TaintToleration(),
    NodeAffinity(),
    NodePorts(),
    NodeResourcesFit(),
    VolumeBinding(),
    PodTopologySpread(),
    InterPodAffinity(),
    DynamicResources(),  # before DefaultPreemption (default_plugins.go applyDynamicResources)
)
# PreFilter order among the plugins that can reject a pod outright.
# (VolumeRestrictions, between NodeResourcesFit and VolumeBinding, has no modelled Filter.)
PREFILTERS: tuple[Plugin, ...] = tuple(
    p
    for p in (*FILTERS[:6], VolumeRestrictions(), *FILTERS[6:])
    if p.name
    in (C.NODE_AFFINITY, C.VOLUME_RESTRICTIONS_PLUGIN, C.VOLUME_BINDING, C.INTER_POD_AFFINITY, C.DYNAMIC_RESOURCES)
)

GATED_MESSAGE = (
    "Scheduling is blocked due to non-empty scheduling gates"  # PodScheduled=False, SchedulingGated
)


def simulate(snapshot: ClusterSnapshot, pod: Pod, *, kube_version: str | None = None) -> PodVerdict:
    """kube-scheduler's verdict for ``pod`` in ``snapshot``.

    ``pod`` may be a pod of the snapshot or a hypothetical one (e.g. built from
    a Deployment template); it is scheduled as if it had no node. The wording
    follows ``kube_version``, else the snapshot's, else
    :data:`~analyzers.simulator.versions.DEFAULT_KUBE_VERSION`."""
    wording = wording_for(kube_version or snapshot.kube_version)
    table = node_table(snapshot)
    ns = snapshot.namespaces.get(pod.namespace)
    cycle = Cycle(
        snapshot=snapshot,
        table=table,
        pod=pod,
        wording=wording,
        priority=snapshot.priority_of(pod),
        namespace_labels=ns.labels if ns is not None else EMPTY_MAP,
    )
    total = table.size

    gated = pre_enqueue(snapshot, pod)

    prefilter = run_prefilters(PREFILTERS, cycle)

    outcomes: list[Outcome] = []
    absent = _prefilter_result_outcome(cycle)
    if absent is not None:
        outcomes.append(absent)
    for plugin in FILTERS:
        out = plugin.filter_all(cycle)
        if out is not None:
            outcomes.append(out)
            cycle.outcomes[plugin.name] = out

    failing = 0
    for out in outcomes:
        failing |= out.mask
    feasible = table.all_mask & ~failing
    feasible_count = feasible.bit_count()
    fits = feasible_count > 0 and gated is None and prefilter is None
    # A Filter that returned Error (DynamicResources' fatal allocator errors) aborts the
    # attempt: the condition is the error, no PostFilter runs.
    filter_error: str | None = cycle.state.get(FILTER_ERROR) if gated is None and prefilter is None else None
    if filter_error is not None:
        fits = False

    reasons: dict[str, int] = {}
    codes: dict[str, int] = {}
    potential = 0
    first_codes: dict[int, str] = {}
    if not fits and gated is None:
        if prefilter is not None:
            # One code per reason, always: "strict" never fires (nor in _node_verdicts).
            for r, rc in zip(prefilter.reasons, prefilter.reason_codes, strict=True):  # pragma: no mutate
                reasons[r] = reasons.get(r, 0) + total
                codes[rc] = codes.get(rc, 0) + total
        else:
            remaining = table.all_mask
            for out in outcomes:
                first = out.mask & remaining
                if first:
                    out.count(first, reasons, codes)
                    for m, f in out.groups:
                        if f.code == C.UNSCHEDULABLE:
                            potential |= m & first
                    for i, (code, _, _) in out.varying.items():
                        if code == C.UNSCHEDULABLE and has(first, i):
                            potential |= 1 << i
                remaining &= ~out.mask
            nominated = table.index.get(pod.nominated_node) if pod.nominated_node else None
            if nominated is not None:
                for out in outcomes:
                    node_code = out.code_of(nominated)
                    if node_code is not None:
                        first_codes[nominated] = node_code
                        break

    preemption: PreemptionVerdict = NOT_ATTEMPTED
    message = ""
    if gated is not None:
        # A PreEnqueue rejection is never attempted: only SchedulingGates sets a condition.
        message = GATED_MESSAGE if gated.plugin == C.SCHEDULING_GATES else ""
    elif filter_error is not None:
        message = filter_error
    elif not fits:
        nominated = table.index.get(pod.nominated_node) if pod.nominated_node else None
        if total:
            preemption = preempt(
                cycle,
                FILTERS,
                outcomes,
                potential=potential,
                nominated_code=first_codes.get(nominated) if nominated is not None else None,
                prefilter_failed=prefilter is not None,
            )
        message = fit_error(
            total,
            wording,
            reasons=reasons,
            prefilter=prefilter.reasons if prefilter is not None else (),
            postfilter=preemption.message,
        )

    allocations: dict[str, tuple[object, ...]] = {}
    found = cycle.state.get(ALLOCATIONS)
    if found and fits:
        allocations = {table.names[i]: results for i, results in found.items() if has(feasible, i)}
    return PodVerdict(
        pod=pod.key,
        kube_version=wording.label,
        total_nodes=total,
        fits=fits,
        feasible_nodes=feasible_count,
        message=message,
        reasons=FrozenMap(reasons),
        reason_counts=FrozenMap(codes),
        preemption=preemption,
        gated=gated,
        prefilter=prefilter,
        failing=FrozenMap(_failing_masks(table, outcomes, prefilter)),
        node_names=table.names,
        _breakdown=Breakdown(table, outcomes, prefilter),
        allocations=FrozenMap(allocations) if found is not None else None,
    )


def pre_enqueue(snapshot: ClusterSnapshot, pod: Pod) -> FilterFailure | None:
    """The PreEnqueue rejection that keeps ``pod`` out of the scheduling queue, in the
    default plugin order: SchedulingGates (scheduling_gates.go), then
    DynamicResources (its ResourceClaims, :mod:`analyzers.simulator.dra`)."""
    if pod.spec.scheduling_gates:
        return failure(
            C.SCHEDULING_GATES,
            C.UNRESOLVABLE,
            (f"waiting for scheduling gates: [{' '.join(pod.spec.scheduling_gates)}]",),
            (C.SCHEDULING_GATED,),
        )
    if pod.spec.resource_claims:
        hold = claim_hold(snapshot, pod)
        if hold is not None:
            return failure(
                C.DYNAMIC_RESOURCES,
                C.UNRESOLVABLE,
                (hold.message,),
                (C.DRA_CLAIM_MISSING,),
                detail(cause=hold.cause, claim=hold.name, entry=hold.entry),
            )
    return None


def run_prefilters(plugins: tuple[Plugin, ...], cycle: Cycle) -> FilterFailure | None:
    """The PreFilter status of the pod, as RunPreFilterPlugins decides it
    (pkg/scheduler/framework/runtime/framework.go): since 1.30 (v1.30.14 to
    v1.35.4, kubernetes#119770) the first UnschedulableAndUnresolvable status is
    the answer, while an Unschedulable one is kept -- the last such -- and the
    other plugins still run, so a later UnschedulableAndUnresolvable one wins;
    until 1.29 (v1.29.15) the first rejection of either code is the answer.

    Every plugin's PreFilter runs here all the same: the simulator also evaluates
    the filters after a rejection, to explain every node (their state comes from
    PreFilter). No default plugin of 1.35 returns a plain Unschedulable from
    PreFilter; for one that did, preemption is not simulated (every node would be
    a candidate upstream)."""
    past_unschedulable = cycle.wording.prefilter_runs_past_unschedulable
    kept: FilterFailure | None = None
    decided: FilterFailure | None = None
    for plugin in plugins:
        found = plugin.prefilter(cycle)
        if found is None or decided is not None:
            continue
        if found.code == C.UNSCHEDULABLE and past_unschedulable:
            kept = found
        else:
            decided = found
    return decided or kept


def simulate_pending(
    snapshot: ClusterSnapshot, *, kube_version: str | None = None
) -> Mapping[tuple[str, str], PodVerdict]:
    """Verdicts for every pod waiting for kube-scheduler (no node, not finished,
    not being deleted, ``schedulerName: default-scheduler``), in key order."""
    pods = sorted(
        (p for p in snapshot.unscheduled_pods() if p.spec.scheduler_name == "default-scheduler"),
        key=lambda p: p.key,
    )
    return {p.key: simulate(snapshot, p, kube_version=kube_version) for p in pods}


def _prefilter_result_outcome(cycle: Cycle) -> Outcome | None:
    """Nodes left out by NodeAffinity's PreFilterResult (matchFields metadata.name)."""
    names = cycle.state.get("prefilter_node_names")
    reason = cycle.wording.prefilter_result_reason
    if not names or reason is None:
        return None
    table = cycle.table
    kept = mask_of([table.index[n] for n in names if n in table.index], table.size)
    absent = table.all_mask & ~kept
    if not absent:
        return None
    out = Outcome(C.NODE_AFFINITY)
    out.add_group(absent, failure(C.NODE_AFFINITY, C.UNRESOLVABLE, (reason,), (C.NODE_AFFINITY_MISMATCH,)))
    return out


def _failing_masks(
    table: NodeTable, outcomes: list[Outcome], prefilter: FilterFailure | None
) -> dict[str, int]:
    """Plugin -> nodes it rejects, in filter order (a PreFilter rejection rejects all)."""
    masks: dict[str, int] = {prefilter.plugin: table.all_mask} if prefilter is not None else {}
    for o in outcomes:
        if o.mask:
            masks[o.plugin] = masks.get(o.plugin, 0) | o.mask
    return masks


class Breakdown:
    """A verdict's per-node detail (results.NodeBreakdown), from the filter outcomes:
    built per node on demand, or for every node at once (cached)."""

    __slots__ = ("_all", "_one", "outcomes", "prefilter", "table")

    def __init__(self, table: NodeTable, outcomes: list[Outcome], prefilter: FilterFailure | None) -> None:
        self.table = table
        self.outcomes = outcomes
        self.prefilter = prefilter
        self._all: tuple[NodeVerdict, ...] | None = None
        self._one: dict[int, NodeVerdict] = {}

    def nodes(self) -> tuple[NodeVerdict, ...]:
        if self._all is None:
            self._all = _node_verdicts(self.table, self.outcomes, self.prefilter)
            self._one.clear()
        return self._all

    def node(self, i: int) -> NodeVerdict:
        if self._all is not None:
            return self._all[i]
        found = self._one.get(i)
        if found is None:
            filters = [self.prefilter] if self.prefilter is not None else []
            for o in self.outcomes:
                failed = o.failure(i)
                if failed is not None:
                    filters.append(failed)
            found = self._one[i] = NodeVerdict(self.table.names[i], not filters, tuple(filters))
        return found

    def reason_codes_on(self, plugin: str, within: int) -> dict[tuple[str, ...], int]:
        out: dict[tuple[str, ...], int] = {}
        if self.prefilter is not None and self.prefilter.plugin == plugin and within:
            out[self.prefilter.reason_codes] = within.bit_count()
        for o in self.outcomes:
            if o.plugin != plugin:
                continue
            grouped = 0
            for m, f in o.groups:
                grouped |= m
                c = (m & within).bit_count()
                if c:
                    out[f.reason_codes] = out.get(f.reason_codes, 0) + c
            for i, (_, _, codes) in o.varying.items():
                if has(within, i) and not has(grouped, i):
                    out[codes] = out.get(codes, 0) + 1
        return out

    def first_reasons(self, within: int) -> dict[tuple[str, ...], int]:
        out: dict[tuple[str, ...], int] = {}
        if self.prefilter is not None:
            return {self.prefilter.reasons: within} if within else {}
        remaining = within
        for o in self.outcomes:
            first = o.mask & remaining
            if not first:
                continue
            grouped = 0
            for m, f in o.groups:
                grouped |= m
                if m & first:
                    out[f.reasons] = out.get(f.reasons, 0) | (m & first)
            for i, (_, reasons, _) in o.varying.items():
                if has(first, i) and not has(grouped, i):
                    out[reasons] = out.get(reasons, 0) | (1 << i)
            remaining &= ~o.mask
        return out


def _node_verdicts(
    table: NodeTable, outcomes: list[Outcome], prefilter: FilterFailure | None
) -> tuple[NodeVerdict, ...]:
    # Outcome by outcome (filter order), so each node's failures keep that order;
    # a group's nodes share its failure without a per-node lookup.
    found: list[list[FilterFailure] | None] = [None] * table.size
    for o in outcomes:
        rest = o.mask
        if o.make is None:
            for m, f in o.groups:
                for i in bits(m):
                    node_failures = found[i]
                    if node_failures is None:
                        found[i] = [f]
                    else:
                        node_failures.append(f)
                rest &= ~m
        for i in bits(rest):
            failed = o.failure(i)
            if failed is not None:
                node_failures = found[i]
                if node_failures is None:
                    found[i] = [failed]
                else:
                    node_failures.append(failed)
    head: tuple[FilterFailure, ...] = (prefilter,) if prefilter is not None else ()
    out = []
    for name, node_failures in zip(table.names, found, strict=True):  # pragma: no mutate
        filters = head + tuple(node_failures) if node_failures is not None else head
        out.append(NodeVerdict(name, not filters, filters))
    return tuple(out)
