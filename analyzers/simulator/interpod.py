"""InterPodAffinity's filter (pkg/scheduler/framework/plugins/interpodaffinity/
filtering.go; AffinityTerm.Matches in pkg/scheduler/framework/types.go).

PreFilter counts, per (topologyKey, value) of the nodes the pods run on:
- pods matching ALL the incoming pod's required affinity terms (per term);
- pods matching each of its required anti-affinity terms;
- existing pods whose required anti-affinity terms match the incoming pod
  (their namespaceSelector evaluated against the incoming pod's Namespace labels).
A term's namespaces default to the owner pod's namespace when both
``namespaces`` and ``namespaceSelector`` are empty; ``namespaceSelector: {}``
selects every namespace; ``matchLabelKeys``/``mismatchLabelKeys`` add
``key In/NotIn (pod's value)`` to the incoming pod's selectors.

PreFilter rejects the pod (UnschedulableAndUnresolvable, ``parsing pod: ...``)
when one of its (anti-)affinity selectors does not parse (``selectors``).

Filter, in this order (1.22+):
1. ``node(s) didn't match pod affinity rules`` (UnschedulableAndUnresolvable)
   when the node lacks a term's topology key or no matching pod is in its
   domain -- unless no pod in the cluster matches and the pod matches its own
   terms (the first pod of a self-affine group), then any node with all keys passes;
2. ``node(s) didn't match pod anti-affinity rules`` (Unschedulable);
3. ``node(s) didn't satisfy existing pods anti-affinity rules`` (Unschedulable).
Until 1.21 the existing pods' check came first and every failure also carried
``node(s) didn't match pod affinity/anti-affinity``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from analyzers.records import LabelSelector, Pod, PodAffinityTerm, Requirement
from analyzers.simulator import codes as C
from analyzers.simulator.framework import Cycle, Outcome, Plugin, detail, failure
from analyzers.simulator.results import FilterFailure
from analyzers.simulator.selectors import pod_affinity_parse_error

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_GENERIC = "node(s) didn't match pod affinity/anti-affinity"

Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class IncomingTerm:
    """An incoming pod's term with namespaces resolved (namespaceSelector merged)."""

    topology_key: str
    selector: LabelSelector | None
    all_namespaces: bool
    namespaces: frozenset[str]

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if not (self.all_namespaces or namespace in self.namespaces):
            return False
        return self.selector is not None and self.selector.matches(labels)


def resolve_term(cycle: Cycle, term: PodAffinityTerm) -> IncomingTerm:
    pod = cycle.pod
    selector = term.label_selector
    extra = tuple(Requirement(k, "In", (pod.labels[k],)) for k in term.match_label_keys if k in pod.labels)
    extra += tuple(
        Requirement(k, "NotIn", (pod.labels[k],)) for k in term.mismatch_label_keys if k in pod.labels
    )
    # The API server refuses matchLabelKeys/mismatchLabelKeys without a labelSelector, and an
    # unchanged selector rebuilt is equal: "or" would agree on every valid pod.
    if selector is not None and extra:  # pragma: no mutate
        selector = LabelSelector(selector.match_labels, selector.match_expressions + extra)
    ns_sel = term.namespace_selector
    names = set(term.namespaces)
    if not names and ns_sel is None:
        names.add(pod.namespace)
    all_ns = ns_sel is not None and ns_sel.is_empty
    if ns_sel is not None and not ns_sel.is_empty:
        names.update(ns.name for ns in cycle.snapshot.namespaces.values() if ns_sel.matches(ns.labels))
    return IncomingTerm(term.topology_key, selector, all_ns, frozenset(names))


def existing_term_matches(
    term: PodAffinityTerm, owner_namespace: str, pod: Pod, pod_ns_labels: Mapping[str, str]
) -> bool:
    """An existing pod's term against the incoming pod (AffinityTerm.Matches)."""
    ns_sel = term.namespace_selector
    namespaces = term.namespaces or ((owner_namespace,) if ns_sel is None else ())
    if not (pod.namespace in namespaces or (ns_sel is not None and ns_sel.matches(pod_ns_labels))):
        return False
    return term.label_selector is not None and term.label_selector.matches(pod.labels)


@dataclass(slots=True)
class _State:
    affinity: list[IncomingTerm]
    anti: list[IncomingTerm]
    self_affine: bool
    affinity_counts: dict[Pair, int]
    anti_counts: dict[Pair, int]
    existing_counts: dict[Pair, int]


def _add(counts: dict[Pair, int], key: str, value: str | None, n: int) -> None:
    if value is None:
        return
    pair = (key, value)
    total = counts.get(pair, 0) + n
    if total:
        counts[pair] = total
    else:
        counts.pop(pair, None)


class InterPodAffinity(Plugin):
    name = C.INTER_POD_AFFINITY

    def prefilter(self, cycle: Cycle) -> FilterFailure | None:
        """framework.NewPodInfo fails on a selector labels.NewRequirement refuses:
        ``parsing pod: ...``, UnschedulableAndUnresolvable (filtering.go PreFilter)."""
        message = pod_affinity_parse_error(cycle.pod.spec)
        if message is None:
            return None
        return failure(self.name, C.UNRESOLVABLE, (message,), (C.OTHER,), detail(parse_error=message))

    def _prepare(self, cycle: Cycle) -> _State | None:
        pod = cycle.pod
        table = cycle.table
        labels = table.labels
        affinity = [resolve_term(cycle, t) for t in pod.spec.pod_affinity]
        anti = [resolve_term(cycle, t) for t in pod.spec.pod_anti_affinity]
        existing: dict[Pair, int] = {}
        for anti_group in table.anti_affinity_groups:
            for term in anti_group.terms:
                if existing_term_matches(term, anti_group.namespace, pod, cycle.namespace_labels):
                    key = term.topology_key
                    for i, n in anti_group.node_counts.items():
                        _add(existing, key, labels[i].get(key), n)
        if not affinity and not anti and not existing:
            return None
        affinity_counts: dict[Pair, int] = {}
        anti_counts: dict[Pair, int] = {}
        if affinity or anti:
            for groups in table.pod_groups.values():
                for group in groups:
                    if affinity and all(t.matches(group.namespace, group.labels) for t in affinity):
                        for i, n in group.node_counts.items():
                            for t in affinity:
                                _add(affinity_counts, t.topology_key, labels[i].get(t.topology_key), n)
                    for t in anti:
                        if t.matches(group.namespace, group.labels):
                            for i, n in group.node_counts.items():
                                _add(anti_counts, t.topology_key, labels[i].get(t.topology_key), n)
        self_affine = bool(affinity) and all(t.matches(pod.namespace, pod.labels) for t in affinity)
        return _State(affinity, anti, self_affine, affinity_counts, anti_counts, existing)

    def _reasons(self, cycle: Cycle, specific: str, code: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if cycle.wording.interpod_generic_reason:
            generic_code = C.POD_AFFINITY_MISMATCH
            return (REASON_GENERIC, specific), (generic_code, code)
        return (specific,), (code,)

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        state = self._prepare(cycle)
        if state is None:
            return None
        cycle.state["interpod"] = state
        table = cycle.table
        all_mask = table.all_mask
        aff_fail = 0
        if state.affinity:
            ok = all_mask
            if not state.affinity_counts and state.self_affine:
                for t in state.affinity:
                    ok &= table.key_mask.get(t.topology_key, 0)
            else:
                for t in state.affinity:
                    values = [
                        v for (k, v), n in state.affinity_counts.items() if k == t.topology_key and n > 0
                    ]
                    ok &= table.domain_mask(t.topology_key, values)
            aff_fail = all_mask & ~ok
        anti_fail = 0
        if state.anti_counts:
            for t in state.anti:
                values = [v for (k, v), n in state.anti_counts.items() if k == t.topology_key and n > 0]
                anti_fail |= table.domain_mask(t.topology_key, values)
        existing_fail = 0
        # _add drops a pair whose count falls to 0, and every pair is a label some node has:
        # ">=" and other defaults would agree.
        for (k, v), n in state.existing_counts.items():
            if n > 0:  # pragma: no mutate
                existing_fail |= table.label_index.get(k, {}).get(v, 0)  # pragma: no mutate
        checks = [
            (aff_fail, C.UNRESOLVABLE, REASON_AFFINITY, C.POD_AFFINITY_MISMATCH),
            (anti_fail, C.UNSCHEDULABLE, REASON_ANTI_AFFINITY, C.POD_ANTI_AFFINITY_MISMATCH),
            (existing_fail, C.UNSCHEDULABLE, REASON_EXISTING, C.EXISTING_POD_ANTI_AFFINITY),
        ]
        if cycle.wording.interpod_generic_reason:
            checks = [checks[2], checks[0], checks[1]]
        out = Outcome(self.name)
        for mask, code, reason, rcode in checks:
            if mask:
                reasons, rcodes = self._reasons(cycle, reason, rcode)
                out.add_group(mask, failure(self.name, code, reasons, rcodes))
        if not out.mask:
            return None
        out.make = lambda i: self._node(cycle, i, ()) or failure(self.name, C.UNSCHEDULABLE, (), ())
        return out

    def filter_node(self, cycle: Cycle, i: int, removed: Sequence[Pod]) -> FilterFailure | None:
        if "interpod" not in cycle.state:
            return None
        return self._node(cycle, i, removed)

    def _node(self, cycle: Cycle, i: int, removed: Sequence[Pod]) -> FilterFailure | None:
        state: _State = cycle.state["interpod"]
        labels = cycle.table.labels[i]
        aff, anti, existing = state.affinity_counts, state.anti_counts, state.existing_counts
        if removed:
            aff, anti, existing = dict(aff), dict(anti), dict(existing)
            for p in removed:
                if state.affinity and all(t.matches(p.namespace, p.labels) for t in state.affinity):
                    for t in state.affinity:
                        _add(aff, t.topology_key, labels.get(t.topology_key), -1)
                for t in state.anti:
                    if t.matches(p.namespace, p.labels):
                        _add(anti, t.topology_key, labels.get(t.topology_key), -1)
                for term in p.spec.pod_anti_affinity:
                    if existing_term_matches(term, p.namespace, cycle.pod, cycle.namespace_labels):
                        _add(existing, term.topology_key, labels.get(term.topology_key), -1)

        def affinity_fails() -> FilterFailure | None:
            if not state.affinity:
                return None
            exist = True
            for t in state.affinity:
                v = labels.get(t.topology_key)
                if v is None:
                    return self._fail(
                        cycle, C.UNRESOLVABLE, REASON_AFFINITY, C.POD_AFFINITY_MISMATCH, t.topology_key, None
                    )
                if aff.get((t.topology_key, v), 0) <= 0:
                    exist = False
            if not exist and not (not aff and state.self_affine):
                key = state.affinity[0].topology_key
                return self._fail(
                    cycle, C.UNRESOLVABLE, REASON_AFFINITY, C.POD_AFFINITY_MISMATCH, key, labels.get(key)
                )
            return None

        def anti_fails() -> FilterFailure | None:
            if not anti:
                return None
            for t in state.anti:
                v = labels.get(t.topology_key)
                if v is not None and anti.get((t.topology_key, v), 0) > 0:
                    return self._fail(
                        cycle,
                        C.UNSCHEDULABLE,
                        REASON_ANTI_AFFINITY,
                        C.POD_ANTI_AFFINITY_MISMATCH,
                        t.topology_key,
                        v,
                    )
            return None

        def existing_fails() -> FilterFailure | None:
            if not existing:
                return None
            for k, v in labels.items():
                if existing.get((k, v), 0) > 0:
                    return self._fail(
                        cycle, C.UNSCHEDULABLE, REASON_EXISTING, C.EXISTING_POD_ANTI_AFFINITY, k, v
                    )
            return None

        order = (
            (existing_fails, affinity_fails, anti_fails)
            if cycle.wording.interpod_generic_reason
            else (affinity_fails, anti_fails, existing_fails)
        )
        for check in order:
            found = check()
            if found is not None:
                return found
        return None

    def _fail(
        self, cycle: Cycle, code: str, reason: str, rcode: str, key: str, value: str | None
    ) -> FilterFailure:
        reasons, rcodes = self._reasons(cycle, reason, rcode)
        return failure(self.name, code, reasons, rcodes, detail(topology_key=key, domain=value))
