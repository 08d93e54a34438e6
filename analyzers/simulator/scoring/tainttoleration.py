"""TaintToleration's score: pkg/scheduler/framework/plugins/tainttoleration/
taint_toleration.go (v1.37.2). PreScore keeps the tolerations whose effect is
empty or PreferNoSchedule; Score counts the node's PreferNoSchedule taints
none of them tolerates; NormalizeScore is DefaultNormalizeScore reversed
(the node with most such taints 0, none 100; all nodes 100 when no node has one).
"""

from __future__ import annotations

from analyzers.records import Taint
from analyzers.simulator.basic import tolerates
from analyzers.simulator.nodeinfo import NodeTable
from analyzers.simulator.scoring.framework import PLACED_NONE, ScorePlugin, ScoreState, default_normalize
from analyzers.simulator.scoring.profile import TAINT_TOLERATION


def taint_classes(table: NodeTable) -> tuple[list[int], list[tuple[Taint, ...]]]:
    """Nodes grouped by their taints (once per node table): each node's class, and
    each class's taints. Nodes of a class score alike."""
    found: tuple[list[int], list[tuple[Taint, ...]]] | None = table.memo.get("scoring.taint_classes")
    if found is None:
        ids: dict[tuple[Taint, ...], int] = {}
        column = [ids.setdefault(node.taints, len(ids)) for node in table.nodes]
        found = (column, list(ids))
        table.memo["scoring.taint_classes"] = found
    return found


class TaintToleration(ScorePlugin):
    name = TAINT_TOLERATION
    placed = PLACED_NONE

    def score(self, st: ScoreState) -> list[int]:
        tolerations = [t for t in st.pod.spec.tolerations if t.effect in ("", "PreferNoSchedule")]
        column, classes = taint_classes(st.table)
        counts = [
            sum(1 for t in taints if t.effect == "PreferNoSchedule" and not tolerates(tolerations, t))
            for taints in classes
        ]
        if not any(counts):
            return [0] * len(st.nodes)
        return [counts[column[i]] for i in st.nodes]

    def normalize(self, st: ScoreState, scores: list[int]) -> list[int]:
        return default_normalize(scores, reverse=True)
