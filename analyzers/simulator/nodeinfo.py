"""The per-snapshot node table: kube-scheduler's NodeInfo aggregates, computed
once per snapshot (``ClusterSnapshot.derived``) and shared by every simulated pod.

Nodes are numbered in name order; sets of nodes are Python ints used as bit
sets (bit ``i`` = node ``i``), so a label selector over 5,000 nodes is a few
big-int operations on precomputed per-label masks instead of 5,000 dict
lookups. Upstream counterpart: pkg/scheduler/framework/types.go (NodeInfo:
Requested, Allocatable, UsedPorts, Pods, PodsWithRequiredAntiAffinity).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analyzers.records import (
    FrozenMap,
    Node,
    NodeSelector,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    Requirement,
    Taint,
)
from analyzers.snapshot import ClusterSnapshot

DERIVED_KEY = "simulator.nodetable"
WILDCARD_IP = "0.0.0.0"


def bits(mask: int) -> list[int]:
    """Indices of the set bits of ``mask``, ascending."""
    if not mask:
        return []
    s = bin(mask)[:1:-1]
    out = []
    i = s.find("1")
    while i >= 0:
        out.append(i)
        i = s.find("1", i + 1)
    return out


def mask_of(indices: Iterable[int], size: int) -> int:
    """The bit set of ``indices`` (all < ``size``)."""
    idx = indices if isinstance(indices, list | tuple) else list(indices)
    if len(idx) < 64:
        m = 0
        for i in idx:
            m |= 1 << i
        return m
    chars = ["0"] * size
    for i in idx:
        chars[i] = "1"
    return int("".join(reversed(chars)), 2)


def has(mask: int, i: int) -> bool:
    return (mask >> i) & 1 == 1


@dataclass(slots=True)
class PodGroup:
    """Bound pods of one namespace sharing one (interned) label map."""

    namespace: str
    labels: FrozenMap[str]
    terminating: bool
    node_counts: dict[int, int]


@dataclass(slots=True)
class AntiAffinityGroup:
    """Bound pods of one namespace sharing the same required anti-affinity terms."""

    namespace: str
    terms: tuple[PodAffinityTerm, ...]
    node_counts: dict[int, int]


class NodeTable:
    """Everything the filters need about nodes and the pods bound to them."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        nodes = sorted(snapshot.nodes.values(), key=lambda n: n.name)
        n = len(nodes)
        self.size = n
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.names: tuple[str, ...] = tuple(node.name for node in nodes)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.all_mask = (1 << n) - 1
        self.labels: tuple[FrozenMap[str], ...] = tuple(node.labels for node in nodes)

        by_label: dict[str, dict[str, list[int]]] = {}
        for i, labels in enumerate(self.labels):
            for k, v in labels.items():
                by_label.setdefault(k, {}).setdefault(v, []).append(i)
        self.label_index: dict[str, dict[str, int]] = {
            k: {v: mask_of(idx, n) for v, idx in values.items()} for k, values in by_label.items()
        }
        self.key_mask: dict[str, int] = {}
        for k, values in self.label_index.items():
            m = 0
            for vm in values.values():
                m |= vm
            self.key_mask[k] = m

        self.unschedulable_mask = mask_of([i for i, node in enumerate(nodes) if node.unschedulable], n)
        taint_idx: dict[tuple[Taint, ...], list[int]] = {}
        for i, node in enumerate(nodes):
            if node.taints:
                taint_idx.setdefault(node.taints, []).append(i)
        self.taint_groups: dict[tuple[Taint, ...], int] = {t: mask_of(idx, n) for t, idx in taint_idx.items()}

        pods_by_node = snapshot.pods_by_node()
        self.pods: tuple[tuple[Pod, ...], ...] = tuple(pods_by_node.get(name, ()) for name in self.names)
        self.pod_count: list[int] = [len(p) for p in self.pods]
        self.allowed_pods: list[int] = [node.allocatable.get("pods", 0) for node in nodes]

        resources: set[str] = set()
        for node in nodes:
            resources.update(node.allocatable)
        requested: dict[str, list[int]] = {}
        self.min_priority: list[int | None] = [None] * n
        ports: dict[int, set[tuple[str, str, int]]] = {}
        groups: dict[tuple[str, FrozenMap[str], bool], PodGroup] = {}
        anti: dict[tuple[str, tuple[PodAffinityTerm, ...]], AntiAffinityGroup] = {}
        priorities: list[tuple[int, ...]] = []
        # priority -> (pods per node, resource -> summed requests per node), for preemption.
        by_priority: dict[int, tuple[list[int], dict[str, list[int]]]] = {}
        for i, pods in enumerate(self.pods):
            lowest: int | None = None
            node_prios = []
            for pod in pods:
                spec = pod.spec
                prio = snapshot.priority_of(pod)
                node_prios.append(prio)
                level = by_priority.get(prio)
                if level is None:
                    level = by_priority[prio] = ([0] * n, {})
                level[0][i] += 1
                for r, q in spec.requests.items():
                    col = requested.get(r)
                    if col is None:
                        col = requested[r] = [0] * n
                    col[i] += q
                    pcol = level[1].get(r)
                    if pcol is None:
                        pcol = level[1][r] = [0] * n
                    pcol[i] += q
                if lowest is None or prio < lowest:
                    lowest = prio
                for hp in spec.host_ports:
                    if hp.port > 0:
                        ports.setdefault(i, set()).add(
                            (hp.host_ip or WILDCARD_IP, hp.protocol or "TCP", hp.port)
                        )
                key = (pod.namespace, pod.labels, pod.deleted is not None)
                group = groups.get(key)
                if group is None:
                    group = groups[key] = PodGroup(pod.namespace, pod.labels, pod.deleted is not None, {})
                group.node_counts[i] = group.node_counts.get(i, 0) + 1
                if spec.pod_anti_affinity:
                    akey = (pod.namespace, spec.pod_anti_affinity)
                    ag = anti.get(akey)
                    if ag is None:
                        ag = anti[akey] = AntiAffinityGroup(pod.namespace, spec.pod_anti_affinity, {})
                    ag.node_counts[i] = ag.node_counts.get(i, 0) + 1
            self.min_priority[i] = lowest
            priorities.append(tuple(node_prios))
        self.priorities: tuple[tuple[int, ...], ...] = tuple(priorities)
        self._by_priority = by_priority
        resources.update(requested)
        self.allocatable: dict[str, list[int]] = {
            r: [node.allocatable.get(r, 0) for node in nodes] for r in sorted(resources)
        }
        zero = [0] * n
        self.requested: dict[str, list[int]] = {r: requested.get(r, zero) for r in self.allocatable}
        self.free: dict[str, list[int]] = {
            r: [a - q for a, q in zip(self.allocatable[r], self.requested[r], strict=True)]
            for r in self.allocatable
        }
        self.used_ports: dict[int, frozenset[tuple[str, str, int]]] = {
            i: frozenset(s) for i, s in ports.items()
        }
        self.pod_groups: dict[str, list[PodGroup]] = {}
        for group in groups.values():
            self.pod_groups.setdefault(group.namespace, []).append(group)
        self.anti_affinity_groups: tuple[AntiAffinityGroup, ...] = tuple(anti.values())
        # Per-snapshot memo for selector counts etc. (deterministic functions of the snapshot).
        self.memo: dict[Any, Any] = {}

    # -- preemption ---------------------------------------------------------------
    def lower_priority(self, priority: int) -> tuple[dict[str, list[int]], list[int], int]:
        """For pods of priority below ``priority``: their summed requests per
        resource and node, their count per node, and the nodes that have any."""
        key = ("lower", priority)
        found: tuple[dict[str, list[int]], list[int], int] | None = self.memo.get(key)
        if found is None:
            n = self.size
            counts = [0] * n
            reqs: dict[str, list[int]] = {}
            for prio, (level_counts, level_reqs) in self._by_priority.items():
                if prio >= priority:
                    continue
                counts = [a + b for a, b in zip(counts, level_counts, strict=True)]
                for r, col in level_reqs.items():
                    base = reqs.get(r)
                    reqs[r] = list(col) if base is None else [a + b for a, b in zip(base, col, strict=True)]
            found = (reqs, counts, mask_of([i for i, c in enumerate(counts) if c], n))
            self.memo[key] = found
        return found

    # -- selectors over nodes -------------------------------------------------
    def requirement_mask(self, req: Requirement) -> int:
        op = req.operator
        values = self.label_index.get(req.key, {})
        if op == "In":
            m = 0
            for v in req.values:
                m |= values.get(v, 0)
            return m
        if op == "NotIn":
            m = 0
            for v in req.values:
                m |= values.get(v, 0)
            return self.all_mask & ~m
        if op == "Exists":
            return self.key_mask.get(req.key, 0)
        if op == "DoesNotExist":
            return self.all_mask & ~self.key_mask.get(req.key, 0)
        if op in ("Gt", "Lt"):
            if len(req.values) != 1:
                return 0
            want = _parse_int(req.values[0])
            if want is None:
                return 0
            m = 0
            for v, vm in values.items():
                have = _parse_int(v)
                if have is not None and (have > want if op == "Gt" else have < want):
                    m |= vm
            return m
        return 0

    def field_requirement_mask(self, req: Requirement) -> int:
        """matchFields: only metadata.name with In/NotIn is meaningful
        (component-helpers/scheduling/corev1/nodeaffinity)."""
        if req.key != "metadata.name" or req.operator not in ("In", "NotIn"):
            return 0
        m = 0
        for v in req.values:
            i = self.index.get(v)
            if i is not None:
                m |= 1 << i
        return m if req.operator == "In" else self.all_mask & ~m

    def term_mask(self, term: NodeSelectorTerm) -> int:
        if not term.match_expressions and not term.match_fields:
            return 0
        m = self.all_mask
        for req in term.match_expressions:
            m &= self.requirement_mask(req)
            if not m:
                return 0
        for req in term.match_fields:
            m &= self.field_requirement_mask(req)
        return m

    def selector_mask(self, selector: NodeSelector) -> int:
        m = 0
        for term in selector.terms:
            m |= self.term_mask(term)
        return m

    def labels_mask(self, wanted: Mapping[str, str]) -> int:
        """Nodes whose labels include every ``wanted`` pair (a nodeSelector)."""
        m = self.all_mask
        for k, v in wanted.items():
            m &= self.label_index.get(k, {}).get(v, 0)
            if not m:
                return 0
        return m

    def domain_mask(self, key: str, values: Iterable[str]) -> int:
        index = self.label_index.get(key, {})
        m = 0
        for v in values:
            m |= index.get(v, 0)
        return m


def node_table(snapshot: ClusterSnapshot) -> NodeTable:
    """The snapshot's NodeTable, built on first use and cached in the snapshot."""
    table: NodeTable = snapshot.derived(DERIVED_KEY, lambda: NodeTable(snapshot))
    return table


def _parse_int(text: str) -> int | None:
    s = text.strip() if text else text
    if not s or s != text:
        return None
    body = s[1:] if s[0] in "+-" else s
    if not body.isdigit() or not body.isascii():
        return None
    return int(s)


def pods_on(table: NodeTable, i: int, removed: Sequence[Pod] = ()) -> tuple[Pod, ...]:
    if not removed:
        return table.pods[i]
    gone = {id(p) for p in removed}
    return tuple(p for p in table.pods[i] if id(p) not in gone)
