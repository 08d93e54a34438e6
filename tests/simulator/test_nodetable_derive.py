"""A what-if snapshot's NodeTable derived from its parent's (NodeTable.derive) must
equal the table built from scratch, field by field, for every kind of change the
rules make: pods removed, added, moved, respecified; nodes cordoned, relabelled,
tainted; and chains of what-ifs. Also the simulator's verdicts on both agree."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from analyzers.records import Pod, Taint
from analyzers.simulator import simulate
from analyzers.simulator.nodeinfo import DERIVED_KEY, NodeTable, node_table
from analyzers.snapshot import ClusterSnapshot

from .builders import node, pod, snapshot

ANTI = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "topology.kubernetes.io/zone"}
        ]
    }
}


def _cluster() -> ClusterSnapshot:
    objs = []
    for i in range(6):
        objs.append(node(f"n{i}", labels={"topology.kubernetes.io/zone": f"z{i % 3}", "pool": "general"}))
    for i in range(18):
        objs.append(
            pod(
                f"web-{i}",
                node_name=f"n{i % 6}",
                labels={"app": "web"},
                requests={"cpu": "500m", "memory": "1Gi"},
                priority=100 * (i % 3),
                host_ports=[{"containerPort": 80, "hostPort": 8000 + i % 2}] if i % 4 == 0 else None,
            )
        )
    for i in range(3):
        objs.append(pod(f"db-{i}", namespace="data", node_name=f"n{i}", labels={"app": "db"}, affinity=ANTI))
    objs.append(pod("pending", requests={"cpu": "3"}, labels={"app": "web"}))
    return snapshot(*objs)


def _plain(table: NodeTable) -> dict[str, Any]:
    """The table's contents in comparable form (objects by key, groups as sets)."""
    return {
        "names": table.names,
        "nodes": table.nodes,
        "label_index": table.label_index,
        "key_mask": table.key_mask,
        "unschedulable": table.unschedulable_mask,
        "taints": table.taint_groups,
        "allowed_pods": list(table.allowed_pods),
        # Order within a node is not the scheduler's business (NodeInfo.Pods is in cache
        # insertion order; victims are sorted by importance): a moved pod may sit elsewhere.
        "pods": [sorted(p.key for p in pods) for pods in table.pods],
        "pod_count": list(table.pod_count),
        "min_priority": list(table.min_priority),
        "priorities": [tuple(sorted(p)) for p in table.priorities],
        "used_ports": table.used_ports,
        "requested": {r: col for r, col in table.requested.items() if any(col)},
        "allocatable": table.allocatable,
        "free": table.free,
        "pod_groups": {
            ns: {(g.labels, g.terminating, tuple(sorted(g.node_counts.items()))) for g in groups}
            for ns, groups in table.pod_groups.items()
            if groups
        },
        "anti": {
            (g.namespace, g.terms, tuple(sorted(g.node_counts.items()))) for g in table.anti_affinity_groups
        },
        "lower": [table.lower_priority(p) for p in (0, 100, 200, 1000)],
    }


def _derived_and_fresh(what_if: ClusterSnapshot) -> tuple[NodeTable, NodeTable]:
    origin = what_if.origin
    assert origin is not None
    base = node_table(origin.parent)
    derived = NodeTable.derive(base, what_if, origin)
    assert derived is not None, "derive declined a change it should follow"
    fresh = NodeTable(ClusterSnapshot.from_records(list(what_if)))
    return derived, fresh


def _moved(p: Pod, node_name: str) -> Pod:
    return replace(p, node_name=node_name)


CHANGES = {
    "remove two pods": lambda s: s.replace(
        remove=[("pods", ("default", "web-0")), ("pods", ("default", "web-7"))]
    ),
    "bind the pending pod": lambda s: s.replace(_moved(s.pods[("default", "pending")], "n5")),
    "add a new bound pod": lambda s: s.replace(
        replace(_moved(s.pods[("default", "web-2")], "n1"), name="web-99")
    ),
    "move a pod to another node": lambda s: s.replace(_moved(s.pods[("default", "web-1")], "n4")),
    "respecify pods in place": lambda s: s.replace(
        *[
            replace(
                s.pods[("data", f"db-{i}")], spec=replace(s.pods[("data", "db-0")].spec, pod_anti_affinity=())
            )
            for i in range(3)
        ]
    ),
    "cordon a node": lambda s: s.replace(replace(s.nodes["n2"], unschedulable=True)),
    "relabel and taint a node": lambda s: s.replace(
        replace(
            s.nodes["n3"],
            labels=type(s.nodes["n3"].labels)({**s.nodes["n3"].labels, "pool": "gpu"}),
            taints=(Taint("nvidia.com/gpu", "", "NoSchedule"),),
        )
    ),
    "remove the last pod of a node": lambda s: s.replace(
        remove=[("pods", p.key) for p in s.pods_by_node()["n0"]]
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_derived_table_equals_fresh_table(change: str) -> None:
    base = _cluster()
    node_table(base)
    what_if = CHANGES[change](base)
    derived, fresh = _derived_and_fresh(what_if)
    assert _plain(derived) == _plain(fresh)
    pending = base.pods[("default", "pending")]
    assert (
        simulate(what_if, pending).message
        == simulate(ClusterSnapshot.from_records(list(what_if)), pending).message
    )


def test_derive_leaves_the_parent_table_untouched() -> None:
    base = _cluster()
    table = node_table(base)
    before = _plain(table)
    for change in CHANGES.values():
        node_table(change(base))
    assert _plain(table) == before


def test_chained_what_ifs_derive_from_each_other() -> None:
    base = _cluster()
    node_table(base)
    first = CHANGES["remove two pods"](base)
    node_table(first)
    second = CHANGES["move a pod to another node"](first)
    derived, fresh = _derived_and_fresh(second)
    assert _plain(derived) == _plain(fresh)


def test_added_or_removed_nodes_are_built_afresh() -> None:
    base = _cluster()
    table = node_table(base)
    extra = replace(base.nodes["n0"], name="n9")  # a copy of n0 under another name
    what_if = base.replace(extra)
    assert what_if.origin is not None
    assert NodeTable.derive(table, what_if, what_if.origin) is None
    assert node_table(what_if).names[-1] == "n9"  # built from scratch, correctly


def test_the_what_if_snapshot_caches_its_derived_table() -> None:
    base = _cluster()
    node_table(base)
    what_if = CHANGES["cordon a node"](base)
    assert what_if.cached(DERIVED_KEY) is None
    assert node_table(what_if) is node_table(what_if)
    assert what_if.cached(DERIVED_KEY) is not None


def test_sibling_what_ifs_do_not_leak_into_each_other() -> None:
    """Two what-ifs of one base: a pod with new labels (a new group) in the first must
    not appear in the second's spread and affinity counts (copy on write)."""
    base = _cluster()
    node_table(base)
    newcomer = replace(
        base.pods[("default", "web-2")],
        name="canary",
        labels=type(base.pods[("default", "web-2")].labels)({"app": "canary"}),
    )
    first = base.replace(newcomer)
    node_table(first)
    second = CHANGES["cordon a node"](base)
    derived, fresh = _derived_and_fresh(second)
    assert _plain(derived) == _plain(fresh)
    assert not any(g.labels.get("app") == "canary" for g in node_table(second).pod_groups["default"])


def _classes(table: NodeTable) -> tuple[object, ...]:
    """The victim classes as a partition of node names, with each node's importance order."""
    vc = table.victim_classes()
    groups: dict[int, list[str]] = {}
    for i, number in enumerate(vc.of):
        groups.setdefault(number, []).append(table.names[i])
        assert i in vc.members[number] and (vc.mask(number) >> i) & 1
    assert sum(len(m) for m in vc.members) == table.size
    return (
        frozenset(frozenset(g) for g in groups.values()),
        [tuple(p.key for p in pods) for pods in vc.pods],
        vc.priorities,
    )


@pytest.mark.parametrize("change", list(CHANGES))
def test_victim_classes_carried_to_a_derived_table_are_those_made_afresh(change: str) -> None:
    base = _cluster()
    node_table(base).victim_classes()
    what_if = CHANGES[change](base)
    derived = node_table(what_if)
    assert derived.has_victim_classes(), "the classes were not carried"
    carried = _classes(derived)
    derived.memo.pop("victim_classes")
    assert carried == _classes(derived)


def test_victim_classes_follow_a_node_that_joins_a_class_of_many() -> None:
    # 70 alike nodes (a class kept as a bit set) and one that differs; the what-if makes
    # it alike (its extra pod gone): it joins the big class, whose bit set must follow.
    objs = [node(f"n{i:03d}", cpu="2") for i in range(71)]
    objs += [pod(f"low-{i}", node_name=f"n{i:03d}", requests={"cpu": "1"}, priority=0) for i in range(71)]
    objs.append(pod("extra", node_name="n070", requests={"cpu": "500m"}, priority=0))
    base = snapshot(*objs)
    before = node_table(base).victim_classes()
    assert len(before.members[before.of[0]]) == 70
    what_if = base.replace(remove=[("pods", ("default", "extra"))])
    after = node_table(what_if).victim_classes()
    assert after is not before and len(after.members[after.of[0]]) == 71
    assert after.mask(after.of[0]) == (1 << 71) - 1
    assert before.mask(before.of[0]) == (1 << 70) - 1  # the parent's are untouched
