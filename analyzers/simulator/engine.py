"""One scheduling attempt, simulated: PreEnqueue, PreFilter, Filter over every
node in the default plugin order, then DefaultPreemption, then the message.

Plugin order: pkg/scheduler/apis/config/v1/default_plugins.go (SchedulingGates,
NodeUnschedulable, NodeName -- NodeName, NodeUnschedulable since 1.37 --, TaintToleration, NodeAffinity, NodePorts,
NodeResourcesFit, VolumeRestrictions, ...Limits, VolumeBinding, VolumeZone,
PodTopologySpread, InterPodAffinity, DefaultPreemption). The framework stops
at a node's first failing filter (RunFilterPlugins); the simulator evaluates
them all and keeps that order, so the first one is what kube-scheduler reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from analyzers.records import EMPTY_MAP, FrozenMap, NodeSelector, Pod
from analyzers.simulator import codes as C
from analyzers.simulator.basic import NodeAffinity, NodeName, NodePorts, NodeUnschedulable, TaintToleration
from analyzers.simulator.dra import claim_hold
from analyzers.simulator.dra.plugin import ALLOCATIONS, CLAIM_RESULTS, FILTER_ERROR, DynamicResources
from analyzers.simulator.framework import Cycle, Outcome, Plugin, detail, failure
from analyzers.simulator.interpod import InterPodAffinity
from analyzers.simulator.nodeinfo import NodeTable, bits, has, mask_of, node_table
from analyzers.simulator.preemption import NOT_ATTEMPTED, preempt
from analyzers.simulator.render import DRA_STATE_NOT_FOUND, fit_error
from analyzers.simulator.resources import NodeResourcesFit
from analyzers.simulator.results import FilterFailure, NodeVerdict, PodVerdict, PreemptionVerdict
from analyzers.simulator.spread import PodTopologySpread
from analyzers.simulator.versions import Wording, wording_for
from analyzers.simulator.volumes import VolumeBinding, VolumeRestrictions, VolumeZone
from analyzers.snapshot import ClusterSnapshot

FILTERS: tuple[Plugin, ...] = (
    NodeUnschedulable(),
    NodeName(),
    TaintToleration(),
    NodeAffinity(),
    NodePorts(),
    NodeResourcesFit(),
    VolumeBinding(),
    VolumeZone(),
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
    in (
        C.NODE_AFFINITY,
        C.VOLUME_RESTRICTIONS_PLUGIN,
        C.VOLUME_BINDING,
        VolumeZone.name,
        C.INTER_POD_AFFINITY,
        C.DYNAMIC_RESOURCES,
    )
)


def filter_order(wording: Wording) -> tuple[Plugin, ...]:
    """:data:`FILTERS` in ``wording``'s release order: 1.37 runs NodeName before
    NodeUnschedulable (default_plugins.go at v1.37.0)."""
    if not wording.node_name_before_unschedulable:
        return FILTERS
    names = [p.name for p in FILTERS]
    if C.NODE_NAME not in names or C.NODE_UNSCHEDULABLE_PLUGIN not in names:
        return FILTERS
    i, j = names.index(C.NODE_UNSCHEDULABLE_PLUGIN), names.index(C.NODE_NAME)
    if i > j:
        return FILTERS
    order = list(FILTERS)
    order[i], order[j] = order[j], order[i]
    return tuple(order)


GATED_MESSAGE = (
    "Scheduling is blocked due to non-empty scheduling gates"  # PodScheduled=False, SchedulingGated
)


def simulate(
    snapshot: ClusterSnapshot,
    pod: Pod,
    *,
    kube_version: str | None = None,
    disabled: frozenset[str] = frozenset(),
    added_affinity: NodeSelector | None = None,
    dra_filter_timeout: float | None = None,
) -> PodVerdict:
    """kube-scheduler's verdict for ``pod`` in ``snapshot``.

    ``pod`` may be a pod of the snapshot or a hypothetical one (e.g. built from
    a Deployment template); it is scheduled as if it had no node. The wording
    follows ``kube_version``, else the snapshot's, else
    :data:`~analyzers.simulator.versions.DEFAULT_KUBE_VERSION`. ``disabled`` names
    filter plugins a KubeSchedulerConfiguration profile disables: they filter
    nothing (neither PreFilter nor Filter). ``added_affinity`` is the profile's
    NodeAffinityArgs ``addedAffinity.requiredDuringSchedulingIgnoredDuringExecution``,
    which NodeAffinity's Filter enforces on every pod; ``dra_filter_timeout`` its
    DynamicResourcesArgs ``filterTimeout`` in seconds (None: the release's default)."""
    wording = wording_for(kube_version or snapshot.kube_version)
    # The release's filter order, less the plugins the profile disables.
    filters = tuple(p for p in filter_order(wording) if p.name not in disabled)
    prefilters = PREFILTERS if not disabled else tuple(p for p in PREFILTERS if p.name not in disabled)
    table = node_table(snapshot)
    ns = snapshot.namespaces.get(pod.namespace)
    cycle = Cycle(
        snapshot=snapshot,
        table=table,
        pod=pod,
        wording=wording,
        priority=snapshot.priority_of(pod),
        namespace_labels=ns.labels if ns is not None else EMPTY_MAP,
        added_affinity=added_affinity,
        dra_filter_timeout=dra_filter_timeout,
    )
    total = table.size

    gated = pre_enqueue(snapshot, pod)

    prefilter, absent, by_plugin = filter_pass(cycle, prefilters, filters)
    if prefilter is None:
        by_plugin = with_nominated_pods(cycle, by_plugin, filters)
    outcomes: list[Outcome] = [absent] if absent is not None else []
    for plugin in filters:
        found = by_plugin.get(plugin.name)
        if found is not None:
            outcomes.append(found)
            cycle.outcomes[plugin.name] = found

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
        if (
            total
            and prefilter is not None
            and prefilter.code == C.UNRESOLVABLE
            and prefilter.plugin != C.DYNAMIC_RESOURCES
            and wording.dra_postfilter_state_missing_error
        ):
            # (DynamicResources' own PreFilter rejection comes after it wrote its state:
            # PostFilter finds no claims recorded and DefaultPreemption runs, v1.36.5/v1.37.2.)
            # DynamicResources' PostFilter errs (its PreFilter never ran): DefaultPreemption
            # does not run, the error text is the PostFilter message (versions.py).
            preemption = PreemptionVerdict(attempted=False, eligible=True, message=DRA_STATE_NOT_FOUND)
        elif total:
            preemption = preempt(
                cycle,
                filters,
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
    claim_allocations: dict[str, tuple[object, ...]] = {}
    found = cycle.state.get(ALLOCATIONS)
    if found and fits:
        allocations = {table.names[i]: results for i, results in found.items() if has(feasible, i)}
        per_claim = cycle.state.get(CLAIM_RESULTS) or {}
        claim_allocations = {table.names[i]: c for i, c in per_claim.items() if has(feasible, i)}
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
        claim_allocations=FrozenMap(claim_allocations) if found is not None else None,
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


def filter_pass(
    cycle: Cycle,
    prefilters: tuple[Plugin, ...] = PREFILTERS,
    filters: tuple[Plugin, ...] = FILTERS,
) -> tuple[FilterFailure | None, Outcome | None, dict[str, Outcome]]:
    """PreFilter, then every Filter over all nodes of ``cycle``'s table: the PreFilter
    status, the nodes NodeAffinity's PreFilterResult leaves out, and each plugin's outcome.
    ``prefilters``/``filters`` are the profile's enabled plugins (all by default)."""
    prefilter = run_prefilters(prefilters, cycle)
    absent = _prefilter_result_outcome(cycle)
    by_plugin: dict[str, Outcome] = {}
    for plugin in filters:
        out = plugin.filter_all(cycle)
        if out is not None:
            by_plugin[plugin.name] = out
            cycle.outcomes[plugin.name] = out
    return prefilter, absent, by_plugin


NOMINATED_KEY = "simulator.nominated"
NOMINATED_CYCLES = "nominated_cycles"


def nominated_pods(snapshot: ClusterSnapshot) -> Mapping[str, tuple[tuple[int, Pod], ...]]:
    """Node name -> (priority, pod) of the pods waiting for kube-scheduler with
    ``status.nominatedNodeName`` naming it: the scheduling queue's nominator
    (pkg/scheduler/backend/queue/nominator.go, v1.35.4 and v1.37.2) holds every
    unassigned pod of the scheduler whose status carries a nominated node."""

    def build() -> dict[str, tuple[tuple[int, Pod], ...]]:
        out: dict[str, list[tuple[int, Pod]]] = {}
        for p in snapshot.pending_pods():  # every waiting pod, whatever a scoped view analyses
            if p.nominated_node and p.spec.scheduler_name == "default-scheduler":
                out.setdefault(p.nominated_node, []).append((snapshot.priority_of(p), p))
        return {k: tuple(v) for k, v in out.items()}

    found: Mapping[str, tuple[tuple[int, Pod], ...]] = snapshot.derived(NOMINATED_KEY, build)
    return found


def nominated_holders(cycle: Cycle) -> dict[int, tuple[Pod, ...]]:
    """Node index -> the pods nominated there whose priority is at least the cycle's
    pod's (the pod itself excluded, by UID as upstream compares): addGENominatedPods."""
    pod = cycle.pod
    out: dict[int, tuple[Pod, ...]] = {}
    for name, entries in nominated_pods(cycle.snapshot).items():
        i = cycle.table.index.get(name)
        if i is None:
            continue
        held = tuple(
            p
            for prio, p in entries
            if prio >= cycle.priority and (p.uid != pod.uid if pod.uid else p.key != pod.key)
        )
        if held:
            out[i] = held
    return out


def with_nominated_pods(
    cycle: Cycle, by_plugin: dict[str, Outcome], filters: tuple[Plugin, ...] = FILTERS
) -> dict[str, Outcome]:
    """The Filter outcomes as RunFilterPluginsWithNominatedPods decides them
    (pkg/scheduler/framework/runtime/framework.go, the same in v1.35.4 and v1.37.2):
    on a node where pods of equal or higher priority are nominated, the filters run
    first with those pods added to the node (addGENominatedPods, each through the
    plugins' AddPod extension) and, only if that pass succeeds, again without them.
    A node failing the first pass reports the first pass's statuses.

    Upstream adds a node's nominated pods to that node alone. When the pod's verdict
    on a node depends on no other node's pods (no topology spread constraint, and
    InterPodAffinity skipped at PreFilter), one pass with every nominated pod bound
    gives each node that answer; otherwise one pass per node. A skipped
    InterPodAffinity stays skipped in the passes with nominated pods. The passes
    with nominated pods are kept (``cycle.state``) for preemption's dry run, which
    runs the same two passes (SelectVictimsOnNode calls RunFilterPluginsWithNominatedPods)."""
    holders = nominated_holders(cycle)
    if not holders:
        return by_plugin
    table = cycle.table
    # InterPodAffinity's PreFilter ran on the cluster without nominated pods: with no
    # existing anti-affinity term matching the pod and no term of its own it returned
    # Skip (filtering.go PreFilter, v1.35.4 and v1.37.2), and its Filter -- AddPod
    # included -- is skipped for the whole cycle, nominated pods' terms or not.
    interpod_skipped = "interpod" not in cycle.state
    topological = "spread" in cycle.state or not interpod_skipped
    groups: list[list[int]] = [[i] for i in holders] if topological else [list(holders)]
    cycles: dict[int, Cycle] = {}
    overrides: list[tuple[int, dict[str, Outcome], Outcome | None]] = []
    for nodes in groups:
        snap = _with_bound(cycle.snapshot, [p for i in nodes for p in holders[i]])
        held = Cycle(
            snapshot=snap,
            table=node_table(snap),
            pod=cycle.pod,
            wording=cycle.wording,
            priority=cycle.priority,
            namespace_labels=cycle.namespace_labels,
        )
        _, absent, outs = filter_pass(held, filters=filters)
        if interpod_skipped:
            held.state.pop("interpod", None)
            outs.pop(C.INTER_POD_AFFINITY, None)
        where = mask_of(nodes, table.size)
        failed = absent.mask if absent is not None else 0
        for out in outs.values():
            failed |= out.mask
        for i in nodes:
            cycles[i] = held
        if failed & where:
            overrides.append((failed & where, outs, absent))
    cycle.state[NOMINATED_CYCLES] = cycles
    if not overrides:
        return by_plugin
    replaced = 0
    for m, _, _ in overrides:
        replaced |= m
    merged: dict[str, Outcome] = {}
    for plugin in filters:
        name = plugin.name
        sources: list[tuple[int, Outcome]] = []
        own = by_plugin.get(name)
        if own is not None:
            sources.append((table.all_mask & ~replaced, own))
        for m, outs, _ in overrides:
            theirs = outs.get(name)
            if theirs is not None:
                sources.append((m, theirs))
        combined = _merged_outcome(name, sources)
        if combined is not None:
            merged[name] = combined
    return merged


def _with_bound(snapshot: ClusterSnapshot, pods: list[Pod]) -> ClusterSnapshot:
    """``snapshot`` with ``pods`` bound to their nominated nodes; cached in ``snapshot``,
    so the pending pods of one priority share it (and its node table)."""
    key = "simulator.nominated-bound:" + ";".join(f"{p.namespace}/{p.name}" for p in pods)

    def build() -> ClusterSnapshot:
        return snapshot.replace(*(replace(p, node_name=p.nominated_node) for p in pods))

    found: ClusterSnapshot = snapshot.derived(key, build)
    return found


def _merged_outcome(plugin: str, sources: list[tuple[int, Outcome]]) -> Outcome | None:
    """One outcome taking each node's failure from the source whose node set holds it."""
    out = Outcome(plugin)
    for sel, src in sources:
        for m, f in src.groups:
            g = m & sel
            if g:
                out.groups.append((g, f))
                out.mask |= g
        grouped = 0
        for m, _ in src.groups:
            grouped |= m
        for i, entry in src.varying.items():
            if has(sel, i) and not has(grouped, i):
                out.varying[i] = entry
                out.mask |= 1 << i
    if not out.mask:
        return None

    def make(i: int) -> FilterFailure:
        for sel, src in sources:
            if has(sel, i):
                found = src.failure(i)
                if found is not None:
                    return found
        raise KeyError(i)  # pragma: no cover - make is only asked for nodes of the mask

    out.make = make
    return out


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
        return {codes: mask.bit_count() for codes, mask in self.reason_code_masks(plugin, within).items()}

    def reason_code_masks(self, plugin: str, within: int) -> dict[tuple[str, ...], int]:
        out: dict[tuple[str, ...], int] = {}
        if self.prefilter is not None and self.prefilter.plugin == plugin and within:
            out[self.prefilter.reason_codes] = within
        for o in self.outcomes:
            if o.plugin != plugin:
                continue
            grouped = 0
            for m, f in o.groups:
                grouped |= m
                if m & within:
                    out[f.reason_codes] = out.get(f.reason_codes, 0) | (m & within)
            for i, (_, _, codes) in o.varying.items():
                if has(within, i) and not has(grouped, i):
                    out[codes] = out.get(codes, 0) | (1 << i)
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
