"""The per-snapshot node table: kube-scheduler's NodeInfo aggregates, computed
once per snapshot (``ClusterSnapshot.derived``) and shared by every simulated pod.

Nodes are numbered in name order; sets of nodes are Python ints used as bit
sets (bit ``i`` = node ``i``), so a label selector over 5,000 nodes is a few
big-int operations on precomputed per-label masks instead of 5,000 dict
lookups. Upstream counterpart: pkg/scheduler/framework/types.go (NodeInfo:
Requested, Allocatable, UsedPorts, Pods, PodsWithRequiredAntiAffinity).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any, TypeVar

from analyzers.records import (
    FrozenMap,
    Node,
    NodeSelector,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    Requirement,
    Taint,
    parse_int64,
)
from analyzers.simulator.selectors import node_term_valid
from analyzers.snapshot import ClusterSnapshot, Origin, bound_node

DERIVED_KEY = "simulator.nodetable"
_T = TypeVar("_T")
WILDCARD_IP = "0.0.0.0"


def host_port_triples(pod: Pod) -> list[tuple[str, str, int]]:
    """The pod's host ports as (host IP, protocol, port); HostPortInfo.Add skips ports
    <= 0 (pkg/scheduler/framework/types.go); the decoder already drops hostPort 0."""
    return [
        (hp.host_ip or WILDCARD_IP, hp.protocol or "TCP", hp.port)
        for hp in pod.spec.host_ports
        # hostPort 0 never reaches here: ">=" would agree with ">".
        if hp.port > 0  # pragma: no mutate
    ]


_DIGIT_VALUE = bytes.maketrans(b"01", b"\x00\x01")


def bits(mask: int) -> list[int]:
    """Indices of the set bits of ``mask``, ascending."""
    if not mask:
        return []
    s = bin(mask)[:1:-1]
    if mask.bit_count() * 16 > len(s):  # pragma: no mutate (both ways give the same list)
        # Dense (most nodes of a 5,000-node cluster): one pass in C, no call per bit.
        return list(compress(range(len(s)), s.encode().translate(_DIGIT_VALUE)))
    out = []
    i = s.find("1")
    while i >= 0:
        out.append(i)
        i = s.find("1", i + 1)
    return out


def lowest_bits(mask: int, count: int) -> list[int]:
    """``bits(mask)[:count]`` without reading the bits past them."""
    out: list[int] = []
    while mask and len(out) < count:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def mask_of(indices: Iterable[int], size: int) -> int:
    """The bit set of ``indices`` (all < ``size``)."""
    idx = indices if isinstance(indices, list | tuple) else list(indices)
    # Both ways build the same set; the threshold is only a matter of speed.
    if len(idx) < 64:  # pragma: no mutate
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


class Column:
    """One figure per node (free CPU, pods left, ...) with the nodes below any bound as
    a bit set. With few distinct figures (a pool of alike nodes), the bit set of each;
    otherwise the nodes sorted by the figure, with the bit set of every ``STEP``-th
    prefix of that order, so :meth:`below` is a bisection, one of those sets and at most
    ``STEP - 1`` bits, whatever the number of nodes. Built on the first question (a
    table nobody asks pays nothing)."""

    STEP = 64
    FEW = 8
    __slots__ = ("_few", "_indexed", "_order", "_prefixes", "_sorted", "values")

    def __init__(self, values: Sequence[int]) -> None:
        self.values = values
        self._indexed = False
        self._few: list[tuple[int, int]] | None = None  # (figure, its nodes), ascending
        self._order: list[int] = []
        self._sorted: list[int] = []
        self._prefixes: list[int] = []

    def below(self, bound: int) -> int:
        """The nodes whose figure is less than ``bound``."""
        if not self._indexed:
            self._index()
        if self._few is not None:
            m = 0
            for figure, nodes in self._few:
                if figure >= bound:
                    break
                m |= nodes
            return m
        p = bisect_left(self._sorted, bound)
        start = p - p % self.STEP
        m = self._prefixes[p // self.STEP]
        for i in self._order[start:p]:
            m |= 1 << i
        return m

    def _index(self) -> None:
        values = self.values
        n = len(values)
        self._indexed = True
        distinct = sorted(set(values))
        if len(distinct) == 1:
            self._few = [(distinct[0], (1 << n) - 1)]
            return
        if len(distinct) <= self.FEW:
            members: dict[int, list[int]] = {figure: [] for figure in distinct}
            for i, figure in enumerate(values):
                members[figure].append(i)
            self._few = [(figure, mask_of(members[figure], n)) for figure in distinct]
            return
        order = sorted(range(n), key=values.__getitem__)
        self._sorted = sorted(values)
        prefixes = [0]
        seen = bytearray((n + 7) // 8)  # the bit set so far, little-endian
        for k, i in enumerate(order, 1):
            seen[i >> 3] |= 1 << (i & 7)
            if k % self.STEP == 0:
                prefixes.append(int.from_bytes(seen, "little"))
        self._prefixes = prefixes
        self._order = order


class ResourceColumns:
    """What NodeResourcesFit compares, per node, as :class:`Column`: the amount of each
    resource free and the pods the node can still take -- on the table as it is
    (``priority`` None), or once every pod of priority below ``priority`` is evicted
    (preemption's first step). Made by :meth:`NodeTable.resource_columns`, kept with
    the table: every pod of the pass that asks the same question shares them."""

    __slots__ = ("_free", "_freed", "pods_left", "table")

    def __init__(self, table: NodeTable, priority: int | None) -> None:
        self.table = table
        count = table.pod_count
        self._freed: dict[str, list[int]] = {}
        if priority is not None:
            self._freed, low_count, _ = table.lower_priority(priority)
            count = [c - q for c, q in zip(count, low_count, strict=True)]
        self.pods_left = Column([a - c for a, c in zip(table.allowed_pods, count, strict=True)])
        self._free: dict[str, Column | None] = {}

    def free(self, resource: str) -> Column | None:
        """The resource's free amount per node; None when no node has it allocatable
        nor requested."""
        if resource in self._free:
            return self._free[resource]
        base = self.table.free.get(resource)
        freed = self._freed.get(resource)
        column = None
        if base is not None:
            column = Column(base if freed is None else [f + q for f, q in zip(base, freed, strict=True)])
        self._free[resource] = column
        return column


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


class VictimClasses:
    """Each node's pods most important first, and the node's victim class: a number
    shared by the nodes that answer every preemption dry run alike where only
    NodeResourcesFit reads the pods removed (preemption._DryRunGroups).

    The importance order is util.MoreImportantPod's (pkg/scheduler/util/utils.go,
    v1.37.2): higher priority, then the earlier start (a pod without one last); equal
    pods keep the node's order. The pods of priority below any bound are a suffix of it,
    in the order SelectVictimsOnNode considers them. Two nodes share a class when they
    have the same allowed pod count and allocatable and requested amounts of every
    resource, and, position by position in that order, pods of the same priority,
    requests, namespace and labels (the PDBs a pod matches follow from the last two).
    ``members`` lists each class's nodes (``mask``: as a bit set). Made once per table (in the order
    of its pods: O(pods)) and reused by every pod of every pass while the table lives."""

    __slots__ = (
        "_by_identity",
        "_by_value",
        "_columns",
        "_masks",
        "_numbers",
        "_size",
        "members",
        "of",
        "pods",
        "priorities",
    )

    BIG = 64  # classes of this many nodes keep their bit set

    def __init__(self, table: NodeTable) -> None:
        # Row (allowed pods, allocatable and requested of every resource, pods) -> class.
        self._numbers: dict[tuple[object, ...], int] = {}
        # A number per distinct (priority, requests, namespace, labels) of a pod, found by
        # the identity of the (interned) objects first: hashing the maps once per object.
        self._by_identity: dict[tuple[int, int, int, str], int] = {}
        self._by_value: dict[tuple[object, ...], int] = {}
        self._columns = (tuple(table.allocatable), tuple(table.requested))
        self._size = table.size
        self.pods: list[tuple[Pod, ...]] = list(table.pods)
        self.priorities: list[tuple[int, ...]] = list(table.priorities)
        signatures: list[object] = []
        by_identity = self._by_identity
        for i, (pods, prios) in enumerate(
            zip(table.pods, table.priorities, strict=True)
        ):  # pragma: no mutate
            if len(pods) == 1:  # the common case, inline
                pod = pods[0]
                found = by_identity.get((prios[0], id(pod.spec), id(pod.labels), pod.namespace))
                signatures.append(found if found is not None else self._number(pod, prios[0]))
            else:
                signatures.append(self._arrange(i, pods, prios))
        # One flat row per node: allowed pods, allocatable and requested of every resource, pods.
        rows = zip(
            table.allowed_pods,
            *table.allocatable.values(),
            *table.requested.values(),
            signatures,
            strict=True,
        )
        numbers = self._numbers
        self.of: list[int] = [numbers.setdefault(row, len(numbers)) for row in rows]
        members: list[list[int]] = [[] for _ in numbers]
        for i, n in enumerate(self.of):
            members[n].append(i)
        self.members = members
        # Bit sets of the large classes only: one per class would cost O(nodes^2) bits.
        self._masks = {
            n: mask_of(nodes, table.size) for n, nodes in enumerate(members) if len(nodes) >= self.BIG
        }

    def _number(self, pod: Pod, prio: int) -> int:
        ident = (prio, id(pod.spec), id(pod.labels), pod.namespace)
        found = self._by_identity.get(ident)
        if found is None:
            value = (prio, pod.spec.requests, pod.namespace, pod.labels)
            found = self._by_identity[ident] = self._by_value.setdefault(value, len(self._by_value))
        return found

    def _arrange(self, i: int, pods: tuple[Pod, ...], prios: tuple[int, ...]) -> object:
        """Node ``i``'s pods (and priorities) in importance order; their signature."""
        if not pods:
            self.pods[i], self.priorities[i] = pods, prios
            return -1
        if len(pods) > 1:
            inf = float("inf")
            order = sorted(
                range(len(pods)),
                key=lambda k: (-prios[k], pods[k].created if pods[k].created is not None else inf),
            )
            pods = tuple([pods[k] for k in order])
            prios = tuple([prios[k] for k in order])
        self.pods[i], self.priorities[i] = pods, prios
        if len(pods) == 1:
            return self._number(pods[0], prios[0])
        return tuple([self._number(pod, prio) for pod, prio in zip(pods, prios, strict=True)])

    @classmethod
    def derive(cls, base: VictimClasses, table: NodeTable, touched: Iterable[int]) -> VictimClasses | None:
        """``table``'s classes from ``base``, those of the table it was derived from,
        given the nodes whose pods or Node changed (``touched``): the work is on those
        nodes. None when the resources the table counts changed (rows differ in length)."""
        if base._columns != (tuple(table.allocatable), tuple(table.requested)):
            return None
        new = object.__new__(cls)
        new._columns, new._size = base._columns, base._size
        new._numbers, new._by_identity = dict(base._numbers), dict(base._by_identity)
        new._by_value = dict(base._by_value)
        new.pods, new.priorities, new.of = list(base.pods), list(base.priorities), list(base.of)
        new.members, new._masks = list(base.members), dict(base._masks)
        copied: set[int] = set()  # classes whose member list this one owns (copy on write)
        for i in touched:
            row = (
                table.allowed_pods[i],
                *(col[i] for col in table.allocatable.values()),
                *(col[i] for col in table.requested.values()),
                new._arrange(i, table.pods[i], table.priorities[i]),
            )
            number = new._numbers.setdefault(row, len(new._numbers))
            old = new.of[i]
            if number == old:
                continue
            new.of[i] = number
            while len(new.members) < len(new._numbers):
                new.members.append([])
            for n in (old, number):
                if n not in copied:
                    new.members[n] = list(new.members[n])
                    copied.add(n)
            new.members[old].remove(i)
            new.members[number].append(i)
            new.members[number].sort()
            if old in new._masks:
                new._masks[old] &= ~(1 << i)
            if number in new._masks:
                new._masks[number] |= 1 << i
            elif len(new.members[number]) >= cls.BIG:
                new._masks[number] = mask_of(new.members[number], new._size)
        return new

    def mask(self, number: int) -> int:
        """The nodes of class ``number`` as a bit set."""
        found = self._masks.get(number)
        return found if found is not None else mask_of(self.members[number], self._size)

    def lower(self, i: int, priority: int) -> tuple[tuple[Pod, ...], tuple[int, ...]]:
        """Node ``i``'s pods of priority below ``priority``, most important first, and
        their priorities."""
        prios = self.priorities[i]
        start = len(prios)
        while start and prios[start - 1] < priority:
            start -= 1
        return self.pods[i][start:], prios[start:]


class NodeTable:
    """Everything the filters need about nodes and the pods bound to them.

    Built from a snapshot, or (:meth:`derive`) updated from the table of the snapshot a
    what-if snapshot was made from: a remedy that moves a few pods or relabels a node
    costs work on those nodes, not a pass over every pod of the cluster."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        nodes = sorted(snapshot.nodes.values(), key=lambda n: n.name)
        n = len(nodes)
        self.size = n
        self.names: tuple[str, ...] = tuple(node.name for node in nodes)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.all_mask = (1 << n) - 1
        self._index_nodes(nodes)

        pods_by_node = snapshot.pods_by_node()
        self.pods: list[tuple[Pod, ...]] = [pods_by_node.get(name, ()) for name in self.names]
        # Every entry is set by _summarise below.
        self.pod_count: list[int] = [0] * n  # pragma: no mutate
        self.min_priority: list[int | None] = [None] * n
        self.priorities: list[tuple[int, ...]] = [()] * n
        self.used_ports: dict[int, frozenset[tuple[str, str, int]]] = {}
        self.requested: dict[str, list[int]] = {}
        # priority -> (pods per node, resource -> summed requests per node), for preemption.
        self._by_priority: dict[int, tuple[list[int], dict[str, list[int]]]] = {}
        self._groups: dict[str, dict[tuple[str, FrozenMap[str], bool], PodGroup]] = {}
        self._anti: dict[tuple[str, tuple[PodAffinityTerm, ...]], AntiAffinityGroup] = {}
        self._copied: set[int] | None = None  # ids of groups this table owns (None: all of them)
        for i, pods in enumerate(self.pods):
            prios = tuple(snapshot.priority_of(pod) for pod in pods)
            self._account(i, pods, prios, 1)
            self._summarise(i, prios)
        self._finish()

    @classmethod
    def derive(cls, base: NodeTable, snapshot: ClusterSnapshot, origin: Origin) -> NodeTable | None:
        """``snapshot``'s table from ``base``, the table of ``origin.parent``; None when
        the change is not one this can follow (nodes added or removed, priority classes
        changed, or most pods changed) and the table must be built afresh."""
        changes = origin.changes
        if changes.get("priority_classes"):
            return None
        node_changes = changes.get("nodes", ())
        if any(old is None or new is None for old, new in node_changes):
            return None
        pod_changes = [
            (old, new) for old, new in changes.get("pods", ()) if bound_node(old) or bound_node(new)
        ]
        # Past this a fresh table is built: the same table, so the threshold is only speed.
        if len(pod_changes) > max(64, len(snapshot.pods) // 20):  # pragma: no mutate
            return None
        table = object.__new__(cls)
        table.__dict__.update(base.__dict__)
        table.memo = {}
        table.requested = dict(base.requested)  # _finish may add columns
        if node_changes:
            table._index_nodes([snapshot.nodes[name] for name in base.names])
        changed_nodes = [table.index[new.name] for _, new in node_changes]
        if not pod_changes:
            table._finish(None if node_changes else base)
            table._carry_victim_classes(base, changed_nodes)
            return table
        table.pods = list(base.pods)
        table.pod_count = list(base.pod_count)
        table.min_priority = list(base.min_priority)
        table.priorities = list(base.priorities)
        table.used_ports = dict(base.used_ports)
        table.requested = {r: list(col) for r, col in base.requested.items()}
        table._by_priority = {
            prio: (list(counts), {r: list(col) for r, col in reqs.items()})
            for prio, (counts, reqs) in base._by_priority.items()
        }
        table._groups = dict(base._groups)
        table._anti = dict(base._anti)
        table._copied = set()
        touched: dict[int, None] = {}
        for old, new in pod_changes:
            for pod, sign in ((old, -1), (new, 1)):
                where = bound_node(pod)
                i = table.index.get(where) if where is not None else None
                if pod is None or i is None:
                    continue
                table._account(i, (pod,), (snapshot.priority_of(pod),), sign)
                touched[i] = None
        after = snapshot.pods_by_node()
        for i in touched:
            table.pods[i] = after.get(table.names[i], ())
            table._summarise(i, tuple(snapshot.priority_of(pod) for pod in table.pods[i]))
        table._finish(None if node_changes else base, touched)
        table._carry_victim_classes(base, [*touched, *changed_nodes])
        return table

    def _carry_victim_classes(self, base: NodeTable, touched: Sequence[int]) -> None:
        """Keep ``base``'s victim classes (when it made them) updated on ``touched``."""
        found: VictimClasses | None = base.memo.get("victim_classes")
        if found is not None:
            carried = VictimClasses.derive(found, self, dict.fromkeys(touched))
            if carried is not None:
                self.memo["victim_classes"] = carried

    # -- building blocks ------------------------------------------------------
    def _index_nodes(self, nodes: Sequence[Node]) -> None:
        """Everything that depends on the nodes alone (labels, taints, cordon, allocatable)."""
        n = self.size
        self.nodes: tuple[Node, ...] = tuple(nodes)
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
        self.allowed_pods: list[int] = [node.allocatable.get("pods", 0) for node in nodes]

    def _account(self, i: int, pods: Sequence[Pod], prios: Sequence[int], sign: int) -> None:
        """Add (sign 1) or take away (sign -1) pods bound to node ``i``. A derived table
        shares its base's groups until it changes one (copy on write, ``_copied``)."""
        n = self.size
        requested, by_priority, all_groups, anti = self.requested, self._by_priority, self._groups, self._anti
        for pod, prio in zip(pods, prios, strict=True):  # pragma: no mutate
            level = by_priority.get(prio)
            if level is None:
                level = by_priority[prio] = ([0] * n, {})
            level[0][i] += sign
            level_requests = level[1]
            for r, q in pod.spec.requests.items():
                col = requested.get(r)
                if col is None:
                    col = requested[r] = [0] * n
                col[i] += sign * q
                pcol = level_requests.get(r)
                if pcol is None:
                    pcol = level_requests[r] = [0] * n
                pcol[i] += sign * q
            ns = pod.namespace
            terminating = pod.deleted is not None
            groups = all_groups.get(ns)
            if groups is None:
                groups = all_groups[ns] = self._own({})
            elif not self._owns(groups):
                groups = all_groups[ns] = self._own(dict(groups))
            key = (ns, pod.labels, terminating)
            group = groups.get(key)
            if group is None:
                group = groups[key] = self._own(PodGroup(ns, pod.labels, terminating, {}))
            elif not self._owns(group):
                group = groups[key] = self._own(
                    PodGroup(group.namespace, group.labels, group.terminating, dict(group.node_counts))
                )
            _count(group.node_counts, i, sign)
            terms = pod.spec.pod_anti_affinity
            if terms:
                akey = (ns, terms)
                ag = anti.get(akey)
                if ag is None:
                    ag = anti[akey] = self._own(AntiAffinityGroup(ns, terms, {}))
                elif not self._owns(ag):
                    ag = anti[akey] = self._own(
                        AntiAffinityGroup(ag.namespace, ag.terms, dict(ag.node_counts))
                    )
                _count(ag.node_counts, i, sign)

    def _owns(self, obj: object) -> bool:
        return self._copied is None or id(obj) in self._copied

    def _own(self, obj: _T) -> _T:
        if self._copied is not None:
            self._copied.add(id(obj))
        return obj

    def _summarise(self, i: int, prios: tuple[int, ...]) -> None:
        """Node ``i``'s pod count, priorities and host ports, from ``self.pods[i]``."""
        pods = self.pods[i]
        self.pod_count[i] = len(pods)
        self.priorities[i] = prios
        self.min_priority[i] = min(prios) if prios else None
        ports = {triple for pod in pods for triple in host_port_triples(pod)}
        if ports:
            self.used_ports[i] = frozenset(ports)
        else:
            self.used_ports.pop(i, None)

    def _finish(self, base: NodeTable | None = None, touched: Iterable[int] = ()) -> None:
        """Columns derived from the accounts: allocatable, requested and free per resource.
        ``base``: the table this one was derived from with the same nodes, and ``touched``
        the nodes whose accounts changed: the allocatable columns are base's, and only the
        touched nodes' free entries are worked out again (not every node's)."""
        n = self.size
        self.allocatable: dict[str, list[int]]
        self.free: dict[str, list[int]]
        if base is not None and self.requested.keys() <= base.allocatable.keys():
            self.allocatable = base.allocatable
            for r in self.allocatable:
                if r not in self.requested:
                    self.requested[r] = [0] * n
            free = {r: list(col) for r, col in base.free.items()}
            for i in touched:
                for r, col in free.items():
                    col[i] = self.allocatable[r][i] - self.requested[r][i]
            self.free = free
        else:
            resources = set(self.requested)
            for node in self.nodes:
                resources.update(node.allocatable)
            self.allocatable = {
                r: [node.allocatable.get(r, 0) for node in self.nodes] for r in sorted(resources)
            }
            for r in self.allocatable:
                if r not in self.requested:
                    self.requested[r] = [0] * n
            self.free = {
                r: [a - q for a, q in zip(alloc, self.requested[r], strict=True)]
                for r, alloc in self.allocatable.items()
            }
        self.pod_groups: dict[str, list[PodGroup]] = {
            ns: [g for g in groups.values() if g.node_counts] for ns, groups in self._groups.items()
        }
        self.anti_affinity_groups: tuple[AntiAffinityGroup, ...] = tuple(
            g for g in self._anti.values() if g.node_counts
        )
        # Per-snapshot memo for selector counts etc. (deterministic functions of the snapshot).
        self.memo: dict[Any, Any] = {}

    def resource_columns(self, priority: int | None = None) -> ResourceColumns:
        """:class:`ResourceColumns` of the table (``priority`` None) or of the table less
        the pods of priority below ``priority``; made once per table and priority."""
        key = ("resources", priority)
        found: ResourceColumns | None = self.memo.get(key)
        if found is None:
            found = self.memo[key] = ResourceColumns(self, priority)
        return found

    def allocatable_column(self, resource: str) -> Column:
        key = ("allocatable", resource)
        found: Column | None = self.memo.get(key)
        if found is None:
            found = self.memo[key] = Column(self.allocatable[resource])
        return found

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
                # An equal-priority pod counted here is never a victim: select_victims filters
                # with "<" again and reports the node alike.
                if prio >= priority:  # pragma: no mutate
                    continue
                counts = [a + b for a, b in zip(counts, level_counts, strict=True)]
                for r, col in level_reqs.items():
                    base = reqs.get(r)
                    reqs[r] = list(col) if base is None else [a + b for a, b in zip(base, col, strict=True)]
            found = (reqs, counts, mask_of([i for i, c in enumerate(counts) if c], n))
            self.memo[key] = found
        return found

    def has_victim_classes(self) -> bool:
        return "victim_classes" in self.memo

    def victim_classes(self) -> VictimClasses:
        """The table's :class:`VictimClasses`, made on first use and kept with the table."""
        found: VictimClasses | None = self.memo.get("victim_classes")
        if found is None:
            found = self.memo["victim_classes"] = VictimClasses(self)
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
            want = parse_int64(req.values[0])
            if want is None:
                return 0
            m = 0
            for v, vm in values.items():
                have = parse_int64(v)
                if have is not None and (have > want if op == "Gt" else have < want):
                    m |= vm
            return m
        return 0

    def field_requirement_mask(self, req: Requirement, *, named: bool = True) -> int:
        """matchFields (component-helpers/scheduling/corev1/nodeaffinity
        nodeSelectorRequirementsAsFieldSelector): In/NotIn of one value against the
        node's only field, ``metadata.name``; any other key reads as empty. Unless
        ``named``, every node's name reads as empty too (a PV's node affinity:
        component-helpers/storage/volume CheckNodeAffinity matches a Node built
        from the labels alone)."""
        if req.operator not in ("In", "NotIn") or len(req.values) != 1:
            return 0
        value = req.values[0]
        if req.key == "metadata.name" and named:
            i = self.index.get(value)
            m = 1 << i if i is not None else 0
        else:
            m = self.all_mask if value == "" else 0
        return m if req.operator == "In" else self.all_mask & ~m

    def term_mask(self, term: NodeSelectorTerm, *, named: bool = True) -> int:
        """Nodes a required node-affinity term matches: none when the term is empty
        or does not parse (``selectors.node_term_valid``)."""
        if not term.match_expressions and not term.match_fields:
            return 0
        if not node_term_valid(term):
            return 0
        m = self.all_mask
        for req in term.match_expressions:
            m &= self.requirement_mask(req)
            if not m:
                return 0
        for req in term.match_fields:
            m &= self.field_requirement_mask(req, named=named)
        return m

    def selector_mask(self, selector: NodeSelector, *, named: bool = True) -> int:
        """Nodes matching any term (``named``: see :meth:`field_requirement_mask`)."""
        m = 0
        for term in selector.terms:
            m |= self.term_mask(term, named=named)
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
            # Callers pass values read from node labels: each is in the index.
            m |= index.get(v, 0)  # pragma: no mutate
        return m


def node_table(snapshot: ClusterSnapshot) -> NodeTable:
    """The snapshot's NodeTable, built on first use and cached in the snapshot; a what-if
    snapshot's is derived from its parent's when the parent has one."""

    def build() -> NodeTable:
        origin = snapshot.origin
        if origin is not None:
            base = origin.parent.cached(DERIVED_KEY)
            if base is not None:
                derived = NodeTable.derive(base, snapshot, origin)
                if derived is not None:
                    return derived
        return NodeTable(snapshot)

    table: NodeTable = snapshot.derived(DERIVED_KEY, build)
    return table


def _count(counts: dict[int, int], i: int, sign: int) -> None:
    c = counts.get(i, 0) + sign
    if c:
        counts[i] = c
    else:
        counts.pop(i, None)


def pods_on(table: NodeTable, i: int, removed: Sequence[Pod] = ()) -> tuple[Pod, ...]:
    if not removed:
        return table.pods[i]
    gone = {id(p) for p in removed}
    return tuple(p for p in table.pods[i] if id(p) not in gone)
