"""The Score phase for one pod: PreScore, Score, NormalizeScore per plugin in
the profile's order, weights and the total, as
pkg/scheduler/framework/runtime/framework.go (RunPreScorePlugins,
RunScorePlugins, normalizeScores; v1.37.2) computes them, and which nodes the
scheduler looks at (pkg/scheduler/schedule_one.go numFeasibleNodesToFind).

A plugin's PreScore may return Skip: it then has no score at all (not even 0).
An Error status (e.g. a preferred node-affinity term that does not parse) is
:class:`ScoreError`: kube-scheduler fails the scheduling attempt with it.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from types import MappingProxyType
from typing import Any

from analyzers.records import EMPTY_MAP, Pod
from analyzers.simulator.nodeinfo import NodeTable
from analyzers.simulator.scoring.profile import Profile
from analyzers.snapshot import ClusterSnapshot

NO_PLACED: Mapping[int, int] = MappingProxyType({})  # no copies placed
MAX_NODE_SCORE = 100  # k8s.io/kube-scheduler/framework MaxNodeScore
MIN_FEASIBLE_NODES_TO_FIND = 100  # schedule_one.go minFeasibleNodesToFind
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5  # schedule_one.go minFeasibleNodesPercentageToFind


class ScoreError(Exception):
    """A score plugin's Error status: the attempt fails (``plugin`` says which)."""

    def __init__(self, plugin: str, message: str) -> None:
        super().__init__(f'plugin "{plugin}" failed with: {message}')
        self.plugin = plugin


def go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero; Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_round(x: float) -> int:
    """math.Round: half away from zero (Python's round() is half to even)."""
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


@dataclass(slots=True)
class ScoreState:
    """What one Score phase knows (CycleState for the score plugins)."""

    snapshot: ClusterSnapshot
    table: NodeTable
    pod: Pod
    profile: Profile
    nodes: Sequence[int]  # the feasible nodes being scored, by table index
    namespace_labels: Mapping[str, str] = EMPTY_MAP
    # Copies of ``pod`` already bound by a placement, per node index (each counts as
    # a pod on that node: requests, spread and inter-pod counts).
    placed: Mapping[int, int] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)

    def positions(self) -> dict[int, int]:
        """Node index -> its position in ``nodes`` (built once per phase)."""
        found: dict[int, int] | None = self.data.get("positions")
        if found is None:
            found = self.data["positions"] = dict(zip(self.nodes, range(len(self.nodes)), strict=True))
        return found


class ScorePlugin:
    """Base of the score plugins; ``name`` is kube-scheduler's plugin name."""

    name = ""

    def prescore(self, st: ScoreState) -> bool:
        """PreScore: False means Skip (the plugin gives no score for this pod)."""
        return True

    def score(self, st: ScoreState) -> list[int]:
        """Score: one raw score per node of ``st.nodes``, in that order."""
        raise NotImplementedError

    def normalize(self, st: ScoreState, scores: list[int]) -> list[int]:
        """NormalizeScore (ScoreExtensions); the identity when the plugin has none."""
        return scores


def default_normalize(scores: list[int], reverse: bool) -> list[int]:
    """pkg/scheduler/framework/plugins/helper/normalize_score.go DefaultNormalizeScore."""
    top = max(scores, default=0)
    if top <= 0:
        return [MAX_NODE_SCORE] * len(scores) if reverse else list(scores)
    # Scores take few distinct values: each is mapped once (scores >= 0: // is Go's /).
    if reverse:
        mapped = {s: MAX_NODE_SCORE - MAX_NODE_SCORE * s // top for s in set(scores)}
    else:
        mapped = {s: MAX_NODE_SCORE * s // top for s in set(scores)}
    return [mapped[s] for s in scores]


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """The Score phase over ``nodes``: per plugin that was not skipped, its
    normalized score per node (0-100, before weighting); the weighted totals."""

    nodes: tuple[int, ...]
    plugins: tuple[str, ...]
    weights: tuple[int, ...]
    scores: tuple[tuple[int, ...], ...]  # [plugin][k] for nodes[k]
    totals: tuple[int, ...]
    skipped: tuple[str, ...]

    def node_scores(self, k: int) -> dict[str, int]:
        return {p: self.scores[j][k] for j, p in enumerate(self.plugins)}

    def best(self) -> int | None:
        return max(self.totals) if self.totals else None

    def top(self) -> tuple[int, ...]:
        """The nodes sharing the best total (kube-scheduler picks one of them)."""
        best = self.best()
        return tuple(n for n, t in zip(self.nodes, self.totals, strict=True) if t == best)


def run_score_plugins(plugins: Sequence[tuple[ScorePlugin, int]], st: ScoreState) -> PhaseResult:
    """RunPreScorePlugins, RunScorePlugins and normalizeScores: a skipped plugin
    has no score; a score outside [0, 100] after normalizing is an error."""
    names: list[str] = []
    weights: list[int] = []
    all_scores: list[tuple[int, ...]] = []
    skipped: list[str] = []
    active: list[tuple[ScorePlugin, int]] = []
    for plugin, weight in plugins:
        if plugin.prescore(st):
            active.append((plugin, weight))
        else:
            skipped.append(plugin.name)
    totals = [0] * len(st.nodes)
    for plugin, weight in active:
        scores = plugin.normalize(st, plugin.score(st))
        if scores and (max(scores) > MAX_NODE_SCORE or min(scores) < 0):
            s = next(s for s in scores if s > MAX_NODE_SCORE or s < 0)
            raise ScoreError(
                plugin.name,
                f"returns an invalid score {s}, it should in the range of [0, {MAX_NODE_SCORE}] "
                "after normalizing",
            )
        weighted = scores if weight == 1 else map(operator.mul, scores, repeat(weight))
        totals = list(map(operator.add, totals, weighted))
        names.append(plugin.name)
        weights.append(weight)
        all_scores.append(tuple(scores))
    return PhaseResult(
        nodes=tuple(st.nodes),
        plugins=tuple(names),
        weights=tuple(weights),
        scores=tuple(all_scores),
        totals=tuple(totals),
        skipped=tuple(skipped),
    )


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """schedule_one.go numFeasibleNodesToFind (v1.37.2): below 100 nodes, all;
    else percentage% of them (0 or unset: the adaptive 50 - nodes/125, at least
    5%), never fewer than 100. The profile's value wins over the top-level one."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    num = num_all_nodes * pct // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)
