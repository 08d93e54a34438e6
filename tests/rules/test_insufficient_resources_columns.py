"""insufficient-resources reads a workload's nodes a column at a time (C-level sort keys,
one list per resource) instead of node by node: on random node tables -- few distinct
values, so ties are the rule -- every column-wise answer equals the node-by-node one
the rule computed before (kept here as the reference)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.rules import insufficient_resources as rule
from analyzers.simulator import node_table
from analyzers.simulator.nodeinfo import NodeTable
from analyzers.snapshot import ClusterSnapshot
from tests.simulator.builders import node, pod

RESOURCES = ("pods", "cpu", "memory", "example.com/fpga", "example.com/absent")


def _free(table: NodeTable, i: int, res: str) -> tuple[int, int]:
    """(free, allocatable) of ``res`` on node ``i``, one node at a time (the reference)."""
    if res == "pods":
        return table.allowed_pods[i] - table.pod_count[i], table.allowed_pods[i]
    alloc = table.allocatable.get(res)
    if alloc is None:
        return 0, 0
    return table.free[res][i], alloc[i]


def _reference_shortage(table: NodeTable, nodes: list[int], res: str) -> tuple[Any, ...]:
    rows = [(table.names[i], *_free(table, i, res)) for i in nodes]
    rows.sort(key=lambda r: (-r[1], r[0]))
    best = min(rows, key=lambda r: (-r[2], r[0])) if rows else None
    return (
        rows,
        rows[0][1] if rows else 0,
        best[2] if best else 0,
        best[0] if best else "",
        sum(f for _, f, _ in rows if f > 0),
    )


def _reference_lowered(
    table: NodeTable, nodes: list[int], shortages: list[rule.Shortage]
) -> tuple[float, str, dict[str, int]] | None:
    best: tuple[float, str, dict[str, int]] | None = None
    for i in nodes:
        new: dict[str, int] = {}
        ratio = 1.0
        for s in shortages:
            free, _ = _free(table, i, s.resource)
            if free >= s.requested:
                continue
            value = rule._round_down(s.resource, free)
            if value <= 0 or not (s.resource in rule._LOWERABLE or rule.is_scalar(s.resource)):
                ratio = 0.0
                break
            new[s.resource] = value
            ratio = min(ratio, value / s.requested)
        if new and ratio > 0 and (best is None or ratio > best[0]):
            best = (ratio, table.names[i], new)
    return best


def _reference_slots(table: NodeTable, nodes: list[int], requests: dict[str, int]) -> int:
    total = 0
    for i in nodes:
        fit = None
        for res in RESOURCES:
            want = 1 if res == "pods" else requests.get(res, 0)
            if want <= 0:
                continue
            n = max(_free(table, i, res)[0], 0) // want
            fit = n if fit is None else min(fit, n)
        total += fit or 0
    return total


@st.composite
def tables(draw: st.DrawFn) -> NodeTable:
    count = draw(st.integers(1, 12))
    # Names out of order: the table sorts them, and the rows must come out the same.
    names = draw(
        st.lists(st.text("abcz", min_size=1, max_size=3), min_size=count, max_size=count, unique=True)
    )
    objects: list[dict[str, Any]] = []
    for name in names:
        extra = {"example.com/fpga": str(draw(st.integers(0, 3)))} if draw(st.booleans()) else None
        objects.append(
            node(
                name,
                cpu=f"{draw(st.sampled_from([0, 1, 2, 4]))}",
                memory=f"{draw(st.sampled_from([0, 1, 3]))}Gi",
                pods=str(draw(st.integers(0, 4))),
                extra=extra,
            )
        )
        for k in range(draw(st.integers(0, 3))):
            requests = {"cpu": f"{draw(st.sampled_from([0, 500, 1000, 1500]))}m"}
            if draw(st.booleans()):
                requests["memory"] = f"{draw(st.sampled_from([256, 1024, 2049]))}Mi"
            objects.append(pod(f"p-{name}-{k}", node_name=name, requests=requests))
    return node_table(ClusterSnapshot.from_objects(objects))


@settings(max_examples=150, deadline=None)
@given(table=tables(), data=st.data())
def test_column_answers_equal_node_by_node_ones(table: NodeTable, data: st.DataObject) -> None:
    nodes = sorted(data.draw(st.sets(st.integers(0, table.size - 1))))
    wants = {
        "pods": 1,
        "cpu": data.draw(st.sampled_from([100, 1000, 1700, 3000, 5000])),
        "memory": data.draw(st.sampled_from([2**20, 2**30, 2**31 + 5])),
        "example.com/fpga": data.draw(st.integers(1, 4)),
        "example.com/absent": 1,
    }
    names = [table.names[i] for i in nodes]
    shortages = []
    for res in data.draw(st.lists(st.sampled_from(RESOURCES), min_size=1, max_size=3, unique=True)):
        free, allocatable = rule._free_column(table, nodes, res), rule._allocatable_column(table, nodes, res)
        s = rule.Shortage(res, wants[res], names, free, allocatable)
        reference = _reference_shortage(table, nodes, res)
        assert (s.rows(), s.max_free, s.max_allocatable, s.most_allocatable, s.total_free) == reference
        limit = data.draw(st.integers(0, len(nodes) + 1))
        assert s.rows(limit) == reference[0][:limit]
        # Past the first 100 and below the count (not reached by these small tables).
        assert s._ordered(limit) == reference[0][:limit]
        assert s.best("free") == (reference[0][0][0] if nodes else "")
        shortages.append(s)
    analysis = rule.Analysis(names, shortages, "", node_indices=nodes)
    assert rule._largest_fitting_request(analysis) == _reference_lowered(table, nodes, shortages)
    assert rule._slots(table, nodes, wants, RESOURCES) == _reference_slots(table, nodes, wants)
    assert (bool(nodes) and rule._one_node_holds_all(shortages)) == any(
        all(_free(table, i, s.resource)[1] >= s.requested for s in shortages) for i in nodes
    )
    for s in shortages:
        if nodes:
            expected = max(
                (table.nodes[i] for i in nodes), key=lambda n: (n.allocatable.get(s.resource, 0), n.name)
            )
            assert table.nodes[rule._largest(table, nodes, s.resource)] is expected


def test_lowered_request_on_a_tie_takes_the_first_node_by_name() -> None:
    """Two nodes equally short (random tables rarely tie on the best fraction)."""
    objects: list[dict[str, Any]] = []
    for name in ("b-node", "a-node", "c-node"):
        objects.append(node(name, cpu="2"))
        objects.append(
            pod(f"p-{name}", node_name=name, requests={"cpu": "1500m" if name != "c-node" else "1800m"})
        )
    table = node_table(ClusterSnapshot.from_objects(objects))
    nodes = list(range(table.size))
    names = [table.names[i] for i in nodes]
    cpu = rule.Shortage(
        "cpu",
        1000,
        names,
        rule._free_column(table, nodes, "cpu"),
        rule._allocatable_column(table, nodes, "cpu"),
    )
    analysis = rule.Analysis(names, [cpu], "", node_indices=nodes)
    assert rule._largest_fitting_request(analysis) == (0.5, "a-node", {"cpu": 500})
    assert rule._largest_fitting_request(analysis) == _reference_lowered(table, nodes, [cpu])
