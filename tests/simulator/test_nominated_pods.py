"""Nominated pods hold room: RunFilterPluginsWithNominatedPods / addGENominatedPods
(pkg/scheduler/framework/runtime/framework.go, v1.35.4 and v1.37.2).

A pod waiting with ``status.nominatedNodeName`` (a preemptor whose victims are still
terminating) counts on that node when kube-scheduler filters pods of equal or lower
priority, and when it judges their preemption; a pod of higher priority ignores it.
"""

from __future__ import annotations

from analyzers.simulator import simulate
from tests.simulator.builders import node, pod, pod_of, snapshot

V = "1.35.4"


def _cluster(*extra: dict) -> list[dict]:
    """One node of 8 CPUs, 600m free: its 7400m victim is terminating, and the 7951m
    preemptor that evicted it (priority 1000) is nominated there."""
    return [
        node("n-b", cpu="8"),
        pod("victim", node_name="n-b", requests={"cpu": "7400m"}, priority=0, deleting=True),
        pod("preemptor", requests={"cpu": "7951m"}, priority=1000, nominated="n-b"),
        *extra,
    ]


def test_a_nominated_pod_takes_the_room_it_was_promised() -> None:
    snap = snapshot(*_cluster(pod("small", requests={"cpu": "600m"}, priority=1000)))
    verdict = simulate(snap, pod_of(snap, "small"), kube_version=V)
    assert not verdict.fits
    assert verdict.message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    assert verdict.node("n-b").filters[0].reasons == ("Insufficient cpu",)


def test_a_higher_priority_pod_ignores_a_lower_nomination() -> None:
    snap = snapshot(*_cluster(pod("small", requests={"cpu": "600m"}, priority=5000)))
    verdict = simulate(snap, pod_of(snap, "small"), kube_version=V)
    assert verdict.fits


def test_equal_priority_counts_and_the_pod_itself_does_not() -> None:
    objs = [
        node("n-b", cpu="8"),
        pod("preemptor", requests={"cpu": "7951m"}, priority=100, nominated="n-b"),
        pod("peer", requests={"cpu": "600m"}, priority=100),
    ]
    snap = snapshot(*objs)
    assert not simulate(snap, pod_of(snap, "peer"), kube_version=V).fits
    # The nominated pod is not in its own way.
    assert simulate(snap, pod_of(snap, "preemptor"), kube_version=V).fits


def test_a_nomination_to_an_unknown_node_or_another_scheduler_holds_nothing() -> None:
    other = pod("other", requests={"cpu": "7951m"}, priority=100, nominated="n-b")
    other["spec"]["schedulerName"] = "volcano"
    objs = [
        node("n-b", cpu="8"),
        other,
        pod("ghost", requests={"cpu": "7951m"}, priority=100, nominated="n-gone"),
        pod("peer", requests={"cpu": "600m"}, priority=100),
    ]
    snap = snapshot(*objs)
    assert simulate(snap, pod_of(snap, "peer"), kube_version=V).fits


def test_the_second_pass_without_nominated_pods_must_pass_too() -> None:
    """Pod affinity satisfied only by the nominated pod: the first pass (with it) passes,
    the second (without it) fails -- the node is rejected with the second pass's reason."""
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    objs = [
        node("n-a", cpu="8"),
        node("n-b", cpu="8"),
        pod("db", node_name="n-a", labels={"app": "db"}, priority=0),
        pod("db-next", requests={"cpu": "1"}, labels={"app": "db"}, priority=100, nominated="n-b"),
        pod("web", requests={"cpu": "1"}, priority=100, affinity=affinity),
    ]
    snap = snapshot(*objs)
    verdict = simulate(snap, pod_of(snap, "web"), kube_version=V)
    assert verdict.fits and verdict.feasible_nodes == 1
    assert not verdict.node("n-b").fits
    assert verdict.node("n-b").filters[0].plugin == "InterPodAffinity"


def test_anti_affinity_of_the_nominated_pod_binds_its_node_only() -> None:
    """The nominated pod's required anti-affinity (zone) rejects the probe on its own
    node, but upstream adds it to that node alone: another node of the zone is fine.
    (A bound pod's matching anti-affinity in another zone keeps InterPodAffinity's
    PreFilter from skipping.)"""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "topologyKey": "topology.kubernetes.io/zone",
                }
            ]
        }
    }
    zone = {"topology.kubernetes.io/zone": "za"}
    objs = [
        node("n-a", labels=zone),
        node("n-b", labels=zone),
        node("n-c", labels={"topology.kubernetes.io/zone": "zb"}),
        pod("guard", node_name="n-c", affinity=anti, labels={"app": "db"}, priority=0),
        pod("lonely", affinity=anti, labels={"app": "db"}, priority=100, nominated="n-b"),
        pod("web", labels={"app": "web"}, priority=100),
    ]
    snap = snapshot(*objs)
    verdict = simulate(snap, pod_of(snap, "web"), kube_version=V)
    assert verdict.fits and verdict.feasible_nodes == 1
    assert verdict.node("n-a").fits and not verdict.node("n-b").fits
    assert verdict.node("n-b").filters[0].plugin == "InterPodAffinity"


def test_preemption_counts_the_nominated_pod_after_evicting_victims() -> None:
    """n-b: a 5-CPU low-priority victim and a 4.5-CPU preemptor nominated there. A 4-CPU
    pod of equal priority to the preemptor cannot be helped by evicting the victim: the
    nominated pod takes the freed room (8 - 4.5 < 4). Upstream: SelectVictimsOnNode calls
    RunFilterPluginsWithNominatedPods with the victims removed."""
    objs = [
        node("n-b", cpu="8"),
        pod("victim", node_name="n-b", requests={"cpu": "5"}, priority=0),
        pod("preemptor", requests={"cpu": "4500m"}, priority=100, nominated="n-b"),
        pod("next", requests={"cpu": "4"}, priority=100),
    ]
    snap = snapshot(*objs)
    verdict = simulate(snap, pod_of(snap, "next"), kube_version=V)
    assert not verdict.fits
    assert verdict.message == (
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
        "preemption: 0/1 nodes are available: 1 Insufficient cpu."
    )
    # Without the nomination the victim's eviction would make room: a candidate.
    objs[2] = pod("preemptor", requests={"cpu": "4500m"}, priority=100)
    snap = snapshot(*objs)
    verdict = simulate(snap, pod_of(snap, "next"), kube_version=V)
    assert verdict.preemption.candidates == ("n-b",)


def test_a_skipped_inter_pod_affinity_ignores_a_nominated_pods_anti_affinity() -> None:
    """Found by the differential run on v1.37.2 (seed 5151, c19-p7): InterPodAffinity's
    PreFilter sees no existing anti-affinity term matching the pod and the pod has no
    term of its own, so it returns Skip (interpodaffinity/filtering.go, v1.35.4 and
    v1.37.2); the nominated preemptor's hostname anti-affinity against the pod's app is
    then never checked, and the pod fits the preemptor's node."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    objs = [
        node("n0"),
        pod("preemptor", labels={"app": "db"}, affinity=anti, priority=500, nominated="n0"),
        pod("probe", labels={"app": "db"}, priority=10),
    ]
    snap = snapshot(*objs)
    assert simulate(snap, pod_of(snap, "probe"), kube_version="1.37.2").fits
    # With an existing pod's matching anti-affinity bound somewhere, PreFilter does not
    # skip, and the nominated pod's term counts on its node.
    objs.append(node("n1"))
    objs.append(pod("bound-anti", node_name="n1", labels={"app": "db"}, affinity=anti, priority=0))
    snap = snapshot(*objs)
    verdict = simulate(snap, pod_of(snap, "probe"), kube_version="1.37.2")
    assert not verdict.fits
    assert verdict.node("n0").filters[0].plugin == "InterPodAffinity"
