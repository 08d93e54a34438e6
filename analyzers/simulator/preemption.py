"""DefaultPreemption, the PostFilter (pkg/scheduler/framework/plugins/
defaultpreemption/default_preemption.go and pkg/scheduler/framework/preemption/
preemption.go).

1. PodEligibleToPreemptOthers: ``preemptionPolicy: Never`` → ``preemption: not
   eligible due to preemptionPolicy=Never.``; a lower-priority pod already
   terminating on the pod's nominated node → ``... a terminating pod on the
   nominated node.`` (1.27+: only one kube-scheduler preempted, its DisruptionTarget
   condition reading PreemptionByScheduler -- podTerminatingByPreemption)
2. Only nodes whose (first) failing status is Unschedulable are tried; the
   others count as ``Preemption is not helpful for scheduling``.
3. SelectVictimsOnNode: no pod of lower priority → ``No preemption victims
   found for incoming pod``; remove them all and run every filter again -- a
   node that still fails reports that filter's reasons; otherwise reprieve
   victims (PDB-violating first, each group by importance: priority, then
   earliest start) while the pod still fits.
4. DryRunPreemption stops once it has max(10% of the tried nodes, 100)
   candidates (one of them not violating a PDB). Any candidate → preemption
   succeeds: until 1.36 kube-scheduler prints no ``preemption:`` clause, since
   1.37 ``preemption: found a potential placement for pod on node <node>,
   preempting <n> victims`` for the candidate pickOneNodeForPreemption chooses
   (fewest PDB violations, lowest highest victim priority, lowest sum of victim
   priorities, fewest victims, latest start of the highest-priority victims,
   then the first; preemption.go at v1.37.2); none → the clause is
   ``preemption: 0/N nodes are available: <histogram>.``
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from analyzers.records import EMPTY_MAP, FrozenMap, Pod
from analyzers.simulator import codes as C
from analyzers.simulator.framework import Cycle, Outcome, Plugin
from analyzers.simulator.nodeinfo import VictimClasses, bits
from analyzers.simulator.render import (
    DRA_DEALLOCATED,
    DRA_NO_CLAIMS,
    DRA_STILL_NOT_SCHEDULABLE,
    NO_VICTIMS,
    NOT_ELIGIBLE_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    NOT_HELPFUL,
    PLACEMENT_FOUND,
    preemption_fit_error,
)
from analyzers.simulator.resources import checked_requests, resource_outcome
from analyzers.simulator.results import FilterFailure, PreemptionVerdict

MIN_CANDIDATE_NODES_PERCENTAGE = 10  # DefaultPreemptionArgs defaults (apis/config/v1/defaults.go)
MIN_CANDIDATE_NODES_ABSOLUTE = 100


@dataclass(frozen=True, slots=True)
class _Candidate:
    node: int
    victims: tuple[Pod, ...]
    pdb_violations: int


def preemption_policy(cycle: Cycle) -> str:
    spec = cycle.pod.spec
    if spec.preemption_policy:
        return spec.preemption_policy
    pc = cycle.snapshot.priority_classes.get(spec.priority_class_name) if spec.priority_class_name else None
    if pc is None:
        pc = next((p for p in cycle.snapshot.priority_classes.values() if p.global_default), None)
    return pc.preemption_policy if pc is not None else "PreemptLowerPriority"


def num_candidates(nodes: int) -> int:
    n = nodes * MIN_CANDIDATE_NODES_PERCENTAGE // 100
    n = max(n, MIN_CANDIDATE_NODES_ABSOLUTE)
    return min(n, nodes)


def run_filters_on_node(
    cycle: Cycle, plugins: Sequence[Plugin], i: int, removed: Sequence[Pod]
) -> FilterFailure | None:
    for plugin in plugins:
        found = plugin.filter_node(cycle, i, removed)
        if found is not None:
            return found
    return None


NOMINATED_CYCLES = "nominated_cycles"  # engine.with_nominated_pods keeps them here


def run_filters_with_nominated(
    cycle: Cycle, plugins: Sequence[Plugin], i: int, removed: Sequence[Pod]
) -> FilterFailure | None:
    """RunFilterPluginsWithNominatedPods for node ``i`` with ``removed`` evicted
    (pkg/scheduler/framework/runtime/framework.go, v1.35.4 and v1.37.2): where pods of
    equal or higher priority are nominated to the node, the filters run first with
    them added; only if that pass succeeds, again without them."""
    held: Mapping[int, Cycle] = cycle.state.get(NOMINATED_CYCLES, EMPTY_MAP)
    with_nominated = held.get(i)
    if with_nominated is not None:
        found = run_filters_on_node(with_nominated, plugins, i, removed)
        if found is not None:
            return found
    return run_filters_on_node(cycle, plugins, i, removed)


def _importance_key(cycle: Cycle, pod: Pod) -> tuple[int, float]:
    # util.MoreImportantPod: higher priority first, then the earlier start time.
    created = pod.created if pod.created is not None else float("inf")
    return (-cycle.snapshot.priority_of(pod), created)


def _split_by_pdb(cycle: Cycle, pods: Sequence[Pod]) -> tuple[list[Pod], list[Pod]]:
    """filterPodsWithPDBViolation: a PDB with a nil or empty selector matches nothing."""
    pdbs = [p for p in cycle.snapshot.pdbs.values() if p.selector is not None and not p.selector.is_empty]
    allowed = [p.status_disruptions_allowed or 0 for p in pdbs]
    violating: list[Pod] = []
    fine: list[Pod] = []
    for pod in pods:
        hit = False
        if pod.labels:
            for j, pdb in enumerate(pdbs):
                if (
                    pdb.namespace != pod.namespace
                    or pdb.selector is None
                    or not pdb.selector.matches(pod.labels)
                ):
                    continue
                allowed[j] -= 1
                if allowed[j] < 0:
                    hit = True
        (violating if hit else fine).append(pod)
    return violating, fine


def _lower_in_importance_order(cycle: Cycle, i: int) -> list[Pod]:
    """The node's pods of lower priority than the pod, most important first."""
    lower = [
        p
        for p, prio in zip(cycle.table.pods[i], cycle.table.priorities[i], strict=True)  # pragma: no mutate
        if prio < cycle.priority
    ]
    if len(lower) > 1:
        lower.sort(key=lambda p: _importance_key(cycle, p))
    return lower


@dataclass(frozen=True, slots=True)
class _DryRun:
    """SelectVictimsOnNode's answer as positions in the node's lower-priority pods
    (importance order): the victims in the order they were found (PDB-violating
    group first), how many violate a PDB, and whether both groups had victims."""

    picks: tuple[int, ...]
    pdb_violations: int
    both_groups: bool


def _dry_run(
    cycle: Cycle, plugins: Sequence[Plugin], i: int, lower: Sequence[Pod]
) -> _DryRun | FilterFailure:
    """SelectVictimsOnNode (pkg/scheduler/framework/plugins/defaultpreemption/
    default_preemption.go, v1.37.2) on node ``i`` whose lower-priority pods are
    ``lower``, in importance order (the filters' verdicts do not depend on the
    order of the removed pods)."""
    if not lower:
        return FilterFailure(C.DEFAULT_PREEMPTION, C.UNRESOLVABLE, (NO_VICTIMS,), (C.PREEMPTION_NO_VICTIMS,))
    status = run_filters_with_nominated(cycle, plugins, i, lower)
    if status is not None:
        return status
    position = {id(p): k for k, p in enumerate(lower)}
    violating, fine = _split_by_pdb(cycle, lower)
    removed = list(lower)
    picks: list[int] = []
    violations = 0
    for group_violates, group in ((True, violating), (False, fine)):
        for pod in group:
            trial = [p for p in removed if p is not pod]
            if run_filters_with_nominated(cycle, plugins, i, trial) is None:
                removed = trial
            else:
                picks.append(position[id(pod)])
                if group_violates:
                    violations += 1
    if not picks:
        name = cycle.table.names[i]
        return FilterFailure(
            C.DEFAULT_PREEMPTION, "Error", (f'expected at least one victim pod on node "{name}"',), (C.OTHER,)
        )
    return _DryRun(tuple(picks), violations, bool(violating and fine))


def _candidate(cycle: Cycle, i: int, lower: Sequence[Pod], run: _DryRun) -> _Candidate:
    """Node ``i``'s candidate from a dry run's answer, with its own pods."""
    victims = [lower[k] for k in run.picks]
    # With one group the victims are in importance order already (lower is sorted).
    if run.both_groups:  # pragma: no mutate
        victims.sort(key=lambda p: _importance_key(cycle, p))
    return _Candidate(i, tuple(victims), run.pdb_violations)


def select_victims(cycle: Cycle, plugins: Sequence[Plugin], i: int) -> _Candidate | FilterFailure:
    lower = _lower_in_importance_order(cycle, i)
    run = _dry_run(cycle, plugins, i, lower)
    return run if isinstance(run, FilterFailure) else _candidate(cycle, i, lower, run)


# Preemption's dry runs, one per group of nodes that must give the same answer (True), or
# one per node (False: the plain path, kept as the tests' oracle and the bench's baseline).
GROUP_DRY_RUNS = True
# Grouped dry runs build the table's victim classes when at least one node in this many
# is to be tried (or the table has them already); fewer are tried one by one.
CLASSES_FOR_ONE_NODE_IN = 8

# The plugins whose filter_node reads the pods removed; any other plugin's verdict in the
# dry run is its Filter verdict on the node (Plugin.filter_node).
_REMOVAL_AWARE = frozenset(
    {
        C.NODE_RESOURCES_FIT,
        C.NODE_PORTS_PLUGIN,
        C.POD_TOPOLOGY_SPREAD,
        C.INTER_POD_AFFINITY,
        C.DYNAMIC_RESOURCES,
    }
)


class _DryRunGroups:
    """Dry runs shared by nodes that must give the same answer.

    SelectVictimsOnNode's answer on a node is a function of what its filters read. When
    the pod has no host port, no topology spread constraint, no inter-pod term (of its
    own or of an existing pod: InterPodAffinity keeps no state), no DynamicResources
    allocation pending (then _triage has settled every node failing a filter other than
    NodeResourcesFit), and the node holds no nominated pod, the only filter that reads
    the pods removed is NodeResourcesFit (fitsRequest, noderesources/fit.go): it reads
    the node's allowed pod count, pod count, allocatable and requested amounts of the
    resources the pod asks for, and each removed pod's requests of those. The reprieve reads the victims' priorities
    and start times only through their order (util.MoreImportantPod) and their PDBs
    through filterPodsWithPDBViolation. So two nodes with the same key -- those node
    figures, and per lower-priority pod in importance order its priority, its requests
    of the pod's resources and the PDBs matching it -- give the same answer by
    position; each node takes its own pods at those positions (and its own start
    times for the final order). Any other node runs its own dry run."""

    __slots__ = (
        "_alone",
        "_answers",
        "_by_class",
        "_classes",
        "_columns",
        "_cycle",
        "_held",
        "_pdbs",
        "_plugins",
        "_resources",
        "_signatures",
    )

    def __init__(self, cycle: Cycle, plugins: Sequence[Plugin], held: int) -> None:
        self._cycle = cycle
        self._plugins = plugins
        self._answers: dict[tuple[object, ...], _DryRun] = {}
        self._by_class: dict[int, _DryRun] = {}  # victim class -> its answer
        self._alone: dict[int, _DryRun] = {}  # node judged alone -> its answer
        self._classes = cycle.table.victim_classes()
        self._signatures: dict[tuple[int, int, str], tuple[object, ...]] = {}
        self._resources = [r for r, _ in checked_requests(cycle.pod)]
        # Allocatable and requested amounts of those resources, per node (0 where absent).
        table = cycle.table
        zeros = [0] * table.size
        self._columns = [
            column
            for r in self._resources
            for column in (table.allocatable.get(r, zeros), table.requested.get(r, zeros))
        ]
        self._pdbs = [
            p for p in cycle.snapshot.pdbs.values() if p.selector is not None and not p.selector.is_empty
        ]
        self._held = held

    @staticmethod
    def applicable(cycle: Cycle, plugins: Sequence[Plugin], to_try: int) -> bool:
        state = cycle.state
        table = cycle.table
        return (
            GROUP_DRY_RUNS
            # The victim classes cost O(nodes) once per table: worth it for many nodes.
            and (table.has_victim_classes() or to_try.bit_count() * CLASSES_FOR_ONE_NODE_IN >= table.size)
            and not cycle.pod.spec.host_ports
            and "spread" not in state
            and "interpod" not in state
            and state.get("dra_pending") is None
            and all(type(p).filter_node is Plugin.filter_node or p.name in _REMOVAL_AWARE for p in plugins)
        )

    def dry_run(self, i: int, lower: Sequence[Pod]) -> _DryRun | FilterFailure:
        """Node ``i``'s dry run (``lower``: its lower-priority pods, most important
        first), shared with every node of its key."""
        cycle = self._cycle
        if not lower or (self._held >> i) & 1:
            return _dry_run(cycle, self._plugins, i, lower)
        key = self._key(i, lower)
        found = self._answers.get(key)
        if found is None:
            run = _dry_run(cycle, self._plugins, i, lower)
            if isinstance(run, FilterFailure):
                return run
            found = self._answers[key] = run
        return found

    def dry_run_preemption(self, to_try: int, wanted: int) -> tuple[list[int], int, dict[int, FilterFailure]]:
        """DryRunPreemption over the nodes of ``to_try``, a victim class at a time
        (nodeinfo.VictimClasses: a refinement of the key): the answer of a class's first
        node is every node's of the class. The candidates are the nodes in order up to
        the one where the per-node loop would stop -- numCandidates candidates, one of
        them violating no PDB -- those violating none first; and the statuses of the
        nodes judged that are no candidate. A node holding nominated pods, and every node
        of a class whose first node's dry run fails, is judged alone. Returns the
        candidates in that order, as a bit set, and the statuses."""
        classes = self._classes
        remaining = to_try
        fine = violating = 0
        found = 0
        statuses: dict[int, FilterFailure] = {}
        lone = self._held  # nodes judged alone
        while remaining:
            low = (remaining & -remaining).bit_length() - 1
            lower, _ = classes.lower(low, self._cycle.priority)
            run = self.dry_run(low, lower)
            number = classes.of[low]
            if (lone >> low) & 1 or not lower or isinstance(run, FilterFailure):
                nodes = 1 << low
                if isinstance(run, FilterFailure):
                    statuses[low] = run
                    lone |= classes.mask(number)
                else:
                    self._alone[low] = run
            else:
                nodes = classes.mask(number) & remaining & ~lone
                self._by_class[number] = run
            remaining &= ~nodes
            if isinstance(run, FilterFailure):
                continue
            if run.pdb_violations == 0:
                fine |= nodes
            else:
                violating |= nodes
            found += nodes.bit_count()
            if found >= wanted and fine:
                # Every node below the first one left is judged: where would the loop stop?
                judged = ((remaining & -remaining) - 1) if remaining else -1
                both = (fine | violating) & judged
                if both.bit_count() >= wanted and fine & judged:
                    last = max(_nth_bit(both, wanted - 1), (fine & -fine).bit_length() - 1)
                    fine &= (2 << last) - 1
                    violating &= (2 << last) - 1
                    break
        return bits(fine) + bits(violating), fine | violating, statuses

    def pick_one(self, chosen: int) -> int:
        """pickOneNodeForPreemption (:func:`pick_one`) over the candidates ``chosen``: the first
        four criteria are functions of the dry run's answer (nodes sharing one have victims
        of the same priorities at the same positions), ranked once per answer; only the
        nodes whose answer ranks first are ranked by their victims' start times. The
        first of equal candidates wins (those of the best answers are all, or none, PDB
        violators: in node order)."""
        classes, priority = self._classes, self._cycle.priority
        shares: list[tuple[_DryRun, list[int]]] = [
            (run, bits(classes.mask(number) & chosen & ~self._held)) for number, run in self._by_class.items()
        ]
        shares.extend((run, [i]) for i, run in self._alone.items() if (chosen >> i) & 1)
        ranked = []
        for run, nodes in shares:
            if nodes:
                _, prios = classes.lower(nodes[0], priority)
                ranked.append((_answer_rank(run.pdb_violations, [prios[k] for k in run.picks]), run, nodes))
        best = min(rank for rank, _, _ in ranked)
        best_node, best_start = -1, 0.0
        for rank, run, nodes in ranked:
            if rank != best:
                continue
            lower, prios = classes.lower(nodes[0], priority)
            top = rank[1]
            # The positions of the highest-priority victims in each node's importance order.
            tops = [len(classes.pods[nodes[0]]) - len(lower) + k for k in run.picks if prios[k] == top]
            for i in nodes:
                pods = classes.pods[i]
                earliest = float("inf")
                for j in tops:
                    created = pods[j].created
                    if created is not None and created < earliest:
                        earliest = created
                start = -earliest if earliest != float("inf") else earliest
                if best_node < 0 or start < best_start or (start == best_start and i < best_node):
                    best_node, best_start = i, start
        return best_node

    def victims(self, candidates: Sequence[int]) -> _Victims:
        table = self._cycle.table
        return _Victims(
            {table.names[i]: i for i in candidates},
            self._classes,
            self._cycle.priority,
            self._by_class,
            self._alone,
        )

    def _key(self, i: int, lower: Sequence[Pod]) -> tuple[object, ...]:
        table = self._cycle.table
        node = tuple(column[i] for column in self._columns)
        return (table.allowed_pods[i], len(table.pods[i]), node, *map(self._signature, lower))

    def _signature(self, pod: Pod) -> tuple[object, ...]:
        # A function of the pod's spec (priority, requests), labels and namespace (PDBs):
        # pods sharing those (interned) objects share it. They live as long as the cycle.
        ident = (id(pod.spec), id(pod.labels), pod.namespace)
        found = self._signatures.get(ident)
        if found is None:
            requests = pod.spec.requests
            pdbs = (
                tuple(
                    j
                    for j, pdb in enumerate(self._pdbs)
                    if pdb.namespace == pod.namespace
                    and pdb.selector is not None
                    and pdb.selector.matches(pod.labels)
                )
                if pod.labels
                else ()
            )
            found = (
                self._cycle.snapshot.priority_of(pod),
                tuple(requests.get(r, 0) for r in self._resources),
                pdbs,
            )
            self._signatures[ident] = found
        return found


def _deallocates(cycle: Cycle) -> bool:
    """DynamicResources' PostFilter deallocates one claim that is unavailable on the nodes
    when no other pod uses it (deallocateOrDeletePodClaims): ``deallocation of
    ResourceClaim completed``."""
    names = cycle.state.get("dra_deallocate")
    if not names:
        return False
    pod = cycle.pod
    for claim in cycle.state.get("dra_claims") or ():
        if claim.name in names and (
            not claim.reserved_for or (len(claim.reserved_for) == 1 and claim.reserved_for[0].uid == pod.uid)
        ):
            return True
    return False


def preempt(
    cycle: Cycle,
    plugins: Sequence[Plugin],
    outcomes: Sequence[Outcome],
    *,
    potential: int,
    nominated_code: str | None,
    prefilter_failed: bool,
) -> PreemptionVerdict:
    """Run DefaultPreemption for a pod no node fits. ``potential`` is the bit set of
    nodes whose first failing status is Unschedulable; ``nominated_code`` the
    status code of the pod's nominated node (None when it has none or it passed)."""
    wording = cycle.wording
    table = cycle.table
    total = table.size
    clause = wording.preemption_clause

    def verdict(
        eligible: bool,
        message: str,
        *,
        reasons: Mapping[str, int] = EMPTY_MAP,
        reason_counts: Mapping[str, int] = EMPTY_MAP,
        candidates: tuple[str, ...] = (),
        victims: VictimsByNode = EMPTY_MAP,
    ) -> PreemptionVerdict:
        if message and wording.dra_postfilter:
            # DynamicResources' PostFilter runs first (v1.34-v1.36.4 dynamicresources.go): "no new
            # claims to deallocate" for a pod without claims, "still not schedulable" for one
            # whose claims it did not deallocate.
            claims = cycle.state.get("dra_claims") is not None
            message = f"{DRA_STILL_NOT_SCHEDULABLE if claims else DRA_NO_CLAIMS}, {message}"
        if message and wording.dra_deallocation and _deallocates(cycle):
            if wording.dra_postfilter:
                message = message.split(", ", 1)[1]
            message = f"{DRA_DEALLOCATED}, {message}"
        return PreemptionVerdict(
            attempted=clause,
            eligible=eligible,
            candidates=candidates,
            victims=victims,
            message=message if clause else "",
            reasons=reasons,
            reason_counts=reason_counts,
        )

    if preemption_policy(cycle) == "Never":
        return verdict(
            False,
            f"preemption: {NOT_ELIGIBLE_NEVER}",
            reason_counts=FrozenMap({C.PREEMPTION_NOT_ELIGIBLE: 1}),
        )
    nominated = table.index.get(cycle.pod.nominated_node) if cycle.pod.nominated_node else None
    if nominated is not None and nominated_code != C.UNRESOLVABLE:
        by_preemption_only = wording.terminating_by_preemption_only
        for p in table.pods[nominated]:
            if (
                p.deleted is not None
                and cycle.snapshot.priority_of(p) < cycle.priority
                and (p.preempted_by_scheduler or not by_preemption_only)
            ):
                return verdict(
                    False,
                    f"preemption: {NOT_ELIGIBLE_TERMINATING}",
                    reason_counts=FrozenMap({C.PREEMPTION_NOT_ELIGIBLE: 1}),
                )

    reasons: dict[str, int] = {}
    codes: dict[str, int] = {}
    if prefilter_failed and wording.prefilter_preemption_no_victims:
        # 1.26-1.28 left every node without a status after a PreFilter rejection,
        # so all nodes were tried; each is reported as having no victims
        # (approximation: nodes with lower-priority pods erred out upstream).
        reasons[NO_VICTIMS] = total
        codes[C.PREEMPTION_NO_VICTIMS] = total
        msg = f"preemption: {preemption_fit_error(total, reasons)}"
        return verdict(True, msg, reasons=FrozenMap(reasons), reason_counts=FrozenMap(codes))

    # Nodes holding nominated pods are judged one by one (run_filters_with_nominated).
    held = 0
    for i in cycle.state.get(NOMINATED_CYCLES, EMPTY_MAP):
        held |= 1 << i
    to_try, settled = _triage(cycle, outcomes, potential & ~held, reasons, codes)
    to_try |= potential & held
    wanted = num_candidates(potential.bit_count())
    statuses: dict[int, FilterFailure]

    def placed(node: int, victims: int, ordered: Sequence[int], by_node: VictimsByNode) -> PreemptionVerdict:
        return verdict(
            True,
            (
                "preemption: " + PLACEMENT_FOUND.format(node=table.names[node], victims=victims)
                if wording.preemption_placement_message
                else ""
            ),
            candidates=tuple(table.names[i] for i in ordered),
            victims=by_node,
        )

    # DryRunPreemption (preemption.go, v1.37.2) runs SelectVictimsOnNode over the potential
    # nodes from an offset, in parallel, and stops once it has numCandidates candidates
    # with one not violating a PDB; here in node order from the first. Grouped dry runs
    # give every node its per-node answer, in the same order: the same candidates and stop.
    if to_try and _DryRunGroups.applicable(cycle, plugins, to_try):
        groups = _DryRunGroups(cycle, plugins, held)
        nodes, selected, statuses = groups.dry_run_preemption(to_try, wanted)
        if nodes:
            best = groups.pick_one(selected)
            return placed(best, len(groups.victims([best])[table.names[best]]), nodes, groups.victims(nodes))
    else:
        candidates, statuses = _dry_run_preemption(
            to_try, wanted, lambda i: select_victims(cycle, plugins, i)
        )
        if candidates:
            chosen = pick_one(cycle, candidates)
            return placed(
                chosen.node,
                len(chosen.victims),
                [c.node for c in candidates],
                FrozenMap(
                    {table.names[c.node]: tuple((p.namespace, p.name) for p in c.victims) for c in candidates}
                ),
            )
    for status in statuses.values():
        for r, rc in zip(status.reasons, status.reason_codes, strict=True):  # pragma: no mutate
            reasons[r] = reasons.get(r, 0) + 1
            codes[rc] = codes.get(rc, 0) + 1
    absent = total - settled - len(statuses)
    if absent:
        reasons[NOT_HELPFUL] = reasons.get(NOT_HELPFUL, 0) + absent
        codes[C.PREEMPTION_NOT_HELPFUL] = codes.get(C.PREEMPTION_NOT_HELPFUL, 0) + absent
    msg = f"preemption: {preemption_fit_error(total, reasons)}"
    return verdict(True, msg, reasons=FrozenMap(reasons), reason_counts=FrozenMap(codes))


def _dry_run_preemption(
    to_try: int, wanted: int, select: Callable[[int], _Candidate | FilterFailure]
) -> tuple[list[_Candidate], dict[int, FilterFailure]]:
    """DryRunPreemption's loop over the nodes of ``to_try`` in order: the candidates,
    those violating no PDB first, and the statuses of the nodes that are none."""
    candidates: list[_Candidate] = []
    statuses: dict[int, FilterFailure] = {}
    found_fine = 0
    for i in _ascending(to_try):
        result = select(i)
        if isinstance(result, FilterFailure):
            statuses[i] = result
            continue
        candidates.append(result)
        if result.pdb_violations == 0:
            found_fine += 1
        if found_fine > 0 and len(candidates) >= wanted:
            break
    ordered = [c for c in candidates if c.pdb_violations == 0] + [c for c in candidates if c.pdb_violations]
    return ordered, statuses


_PRIORITY_OFFSET = 2**31  # math.MaxInt32+1: every priority counts >= 0 in the sum


def _answer_rank(pdb_violations: int, priorities: Sequence[int]) -> tuple[int, int, int, int]:
    """pickOneNodeForPreemption's first four criteria: fewest PDB violations, lowest
    highest victim priority, lowest sum of victim priorities, fewest victims."""
    return (
        pdb_violations,
        max(priorities),
        sum(priorities) + _PRIORITY_OFFSET * len(priorities),
        len(priorities),
    )


def _start_rank(victims: Sequence[Pod], priorities: Sequence[int]) -> float:
    """The fifth: the latest util.GetEarliestPodStartTime, the earliest start among the
    highest-priority victims (none known: last)."""
    top = max(priorities)
    starts = [
        v.created
        for v, prio in zip(victims, priorities, strict=True)
        if prio == top and v.created is not None
    ]
    return -min(starts) if starts else float("inf")


def pick_one(cycle: Cycle, candidates: Sequence[_Candidate]) -> _Candidate:
    """pickOneNodeForPreemption (pkg/scheduler/framework/preemption/preemption.go,
    v1.35.4-v1.37.2, no extender score functions): each criterion keeps the best
    candidates, the next breaks their tie -- the lexicographic minimum of the five.
    Upstream takes the last tie's first node of a map's iteration (random); here,
    the first in ``candidates`` (``min`` keeps the first of equal keys)."""
    priority_of = cycle.snapshot.priority_of

    def rank(c: _Candidate) -> tuple[tuple[int, int, int, int], float]:
        priorities = [priority_of(v) for v in c.victims]
        return _answer_rank(c.pdb_violations, priorities), _start_rank(c.victims, priorities)

    return min(candidates, key=rank)


VictimsByNode = Mapping[str, tuple[tuple[str, str], ...]]


class _Victims(Mapping[str, tuple[tuple[str, str], ...]]):
    """PreemptionVerdict.victims of grouped dry runs: node -> (namespace, name) of its
    victims, each node's expanded when first read. A verdict names up to
    max(100, 10 %) candidates; its message needs the chosen node's count only and most
    readers look at a few nodes. Equal to (and hashes as) the FrozenMap of every entry;
    pickles as that FrozenMap."""

    __slots__ = ("_alone", "_by_class", "_classes", "_expanded", "_nodes", "_priority")

    def __init__(
        self,
        nodes: dict[str, int],
        classes: VictimClasses,
        priority: int,
        by_class: Mapping[int, _DryRun],
        alone: Mapping[int, _DryRun],
    ) -> None:
        self._nodes = nodes
        self._classes = classes
        self._priority = priority
        self._by_class = by_class
        self._alone = alone
        self._expanded: dict[str, tuple[tuple[str, str], ...]] = {}

    def __getitem__(self, node: str) -> tuple[tuple[str, str], ...]:
        victims = self._expanded.get(node)
        if victims is None:
            i = self._nodes[node]
            run = self._alone.get(i) or self._by_class[self._classes.of[i]]
            lower, prios = self._classes.lower(i, self._priority)
            picks = list(run.picks)
            # With one group the victims are in importance order already (lower is).
            if run.both_groups:  # pragma: no mutate
                inf = float("inf")
                picks.sort(
                    key=lambda k: (-prios[k], lower[k].created if lower[k].created is not None else inf)
                )
            victims = self._expanded[node] = tuple((lower[k].namespace, lower[k].name) for k in picks)
        return victims

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    def __hash__(self) -> int:
        return hash(frozenset(self.items()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return len(self) == len(other) and dict(self.items()) == dict(other.items())

    def __repr__(self) -> str:
        return f"FrozenMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple[object, ...]:
        return (FrozenMap, (dict(self.items()),))


def _nth_bit(mask: int, n: int) -> int:
    """The index of the ``n``-th (from 0) set bit of ``mask``, which has more than ``n``."""
    base = 0
    while True:
        chunk = (mask >> base) & ((1 << 256) - 1)
        count = chunk.bit_count()
        if n < count:
            return base + bits(chunk)[n]
        n -= count
        base += 256


def _ascending(mask: int, chunk: int = 256) -> Iterator[int]:
    """The set bits of ``mask``, ascending, found a chunk at a time: the dry runs
    usually stop long before the last node."""
    base = 0
    while mask >> base:
        for j in bits((mask >> base) & ((1 << chunk) - 1)):
            yield base + j
        base += chunk


def _triage(
    cycle: Cycle, outcomes: Sequence[Outcome], potential: int, reasons: dict[str, int], codes: dict[str, int]
) -> tuple[int, int]:
    """SelectVictimsOnNode's first step (evict every lower-priority pod, filter
    again) for all potential nodes at once, as far as it can be done with bit
    sets: nodes without victims, and nodes that still lack resources once their
    victims are gone (NodeResourcesFit is the only pod-dependent filter before
    the later ones, NodePorts aside). When the pod has no host-port conflict,
    spread constraint or inter-pod term, evicting can change nothing else, so
    every potential node is settled here. Tallies the settled nodes' statuses;
    returns (nodes still to try one by one, number of nodes settled)."""
    table = cycle.table
    _, _, has_lower = table.lower_priority(cycle.priority)
    none = (potential & ~has_lower).bit_count()
    if none:
        reasons[NO_VICTIMS] = reasons.get(NO_VICTIMS, 0) + none
        codes[C.PREEMPTION_NO_VICTIMS] = codes.get(C.PREEMPTION_NO_VICTIMS, 0) + none
    rest = potential & has_lower
    if not rest:
        return 0, none
    # A node still short after its evictions fails the per-node dry run alike.
    after = resource_outcome(cycle, table.resource_columns(cycle.priority), rest)
    ports = cycle.outcomes.get(C.NODE_PORTS_PLUGIN)
    if ports is None and "spread" not in cycle.state and "interpod" not in cycle.state:
        remaining = rest
        seq = [after if o.plugin == C.NODE_RESOURCES_FIT else o for o in outcomes]
        if after is not None and not any(o.plugin == C.NODE_RESOURCES_FIT for o in outcomes):
            seq.append(after)
        for out in seq:
            if out is None:
                continue
            first = out.mask & remaining
            if first:
                out.count(first, reasons, codes)
            remaining &= ~out.mask
        return remaining, none + (rest & ~remaining).bit_count()
    if after is None:
        return rest, none
    settled = after.mask & rest & ~(ports.mask if ports is not None else 0)
    if settled:
        after.count(settled, reasons, codes)
    return rest & ~settled, none + settled.bit_count()


NOT_ATTEMPTED = PreemptionVerdict(attempted=False, eligible=True, victims=EMPTY_MAP)
