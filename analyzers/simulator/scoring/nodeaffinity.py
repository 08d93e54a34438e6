"""NodeAffinity's score: pkg/scheduler/framework/plugins/nodeaffinity/
node_affinity.go (v1.37.2) and component-helpers nodeaffinity
PreferredSchedulingTerms. PreScore: Skip when the pod has no preferred terms
and the profile's NodeAffinityArgs add none; a term that does not parse is an
Error. Score: the sum of the weights of the matching terms (weight 0 or empty
terms ignored), added terms included; NormalizeScore: DefaultNormalizeScore.
"""

from __future__ import annotations

from collections.abc import Sequence

from analyzers.records import NodeSelectorTerm
from analyzers.simulator.scoring.framework import (
    PLACED_NONE,
    ScoreError,
    ScorePlugin,
    ScoreState,
    default_normalize,
)
from analyzers.simulator.scoring.profile import NODE_AFFINITY
from analyzers.simulator.selectors import node_term_matches, node_term_valid


def usable_terms(terms: Sequence[tuple[int, NodeSelectorTerm]]) -> list[tuple[int, NodeSelectorTerm]]:
    return [(w, t) for w, t in terms if w != 0 and (t.match_expressions or t.match_fields)]


class NodeAffinity(ScorePlugin):
    name = NODE_AFFINITY
    placed = PLACED_NONE

    def prescore(self, st: ScoreState) -> bool:
        own = st.pod.spec.preferred_node_affinity
        if not own and not st.profile.added_preferred:
            return False
        terms = usable_terms(own)
        for _w, t in terms:
            if not node_term_valid(t):
                raise ScoreError(self.name, "a preferred node affinity term does not parse")
        st.data[self.name] = usable_terms(st.profile.added_preferred) + terms
        return True

    def score(self, st: ScoreState) -> list[int]:
        terms: list[tuple[int, NodeSelectorTerm]] = st.data[self.name]
        table = st.table
        out = []
        for i in st.nodes:
            labels = table.labels[i]
            name = table.names[i]
            out.append(sum(w for w, t in terms if node_term_matches(t, labels, name)))
        return out

    def normalize(self, st: ScoreState, scores: list[int]) -> list[int]:
        return default_normalize(scores, reverse=False)
