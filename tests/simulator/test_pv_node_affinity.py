"""A PersistentVolume's node affinity goes through the node-affinity selector code.

VolumeBinding checks a bound (or candidate) PV with component-helpers/storage/
volume/helpers.go ``CheckNodeAffinity`` (v0.35.4): ``corev1.MatchNodeSelectorTerms``
over a Node built from the node's *labels only* -- so a term that
``labels.NewRequirement`` refuses matches nothing (as for the pod's own node
affinity), and ``matchFields`` on ``metadata.name`` see an empty name.
The simulator (``NodeTable.selector_mask``) and the rules
(``selectors.node_selector_matches``) must agree on every case.
"""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.records import NodeSelector
from analyzers.simulator import node_table, simulate
from analyzers.simulator.selectors import node_selector_matches
from tests.simulator.builders import node, pod, pod_of, snapshot
from tests.simulator.test_filters_node import expr
from tests.simulator.test_filters_resources_volumes import pv, pvc

NODES = [
    node("a", labels={"zone": "z1", "gen": "3", "build": "1_0"}),
    node("b", labels={"zone": "z2", "gen": "5"}),
]

# (term, nodes a PV with that single term admits)
CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"matchExpressions": [expr("zone", "In", "z1")]}, {"a"}),
    ({"matchExpressions": [expr("zone", "NotIn", "not a value")]}, set()),  # value refused
    ({"matchExpressions": [expr("zone", "NotIn", "z" * 64)]}, set()),  # longer than 63
    ({"matchExpressions": [expr("zone", "NotIn")]}, set()),  # NotIn needs values
    ({"matchExpressions": [expr("gen", "Gt", "two")]}, set()),
    ({"matchExpressions": [expr("bad key", "Exists")]}, set()),
    ({"matchExpressions": [expr("zone", "Matches", "z1")]}, set()),
    # strconv.ParseInt refuses "1_0" (Python's int() would read 10)
    ({"matchExpressions": [expr("build", "Gt", "5")]}, set()),
    ({"matchExpressions": [expr("gen", "Gt", "4")]}, {"b"}),
    # matchFields: the Node CheckNodeAffinity builds has no name
    ({"matchFields": [expr("metadata.name", "In", "a")]}, set()),
    ({"matchFields": [expr("metadata.name", "NotIn", "a")]}, {"a", "b"}),
    ({}, set()),  # an empty term matches nothing
]


def _pv_with(term: dict[str, Any]) -> dict[str, Any]:
    obj = pv("pv-1", claim="data", phase="Bound")
    obj["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return obj


@pytest.mark.parametrize(("term", "admits"), CASES)
def test_a_bound_pv_admits_the_nodes_check_node_affinity_admits(
    term: dict[str, Any], admits: set[str]
) -> None:
    snap = snapshot(
        *NODES, pvc("data", volume="pv-1", phase="Bound"), _pv_with(term), pod("p", pvcs=["data"])
    )
    v = simulate(snap, pod_of(snap, "p"), kube_version="1.33")
    assert {n.node for n in v.nodes if n.fits} == admits


@pytest.mark.parametrize(("term", "admits"), CASES)
def test_rules_and_simulator_read_a_pv_selector_alike(term: dict[str, Any], admits: set[str]) -> None:
    snap = snapshot(*NODES, pvc("data", volume="pv-1", phase="Bound"), _pv_with(term))
    selector = snap.pvs["pv-1"].node_affinity
    assert isinstance(selector, NodeSelector)
    table = node_table(snap)
    mask = table.selector_mask(selector, named=False)
    by_rules = {n.name for n in snap.nodes.values() if node_selector_matches(selector, n.labels, None)}
    assert by_rules == {table.names[i] for i in range(table.size) if mask >> i & 1} == admits


def test_a_pods_own_match_fields_do_see_the_node_name() -> None:
    """The pod's node affinity matches the real Node, name included (the contrast)."""
    snap = snapshot(*NODES, _pv_with({"matchFields": [expr("metadata.name", "In", "a")]}))
    selector = snap.pvs["pv-1"].node_affinity
    assert selector is not None
    assert [n for n in ("a", "b") if node_selector_matches(selector, snap.nodes[n].labels, n)] == ["a"]
    mask = node_table(snap).selector_mask(selector)
    assert mask == 1 << node_table(snap).index["a"]
