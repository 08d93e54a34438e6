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

import itertools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from analyzers.records import LabelSelector, Pod, TopologySpreadConstraint
from analyzers.simulator.basic import first_untolerated
from analyzers.simulator.nodeinfo import NodeTable, has
from analyzers.simulator.scoring.framework import (
    MAX_NODE_SCORE,
    KeyedScores,
    ScorePlugin,
    ScoreState,
    go_round,
)
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
    __slots__ = ("base", "copies", "key", "max_skew", "policy_affinity", "policy_taints", "selector")

    def __init__(self, c: TopologySpreadConstraint, selector: LabelSelector | None) -> None:
        self.key = c.topology_key
        self.max_skew = c.max_skew
        self.selector = selector
        self.policy_affinity = c.node_affinity_policy == "Honor"
        self.policy_taints = c.node_taints_policy == "Honor"
        self.copies: Mapping[int, int] = {}  # the placed copies it counts, per node
        self.base: dict[int, int] = {}  # matching pods per node without the copies (the table's memo)


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


def _counted_copies(st: ScoreState, selector: LabelSelector | None) -> Mapping[int, int]:
    """The placed copies of the pod that ``selector`` counts (per node)."""
    if not st.placed or selector is None or selector.is_empty or not selector.matches(st.pod.labels):
        return {}
    return st.placed


def _class_sums(table: NodeTable, counts: dict[int, int], column: list[int]) -> dict[int, int]:
    """``counts`` (a memoised per-node count) summed per node class, once per table."""
    key = ("scoring.spread.class_sums", id(counts), id(column))
    found: tuple[dict[int, int], list[int], dict[int, int]] | None = table.memo.get(key)
    if found is None or found[0] is not counts or found[1] is not column:
        sums: dict[int, int] = {}
        for i, n in counts.items():
            k = column[i]
            sums[k] = sums.get(k, 0) + n
        found = table.memo[key] = (counts, column, sums)
    return found[2]


_T = TypeVar("_T")


def _nodes_memo(
    table: NodeTable, what: str, column: list[int], nodes: Sequence[int], build: Callable[[], _T]
) -> _T:
    """``build()`` for the scored ``nodes`` over ``column``, kept for the last node list
    only (placement scores the same feasible nodes state after state)."""
    key = ("scoring.spread." + what, id(column))
    found = table.memo.get(key)
    if found is None or found[0] is not column or (found[1] is not nodes and found[2] != nodes):
        found = table.memo[key] = (column, nodes, list(nodes), build())
    elif found[1] is not nodes:  # an equal list: known by identity from now on
        found = table.memo[key] = (column, nodes, found[2], found[3])
    value: _T = found[3]
    return value


def _gather(column: list[int], nodes: Sequence[int]) -> list[int]:
    """``column``'s values at ``nodes``, in their order."""
    return [column[i] for i in nodes]


def _own_keys(
    table: NodeTable, prep: _Prepared, hostname: list[int]
) -> tuple[list[int], list[tuple[int, tuple[int, ...]]]]:
    """Every node's (class, own matching pods per constraint) pair as an index into
    the list of distinct pairs -- without placed copies, once per table: a node's
    score is a function of its pair."""
    bases = tuple(prep.soft[j].base for j in hostname)
    key = ("scoring.spread.own_keys", id(prep.column), tuple(id(b) for b in bases))
    found = table.memo.get(key)
    if (
        found is None
        or found[0] is not prep.column
        or any(a is not b for a, b in zip(found[1], bases, strict=True))
    ):
        width = len(prep.soft)
        zero = (0,) * width
        ids: dict[tuple[int, tuple[int, ...]], int] = {}
        per_class = [ids.setdefault((k, zero), len(ids)) for k in range(len(prep.classes))]
        column = prep.column
        key_column = [per_class[k] for k in column]
        holders: set[int] = set()
        for b in bases:
            holders.update(i for i, n in b.items() if n)
        for i in holders:
            own = tuple(prep.soft[j].base.get(i, 0) if j in hostname else 0 for j in range(width))
            key_column[i] = ids.setdefault((column[i], own), len(ids))
        found = table.memo[key] = (prep.column, bases, key_column, list(ids))
    pairs: tuple[list[int], list[tuple[int, tuple[int, ...]]]] = (found[2], found[3])
    return pairs


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
        present = set(
            _nodes_memo(table, "present", column, st.nodes, lambda: set(map(column.__getitem__, st.nodes)))
        )
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
            base = matching_pods_per_node(table, pod.namespace, c.selector) if c.selector is not None else {}
            copies = _counted_copies(st, c.selector)
            c.base = base
            c.copies = copies
            if c.key == HOSTNAME:
                continue
            dom = domains[j]
            if (not c.policy_affinity or affinity == table.all_mask) and not c.policy_taints:
                # No per-node policy: a node's domain and eligibility follow from its class.
                by_class = _class_sums(table, base, column)
                for k, n in itertools.chain(by_class.items(), ((column[i], n) for i, n in copies.items())):
                    values = classes[k]
                    if require_all and None in values:
                        continue
                    value = values[j]
                    if value is None:
                        value = ""
                    if value in dom:
                        dom[value] += n
                continue
            counts = base
            if copies:
                counts = dict(base)
                for i, n in copies.items():
                    counts[i] = counts.get(i, 0) + n
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
        (class, own counts) pair is scored once, then the nodes holding copies."""
        key_column, by_pair, placed = self._pairs(st)
        out = [by_pair[key_column[i]] for i in st.nodes]
        for where, raw in placed.items():
            out[where] = raw
        return out

    def scores(self, st: ScoreState) -> list[int]:
        """score then normalize in one pass over the nodes (:meth:`keyed_scores`)."""
        keyed = self.keyed_scores(st)
        out = list(map(keyed.values.__getitem__, keyed.keys))
        for where, value in keyed.overrides.items():
            out[where] = value
        return out

    def keyed_scores(self, st: ScoreState) -> KeyedScores:
        """The normalized scores per (class, own count) pair: the lowest and highest
        raw scores follow from how many nodes have each pair (per scored node list);
        the nodes holding placed copies are overrides."""
        prep: _Prepared = st.data[self.name]
        key_column, by_pair, placed = self._pairs(st)
        counts = _nodes_memo(
            st.table, "pairs", key_column, st.nodes, lambda: Counter(map(key_column.__getitem__, st.nodes))
        )
        if placed:
            counts = Counter(counts)
            for where in placed:
                counts[key_column[st.nodes[where]]] -= 1
        present = prep.present
        pairs = _own_keys(st.table, prep, [j for j, c in enumerate(prep.soft) if c.key == HOSTNAME])[1]
        kept = [by_pair[p] for p, n in counts.items() if n > 0 and pairs[p][0] in present]
        kept.extend(placed.values())
        lo = min(kept, default=0)
        hi = max(kept, default=0)

        def normalized(s: int) -> int:
            return MAX_NODE_SCORE if hi == 0 else MAX_NODE_SCORE * (hi + lo - s) // hi

        by_pair_normalized = [normalized(s) if pairs[p][0] in present else 0 for p, s in enumerate(by_pair)]
        keys = _nodes_memo(st.table, "keys", key_column, st.nodes, lambda: _gather(key_column, st.nodes))
        return KeyedScores(
            keys, by_pair_normalized, {where: normalized(raw) for where, raw in placed.items()}
        )

    def _pairs(self, st: ScoreState) -> tuple[list[int], list[int], dict[int, int]]:
        """Each node's pair (:func:`_own_keys`), each pair's score (0: ignored), and the
        scores of the nodes holding placed copies, by position (not ignored ones)."""
        prep: _Prepared = st.data[self.name]
        soft, domains, weights = prep.soft, prep.domains, prep.weights
        hostname = [j for j, c in enumerate(soft) if c.key == HOSTNAME]

        def total(values: tuple[str | None, ...], own: Sequence[int]) -> int:
            acc = 0.0
            for j, c in enumerate(soft):
                value = values[j]
                if value is None:
                    continue
                cnt = own[j] if c.key == HOSTNAME else domains[j][value]
                acc += float(cnt) * weights[j] + float(c.max_skew - 1)
            return go_round(acc)

        column, classes, present = prep.column, prep.classes, prep.present
        key_column, pairs = _own_keys(st.table, prep, hostname)
        by_pair = [total(classes[k], own) if k in present else 0 for k, own in pairs]
        placed: dict[int, int] = {}
        if st.placed and hostname:
            at = st.positions()
            for i in st.placed:
                where = at.get(i)
                if where is None or column[i] not in present:
                    continue
                own = tuple(
                    soft[j].base.get(i, 0) + soft[j].copies.get(i, 0) if j in hostname else 0
                    for j in range(len(soft))
                )
                placed[where] = total(classes[column[i]], own)
        return key_column, by_pair, placed

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
