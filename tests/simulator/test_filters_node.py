"""NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts and
SchedulingGates against kube-scheduler's plugins (kubernetes/kubernetes,
pkg/scheduler/framework/plugins/...): reason strings, status codes, order."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.ingest import Decoder
from analyzers.simulator import simulate
from tests.simulator.builders import node, pod, pod_of, snapshot, taint

UNRES = "UnschedulableAndUnresolvable"


def run(objs: list[dict[str, Any]], name: str = "p", version: str | None = None):  # type: ignore[no-untyped-def]
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, name), kube_version=version)


def first(verdict, node_name: str):  # type: ignore[no-untyped-def]
    nv = verdict.node(node_name)
    assert nv is not None
    return nv.filters[0] if nv.filters else None


# --- nodeunschedulable/node_unschedulable.go -----------------------------------------


def test_node_unschedulable_cordoned_node_is_unresolvable() -> None:
    v = run([node("a", unschedulable=True), node("b"), pod("p", requests={"cpu": "1"})])
    f = first(v, "a")
    assert (f.plugin, f.code, f.reasons, f.reason_codes) == (
        "NodeUnschedulable",
        UNRES,
        ("node(s) were unschedulable",),
        ("node-unschedulable",),
    )
    assert v.fits and v.feasible_nodes == 1


def test_node_unschedulable_toleration_of_the_unschedulable_taint_lets_it_pass() -> None:
    tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    v = run([node("a", unschedulable=True), pod("p", tolerations=tol)])
    assert v.fits


# --- nodename/node_name.go ------------------------------------------------------------


def test_node_name_hypothetical_pod_pinned_to_a_node() -> None:
    snap = snapshot(node("a"), node("b"), node("c"))
    p = Decoder().decode(pod("p", node_name="b", phase="Pending"))
    v = simulate(snap, p)  # type: ignore[arg-type]
    assert v.fits and v.feasible_nodes == 1
    f = first(v, "a")
    assert (f.plugin, f.code, f.reasons) == (
        "NodeName",
        UNRES,
        ("node(s) didn't match the requested node name",),
    )


# --- tainttoleration/taint_toleration.go ---------------------------------------------------


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("1.23", "node(s) had taint {dedicated: gpu}, that the pod didn't tolerate"),
        ("1.24", "node(s) had untolerated taint {dedicated: gpu}"),
        ("1.33", "node(s) had untolerated taint {dedicated: gpu}"),
        ("1.34.1", "node(s) had untolerated taint {dedicated: gpu}"),
        ("1.34.2", "node(s) had untolerated taint(s)"),
        ("1.35", "node(s) had untolerated taint(s)"),
    ],
)
def test_taint_reason_wording_by_version(version: str, reason: str) -> None:
    v = run([node("a", taints=[taint("dedicated", "gpu")]), pod("p")], version=version)
    f = first(v, "a")
    assert (f.plugin, f.code, f.reasons, f.reason_codes) == (
        "TaintToleration",
        UNRES,
        (reason,),
        ("untolerated-taint",),
    )
    assert dict(f.detail["taint"]) == {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def test_taint_noexecute_counts_prefer_no_schedule_does_not() -> None:
    v = run(
        [
            node("soft", taints=[taint("spot", "true", "PreferNoSchedule")]),
            node("hard", taints=[taint("maintenance", "", "NoExecute")]),
            pod("p"),
        ]
    )
    assert first(v, "soft") is None
    assert first(v, "hard").reasons == ("node(s) had untolerated taint {maintenance: }",)


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}, False),
        ({"key": "dedicated", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_taint_toleration_equal_and_exists(toleration: dict[str, str], tolerated: bool) -> None:
    v = run([node("a", taints=[taint("dedicated", "gpu")]), pod("p", tolerations=[toleration])])
    assert v.fits is tolerated


def test_taint_first_untolerated_taint_in_node_order_is_reported() -> None:
    tol = [{"key": "a", "operator": "Exists"}]
    v = run(
        [node("n", taints=[taint("a", "1"), taint("b", "2"), taint("c", "3")]), pod("p", tolerations=tol)]
    )
    assert first(v, "n").reasons == ("node(s) had untolerated taint {b: 2}",)


def test_taint_distinct_taints_are_distinct_reasons_in_the_message() -> None:
    objs = [node(f"g{i}", taints=[taint("gpu", "true")]) for i in range(2)]
    objs += [node("m", taints=[taint("node-role.kubernetes.io/control-plane")]), pod("p")]
    v = run(objs)
    assert v.message.startswith(
        "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "2 node(s) had untolerated taint {gpu: true}. preemption: 0/3 nodes are available: "
        "3 Preemption is not helpful for scheduling."
    )
    assert dict(v.reason_counts) == {"untolerated-taint": 3}


# --- nodeaffinity/node_affinity.go ------------------------------------------------------


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


ZONED = [
    node("a", labels={"zone": "z1", "gen": "3"}),
    node("b", labels={"zone": "z2", "gen": "5"}),
    node("c", labels={"gen": "8"}),
]


@pytest.mark.parametrize(
    ("term", "fits"),
    [
        ({"matchExpressions": [expr("zone", "In", "z1", "z3")]}, {"a"}),
        ({"matchExpressions": [expr("zone", "NotIn", "z1")]}, {"b", "c"}),
        ({"matchExpressions": [expr("zone", "Exists")]}, {"a", "b"}),
        ({"matchExpressions": [expr("zone", "DoesNotExist")]}, {"c"}),
        ({"matchExpressions": [expr("gen", "Gt", "4")]}, {"b", "c"}),
        ({"matchExpressions": [expr("gen", "Lt", "5")]}, {"a"}),
        ({"matchExpressions": [expr("zone", "Exists"), expr("gen", "Gt", "4")]}, {"b"}),
        ({"matchFields": [expr("metadata.name", "NotIn", "a")]}, {"b", "c"}),
    ],
)
def test_node_affinity_operators(term: dict[str, Any], fits: set[str]) -> None:
    v = run([*ZONED, pod("p", affinity=affinity(term))])
    assert {n.node for n in v.nodes if n.fits} == fits
    for n in v.nodes:
        if not n.fits:
            assert (n.filters[0].plugin, n.filters[0].code, n.filters[0].reasons) == (
                "NodeAffinity",
                UNRES,
                ("node(s) didn't match Pod's node affinity/selector",),
            )


def test_node_affinity_terms_are_ored_and_node_selector_is_anded() -> None:
    t1 = {"matchExpressions": [expr("zone", "In", "z1")]}
    t2 = {"matchExpressions": [expr("zone", "In", "z2")]}
    v = run([*ZONED, pod("p", affinity=affinity(t1, t2))])
    assert {n.node for n in v.nodes if n.fits} == {"a", "b"}
    v = run([*ZONED, pod("p", affinity=affinity(t1, t2), node_selector={"gen": "5"})])
    assert {n.node for n in v.nodes if n.fits} == {"b"}


def test_node_affinity_empty_term_matches_nothing() -> None:
    v = run([*ZONED, pod("p", affinity=affinity({}))])
    assert v.feasible_nodes == 0


@pytest.mark.parametrize(
    ("version", "absent_reason"),
    [
        ("1.25", "node(s) didn't match Pod's node affinity/selector"),
        ("1.28", "node is filtered out by the prefilter result"),
        ("1.33", "node(s) didn't satisfy plugin(s) [NodeAffinity]"),
    ],
)
def test_node_affinity_match_fields_prefilter_result(version: str, absent_reason: str) -> None:
    """DaemonSet pods pin a node with matchFields metadata.name; nodes outside
    the PreFilterResult are reported without running the filters (schedule_one.go)."""
    term = {"matchFields": [expr("metadata.name", "In", "a")]}
    objs = [
        node("a", cpu="1"),
        node("b"),
        node("c"),
        pod("p", affinity=affinity(term), requests={"cpu": "2"}),
    ]
    v = run(objs, version=version)
    assert v.message.startswith(f"0/3 nodes are available: 1 Insufficient cpu, 2 {absent_reason}.")
    assert first(v, "b").code == UNRES
    assert v.preemption.message == (
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )


def test_node_affinity_conflicting_match_fields_is_a_prefilter_rejection() -> None:
    term = {"matchFields": [expr("metadata.name", "In", "a"), expr("metadata.name", "In", "b")]}
    v = run([*ZONED, pod("p", affinity=affinity(term))])
    assert v.prefilter is not None and v.prefilter.reasons == ("pod affinity terms conflict",)
    assert v.message.startswith("0/3 nodes are available: pod affinity terms conflict. preemption:")


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("1.19", "node(s) didn't match node selector"),
        ("1.20", "node(s) didn't match Pod's node affinity"),
        ("1.21", "node(s) didn't match Pod's node affinity/selector"),
    ],
)
def test_node_affinity_reason_by_version(version: str, reason: str) -> None:
    v = run([node("a"), pod("p", node_selector={"disk": "ssd"})], version=version)
    assert first(v, "a").reasons == (reason,)


# --- nodeports/node_ports.go ------------------------------------------------------------


def port(p: int, proto: str = "TCP", ip: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"containerPort": p, "hostPort": p, "protocol": proto}
    if ip:
        out["hostIP"] = ip
    return out


@pytest.mark.parametrize(
    ("used", "wanted", "conflict"),
    [
        (port(80), port(80), True),
        (port(80), port(81), False),
        (port(80, "TCP"), port(80, "UDP"), False),
        (port(80, ip="10.0.0.1"), port(80), True),  # wanted 0.0.0.0 collides with any IP
        (port(80), port(80, ip="10.0.0.1"), True),  # used 0.0.0.0 collides with a specific IP
        (port(80, ip="10.0.0.1"), port(80, ip="10.0.0.2"), False),
        (port(80, ip="10.0.0.1"), port(80, ip="10.0.0.1"), True),
    ],
)
def test_node_ports_conflicts(used: dict[str, Any], wanted: dict[str, Any], conflict: bool) -> None:
    v = run([node("a"), pod("old", node_name="a", host_ports=[used]), pod("p", host_ports=[wanted])])
    f = first(v, "a")
    if conflict:
        assert (f.plugin, f.code, f.reasons, f.reason_codes) == (
            "NodePorts",
            "Unschedulable",
            ("node(s) didn't have free ports for the requested pod ports",),
            ("node-ports",),
        )
    else:
        assert f is None


# --- schedulinggates/scheduling_gates.go -------------------------------------------------


def test_scheduling_gates_block_the_pod_before_any_filter() -> None:
    v = run([node("a"), pod("p", gates=["example.com/quota", "example.com/policy"])])
    assert not v.fits
    assert v.gated is not None
    assert (v.gated.plugin, v.gated.code, v.gated.reasons, v.gated.reason_codes) == (
        "SchedulingGates",
        UNRES,
        ("waiting for scheduling gates: [example.com/quota example.com/policy]",),
        ("scheduling-gated",),
    )
    assert v.message == "Scheduling is blocked due to non-empty scheduling gates"
    assert v.feasible_nodes == 1  # would fit once ungated
    assert not v.preemption.attempted


# --- ordering ------------------------------------------------------------------------------


def test_every_failing_filter_is_listed_in_plugin_order_and_the_first_is_counted() -> None:
    objs = [
        node("a", cpu="1", unschedulable=True, taints=[taint("x", "y")], labels={"zone": "z9"}),
        pod("p", requests={"cpu": "2"}, node_selector={"zone": "z1"}),
    ]
    v = run(objs)
    nv = v.node("a")
    assert nv is not None
    assert [f.plugin for f in nv.filters] == [
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
    ]
    assert dict(v.reasons) == {"node(s) were unschedulable": 1}
