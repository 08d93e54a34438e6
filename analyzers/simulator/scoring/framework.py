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
from analyzers.simulator.versions import VersionError, parse_version
from analyzers.snapshot import ClusterSnapshot

NO_PLACED: Mapping[int, int] = MappingProxyType({})  # no copies placed
MAX_NODE_SCORE = 100  # k8s.io/kube-scheduler/framework MaxNodeScore
MIN_FEASIBLE_NODES_TO_FIND = 100  # schedule_one.go minFeasibleNodesToFind
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5  # schedule_one.go minFeasibleNodesPercentageToFind
# The release the Score phase follows when the snapshot does not say its own.
SCORE_RELEASE = (1, 37)


def score_release(snapshot: ClusterSnapshot) -> tuple[int, int]:
    """The (major, minor) release whose score code applies: the dump's own
    (``kube_version``), else v1.37 (not the wording's older default: where
    releases differ in scores, docs/placement.md "Releases" says how)."""
    if not snapshot.kube_version:
        return SCORE_RELEASE
    try:
        major, minor, _ = parse_version(snapshot.kube_version)
    except VersionError:
        return SCORE_RELEASE
    return (major, minor)


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

    @property
    def release(self) -> tuple[int, int]:
        return score_release(self.snapshot)

    def positions(self) -> dict[int, int]:
        """Node index -> its position in ``nodes`` (built once per phase)."""
        found: dict[int, int] | None = self.data.get("positions")
        if found is None:
            found = self.data["positions"] = dict(zip(self.nodes, range(len(self.nodes)), strict=True))
        return found


@dataclass(frozen=True, slots=True)
class KeyedScores:
    """Normalized scores as a lookup: the node at position k of the scored nodes
    scores ``values[keys[k]]``, unless ``overrides`` holds its own score."""

    keys: Sequence[int]
    values: list[int]
    overrides: dict[int, int]


# What a plugin's scores depend on among the copies of the pod a placement bound
# (ScoreState.placed): nothing; only a node's own copies (its raw score, with no
# NormalizeScore); or any copy anywhere (domains, normalization).
PLACED_NONE = "none"
PLACED_NODE = "node"
PLACED_ANY = "any"


class ScorePlugin:
    """Base of the score plugins; ``name`` is kube-scheduler's plugin name;
    ``placed`` what its PreScore, Score and NormalizeScore read of
    ``ScoreState.placed`` (:func:`placed_totals`)."""

    name = ""
    placed = PLACED_ANY

    def prescore(self, st: ScoreState) -> bool:
        """PreScore: False means Skip (the plugin gives no score for this pod)."""
        return True

    def score(self, st: ScoreState) -> list[int]:
        """Score: one raw score per node of ``st.nodes``, in that order."""
        raise NotImplementedError

    def normalize(self, st: ScoreState, scores: list[int]) -> list[int]:
        """NormalizeScore (ScoreExtensions); the identity when the plugin has none."""
        return scores

    def scores(self, st: ScoreState) -> list[int]:
        """Score then NormalizeScore (a plugin may compute both in one pass)."""
        return self.normalize(st, self.score(st))

    def keyed_scores(self, st: ScoreState) -> KeyedScores | None:
        """:meth:`scores` as a lookup table, for plugins whose nodes score alike by
        key (None: not available)."""
        return None


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
        scores = _checked(plugin, plugin.scores(st))
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


def _checked(plugin: ScorePlugin, scores: list[int]) -> list[int]:
    """normalizeScores' range check: a score outside [0, 100] is the plugin's Error."""
    if scores and (max(scores) > MAX_NODE_SCORE or min(scores) < 0):
        s = next(s for s in scores if s > MAX_NODE_SCORE or s < 0)
        raise ScoreError(
            plugin.name,
            f"returns an invalid score {s}, it should in the range of [0, {MAX_NODE_SCORE}] after normalizing",
        )
    return scores


class PlacedCache:
    """The part of a Score phase that copies placed on other nodes leave alone,
    kept across the states of one placement while the scored nodes are the same
    list: the weighted sum of the PLACED_NONE and PLACED_NODE plugins' scores
    without copies, and the PLACED_NODE plugins' raw scores to patch."""

    __slots__ = ("groups", "node_plugins", "nodes", "positions", "static_total")

    def __init__(self) -> None:
        self.nodes: Sequence[int] | None = None
        self.static_total: list[int] = []
        self.node_plugins: list[tuple[ScorePlugin, int, list[int]]] = []
        self.positions: dict[int, int] = {}
        self.groups: tuple[Sequence[int], dict[int, list[tuple[int, int]]]] | None = None

    def key_groups(self, keys: Sequence[int]) -> dict[int, list[tuple[int, int]]]:
        """Per key of ``keys`` (one per scored node): its nodes' (cached total,
        position), highest total first -- once per key column."""
        if self.groups is None or self.groups[0] is not keys:
            groups: dict[int, list[tuple[int, int]]] = {}
            for k, (key, total) in enumerate(zip(keys, self.static_total, strict=True)):
                groups.setdefault(key, []).append((total, k))
            for entries in groups.values():
                entries.sort(key=lambda e: -e[0])
            self.groups = (keys, groups)
        return self.groups[1]


def placed_top(plugins: Sequence[tuple[ScorePlugin, int]], st: ScoreState, cache: PlacedCache) -> list[int]:
    """The positions (in ``st.nodes``) of the nodes sharing the best weighted total
    :func:`run_score_plugins` gives ``st`` (copies placed on ``st.placed``), from
    ``cache`` where the copies change nothing: a PLACED_NONE plugin's column is
    reused, a PLACED_NODE plugin's is patched on the nodes holding copies, a
    PLACED_ANY plugin runs whole. When the only PLACED_ANY plugin that runs gives
    keyed scores, the best total is found per key (the cached totals of each
    key's nodes sorted once) instead of node by node. (A plugin's Error is raised
    when its column is computed, which may be before another plugin's.)"""
    if cache.nodes is None or (cache.nodes is not st.nodes and cache.nodes != st.nodes):
        cache.nodes = st.nodes
        cache.positions = st.positions()
        cache.groups = None
        base = ScoreState(
            snapshot=st.snapshot,
            table=st.table,
            pod=st.pod,
            profile=st.profile,
            nodes=st.nodes,
            namespace_labels=st.namespace_labels,
            data={"positions": cache.positions},
        )
        total = [0] * len(st.nodes)
        cache.node_plugins = []
        for plugin, weight in plugins:
            if plugin.placed == PLACED_ANY or not plugin.prescore(base):
                continue
            raw = plugin.score(base)
            scores = _checked(plugin, plugin.normalize(base, raw))
            weighted = scores if weight == 1 else map(operator.mul, scores, repeat(weight))
            total = list(map(operator.add, total, weighted))
            if plugin.placed == PLACED_NODE:
                cache.node_plugins.append((plugin, weight, raw))
        cache.static_total = total
    st.data["positions"] = cache.positions
    static = cache.static_total
    # The nodes holding copies: what the PLACED_NODE plugins add to or take from the cached total.
    at = [(k, i) for i in st.placed if (k := cache.positions.get(i)) is not None]
    delta: dict[int, int] = {}
    if at and cache.node_plugins:
        sub = ScoreState(
            snapshot=st.snapshot,
            table=st.table,
            pod=st.pod,
            profile=st.profile,
            nodes=[i for _, i in at],
            namespace_labels=st.namespace_labels,
            placed=st.placed,
        )
        for plugin, weight, raw in cache.node_plugins:
            plugin.prescore(sub)
            patched = _checked(plugin, plugin.scores(sub))
            for (k, _), s in zip(at, patched, strict=True):
                delta[k] = delta.get(k, 0) + weight * (s - raw[k])
    active = [
        (plugin, weight) for plugin, weight in plugins if plugin.placed == PLACED_ANY and plugin.prescore(st)
    ]
    keyed = active[0][0].keyed_scores(st) if len(active) == 1 else None
    if keyed is None:
        totals = static
        for plugin, weight in active:
            scores = _checked(plugin, plugin.scores(st))
            weighted = scores if weight == 1 else map(operator.mul, scores, repeat(weight))
            totals = list(map(operator.add, totals, weighted))
        if delta:
            totals = list(totals)
            for k, d in delta.items():
                totals[k] += d
        return _best_positions(totals)
    plugin, weight = active[0]
    held = {k for k, _ in at}
    held.update(keyed.overrides)
    groups = cache.key_groups(keyed.keys)
    values = keyed.values
    best: int | None = None
    winners: list[tuple[int, int]] = []  # (key, the cached total its best nodes share)
    for key, entries in groups.items():
        for s, k in entries:
            if k in held:
                continue
            _checked(plugin, [values[key]])
            candidate = s + weight * values[key]
            if best is None or candidate > best:
                best, winners = candidate, [(key, s)]
            elif candidate == best:
                winners.append((key, s))
            break
    own: dict[int, int] = {}
    for k in held:
        value = keyed.overrides.get(k)
        if value is None:
            value = values[keyed.keys[k]]
        else:
            _checked(plugin, [value])
        own[k] = candidate = static[k] + delta.get(k, 0) + weight * value
        if best is None or candidate > best:
            best = candidate
    top = [k for k, candidate in own.items() if candidate == best]
    for key, s in winners:
        if s + weight * values[key] != best:
            continue
        for t, k in groups[key]:
            if t < s:
                break
            if t == s and k not in held:
                top.append(k)
    return sorted(top)


def _best_positions(totals: list[int]) -> list[int]:
    """Positions of the highest total, ascending."""
    if not totals:
        return []
    best = max(totals)
    out = []
    k = totals.index(best)
    while True:
        out.append(k)
        try:
            k = totals.index(best, k + 1)
        except ValueError:
            return out


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
