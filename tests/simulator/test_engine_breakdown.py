"""A verdict's per-node questions (failing, node_at, reason_codes_on, first_reasons) on small
clusters whose answers are known (kube-scheduler 1.33's wording), at the engine's boundaries: a node failing several filters
(kube-scheduler's RunFilterPlugins stops at the first, pkg/scheduler/framework/runtime/framework.go,
so that one is what the node reports), a PreFilter rejection (it rejects every node), node
verdicts asked for before and after the whole breakdown, and a plugin whose reasons vary on more
than 64 nodes. (test_breakdown.py checks the same answers over every golden scenario.)"""

from __future__ import annotations

from analyzers.simulator import simulate
from analyzers.simulator.results import PodVerdict
from tests.simulator.builders import node, nodes, pod, pod_of, snapshot, taint

TAINT = "node(s) had untolerated taint {dedicated: gpu}"
CORDONED = "node(s) were unschedulable"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
CPU, MEMORY = "Insufficient cpu", "Insufficient memory"
RESOURCE = "insufficient-resource"


def mixed() -> PodVerdict:
    """n0 tainted; n1 cordoned and tainted; n2 wrong disk and too small; n3 too little cpu;
    n4 too little memory; n5 too little of both. No node fits."""
    snap = snapshot(
        node("n0", labels={"disk": "ssd"}, taints=[taint("dedicated", "gpu")]),
        node("n1", labels={"disk": "ssd"}, taints=[taint("dedicated", "gpu")], unschedulable=True),
        node("n2", cpu="1", labels={"disk": "hdd"}),
        node("n3", cpu="1", labels={"disk": "ssd"}),
        node("n4", memory="4Gi", labels={"disk": "ssd"}),
        node("n5", cpu="1", memory="4Gi", labels={"disk": "ssd"}),
        pod("p", requests={"cpu": "2", "memory": "8Gi"}, node_selector={"disk": "ssd"}),
    )
    return simulate(snap, pod_of(snap, "p"), kube_version="1.33")


def bit(*indexes: int) -> int:
    return sum(1 << i for i in indexes)


EVERY = bit(0, 1, 2, 3, 4, 5)


def test_each_node_reports_its_first_failing_filter_in_the_default_order() -> None:
    v = mixed()
    assert v.message.startswith(
        f"0/6 nodes are available: 1 {AFFINITY}, 1 {TAINT}, 1 {CORDONED}, 2 {CPU}, 2 {MEMORY}."
    )
    assert dict(v.failing) == {
        "NodeUnschedulable": bit(1),
        "TaintToleration": bit(0, 1),
        "NodeAffinity": bit(2),
        "NodeResourcesFit": bit(2, 3, 4, 5),
    }
    assert v.first_reasons(EVERY) == {
        (CORDONED,): bit(1),
        (TAINT,): bit(0),
        (AFFINITY,): bit(2),
        (CPU,): bit(3),
        (MEMORY,): bit(4),
        (CPU, MEMORY): bit(5),
    }
    # Only the nodes asked about, and nothing for none.
    assert v.first_reasons(bit(1, 5)) == {(CORDONED,): bit(1), (CPU, MEMORY): bit(5)}
    assert v.first_reasons(0) == {}


def test_a_plugin_tallies_every_node_it_rejects_not_only_those_it_rejects_first() -> None:
    v = mixed()
    fit = "NodeResourcesFit"
    assert v.reason_codes_on(fit, EVERY) == {(RESOURCE,): 3, (RESOURCE, RESOURCE): 1}
    assert v.reason_codes_on(fit, bit(2, 5)) == {(RESOURCE,): 1, (RESOURCE, RESOURCE): 1}
    assert v.reason_codes_on("TaintToleration", EVERY) == {("untolerated-taint",): 2}
    assert v.reason_codes_on("TaintToleration", bit(2, 3)) == {}
    assert v.reason_codes_on("InterPodAffinity", EVERY) == {}


def test_one_node_alone_equals_the_same_node_of_the_whole_breakdown() -> None:
    alone = mixed()
    one = [alone.node_at(i) for i in range(6)]
    assert [f.plugin for f in one[1].filters] == ["NodeUnschedulable", "TaintToleration"]
    assert [f.plugin for f in one[2].filters] == ["NodeAffinity", "NodeResourcesFit"]
    assert one[5].filters[0].reasons == (CPU, MEMORY) and not one[5].fits
    assert one[1].first is not None and one[1].first.plugin == "NodeUnschedulable"
    everything = mixed()
    assert everything.nodes == tuple(one)
    assert [everything.node_at(i) for i in range(6)] == one  # read from the built breakdown
    assert everything.node("n4") == one[4] and everything.node("absent") is None
    as_dict = everything.as_dict()
    assert (as_dict["namespace"], as_dict["name"]) == ("default", "p")
    assert as_dict["nodes"][1]["filters"][0]["plugin"] == "NodeUnschedulable"


def test_a_prefilter_rejection_rejects_every_node_with_its_own_reason() -> None:
    snap = snapshot(*nodes(3), pod("p", pvcs=["data"]))
    v = simulate(snap, pod_of(snap, "p"), kube_version="1.33")
    # VolumeRestrictions' PreFilter is the first to look the claim up (volumerestrictions/volume_restrictions.go).
    assert v.prefilter is not None and v.prefilter.plugin == "VolumeRestrictions"
    reason = v.prefilter.reasons
    assert reason == ('persistentvolumeclaim "data" not found',)
    assert v.message.startswith(f"0/3 nodes are available: {reason[0]}.")
    assert dict(v.failing) == {"VolumeRestrictions": bit(0, 1, 2)}
    assert v.first_reasons(bit(0, 2)) == {reason: bit(0, 2)}
    assert v.first_reasons(0) == {}
    assert v.reason_codes_on("VolumeRestrictions", bit(0, 2)) == {v.prefilter.reason_codes: 2}
    assert v.reason_codes_on("VolumeRestrictions", 0) == {}
    assert v.reason_codes_on("NodeResourcesFit", bit(0, 2)) == {}
    assert all(n.filters == (v.prefilter,) and not n.fits for n in v.nodes)
    assert v.node_at(1).filters[0] is v.prefilter


def test_reasons_that_vary_over_more_than_64_nodes_are_each_counted_once() -> None:
    # 35 nodes short of cpu, 35 short of memory, 2 short of both: the resources plugin's
    # reasons differ per node (no shared group), past the 64 nodes a word holds.
    snap = snapshot(
        *nodes(35, "c", cpu="1"),
        *nodes(35, "m", memory="4Gi"),
        *nodes(2, "b", cpu="1", memory="4Gi"),
        node("t", taints=[taint("dedicated", "gpu")], cpu="1"),
        pod("p", requests={"cpu": "2", "memory": "8Gi"}),
    )
    v = simulate(snap, pod_of(snap, "p"), kube_version="1.33")
    assert v.message.startswith(f"0/73 nodes are available: 1 {TAINT}, 37 {CPU}, 37 {MEMORY}.")
    assert dict(v.reasons) == {CPU: 37, MEMORY: 37, TAINT: 1}
    assert v.reason_counts[RESOURCE] == 74
    everything = (1 << 73) - 1
    assert v.reason_codes_on("NodeResourcesFit", everything) == {(RESOURCE,): 71, (RESOURCE, RESOURCE): 2}
    firsts = v.first_reasons(everything)
    assert {k: c.bit_count() for k, c in firsts.items()} == {
        (CPU,): 35,
        (MEMORY,): 35,
        (CPU, MEMORY): 2,
        (TAINT,): 1,
    }
