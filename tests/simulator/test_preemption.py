"""DefaultPreemption as PostFilter (pkg/scheduler/framework/plugins/defaultpreemption/
default_preemption.go, pkg/scheduler/framework/preemption/preemption.go): the split
between "No preemption victims found for incoming pod" and "Preemption is not
helpful for scheduling", candidates and victims, eligibility."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.simulator import simulate
from tests.simulator.builders import node, pod, pod_of, snapshot, taint


def run(objs: list[dict[str, Any]], name: str = "p", version: str | None = None):  # type: ignore[no-untyped-def]
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, name), kube_version=version)


def priority_class(name: str, value: int, policy: str = "PreemptLowerPriority") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": policy,
    }


def test_candidate_found_means_no_preemption_clause() -> None:
    objs = [
        node("a", cpu="2"),
        pod("low", node_name="a", requests={"cpu": "2"}, priority=0),
        pod("p", requests={"cpu": "1"}, priority=1000),
    ]
    v = run(objs)
    assert v.message == "0/1 nodes are available: 1 Insufficient cpu."
    assert v.preemption.candidates == ("a",)
    assert dict(v.preemption.victims) == {"a": (("default", "low"),)}
    assert v.preemption.message == ""


def test_victims_are_only_the_pods_that_must_go_more_important_ones_are_reprieved() -> None:
    objs = [
        node("a", cpu="3"),
        pod("keep", node_name="a", requests={"cpu": "1"}, priority=50),
        pod("evict", node_name="a", requests={"cpu": "1"}, priority=10),
        pod("same", node_name="a", requests={"cpu": "1"}, priority=100),
        pod("p", requests={"cpu": "1"}, priority=100),
    ]
    v = run(objs)
    # Both lower pods are removed first; "keep" (more important) is reprieved, "evict" is not needed... one of
    # them must go to free 1 cpu: reprieving "keep" first leaves "evict" as the victim.
    assert dict(v.preemption.victims) == {"a": (("default", "evict"),)}


def test_still_not_fitting_after_evictions_prints_the_filter_reason() -> None:
    objs = [
        node("a", cpu="2"),
        node("b", cpu="2"),
        pod("x", node_name="a", requests={"cpu": "1"}, priority=-1),
        pod("y", node_name="b", requests={"cpu": "1"}, priority=-1),
        pod("p", requests={"cpu": "3"}),
    ]
    v = run(objs, version="1.33")
    assert v.preemption.message == "preemption: 0/2 nodes are available: 2 Insufficient cpu."
    assert dict(v.preemption.reason_counts) == {"insufficient-resource": 2}


def test_split_no_victims_versus_not_helpful() -> None:
    objs = [
        node("full", cpu="1"),
        node("tainted", taints=[taint("dedicated", "db")]),
        pod("peer", node_name="full", requests={"cpu": "1"}),
        pod("p", requests={"cpu": "1"}),
    ]
    v = run(objs)
    assert v.message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: db}. preemption: "
        "0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    )


def test_preemption_policy_never_is_not_eligible() -> None:
    objs = [
        node("a", cpu="1"),
        pod("low", node_name="a", requests={"cpu": "1"}, priority=-5),
        pod("p", requests={"cpu": "1"}, preemption_policy="Never"),
    ]
    v = run(objs)
    assert not v.preemption.eligible
    assert (
        v.message
        == "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )
    assert dict(v.preemption.reason_counts) == {"preemption-not-eligible": 1}
    assert run(objs, version="1.27").message.endswith("preemptionPolicy=Never..")


def test_preemption_policy_from_the_priority_class() -> None:
    objs = [
        node("a", cpu="1"),
        priority_class("batch", 10, "Never"),
        pod("low", node_name="a", requests={"cpu": "1"}, priority=-5),
        pod("p", requests={"cpu": "1"}, priority_class="batch"),
    ]
    assert not run(objs).preemption.eligible


def _leaving(condition: dict[str, str] | None) -> dict[str, Any]:
    leaving = pod("leaving", node_name="a", requests={"cpu": "1"}, priority=-5, deleting=True)
    if condition is not None:
        leaving.setdefault("status", {}).setdefault("conditions", []).append(
            {"type": "DisruptionTarget", "status": "True", **condition}
        )
    return leaving


PREEMPTED = {"reason": "PreemptionByScheduler", "message": "Kubernetes default scheduler: preempting"}
EVICTED = {"reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}


@pytest.mark.parametrize(
    ("version", "condition", "blocks"),
    [
        # <= 1.26: any terminating lower-priority pod (default_preemption.go v1.26.15).
        ("1.26", None, True),
        ("1.26", EVICTED, True),
        # 1.27+: podTerminatingByPreemption -- only the scheduler's own victims (v1.27.16 .. v1.35.4).
        ("1.27", PREEMPTED, True),
        ("1.27", None, False),
        ("1.35", PREEMPTED, True),
        ("1.35", EVICTED, False),
        ("1.35", None, False),
    ],
)
def test_a_terminating_pod_on_the_nominated_node_blocks_more_preemption_by_version(
    version: str, condition: dict[str, str] | None, blocks: bool
) -> None:
    objs = [node("a", cpu="1"), _leaving(condition), pod("p", requests={"cpu": "1"}, nominated="a")]
    v = run(objs, version=version)
    blocked = v.preemption.message.endswith(
        "preemption: not eligible due to a terminating pod on the nominated node."
    )
    assert blocked is blocks, v.preemption.message


def test_preemption_dry_run_with_inter_pod_anti_affinity() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    objs = [
        node("a"),
        node("b"),
        pod("w-low", node_name="a", labels={"app": "web"}, priority=-1),
        pod("w-same", node_name="b", labels={"app": "web"}),
        pod("p", labels={"app": "web"}, affinity=anti),
    ]
    v = run(objs)
    assert v.preemption.candidates == ("a",)
    assert dict(v.preemption.victims) == {"a": (("default", "w-low"),)}
    assert v.message == "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."


def test_pdb_violating_victims_are_counted() -> None:
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        "status": {"disruptionsAllowed": 0},
    }
    objs = [
        node("a", cpu="1"),
        node("b", cpu="1"),
        pdb,
        pod("db-0", node_name="a", requests={"cpu": "1"}, labels={"app": "db"}, priority=-1),
        pod("cache", node_name="b", requests={"cpu": "1"}, labels={"app": "cache"}, priority=-1),
        pod("p", requests={"cpu": "1"}),
    ]
    v = run(objs)
    # Candidates that violate no PDB come first.
    assert v.preemption.candidates == ("b", "a")


def test_no_clause_before_1_24() -> None:
    objs = [
        node("a", cpu="1"),
        pod("peer", node_name="a", requests={"cpu": "1"}),
        pod("p", requests={"cpu": "1"}),
    ]
    v = run(objs, version="1.23")
    assert v.message == "0/1 nodes are available: 1 Insufficient cpu."
    assert not v.preemption.attempted


# --- boundaries: only pods of *lower* priority are ever victims ---------------------------


def test_a_node_whose_pods_all_have_the_incoming_priority_has_no_victims() -> None:
    objs = [
        node("a", cpu="2"),
        pod("peer-1", node_name="a", requests={"cpu": "1"}, priority=100),
        pod("peer-2", node_name="a", requests={"cpu": "1"}, priority=100),
        pod("p", requests={"cpu": "1"}, priority=100),
    ]
    v = run(objs, version="1.33")
    assert v.preemption.candidates == ()
    assert v.preemption.message == (
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    # One priority point more and both peers are lower: one of them is the victim.
    objs[-1] = pod("p", requests={"cpu": "1"}, priority=101)
    assert run(objs, version="1.33").preemption.candidates == ("a",)


def test_an_equal_priority_pod_holding_the_port_is_never_a_victim() -> None:
    """Evicting the lower pod frees cpu but not the port the equal-priority pod holds;
    the node is reported with the port filter, and no candidate is offered (were the
    equal-priority pod a victim, the node would be a candidate)."""
    port80 = {"containerPort": 80, "hostPort": 80, "protocol": "TCP"}
    objs = [
        node("a", cpu="2"),
        pod("holder", node_name="a", requests={"cpu": "500m"}, priority=100, host_ports=[port80]),
        pod("low", node_name="a", requests={"cpu": "1500m"}, priority=1),
        pod("p", requests={"cpu": "1"}, priority=100, host_ports=[port80]),
    ]
    v = run(objs, version="1.33")
    assert v.preemption.candidates == () and dict(v.preemption.victims) == {}
    assert v.preemption.message == (
        "preemption: 0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    )


def test_an_equal_priority_pod_holding_the_resource_is_never_a_victim() -> None:
    objs = [
        node("a", cpu="2"),
        pod("holder", node_name="a", requests={"cpu": "1500m"}, priority=100),
        pod("low", node_name="a", requests={"cpu": "500m"}, priority=1),
        pod("p", requests={"cpu": "1"}, priority=100),
    ]
    v = run(objs, version="1.33")
    assert v.preemption.candidates == () and dict(v.preemption.victims) == {}
    assert v.preemption.message == "preemption: 0/1 nodes are available: 1 Insufficient cpu."
    # With a host port the per-node path (not the bit-set triage) decides; same answer.
    port81 = {"containerPort": 81, "hostPort": 81, "protocol": "TCP"}
    objs[-1] = pod("p", requests={"cpu": "1"}, priority=100, host_ports=[port81])
    v = run(objs, version="1.33")
    assert v.preemption.candidates == ()
    assert v.preemption.message == "preemption: 0/1 nodes are available: 1 Insufficient cpu."


def test_a_victims_host_port_is_free_in_the_dry_run_even_when_a_pod_that_stays_shares_it() -> None:
    """NodeInfo.UsedPorts is a set (kube-scheduler framework/types.go HostPortInfo.Remove,
    v0.35.4): SelectVictimsOnNode removing the low pod frees 8080 although "high" (bound
    without the scheduler) holds it too, so the dry run finds victims -- as the real
    kube-scheduler v1.35.4 did in the differential run (seed 919651)."""
    port = {"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}
    objs = [
        node("a", cpu="4"),
        pod("low", node_name="a", host_ports=[port], priority=0),
        pod("high", node_name="a", host_ports=[port], priority=1000),
        pod("p", host_ports=[port], priority=10),
    ]
    v = run(objs)
    assert v.message.startswith("0/1 nodes are available: 1 node(s) didn't have free ports")
    assert dict(v.preemption.victims) == {"a": (("default", "low"),)}
