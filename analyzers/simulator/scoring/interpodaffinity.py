"""InterPodAffinity's score: pkg/scheduler/framework/plugins/interpodaffinity/
scoring.go (v1.37.2).

PreScore walks the existing pods (all of them when the incoming pod has
preferred terms, else only pods with affinity terms) on nodes with labels and
adds, per (topologyKey, value of the existing pod's node):
+w for each of the incoming pod's preferred affinity terms matching the existing
pod, -w for its preferred anti-affinity terms; +hardPodAffinityWeight for each
of the existing pod's *required* affinity terms matching the incoming pod;
+w / -w for the existing pod's preferred affinity / anti-affinity terms
matching the incoming pod. Nothing added anywhere, or
ignorePreferredTermsOfExistingPods with no preferred terms of its own: Skip.
Score: the sum over the node's topology values; NormalizeScore:
int64(100 * (s - min) / (max - min)) in float64, 0 everywhere when max == min.
"""

from __future__ import annotations

from collections.abc import Mapping

from analyzers.records import Pod, PodAffinityTerm
from analyzers.simulator.interpod import IncomingTerm, existing_term_matches
from analyzers.simulator.nodeinfo import NodeTable
from analyzers.simulator.scoring.framework import MAX_NODE_SCORE, ScorePlugin, ScoreState
from analyzers.simulator.scoring.profile import INTER_POD_AFFINITY
from analyzers.simulator.scoring.resource_allocation import aggregates, has_affinity
from analyzers.snapshot import ClusterSnapshot

Scores = dict[str, dict[str, int]]


def _resolve(st: ScoreState, term: PodAffinityTerm) -> IncomingTerm:
    from analyzers.simulator.interpod import resolve_term

    class _CycleView:  # resolve_term reads .pod and .snapshot only
        pod = st.pod
        snapshot = st.snapshot

    return resolve_term(_CycleView(), term)  # type: ignore[arg-type]


def affinity_groups(snapshot: ClusterSnapshot, table: NodeTable) -> list[tuple[Pod, dict[int, int]]]:
    """Existing pods with affinity terms, grouped by (spec, namespace) -- pods of one
    template match alike -- with how many of each group run on each node (per snapshot)."""

    def build() -> list[tuple[Pod, dict[int, int]]]:
        groups: dict[tuple[int, str], tuple[Pod, dict[int, int]]] = {}
        for i, others in aggregates(snapshot, table).affinity_pods.items():
            for other in others:
                key = (id(other.spec), other.namespace)
                entry = groups.get(key)
                if entry is None:
                    entry = groups[key] = (other, {})
                entry[1][i] = entry[1].get(i, 0) + 1
        return list(groups.values())

    found: list[tuple[Pod, dict[int, int]]] = snapshot.derived("scoring.affinity_groups", build)
    return found


def _matching_terms(other: Pod, pod: Pod, hard: int, ns_labels: Mapping[str, str]) -> list[tuple[str, int]]:
    """An existing pod's terms matching the incoming pod, as (topologyKey, signed weight)
    (processExistingPod's second half). Pods of one template share the answer."""
    o = other.spec
    entries: list[tuple[PodAffinityTerm, int]] = []
    if hard > 0:
        entries.extend((t, hard) for t in o.pod_affinity)
    # Upstream processes existing pods' preferred terms even with
    # ignorePreferredTermsOfExistingPods, which only adds the Skip in PreScore.
    entries.extend(zip(o.preferred_pod_affinity, o.preferred_pod_affinity_weights, strict=False))
    entries.extend(
        (t, -w)
        for t, w in zip(o.preferred_pod_anti_affinity, o.preferred_pod_anti_affinity_weights, strict=False)
    )
    return [
        (t.topology_key, w) for t, w in entries if existing_term_matches(t, other.namespace, pod, ns_labels)
    ]


def _add(scores: Scores, key: str, value: str, n: int) -> None:
    per = scores.setdefault(key, {})
    per[value] = per.get(value, 0) + n


class InterPodAffinity(ScorePlugin):
    name = INTER_POD_AFFINITY

    def prescore(self, st: ScoreState) -> bool:
        pod = st.pod
        spec = pod.spec
        has_constraints = bool(spec.preferred_pod_affinity or spec.preferred_pod_anti_affinity)
        profile = st.profile
        if profile.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return False
        base, touched, terms = self._existing(st, has_constraints)
        scores = base
        if st.placed:
            # Copies of the pod already placed are existing pods too, both ways.
            scores = {key: dict(per) for key, per in base.items()}
            labels = st.table.labels
            found = [
                (t.topology_key, sign * w) for t, w, sign in terms if t.matches(pod.namespace, pod.labels)
            ]
            if has_affinity(pod):
                found.extend(_matching_terms(pod, pod, profile.hard_pod_affinity_weight, st.namespace_labels))
            for i, n in st.placed.items():
                for topology_key, w in found:
                    value = labels[i].get(topology_key)
                    if value is not None:
                        touched = True
                        _add(scores, topology_key, value, w * n)
        if not touched:
            return False
        st.data[self.name] = scores
        return True

    @staticmethod
    def _existing(
        st: ScoreState, has_constraints: bool
    ) -> tuple[Scores, bool, list[tuple[IncomingTerm, int, int]]]:
        """PreScore over the pods of the table (placed copies aside): the sums, whether
        any term counted, and the pod's resolved terms with their signs. Kept for the
        last pod and profile per table (a placement asks state after state)."""
        memo = st.table.memo.get("scoring.interpod.existing")
        if (
            memo is not None
            and memo[0] is st.pod
            and memo[1] is st.profile
            and memo[2] == st.namespace_labels
        ):
            found: tuple[Scores, bool, list[tuple[IncomingTerm, int, int]]] = memo[3]
            return found
        pod = st.pod
        spec = pod.spec
        table = st.table
        labels = table.labels
        terms = [
            (_resolve(st, t), w, 1)
            for t, w in zip(spec.preferred_pod_affinity, spec.preferred_pod_affinity_weights, strict=False)
        ] + [
            (_resolve(st, t), w, -1)
            for t, w in zip(
                spec.preferred_pod_anti_affinity, spec.preferred_pod_anti_affinity_weights, strict=False
            )
        ]
        scores: Scores = {}
        touched = False
        # The incoming pod's terms against every existing pod: by label groups.
        if has_constraints:
            for term, w, sign in terms:
                for ns, groups in table.pod_groups.items():
                    for g in groups:
                        if not term.matches(ns, g.labels):
                            continue
                        for i, n in g.node_counts.items():
                            value = labels[i].get(term.topology_key)
                            if value is None:
                                continue
                            touched = True
                            _add(scores, term.topology_key, value, sign * w * n)
        # Existing pods' terms against the incoming pod.
        hard = st.profile.hard_pod_affinity_weight
        for other, per_node in affinity_groups(st.snapshot, table):
            matching = _matching_terms(other, pod, hard, st.namespace_labels)
            if not matching:
                continue
            for i, n in per_node.items():
                node_labels = labels[i]
                if not node_labels:
                    continue
                for topology_key, w in matching:
                    value = node_labels.get(topology_key)
                    if value is not None:
                        touched = True
                        _add(scores, topology_key, value, w * n)
        found = (scores, touched, terms)
        st.table.memo["scoring.interpod.existing"] = (pod, st.profile, st.namespace_labels, found)
        return found

    def score(self, st: ScoreState) -> list[int]:
        scores: Scores = st.data[self.name]
        labels = st.table.labels
        out = []
        for i in st.nodes:
            total = 0
            node_labels = labels[i]
            for key, per in scores.items():
                v = node_labels.get(key)
                if v is not None:
                    total += per.get(v, 0)
            out.append(total)
        return out

    def normalize(self, st: ScoreState, scores: list[int]) -> list[int]:
        if not scores:
            return scores
        lo = min(scores)
        diff = max(scores) - lo
        if diff <= 0:
            return [0] * len(scores)
        return [int(float(MAX_NODE_SCORE) * (float(s - lo) / float(diff))) for s in scores]
