"""PodTopologySpread's score: pkg/scheduler/framework/plugins/podtopologyspread/
scoring.go and common.go (v1.37.2).

PreScore: the pod's ScheduleAnyway constraints when it has any constraint at
all; else the profile's default constraints (``defaultingType: System``:
hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway) with the selector
helper.DefaultSelector builds from the pod's owning ReplicaSet /
StatefulSet (Services that select the pod are merged upstream too; the
snapshot holds no Services, see docs/placement.md). No constraint: Skip.
Feasible nodes lacking a constraint's key are ignored (score 0) unless the
constraints are the system defaults. Every node of the cluster passing the
constraint's node-inclusion policies adds its matching pods to its domain.
Score: sum over constraints of count * log(domains + 2) + (maxSkew - 1),
math.Round; NormalizeScore: 100 * (max + min - s) / max over non-ignored
nodes (all 100 when max is 0).
"""

from __future__ import annotations

import math

from analyzers.records import LabelSelector, Pod, TopologySpreadConstraint
from analyzers.simulator.basic import first_untolerated
from analyzers.simulator.nodeinfo import NodeTable, has
from analyzers.simulator.scoring.framework import MAX_NODE_SCORE, ScorePlugin, ScoreState, go_round
from analyzers.simulator.scoring.profile import POD_TOPOLOGY_SPREAD
from analyzers.simulator.spread import effective_selector, matching_pods_per_node
from analyzers.snapshot import ClusterSnapshot

HOSTNAME = "kubernetes.io/hostname"


def default_selector(snapshot: ClusterSnapshot, pod: Pod) -> LabelSelector | None:
    """helper.DefaultSelector without Services: the owning ReplicaSet's or
    StatefulSet's selector; None (empty: Skip) otherwise."""
    owner = pod.owner
    if owner is None or not owner.controller:
        return None
    if owner.kind == "ReplicaSet" and owner.group == "apps":
        rs = snapshot.replicasets.get((pod.namespace, owner.name))
        return rs.selector if rs is not None else None
    if owner.kind == "StatefulSet" and owner.group == "apps":
        sts = snapshot.statefulsets.get((pod.namespace, owner.name))
        return sts.selector if sts is not None else None
    return None


class _Soft:
    __slots__ = ("key", "max_skew", "per_node", "policy_affinity", "policy_taints", "selector")

    def __init__(self, c: TopologySpreadConstraint, selector: LabelSelector | None) -> None:
        self.key = c.topology_key
        self.max_skew = c.max_skew
        self.selector = selector
        self.policy_affinity = c.node_affinity_policy == "Honor"
        self.policy_taints = c.node_taints_policy == "Honor"
        self.per_node: dict[int, int] = {}


def label_classes(table: NodeTable, keys: tuple[str, ...]) -> tuple[list[int], list[tuple[str | None, ...]]]:
    """Nodes grouped by their values of ``keys`` (once per node table and keys):
    each node's class, and each class's values (None: the node lacks the key; the
    hostname key only says whether the node has it, "" then). Nodes of a class
    with no matching pod of their own score alike."""
    memo_key = ("scoring.label_classes", keys)
    found: tuple[list[int], list[tuple[str | None, ...]]] | None = table.memo.get(memo_key)
    if found is None:
        ids: dict[tuple[str | None, ...], int] = {}
        column = []
        for labels in table.labels:
            values = tuple(("" if k in labels else None) if k == HOSTNAME else labels.get(k) for k in keys)
            column.append(ids.setdefault(values, len(ids)))
        found = (column, list(ids))
        table.memo[memo_key] = found
    return found


def _counts_with_placed(st: ScoreState, selector: LabelSelector | None) -> dict[int, int]:
    """Matching pods per node, the placed copies of the pod included when they match."""
    pod = st.pod
    if selector is None:
        return {}
    counts = matching_pods_per_node(st.table, pod.namespace, selector)
    if st.placed and not selector.is_empty and selector.matches(pod.labels):
        counts = dict(counts)
        for i, copies in st.placed.items():
            counts[i] = counts.get(i, 0) + copies
    return counts


class _Prepared:
    """PreScore's state: the constraints, their domains and weights, the ignored
    nodes, and the node classes (:func:`label_classes`) of the constraints' keys."""

    __slots__ = ("classes", "column", "domains", "ignored", "present", "soft", "weights")

    def __init__(
        self,
        soft: list[_Soft],
        domains: list[dict[str, int]],
        weights: list[float],
        ignored: set[int],
        column: list[int],
        classes: list[tuple[str | None, ...]],
        present: set[int],
    ) -> None:
        self.soft = soft
        self.domains = domains
        self.weights = weights
        self.ignored = ignored
        self.column = column
        self.classes = classes
        self.present = present  # classes of the scored nodes that are not ignored


class PodTopologySpread(ScorePlugin):
    name = POD_TOPOLOGY_SPREAD

    def prescore(self, st: ScoreState) -> bool:
        pod = st.pod
        table = st.table
        if table.size == 0:
            return False
        own = pod.spec.topology_spread
        if own:
            soft = [
                _Soft(c, effective_selector(c.label_selector, pod, c.match_label_keys))
                for c in own
                if c.when_unsatisfiable == "ScheduleAnyway"
            ]
        else:
            defaults = [
                c for c in st.profile.default_constraints() if c.when_unsatisfiable == "ScheduleAnyway"
            ]
            selector = default_selector(st.snapshot, pod) if defaults else None
            if selector is None or selector.is_empty:
                return False
            soft = [_Soft(c, selector) for c in defaults]
        if not soft:
            return False
        require_all = bool(own) or st.profile.spread_defaulting_type != "System"
        labels = table.labels
        column, classes = label_classes(table, tuple(c.key for c in soft))
        present = set(map(column.__getitem__, st.nodes))
        ignored_classes = {k for k in present if require_all and None in classes[k]}
        ignored: set[int] = (
            {i for i in st.nodes if column[i] in ignored_classes} if ignored_classes else set()
        )
        domains: list[dict[str, int]] = [{} for _ in soft]
        present -= ignored_classes
        for k in present:
            values = classes[k]
            for j, c in enumerate(soft):
                if c.key == HOSTNAME:
                    continue
                value = values[j]
                domains[j].setdefault("" if value is None else value, 0)
        weights = []
        for j, c in enumerate(soft):
            size = len(st.nodes) - len(ignored) if c.key == HOSTNAME else len(domains[j])
            weights.append(math.log(float(size + 2)))
        # Node-inclusion policies (GA): nodeAffinityPolicy Honor needs the pod's
        # nodeSelector / required affinity; nodeTaintsPolicy Honor its tolerations.
        spec = pod.spec
        affinity = table.all_mask
        if spec.node_selector:
            affinity &= table.labels_mask(spec.node_selector)
        if spec.required_node_affinity is not None:
            affinity &= table.selector_mask(spec.required_node_affinity)
        for j, c in enumerate(soft):
            counts = _counts_with_placed(st, c.selector)
            c.per_node = counts
            if c.key == HOSTNAME:
                continue
            dom = domains[j]
            for i, n in counts.items():
                node_labels = labels[i]
                if require_all and not all(s.key in node_labels for s in soft):
                    continue
                if c.policy_affinity and not has(affinity, i):
                    continue
                if c.policy_taints and first_untolerated(table.nodes[i].taints, spec.tolerations) is not None:
                    continue
                value = node_labels.get(c.key, "")
                if value in dom:
                    dom[value] += n
        st.data[self.name] = _Prepared(soft, domains, weights, ignored, column, classes, present)
        return True

    def score(self, st: ScoreState) -> list[int]:
        """Per node: sum over constraints of count * weight + (maxSkew - 1), rounded.
        A node's score depends on its class and its own (hostname) counts: each
        class is scored once, then the nodes that hold matching pods themselves."""
        prep: _Prepared = st.data[self.name]
        soft, domains, weights = prep.soft, prep.domains, prep.weights
        hostname = [j for j, c in enumerate(soft) if c.key == HOSTNAME]

        def total(values: tuple[str | None, ...], own: list[int]) -> int:
            acc = 0.0
            for j, c in enumerate(soft):
                value = values[j]
                if value is None:
                    continue
                cnt = own[j] if c.key == HOSTNAME else domains[j][value]
                acc += float(cnt) * weights[j] + float(c.max_skew - 1)
            return go_round(acc)

        ignored = prep.ignored
        column, classes = prep.column, prep.classes
        none = [0] * len(soft)
        by_class = [0] * len(classes)  # ignored classes score 0
        for k in prep.present:
            by_class[k] = total(classes[k], none)
        out = [by_class[column[i]] for i in st.nodes]
        holders: set[int] = set()
        for j in hostname:
            holders.update(i for i, n in soft[j].per_node.items() if n)
        if holders:
            at = st.positions()
            for i in holders:
                where = at.get(i)
                if where is None or i in ignored:
                    continue
                own = [soft[j].per_node.get(i, 0) if j in hostname else 0 for j in range(len(soft))]
                out[where] = total(classes[column[i]], own)
        return out

    def normalize(self, st: ScoreState, scores: list[int]) -> list[int]:
        ignored = st.data[self.name].ignored
        kept = [s for i, s in zip(st.nodes, scores, strict=True) if i not in ignored] if ignored else scores
        lo = min(kept, default=0)
        hi = max(kept, default=0)
        if hi == 0:
            mapped = dict.fromkeys(set(scores), MAX_NODE_SCORE)
        else:
            mapped = {s: MAX_NODE_SCORE * (hi + lo - s) // hi for s in set(scores)}
        if not ignored:
            return [mapped[s] for s in scores]
        return [0 if i in ignored else mapped[s] for i, s in zip(st.nodes, scores, strict=True)]
