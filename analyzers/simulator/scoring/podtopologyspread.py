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
from analyzers.simulator.nodeinfo import has
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
        ignored: set[int] = set()
        domains: list[dict[str, int]] = [{} for _ in soft]
        for i in st.nodes:
            if require_all and not all(c.key in labels[i] for c in soft):
                ignored.add(i)
                continue
            for j, c in enumerate(soft):
                if c.key == HOSTNAME:
                    continue
                domains[j].setdefault(labels[i].get(c.key, ""), 0)
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
            counts = (
                matching_pods_per_node(table, pod.namespace, c.selector) if c.selector is not None else {}
            )
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
        st.data[self.name] = (soft, domains, weights, ignored)
        return True

    def score(self, st: ScoreState) -> list[int]:
        soft, domains, weights, ignored = st.data[self.name]
        labels = st.table.labels
        out = []
        for i in st.nodes:
            if i in ignored:
                out.append(0)
                continue
            total = 0.0
            for j, c in enumerate(soft):
                value = labels[i].get(c.key)
                if value is None:
                    continue
                cnt = c.per_node.get(i, 0) if c.key == HOSTNAME else domains[j][value]
                total += float(cnt) * weights[j] + float(c.max_skew - 1)
            out.append(go_round(total))
        return out

    def normalize(self, st: ScoreState, scores: list[int]) -> list[int]:
        ignored = st.data[self.name][3]
        kept = [s for i, s in zip(st.nodes, scores, strict=True) if i not in ignored]
        lo = min(kept, default=0)
        hi = max(kept, default=0)
        out = []
        for i, s in zip(st.nodes, scores, strict=True):
            if i in ignored:
                out.append(0)
            elif hi == 0:
                out.append(MAX_NODE_SCORE)
            else:
                out.append(MAX_NODE_SCORE * (hi + lo - s) // hi)
        return out
