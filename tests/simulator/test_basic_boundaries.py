"""The node-level filters at their boundaries (found by ``bench/mutation.py
analyzers/simulator/basic.py``): which node NodeName keeps, the PreFilter result
of several ``metadata.name`` terms, host port 1 and host IPs in the per-node path
that preemption's dry runs take (pkg/scheduler/framework/plugins/nodename,
nodeaffinity, nodeports; framework/types.go HostPortInfo.CheckConflict)."""

from __future__ import annotations

from typing import Any

from analyzers.simulator import simulate
from analyzers.simulator.basic import prefilter_node_names
from tests.simulator.builders import node, pod, pod_of, snapshot


def run(objs: list[dict[str, Any]], name: str = "p", version: str | None = "1.33"):  # type: ignore[no-untyped-def]
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, name), kube_version=version)


def test_node_name_keeps_exactly_the_named_node() -> None:
    # Only b has room: a pod bound to b by name fits, one bound to a or c does not.
    objs = [node("a", cpu="1"), node("b", cpu="4"), node("c", cpu="1")]
    for name, fits in (("a", False), ("b", True), ("c", False)):
        named = pod("p", requests={"cpu": "2"})
        named["spec"]["nodeName"] = name
        v = run([*objs, named])
        assert (v.message == "") is fits, (name, v.message)
        if not fits:
            assert v.message.startswith(
                "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match the requested node name."
            )


def test_the_prefilter_names_of_several_terms_are_their_union() -> None:
    terms = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b", "c"]}]},
    ]
    p = pod(
        "p",
        affinity={
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        },
    )
    snap = snapshot(node("a"), p)
    assert prefilter_node_names(pod_of(snap, "p")) == {"a", "b", "c"}


def port(number: int, ip: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"containerPort": 8000 + number, "hostPort": number, "protocol": "TCP"}
    if ip is not None:
        out["hostIP"] = ip
    return out


def test_host_port_1_is_a_port() -> None:
    objs = [
        node("a"),
        pod("holder", node_name="a", host_ports=[port(1)]),
        pod("p", host_ports=[port(1)]),
    ]
    assert run(objs).message.startswith("0/1 nodes are available: 1 node(s) didn't have free ports")


def test_preemption_frees_a_port_held_on_every_ip_for_a_pod_asking_one_ip() -> None:
    """The per-node path (preemption's dry run): a lower-priority pod holding 8080 on every
    address (no hostIP) conflicts with a pod asking 8080 on 10.0.0.1; evicting it is needed."""
    objs = [
        node("a"),
        pod("holder", node_name="a", host_ports=[port(8080)], priority=0),
        pod("p", host_ports=[port(8080, "10.0.0.1")], priority=100),
    ]
    v = run(objs)
    assert v.message.startswith("0/1 nodes are available: 1 node(s) didn't have free ports")
    assert dict(v.preemption.victims) == {"a": (("default", "holder"),)}


def test_preemption_keeps_a_pod_whose_port_does_not_conflict() -> None:
    """Only the holder of the conflicting port goes; the one on another IP is reprieved."""
    objs = [
        node("a"),
        pod("other-ip", node_name="a", host_ports=[port(8080, "10.0.0.2")], priority=0),
        pod("holder", node_name="a", host_ports=[port(8080, "10.0.0.1")], priority=0),
        pod("p", host_ports=[port(8080, "10.0.0.1")], priority=100),
    ]
    v = run(objs)
    assert dict(v.preemption.victims) == {"a": (("default", "holder"),)}
