"""NodeResourcesFit's score: pkg/scheduler/framework/plugins/noderesources/
fit.go Score, least_allocated.go, most_allocated.go,
requested_to_capacity_ratio.go and helper/shape_score.go (v1.37.2).

Per resource r with weight w (the node's allocatable A, its pods' non-zero
requests plus the incoming pod's R):
- LeastAllocated: (A - R) * 100 / A, 0 when R > A;
- MostAllocated: min(R, A) * 100 / A;
- RequestedToCapacityRatio: the broken-linear shape at R * 100 / A (shape
  scores 0-10 scaled by 10), 100% when R > A; only resources scoring > 0 count
  and the weighted mean is rounded (math.Round) instead of truncated;
and the node's score is sum(score_r * w) / sum(w), Go integer division.
No NormalizeScore.
"""

from __future__ import annotations

from collections.abc import Sequence

from analyzers.simulator.scoring.framework import (
    MAX_NODE_SCORE,
    PLACED_NODE,
    ScorePlugin,
    ScoreState,
    go_div,
    go_round,
)
from analyzers.simulator.scoring.profile import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    NODE_RESOURCES_FIT,
    REQUESTED_TO_CAPACITY_RATIO,
)
from analyzers.simulator.scoring.resource_allocation import columns, reported

MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10  # pkg/scheduler/apis/config/types.go


def broken_linear(shape: tuple[tuple[int, int], ...], p: int) -> int:
    """helper.BuildBrokenLinearFunction over (utilization, score already scaled)."""
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            pu, ps = shape[i - 1]
            return ps + go_div((s - ps) * (p - pu), u - pu)
    return shape[-1][1]


class NodeResourcesFit(ScorePlugin):
    name = NODE_RESOURCES_FIT
    placed = PLACED_NODE

    def score(self, st: ScoreState) -> list[int]:
        profile = st.profile
        cols = columns(
            st.snapshot, st.table, st.pod, profile.fit_resources, use_requested=False, placed=st.placed
        )
        strategy = profile.fit_strategy
        shape = tuple((u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in profile.shape)
        if strategy in (LEAST_ALLOCATED, MOST_ALLOCATED):
            return _allocated(st.nodes, cols, strategy == LEAST_ALLOCATED)
        out = []
        for i in st.nodes:
            total = 0
            weights = 0
            for req, w, used, alloc in cols:
                a = alloc[i]
                if a == 0:
                    continue
                requested = used[i] + req
                if strategy == LEAST_ALLOCATED:
                    s = 0 if requested > a else (a - requested) * MAX_NODE_SCORE // a
                elif strategy == MOST_ALLOCATED:
                    s = min(requested, a) * MAX_NODE_SCORE // a
                else:  # REQUESTED_TO_CAPACITY_RATIO
                    if requested > a:
                        s = broken_linear(shape, MAX_UTILIZATION)
                    else:
                        s = broken_linear(shape, requested * MAX_UTILIZATION // a)
                    if s <= 0:
                        continue
                total += s * w
                weights += w
            if weights == 0:
                out.append(0)
            elif strategy == REQUESTED_TO_CAPACITY_RATIO:
                out.append(go_round(total / weights))
            else:
                out.append(go_div(total, weights))
        return out


def _allocated(
    nodes: Sequence[int], cols: list[tuple[int, int, Sequence[int], list[int]]], least: bool
) -> list[int]:
    """LeastAllocated / MostAllocated with the per-resource arithmetic inlined
    (the same integer steps as the general loop above, per node)."""
    if len(cols) == 2 and all(reported(col, nodes) for _, _, _, col in cols):
        # The default two resources, both reported by every node: unpacked once.
        (r0, w0, u0, a0), (r1, w1, u1, a1) = cols
        m = MAX_NODE_SCORE
        ws = w0 + w1
        out2 = []
        # An explicit loop: faster here than a comprehension over gathered columns.
        for i in nodes:
            x, y = a0[i], a1[i]
            p, q = u0[i] + r0, u1[i] + r1
            if least:
                s0 = 0 if p > x else (x - p) * m // x
                s1 = 0 if q > y else (y - q) * m // y
            else:
                s0 = (x if p > x else p) * m // x
                s1 = (y if q > y else q) * m // y
            out2.append((s0 * w0 + s1 * w1) // ws)
        return out2
    out = []
    for i in nodes:
        total = 0
        weights = 0
        for req, w, used, alloc in cols:
            a = alloc[i]
            if a == 0:
                continue
            r = used[i] + req
            if least:
                total += (0 if r > a else (a - r) * MAX_NODE_SCORE // a) * w
            else:
                total += ((a if r > a else r) * MAX_NODE_SCORE // a) * w
            weights += w
        out.append(total // weights if weights else 0)
    return out


__all__ = ["MOST_ALLOCATED", "NodeResourcesFit", "broken_linear"]
