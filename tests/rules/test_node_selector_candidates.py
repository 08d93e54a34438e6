"""node-selector-mismatch picks the nodes to try labelling a few bits at a time (the
first ``limit`` of the nodes failing only NodeAffinity, those with a nearest label
first) instead of listing and sorting every such node: on random clusters the
choice equals the straightforward one the rule made before (kept here as the
reference), including when the limit cuts the list short."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.rules import _placement as P
from analyzers.rules import node_selector_mismatch as rule
from analyzers.rules.context import RuleContext
from analyzers.simulator import codes as C
from analyzers.simulator import node_table
from analyzers.simulator.nodeinfo import NodeTable
from analyzers.snapshot import ClusterSnapshot
from tests.simulator.builders import node, pod, taint


def _reference(table: NodeTable, views: P.NodeViews, analysis: rule.Analysis, limit: int) -> list[str]:
    def nodes_with(key: str, value: str, is_field: bool) -> list[str]:
        if is_field:
            return [value] if value in table.index else []
        mask = table.label_index.get(key, {}).get(value, 0)
        return [name for i, name in enumerate(table.names) if (mask >> i) & 1]

    preferred = [
        n for c in analysis.culprits for k, v, _, _ in c.suggestions for n in nodes_with(k, v, c.is_field)
    ]
    only_affinity = set(views.names_of(views.where(lambda p: p == {C.NODE_AFFINITY})))
    order = [n for n in dict.fromkeys(preferred) if n in only_affinity]
    order += sorted(only_affinity - set(order))
    return order[:limit]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterSnapshot, dict[str, Any]]:
    names = draw(st.lists(st.text("abn", min_size=1, max_size=3), min_size=1, max_size=14, unique=True))
    objects: list[dict[str, Any]] = []
    for name in names:
        labels = {}
        for key, values in (("pool", ["a", "b", "batch"]), ("gpu", ["x", "y"]), ("disk", ["ssd"])):
            if draw(st.booleans()):
                labels[key] = draw(st.sampled_from(values))
        taints = [taint("dedicated")] if draw(st.integers(0, 4)) == 0 else None
        objects.append(node(name, labels=labels, taints=taints, unschedulable=draw(st.integers(0, 5)) == 0))
    # Values and keys that no node carries but that are near ones that do.
    selector = draw(
        st.dictionaries(
            st.sampled_from(["pool", "gpu", "poo", "Disk"]),
            st.sampled_from(["A", "B", "bach", "X", "ssd", "y"]),
            min_size=1,
            max_size=3,
        )
    )
    pending = pod("pending", node_selector=selector)
    return ClusterSnapshot.from_objects([*objects, pending]), selector


@settings(max_examples=150, deadline=None)
@given(cluster=clusters(), limit=st.integers(0, 6))
def test_label_candidates_equal_the_straightforward_order(
    cluster: tuple[ClusterSnapshot, dict[str, Any]], limit: int
) -> None:
    snap, _ = cluster
    table = node_table(snap)
    [pending] = [p for p in snap.pods.values() if not p.node_name]
    views = P.NodeViews(RuleContext(snapshot=snap, now=0.0).verdict(pending))
    analysis = rule._analyse(table, pending)
    assert rule._label_candidates(table, views, analysis, limit) == _reference(table, views, analysis, limit)
