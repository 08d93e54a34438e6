"""Where a pod (or the next N replicas of a workload) would land, and why.

One replica: the filters (:func:`analyzers.simulator.simulate`, the profile's
disabled filters left out), then the Score phase over the feasible nodes. The
scores are computed whenever at least one node is feasible, even one
(kube-scheduler skips scoring then; ``place`` still shows why).

N replicas: bound one after another, each bound to a node of the previous
step's ``top`` set (a new pod record on that node, so requests, spread and
inter-pod counts follow). When ``top`` holds several nodes kube-scheduler picks
one of them (v1.37.2 pops a heap whose equal totals come in the parallel
filter's completion order: unpredictable; up to v1.2x selectHost sampled
uniformly). The expected distribution assumes a uniform pick: exact over the
tie branches (states are multisets of chosen nodes, merged) while the number of
states stays within ``MAX_STATES``, else a seeded estimate over ``SAMPLES``
random tie-breaks with its standard error.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from analyzers.records import Pod
from analyzers.simulator import codes as C
from analyzers.simulator.dra.plugin import commit_allocation, extended_resource_classes
from analyzers.simulator.engine import nominated_pods, simulate
from analyzers.simulator.nodeinfo import bits, host_port_triples, node_table
from analyzers.simulator.resources import checked_requests
from analyzers.simulator.results import PodVerdict
from analyzers.simulator.scoring import profile_plugins, score_pod, score_state
from analyzers.simulator.scoring.framework import (
    PhaseResult,
    PlacedCache,
    num_feasible_nodes_to_find,
    placed_top,
)
from analyzers.simulator.scoring.profile import DEFAULT_PROFILE, Profile
from analyzers.snapshot import ClusterSnapshot

MAX_STATES = 32
SAMPLES = 16


@dataclass(frozen=True, slots=True)
class NodeRow:
    node: str
    feasible: bool
    reason: str = ""
    scores: dict[str, int] = field(default_factory=dict)
    total: int = 0


@dataclass(frozen=True, slots=True)
class Step:
    """One scheduling attempt: every node's row, the best nodes, how many are scored."""

    rows: tuple[NodeRow, ...]
    top: tuple[str, ...]
    scored: int | None  # None: all feasible nodes; else numFeasibleNodesToFind
    possible: tuple[str, ...]  # with a subset scored: nodes that can still win
    phase: PhaseResult | None
    verdict: PodVerdict


def feasible_nodes(verdict: PodVerdict, size: int) -> list[int]:
    if verdict.prefilter is not None or verdict.gated is not None:
        return []
    failing = 0
    for m in verdict.failing.values():
        failing |= m
    return bits(((1 << size) - 1) & ~failing)


def attempt(
    snapshot: ClusterSnapshot,
    pod: Pod,
    profile: Profile = DEFAULT_PROFILE,
    *,
    kube_version: str | None = None,
    rows: bool = True,
) -> Step:
    """Filters then scores for ``pod`` (scheduled as if it had no node); with
    ``rows`` False (later replicas) the per-node rows are left out."""
    unbound = replace(pod, node_name="", phase="Pending", spec=replace(pod.spec, node_name=""))
    verdict = simulate(
        snapshot,
        unbound,
        kube_version=kube_version,
        disabled=profile.disabled_filters,
        added_affinity=profile.added_required,
        dra_filter_timeout=profile.dra_filter_timeout,
    )
    table = node_table(snapshot)
    feasible = feasible_nodes(verdict, table.size)
    phase = score_pod(snapshot, unbound, feasible, profile) if feasible else None
    by_node: dict[int, int] = {}
    if phase is not None:
        by_node = {n: k for k, n in enumerate(phase.nodes)}
    out_rows: list[NodeRow] = []
    for i, name in enumerate(table.names if rows else ()):
        k = by_node.get(i)
        if k is not None and phase is not None:
            out_rows.append(NodeRow(name, True, scores=phase.node_scores(k), total=phase.totals[k]))
        else:
            nv = verdict.node_at(i)
            reason = nv.filters[0].reasons[0] if nv.filters and nv.filters[0].reasons else ""
            out_rows.append(NodeRow(name, False, reason=reason))
    top = tuple(table.names[i] for i in phase.top()) if phase is not None else ()
    # The profile carries its own percentage or the configuration's top-level one.
    to_find = num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, table.size)
    scored: int | None = None
    possible: tuple[str, ...] = ()
    if phase is not None and to_find < len(feasible):
        scored = to_find
        # Which nodes of the scored window can win depends on where the rotating
        # start index stands: a node wins some window iff at least to_find - 1
        # other feasible nodes score no more than it does.
        totals = sorted(phase.totals)
        possible = tuple(
            table.names[n]
            for n, t in zip(phase.nodes, phase.totals, strict=True)
            if _count_at_most(totals, t) >= to_find
        )
    return Step(tuple(out_rows), top, scored, possible, phase, verdict)


def _count_at_most(sorted_totals: list[int], t: int) -> int:
    import bisect

    return bisect.bisect_right(sorted_totals, t)


def bind(
    snapshot: ClusterSnapshot, pod: Pod, node: str, k: int, verdict: PodVerdict | None = None
) -> ClusterSnapshot:
    """``snapshot`` with a copy of ``pod`` bound to ``node`` (replica ``k``), holding the
    devices DynamicResources gave it there (``verdict``'s, PreBind's write)."""
    name = f"{pod.name}-unstick-{k}"
    bound = replace(
        pod,
        name=name,
        uid=f"unstick-placement-{pod.namespace}-{name}",
        node_name=node,
        phase="Running",
        nominated_node="",
        deleted=None,
        spec=replace(pod.spec, node_name=node),
    )
    after = snapshot.replace(bound)
    claims = (
        verdict.claim_allocations.get(node) if verdict is not None and verdict.claim_allocations else None
    )
    if claims:
        after = commit_allocation(after, bound, pod, claims)
    return after


@dataclass(frozen=True, slots=True)
class Placement:
    first: Step
    steps: tuple[tuple[str, ...], ...]  # top set per replica along the first branch
    distribution: dict[str, float]
    exact: bool
    stderr: dict[str, float]
    states: int = 0  # placement states (multisets of bound nodes) whose next attempt was computed


def place(
    snapshot: ClusterSnapshot,
    pod: Pod,
    replicas: int = 1,
    profile: Profile = DEFAULT_PROFILE,
    *,
    kube_version: str | None = None,
    seed: int = 0,
) -> Placement:
    """The first attempt, the top set of each of ``replicas`` sequential
    bindings (first node of each tie, in name order), and the expected number of
    replicas per node with ties broken uniformly at random."""
    first = attempt(snapshot, pod, profile, kube_version=kube_version)
    placer = Placer(snapshot, pod, profile, first, kube_version=kube_version)
    dist, exact, err, steps = _distribution(placer, replicas, seed)
    return Placement(first, tuple(steps), dist, exact, err, states=len(placer.tops))


class Placer:
    """The top set of the next replica after copies of ``pod`` were bound to a
    multiset of nodes (a state: the sorted tuple of their names), memoised per
    state, so tie branches and seeded runs that reach the same state share it.

    A copy bound to node b changes what kube-scheduler knows exactly as the
    framework's AddPod extensions do for an assumed or nominated pod
    (pkg/scheduler/framework/interface.go PreFilterExtensions.AddPod, v1.37.2):
    b's requests and pod count (noderesources/fit.go), its host ports
    (nodeports/node_ports.go), the spread counts of b's domains
    (podtopologyspread/filtering.go and scoring.go count matching pods per
    domain) and the inter-pod counts of b's topology values
    (interpodaffinity/filtering.go updateWithPod, scoring.go). When the pod's
    own filters reach beyond b -- required pod (anti-)affinity, DoNotSchedule
    spread, volumes, resource claims, DRA-backed extended resources -- or pods
    nominated to nodes take part, a state is simulated anew on a snapshot with
    the copies bound (:func:`bind`). Otherwise (the usual Deployment) the
    filters are re-checked on the nodes holding copies only, and the Score
    phase runs over the feasible nodes with the copies counted
    (``ScoreState.placed``): no snapshot is rebuilt and no other node is filtered again."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        pod: Pod,
        profile: Profile,
        first: Step,
        *,
        kube_version: str | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.pod = pod
        self.unbound = replace(pod, node_name="", phase="Pending", spec=replace(pod.spec, node_name=""))
        self.profile = profile
        self.kube_version = kube_version
        self.table = node_table(snapshot)
        self.feasible = feasible_nodes(first.verdict, self.table.size)
        self.local = node_local(snapshot, self.unbound, profile)
        self.tops: dict[tuple[str, ...], tuple[str, ...]] = {(): first.top}
        self.snapshots: dict[tuple[str, ...], ClusterSnapshot] = {(): snapshot}
        self.attempts: dict[tuple[str, ...], Step] = {(): first}
        disabled = profile.disabled_filters
        self.check_resources = C.NODE_RESOURCES_FIT not in disabled
        self.check_ports = C.NODE_PORTS_PLUGIN not in disabled and bool(host_port_triples(pod))
        self.requests = checked_requests(self.unbound)
        self.plugins = profile_plugins(profile)
        self.cache = PlacedCache()

    def top(self, chosen: tuple[str, ...]) -> tuple[str, ...]:
        """The nodes sharing the best total once copies are bound to ``chosen``."""
        found = self.tops.get(chosen)
        if found is None:
            found = self.tops[chosen] = self._incremental(chosen) if self.local else self._rebuilt(chosen)
        return found

    def _incremental(self, chosen: tuple[str, ...]) -> tuple[str, ...]:
        index = self.table.index
        placed: dict[int, int] = {}
        for name in chosen:
            i = index[name]
            placed[i] = placed.get(i, 0) + 1
        dropped = {i for i, copies in placed.items() if not self.fits(i, copies)}
        feasible = [i for i in self.feasible if i not in dropped] if dropped else self.feasible
        if not feasible:
            return ()
        st = score_state(self.snapshot, self.unbound, feasible, self.profile, placed)
        names = self.table.names
        return tuple(names[feasible[k]] for k in placed_top(self.plugins, st, self.cache))

    def fits(self, i: int, copies: int) -> bool:
        """Whether node ``i`` (feasible for the pod) still passes the filters a bound
        copy can change there, with ``copies`` copies bound to it: fitsRequest
        (noderesources/fit.go: the pod count, then each request against allocatable
        minus requested) and NodePorts (a copy holds the pod's own host ports)."""
        table = self.table
        if self.check_ports:
            return False
        if not self.check_resources:
            return True
        if table.pod_count[i] + copies + 1 > table.allowed_pods[i]:
            return False
        for r, q in self.requests:
            alloc = table.allocatable.get(r)
            used = table.requested[r][i] if r in table.requested else 0
            if q > (alloc[i] if alloc is not None else 0) - used - copies * q:
                return False
        return True

    def _rebuilt(self, chosen: tuple[str, ...]) -> tuple[str, ...]:
        return self._attempt(chosen).top

    def _attempt(self, chosen: tuple[str, ...]) -> Step:
        found = self.attempts.get(chosen)
        if found is None:
            found = attempt(
                self._snapshot(chosen), self.pod, self.profile, kube_version=self.kube_version, rows=False
            )
            self.attempts[chosen] = found
        return found

    def _snapshot(self, chosen: tuple[str, ...]) -> ClusterSnapshot:
        """The snapshot with copies bound to ``chosen`` (built from the state less its
        last node; copy k is named after the number of copies, so names never clash).
        The last copy holds the devices DynamicResources gave it on its node in the
        attempt that chose it (PreBind's write), so the next copy gets other devices."""
        found = self.snapshots.get(chosen)
        if found is None:
            before = chosen[:-1]
            verdict = self._attempt(before).verdict
            found = bind(self._snapshot(before), self.pod, chosen[-1], len(chosen), verdict)
            self.snapshots[chosen] = found
        return found


def node_local(snapshot: ClusterSnapshot, pod: Pod, profile: Profile) -> bool:
    """Whether a bound copy of ``pod`` changes no filter verdict of the pod but on
    the node it is bound to (see :class:`Placer`)."""
    spec = pod.spec
    if spec.pod_affinity or spec.pod_anti_affinity or spec.pvc_names or spec.resource_claims:
        return False
    constraints = spec.topology_spread or profile.default_constraints()
    if any(c.when_unsatisfiable != "ScheduleAnyway" for c in constraints):
        return False
    if any("/" in r for r in spec.requests) and extended_resource_classes(snapshot):
        return False
    return not nominated_pods(snapshot)


def _grown(chosen: tuple[str, ...], node: str) -> tuple[str, ...]:
    return tuple(sorted((*chosen, node)))


def _first_branch(placer: Placer, replicas: int) -> list[tuple[str, ...]]:
    """The top set of each replica, always binding the first node of a tie."""
    steps: list[tuple[str, ...]] = []
    chosen: tuple[str, ...] = ()
    for k in range(1, replicas + 1):
        top = placer.top(chosen)
        if not top:
            break
        steps.append(top)
        if k == replicas:
            break
        chosen = _grown(chosen, top[0])
    return steps


def _distribution(
    placer: Placer, replicas: int, seed: int
) -> tuple[dict[str, float], bool, dict[str, float], list[tuple[str, ...]]]:
    """The expected distribution, whether exact, its standard errors (estimates
    only) and the first branch's top sets (computed along the way)."""
    steps: list[tuple[str, ...]] = []
    branch: tuple[str, ...] = ()
    # state: multiset of chosen nodes (sorted tuple) -> probability
    states: dict[tuple[str, ...], float] = {(): 1.0}
    for k in range(1, replicas + 1):
        if branch in states:
            top = placer.top(branch)
            if top:
                steps.append(top)
                branch = _grown(branch, top[0])
        if k < replicas and sum(max(1, len(placer.top(c))) for c in states) > MAX_STATES:
            # Too many tie branches to follow exactly: a seeded estimate instead.
            return (*_sampled(placer, replicas, seed), _first_branch(placer, replicas))
        nxt: dict[tuple[str, ...], float] = {}
        for chosen, p in states.items():
            top = placer.top(chosen)
            if not top:
                nxt[chosen] = p + nxt.get(chosen, 0.0)
                continue
            share = p / len(top)
            for node in top:
                key = _grown(chosen, node)
                nxt[key] = nxt.get(key, 0.0) + share
            if len(nxt) > MAX_STATES:
                return (*_sampled(placer, replicas, seed), _first_branch(placer, replicas))
        states = nxt
    dist: dict[str, float] = {}
    for chosen, p in states.items():
        for node in chosen:
            dist[node] = dist.get(node, 0.0) + p
    return {n: round(v, 6) for n, v in sorted(dist.items())}, True, {}, steps


def _sampled(placer: Placer, replicas: int, seed: int) -> tuple[dict[str, float], bool, dict[str, float]]:
    rng = random.Random(seed)
    runs: list[dict[str, int]] = []
    for _ in range(SAMPLES):
        chosen: tuple[str, ...] = ()
        counts: dict[str, int] = {}
        for k in range(1, replicas + 1):
            top = placer.top(chosen)
            if not top:
                break
            node = rng.choice(top)
            counts[node] = counts.get(node, 0) + 1
            if k < replicas:
                chosen = _grown(chosen, node)
        runs.append(counts)
    return estimate(runs)


def estimate(runs: list[dict[str, int]]) -> tuple[dict[str, float], bool, dict[str, float]]:
    """The mean replicas per node over seeded ``runs``, not exact, and its standard errors."""
    names = sorted({n for r in runs for n in r})
    dist: dict[str, float] = {}
    err: dict[str, float] = {}
    for n in names:
        xs = [r.get(n, 0) for r in runs]
        mean = sum(xs) / len(xs)
        var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1) if len(xs) > 1 else 0.0
        dist[n] = round(mean, 6)
        err[n] = round(math.sqrt(var / len(xs)), 6)
    return dist, False, err


def placement_json(pl: Placement, pod: Pod, profile: Profile, replicas: int | None) -> dict[str, object]:
    """The JSON contract of ``unstick place`` (docs/placement.md)."""
    first = pl.first
    nodes: list[dict[str, object]] = []
    for row in first.rows:
        if row.feasible:
            nodes.append({"node": row.node, "feasible": True, "scores": dict(row.scores), "total": row.total})
        else:
            nodes.append({"node": row.node, "feasible": False, "reason": row.reason})
    out: dict[str, object] = {
        "pod": f"{pod.namespace}/{pod.name}",
        "profile": profile.scheduler_name,
        "scored": "all" if first.scored is None else first.scored,
        "nodes": nodes,
        "top": list(first.top),
    }
    if first.scored is not None:
        out["possible"] = list(first.possible)
    if replicas is not None:
        out["placements"] = [{"replica": k, "top": list(t)} for k, t in enumerate(pl.steps, start=1)]
        out["distribution"] = pl.distribution
        out["distribution_method"] = "exact" if pl.exact else f"estimate ({SAMPLES} seeded runs)"
        if not pl.exact:
            out["distribution_stderr"] = pl.stderr
    return out


def rank(rows: Sequence[NodeRow]) -> list[NodeRow]:
    return sorted((r for r in rows if r.feasible), key=lambda r: (-r.total, r.node))
