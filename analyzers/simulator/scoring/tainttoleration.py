"""TaintToleration's score: pkg/scheduler/framework/plugins/tainttoleration/
taint_toleration.go (v1.37.2). PreScore keeps the tolerations whose effect is
empty or PreferNoSchedule; Score counts the node's PreferNoSchedule taints
none of them tolerates; NormalizeScore is DefaultNormalizeScore reversed
(the node with most such taints 0, none 100; all nodes 100 when no node has one).
"""

from __future__ import annotations

from analyzers.simulator.basic import tolerates
from analyzers.simulator.scoring.framework import ScorePlugin, ScoreState, default_normalize
from analyzers.simulator.scoring.profile import TAINT_TOLERATION


class TaintToleration(ScorePlugin):
    name = TAINT_TOLERATION

    def score(self, st: ScoreState) -> list[int]:
        tolerations = [t for t in st.pod.spec.tolerations if t.effect in ("", "PreferNoSchedule")]
        nodes = st.table.nodes
        memo: dict[object, int] = {}
        out = []
        for i in st.nodes:
            taints = nodes[i].taints
            n = memo.get(taints)
            if n is None:
                n = memo[taints] = sum(
                    1 for t in taints if t.effect == "PreferNoSchedule" and not tolerates(tolerations, t)
                )
            out.append(n)
        return out

    def normalize(self, st: ScoreState, scores: list[int]) -> list[int]:
        return default_normalize(scores, reverse=True)
