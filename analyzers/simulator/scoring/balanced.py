"""NodeResourcesBalancedAllocation: pkg/scheduler/framework/plugins/
noderesources/balanced_allocation.go (v1.37.2).

PreScore: Skip when the pod requests none of the resources (a best-effort
pod). Score, over the plain requests (``useRequested``): the fractions f_r =
min(requested_r / allocatable_r, 1) with and without the pod; std = |f1-f2|/2
for two resources, the population standard deviation for more;
balanced(f) = int64((1 - std) * 100); the score is
50 + (50 + balanced(with) - balanced(without)) / 2 (Go integer division):
v1.37.2 scores the change the pod makes (other releases' code not compared).
No NormalizeScore.
"""

from __future__ import annotations

import math

from analyzers.simulator.scoring.framework import MAX_NODE_SCORE, ScorePlugin, ScoreState, go_div
from analyzers.simulator.scoring.profile import BALANCED_ALLOCATION
from analyzers.simulator.scoring.resource_allocation import columns, pod_request


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

    def prescore(self, st: ScoreState) -> bool:
        return any(pod_request(st.pod, r.name, True) != 0 for r in st.profile.balanced_resources)

    def score(self, st: ScoreState) -> list[int]:
        cols = columns(st.snapshot, st.table, st.pod, st.profile.balanced_resources, use_requested=True)
        out = []
        half = MAX_NODE_SCORE // 2
        if len(cols) == 2:
            return self._two(st, cols)
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
            out.append(half + go_div(half + balanced_score(with_pod) - balanced_score(without), 2))
        return out

    @staticmethod
    def _two(st: ScoreState, cols: list[tuple[int, int, list[int], list[int]]]) -> list[int]:
        """The same arithmetic for the usual two resources, without per-node lists:
        std = |f1 - f2| / 2 with both fractions present, 0 with one, none: 100."""
        (r0, _, u0, a0), (r1, _, u1, a1) = cols
        out = []
        for i in st.nodes:
            x, y = a0[i], a1[i]
            if x and y:
                f0, f1 = (u0[i] + r0) / x, (u1[i] + r1) / y
                g0, g1 = u0[i] / x, u1[i] / y
                f0, f1, g0, g1 = min(f0, 1.0), min(f1, 1.0), min(g0, 1.0), min(g1, 1.0)
                with_pod = int((1 - abs((f0 - f1) / 2)) * 100.0)
                without = int((1 - abs((g0 - g1) / 2)) * 100.0)
            else:
                with_pod = without = 100
            d = 50 + with_pod - without
            out.append(50 + (d // 2 if d >= 0 else -((-d) // 2)))
        return out
