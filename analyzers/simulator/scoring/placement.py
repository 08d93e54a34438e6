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
from analyzers.simulator.dra.plugin import commit_allocation
from analyzers.simulator.engine import simulate
from analyzers.simulator.nodeinfo import bits, node_table
from analyzers.simulator.results import PodVerdict
from analyzers.simulator.scoring import score_pod
from analyzers.simulator.scoring.framework import PhaseResult, num_feasible_nodes_to_find
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
    verdict = simulate(snapshot, unbound, kube_version=kube_version, disabled=profile.disabled_filters)
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
    dist, exact, err, steps = _distribution(snapshot, pod, replicas, profile, kube_version, first, seed)
    return Placement(first, tuple(steps), dist, exact, err)


def _first_branch(
    snapshot: ClusterSnapshot,
    pod: Pod,
    replicas: int,
    profile: Profile,
    kube_version: str | None,
    first: Step,
) -> list[tuple[str, ...]]:
    """The top set of each replica, always binding the first node of a tie."""
    steps: list[tuple[str, ...]] = []
    snap, step = snapshot, first
    for k in range(1, replicas + 1):
        if not step.top:
            break
        steps.append(step.top)
        if k == replicas:
            break
        snap = bind(snap, pod, step.top[0], k, step.verdict)
        step = attempt(snap, pod, profile, kube_version=kube_version, rows=False)
    return steps


def _distribution(
    snapshot: ClusterSnapshot,
    pod: Pod,
    replicas: int,
    profile: Profile,
    kube_version: str | None,
    first: Step,
    seed: int,
) -> tuple[dict[str, float], bool, dict[str, float], list[tuple[str, ...]]]:
    """The expected distribution, whether exact, its standard errors (estimates
    only) and the first branch's top sets (computed along the way)."""
    steps: list[tuple[str, ...]] = []
    branch: tuple[str, ...] = ()
    # state: multiset of chosen nodes (sorted tuple) -> (probability, snapshot, next step)
    states: dict[tuple[str, ...], tuple[float, ClusterSnapshot, Step]] = {(): (1.0, snapshot, first)}
    for k in range(1, replicas + 1):
        on_branch = states.get(branch)
        if on_branch is not None and on_branch[2].top:
            steps.append(on_branch[2].top)
            branch = tuple(sorted((*branch, on_branch[2].top[0])))
        if k < replicas and sum(max(1, len(st.top)) for _, _, st in states.values()) > MAX_STATES:
            # Too many tie branches to follow exactly: a seeded estimate instead.
            sampled = _sampled(snapshot, pod, replicas, profile, kube_version, first, seed)
            return (*sampled, _first_branch(snapshot, pod, replicas, profile, kube_version, first))
        nxt: dict[tuple[str, ...], tuple[float, ClusterSnapshot, Step | None]] = {}
        for chosen, (p, snap, step) in states.items():
            if not step.top:
                key = chosen
                old = nxt.get(key)
                nxt[key] = (p + (old[0] if old else 0.0), snap, step)
                continue
            share = p / len(step.top)
            for node in step.top:
                key = tuple(sorted((*chosen, node)))
                old = nxt.get(key)
                if old is not None:
                    nxt[key] = (old[0] + share, old[1], old[2])
                else:
                    nxt[key] = (share, bind(snap, pod, node, k, step.verdict), None)
            if len(nxt) > MAX_STATES:
                sampled = _sampled(snapshot, pod, replicas, profile, kube_version, first, seed)
                return (*sampled, _first_branch(snapshot, pod, replicas, profile, kube_version, first))
        states = {}
        for key, (p, snap, step_or_none) in nxt.items():
            if step_or_none is None:
                step_or_none = (
                    attempt(snap, pod, profile, kube_version=kube_version, rows=False)
                    if k < replicas
                    else first
                )
            states[key] = (p, snap, step_or_none)
    dist: dict[str, float] = {}
    for chosen, (p, _, _) in states.items():
        for node in chosen:
            dist[node] = dist.get(node, 0.0) + p
    return {n: round(v, 6) for n, v in sorted(dist.items())}, True, {}, steps


def _sampled(
    snapshot: ClusterSnapshot,
    pod: Pod,
    replicas: int,
    profile: Profile,
    kube_version: str | None,
    first: Step,
    seed: int,
) -> tuple[dict[str, float], bool, dict[str, float]]:
    rng = random.Random(seed)
    runs: list[dict[str, int]] = []
    for _ in range(SAMPLES):
        snap, step = snapshot, first
        counts: dict[str, int] = {}
        for k in range(1, replicas + 1):
            if not step.top:
                break
            node = rng.choice(step.top)
            counts[node] = counts.get(node, 0) + 1
            if k < replicas:
                snap = bind(snap, pod, node, k, step.verdict)
                step = attempt(snap, pod, profile, kube_version=kube_version, rows=False)
        runs.append(counts)
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
