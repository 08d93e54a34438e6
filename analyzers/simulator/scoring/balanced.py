"""NodeResourcesBalancedAllocation: pkg/scheduler/framework/plugins/
noderesources/balanced_allocation.go (v1.37.2).

PreScore: Skip when the pod requests none of the resources (a best-effort
pod). Score, over the plain requests (``useRequested``): the fractions f_r =
min(requested_r / allocatable_r, 1) with and without the pod; std = |f1-f2|/2
for two resources, the population standard deviation for more;
balanced(f) = int64((1 - std) * 100); the score is
50 + (50 + balanced(with) - balanced(without)) / 2 (Go integer division):
since v1.36 (v1.36.0 to v1.37.2 alike) it scores the change the pod makes.
Up to v1.35 (v1.34.7, v1.35.4 balancedResourceScorer) the score was
balanced(with) alone; a snapshot of such a release is scored so.
No NormalizeScore.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from analyzers.simulator.scoring.framework import MAX_NODE_SCORE, PLACED_NODE, ScorePlugin, ScoreState, go_div
from analyzers.simulator.scoring.profile import BALANCED_ALLOCATION
from analyzers.simulator.scoring.resource_allocation import Patched, columns, pod_request, reported

# noderesources/balanced_allocation.go: the score of the change the pod makes, since v1.36.0.
CHANGE_SCORED_SINCE = (1, 36)


def balanced_score(fractions: list[float]) -> int:
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        acc = 0.0
        for f in fractions:
            acc = acc + (f - mean) * (f - mean)
        std = math.sqrt(acc / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


class NodeResourcesBalancedAllocation(ScorePlugin):
    name = BALANCED_ALLOCATION
    placed = PLACED_NODE

    def prescore(self, st: ScoreState) -> bool:
        return any(pod_request(st.pod, r.name, True) != 0 for r in st.profile.balanced_resources)

    def score(self, st: ScoreState) -> list[int]:
        resources = st.profile.balanced_resources
        cols = columns(st.snapshot, st.table, st.pod, resources, use_requested=True, placed=st.placed)
        out = []
        half = MAX_NODE_SCORE // 2
        change_scored = st.release >= CHANGE_SCORED_SINCE
        if len(cols) == 2 and change_scored:
            base = (
                columns(st.snapshot, st.table, st.pod, resources, use_requested=True) if st.placed else cols
            )
            return self._two(st, cols, base)
        for i in st.nodes:
            with_pod: list[float] = []
            without: list[float] = []
            for req, _w, used, alloc in cols:
                a = alloc[i]
                if a == 0:
                    continue
                f1 = float(used[i] + req) / float(a)
                f0 = float(used[i]) / float(a)
                with_pod.append(1.0 if f1 > 1 else f1)
                without.append(1.0 if f0 > 1 else f0)
            if not change_scored:
                out.append(balanced_score(with_pod))
                continue
            out.append(half + go_div(half + balanced_score(with_pod) - balanced_score(without), 2))
        return out

    @staticmethod
    def _two(
        st: ScoreState,
        cols: list[tuple[int, int, Sequence[int], list[int]]],
        base: list[tuple[int, int, Sequence[int], list[int]]],
    ) -> list[int]:
        """The same arithmetic for the usual two resources, without per-node lists:
        std = |f1 - f2| / 2 with both fractions present, 0 with one, none: 100.
        The node's own balance (without the pod) is a column of the snapshot
        (``base``: the columns without placed copies), recomputed on placed nodes."""
        (r0, _, u0, a0), (r1, _, u1, a1) = cols
        without_col: Sequence[int] = _without_column(st, base)
        if st.placed:
            without_col = Patched(without_col, {i: _balance(u0[i], u1[i], a0[i], a1[i]) for i in st.placed})
        out = []
        if reported(a0, st.nodes) and reported(a1, st.nodes):
            # Every node reports both: the loop without the check (explicit loops are
            # faster here than comprehensions over gathered columns).
            for i in st.nodes:
                f0 = (u0[i] + r0) / a0[i]
                f1 = (u1[i] + r1) / a1[i]
                d = 50 + int((1 - abs(((1.0 if f0 > 1 else f0) - (1.0 if f1 > 1 else f1)) / 2)) * 100.0)
                d -= without_col[i]
                out.append(50 + (d // 2 if d >= 0 else -((-d) // 2)))
            return out
        for i in st.nodes:
            x, y = a0[i], a1[i]
            if x and y:
                f0, f1 = (u0[i] + r0) / x, (u1[i] + r1) / y
                f0 = 1.0 if f0 > 1 else f0
                f1 = 1.0 if f1 > 1 else f1
                d = 50 + int((1 - abs((f0 - f1) / 2)) * 100.0) - without_col[i]
            else:
                d = 50
            out.append(50 + (d // 2 if d >= 0 else -((-d) // 2)))
        return out


def _balance(u0: int, u1: int, x: int, y: int) -> int:
    """balanced(f) of a node's own requests (u0, u1) over allocatable (x, y)."""
    if not (x and y):
        return 100
    g0, g1 = u0 / x, u1 / y
    g0 = 1.0 if g0 > 1 else g0
    g1 = 1.0 if g1 > 1 else g1
    return int((1 - abs((g0 - g1) / 2)) * 100.0)


def _without_column(st: ScoreState, base: list[tuple[int, int, Sequence[int], list[int]]]) -> list[int]:
    """Every node's balance without the pod, once per node table and resource pair
    (the columns are the table's own lists, so their identity keys the memo)."""
    (_, _, u0, a0), (_, _, u1, a1) = base
    key = ("scoring.balanced.without", id(u0), id(a0), id(u1), id(a1))
    found = st.table.memo.get(key)
    if found is None or found[0] is not u0 or found[1] is not u1 or found[2] is not a0 or found[3] is not a1:
        found = (u0, u1, a0, a1, list(map(_balance, u0, u1, a0, a1)))
        st.table.memo[key] = found
    column: list[int] = found[4]
    return column
