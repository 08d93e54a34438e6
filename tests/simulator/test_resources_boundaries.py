"""NodeResourcesFit at its boundaries (kubernetes v1.35.4,
pkg/scheduler/framework/plugins/noderesources/fit.go, fitsRequest): ``len(pods)+1 >
allowedPodNumber`` is "Too many pods"; a request fails when it exceeds allocatable minus the
requests of the node's pods, and is Unresolvable only when it exceeds the whole allocatable
(``podRequest > allocatable``, 1.34+); a zero scalar request is skipped. Preemption's dry run
(SelectVictimsOnNode) evaluates the same per node with the victims removed."""

from __future__ import annotations

from typing import Any

from analyzers.simulator import simulate
from analyzers.simulator.results import PodVerdict
from tests.simulator.builders import node, pod, pod_of, snapshot

U, UU = "Unschedulable", "UnschedulableAndUnresolvable"


def run(*objs: dict[str, Any], version: str = "1.35") -> PodVerdict:
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, "p"), kube_version=version)


def rows(v: PodVerdict, i: int = 0) -> list[dict[str, Any]]:
    [failure] = v.node_at(i).filters
    return [dict(r) for r in failure.detail["resources"]]


def test_a_zero_scalar_request_is_not_checked() -> None:
    v = run(node("a"), pod("p", requests={"nvidia.com/gpu": "0"}))
    assert v.fits


def test_the_pod_limit_counts_the_incoming_pod() -> None:
    one_free = run(node("a", pods="2"), pod("x", node_name="a"), pod("p"))
    assert one_free.fits
    full = run(node("a", pods="2"), pod("x", node_name="a"), pod("y", node_name="a"), pod("p"))
    assert full.message.startswith("0/1 nodes are available: 1 Too many pods.")
    assert full.node_at(0).filters[0].code == U
    assert rows(full) == [{"resource": "pods", "requested": 1, "used": 2, "free": 0, "allocatable": 2}]


def test_one_victim_frees_a_pod_slot() -> None:
    v = run(
        node("a", pods="2"),
        pod("older", node_name="a", priority=0, created="2024-01-01T00:00:00Z"),
        pod("newer", node_name="a", priority=0, created="2024-01-02T00:00:00Z"),
        pod("p", priority=100),
    )
    # The more important (earlier started) pod is reprieved first; one slot is enough.
    assert dict(v.preemption.victims) == {"a": (("default", "newer"),)}


def test_a_request_equal_to_the_whole_allocatable_may_still_be_freed() -> None:
    objs = [node("a", cpu="2"), pod("low", node_name="a", requests={"cpu": "1"}, priority=0)]
    equal = run(*objs, pod("p", requests={"cpu": "2"}, priority=100))
    assert equal.node_at(0).filters[0].code == U
    assert dict(equal.preemption.victims) == {"a": (("default", "low"),)}
    larger = run(*objs, pod("p", requests={"cpu": "3"}, priority=100))
    assert larger.node_at(0).filters[0].code == UU
    assert larger.preemption.candidates == ()


def test_a_resource_no_node_has_reads_as_zero_allocatable() -> None:
    v = run(node("a"), pod("p", requests={"example.com/fpga": "1"}))
    assert v.message.startswith("0/1 nodes are available: 1 Insufficient example.com/fpga.")
    assert rows(v) == [
        {"resource": "example.com/fpga", "requested": 1, "used": 0, "free": 0, "allocatable": 0}
    ]


def test_a_victim_without_the_resource_frees_none_of_it() -> None:
    gpu = "nvidia.com/gpu"
    v = run(
        node("a", extra={gpu: "2"}),
        pod("keeper", node_name="a", requests={gpu: "1"}, priority=1000),
        # "holder" is older (reprieved first) but holds the GPU the pod needs; "idle" holds none.
        pod("holder", node_name="a", requests={gpu: "1"}, priority=0, created="2024-01-01T00:00:00Z"),
        pod("idle", node_name="a", requests={"cpu": "1"}, priority=0, created="2024-01-02T00:00:00Z"),
        pod("p", requests={gpu: "1"}, priority=100),
    )
    assert dict(v.preemption.victims) == {"a": (("default", "holder"),)}


def test_a_node_at_its_pod_limit_elsewhere_does_not_hide_a_candidate() -> None:
    v = run(
        node("a", cpu="1"),
        pod("low", node_name="a", requests={"cpu": "1"}, priority=0),
        node("b", pods="1"),
        pod("important", node_name="b", priority=1000),
        pod("p", requests={"cpu": "1"}, priority=100),
    )
    assert v.message.startswith("0/2 nodes are available: 1 Insufficient cpu, 1 Too many pods.")
    assert dict(v.preemption.victims) == {"a": (("default", "low"),)}


def test_victims_of_two_lower_priorities_are_summed() -> None:
    v = run(
        node("a", pods="2"),
        pod("one", node_name="a", priority=1),
        pod("two", node_name="a", priority=2),
        pod("p", priority=100),
    )
    # Both together free two slots; one is enough, and the more important one is reprieved.
    assert dict(v.preemption.victims) == {"a": (("default", "one"),)}
