"""PodTopologySpread's filter (pkg/scheduler/framework/plugins/podtopologyspread/
filtering.go, common.go, plugin.go).

Only ``whenUnsatisfiable: DoNotSchedule`` constraints filter. For each one:
- matching pods are counted per topology domain over the eligible nodes: nodes
  carrying every constraint's topology key, that match the pod's node
  affinity/selector (nodeAffinityPolicy Honor, the default) and, with
  nodeTaintsPolicy Honor (default Ignore), whose taints the pod tolerates;
  a pod counts when it is in the pod's namespace, not terminating and matches
  the selector (labelSelector plus ``matchLabelKeys`` values of the pod);
- the global minimum is the smallest domain count, or 0 while there are fewer
  eligible domains than ``minDomains``;
- a node without the topology key: ``node(s) didn't match pod topology spread
  constraints (missing required label)``, UnschedulableAndUnresolvable;
- a node where ``count + (1 if the pod matches its own selector) - minimum >
  maxSkew``: ``node(s) didn't match pod topology spread constraints``, Unschedulable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from analyzers.records import LabelSelector, Pod, Requirement, TopologySpreadConstraint
from analyzers.simulator import codes as C
from analyzers.simulator.framework import Cycle, Outcome, Plugin, detail, failure
from analyzers.simulator.nodeinfo import NodeTable, has
from analyzers.simulator.results import FilterFailure

REASON_SKEW = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = REASON_SKEW + " (missing required label)"
MAX_INT32 = 2**31 - 1


def effective_selector(selector: LabelSelector | None, pod: Pod, keys: Sequence[str]) -> LabelSelector | None:
    """The selector with ``matchLabelKeys`` merged in (as the API server / plugin does)."""
    if selector is None:
        return None
    extra = tuple(Requirement(k, "In", (pod.labels[k],)) for k in keys if k in pod.labels)
    if not extra:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + extra)


def matching_pods_per_node(table: NodeTable, namespace: str, selector: LabelSelector) -> dict[int, int]:
    """Non-terminating pods of ``namespace`` matching ``selector``, per node (memoized per snapshot).
    An empty selector (``labelSelector: {}``) counts no pod: countPodsMatchSelector (common.go)
    returns 0 for it, although the incoming pod still matches it itself."""
    if selector.is_empty:
        return {}
    key = ("spread", namespace, selector)
    found: dict[int, int] | None = table.memo.get(key)
    if found is None:
        found = {}
        for group in table.pod_groups.get(namespace, ()):
            if group.terminating or not selector.matches(group.labels):
                continue
            for i, c in group.node_counts.items():
                found[i] = found.get(i, 0) + c
        table.memo[key] = found
    return found


@dataclass(slots=True)
class _Constraint:
    spec: TopologySpreadConstraint
    selector: LabelSelector | None
    eligible: int
    domains: dict[str, int]
    self_match: int


class PodTopologySpread(Plugin):
    name = C.POD_TOPOLOGY_SPREAD

    def _prepare(self, cycle: Cycle) -> list[_Constraint]:
        pod = cycle.pod
        table = cycle.table
        specs = [c for c in pod.spec.topology_spread if c.when_unsatisfiable == "DoNotSchedule"]
        base = table.all_mask
        for c in specs:
            # A key no node has fails every node (missing label), so the domains never matter.
            base &= table.key_mask.get(c.topology_key, 0)  # pragma: no mutate
        out = []
        for c in specs:
            eligible = base
            if c.node_affinity_policy != "Ignore":
                eligible &= cycle.affinity_mask
            if c.node_taints_policy == "Honor":
                eligible &= cycle.tolerated_mask
            selector = effective_selector(c.label_selector, pod, c.match_label_keys)
            domains: dict[str, int] = {}
            if eligible:
                for v, vm in table.label_index.get(c.topology_key, {}).items():
                    if vm & eligible:
                        domains[v] = 0
                if selector is not None:
                    key = c.topology_key
                    labels = table.labels
                    for i, n in matching_pods_per_node(table, pod.namespace, selector).items():
                        if has(eligible, i):
                            v = labels[i][key]
                            domains[v] += n
            self_match = 1 if selector is not None and selector.matches(pod.labels) else 0
            out.append(_Constraint(c, selector, eligible, domains, self_match))
        return out

    @staticmethod
    def _min(con: _Constraint, domains: dict[str, int]) -> int:
        low = min(domains.values()) if domains else MAX_INT32
        if con.spec.min_domains is not None and len(domains) < con.spec.min_domains:
            low = 0
        return low

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        if not any(c.when_unsatisfiable == "DoNotSchedule" for c in cycle.pod.spec.topology_spread):
            return None
        cons = self._prepare(cycle)
        cycle.state["spread"] = cons
        table = cycle.table
        rem = table.all_mask
        out = Outcome(self.name)
        for con in cons:
            key = con.spec.topology_key
            key_mask = table.key_mask.get(key, 0)
            missing = rem & ~key_mask
            if missing:
                out.add_group(
                    missing,
                    failure(
                        self.name, C.UNRESOLVABLE, (REASON_MISSING_LABEL,), (C.TOPOLOGY_SPREAD_MISMATCH,)
                    ),
                )
            low = self._min(con, con.domains)
            bad = [v for v, n in con.domains.items() if n + con.self_match - low > con.spec.max_skew]
            skewed = rem & key_mask & table.domain_mask(key, bad)
            if skewed:
                out.add_group(
                    skewed, failure(self.name, C.UNSCHEDULABLE, (REASON_SKEW,), (C.TOPOLOGY_SPREAD_MISMATCH,))
                )
            # The two are disjoint; add_group skips nodes already failing, so "&" would agree.
            rem &= ~(missing | skewed)  # pragma: no mutate
        if not out.mask:
            return None
        out.make = lambda i: self._node(cycle, i, ()) or failure(self.name, C.UNSCHEDULABLE, (), ())
        return out

    def filter_node(self, cycle: Cycle, i: int, removed: Sequence[Pod]) -> FilterFailure | None:
        if "spread" not in cycle.state:
            return None
        return self._node(cycle, i, removed)

    def _node(self, cycle: Cycle, i: int, removed: Sequence[Pod]) -> FilterFailure | None:
        labels = cycle.table.labels[i]
        for con in cycle.state["spread"]:
            key = con.spec.topology_key
            value = labels.get(key)
            if value is None:
                return failure(
                    self.name,
                    C.UNRESOLVABLE,
                    (REASON_MISSING_LABEL,),
                    (C.TOPOLOGY_SPREAD_MISMATCH,),
                    detail(topology_key=key),
                )
            domains = con.domains
            if removed and con.selector is not None and has(con.eligible, i):
                # RemovePod (updateWithPod, filtering.go) takes every removed pod of the namespace
                # that matches the selector off the count, a terminating one too (it was never counted).
                gone = sum(
                    1
                    for p in removed
                    if p.namespace == cycle.pod.namespace and con.selector.matches(p.labels)
                )
                if gone:
                    domains = dict(domains)
                    domains[value] = domains.get(value, 0) - gone
            low = self._min(con, domains)
            match_num = domains.get(value, 0)
            if match_num + con.self_match - low > con.spec.max_skew:
                return failure(
                    self.name,
                    C.UNSCHEDULABLE,
                    (REASON_SKEW,),
                    (C.TOPOLOGY_SPREAD_MISMATCH,),
                    detail(
                        topology_key=key,
                        domain=value,
                        matching_pods=match_num,
                        self_match=con.self_match,
                        global_minimum=low,
                        max_skew=con.spec.max_skew,
                        eligible_domains=len(domains),
                        min_domains=con.spec.min_domains,
                    ),
                )
        return None
