"""One volume, one claim: FindPodVolumes/findMatchingVolumes
(pkg/scheduler/framework/plugins/volumebinding/binder.go, v1.35.4 and v1.37.2) bind a
pod's WaitForFirstConsumer claims smallest first, each to the smallest matching volume
that FindMatchingVolume (component-helpers/storage/volume/pv_helpers.go) finds with
the volumes already chosen for the pod's other claims excluded."""

from __future__ import annotations

from typing import Any

from analyzers.simulator import simulate
from analyzers.simulator.results import PodVerdict
from tests.simulator.builders import node, pod, pod_of, snapshot
from tests.simulator.test_filters_resources_volumes import pv, pvc, sc

BIND = "node(s) didn't find available persistent volumes to bind"
LOCAL = sc("local", "kubernetes.io/no-provisioner")


def run(*objs: dict[str, Any]) -> PodVerdict:
    snap = snapshot(node("a"), node("b"), *objs)
    return simulate(snap, pod_of(snap, "p"), kube_version="1.35.4")


def fitting(v: PodVerdict) -> set[str]:
    return {n.node for n in v.nodes if n.fits}


def test_two_claims_cannot_share_one_volume() -> None:
    v = run(
        LOCAL,
        pvc("data", sc="local"),
        pvc("logs", sc="local"),
        pv("pv-a", sc="local", node_name="a"),
        pod("p", pvcs=["data", "logs"]),
    )
    assert not v.fits
    assert v.message.startswith(f"0/2 nodes are available: 2 {BIND}.")
    # Unresolvable everywhere: no preemption is offered.
    assert not v.preemption.candidates
    assert "2 Preemption is not helpful for scheduling" in v.message


def test_two_volumes_on_one_node_serve_two_claims_there_only() -> None:
    v = run(
        LOCAL,
        pvc("data", sc="local"),
        pvc("logs", sc="local"),
        pv("pv-a1", sc="local", node_name="a"),
        pv("pv-a2", sc="local", node_name="a"),
        pv("pv-b1", sc="local", node_name="b"),
        pod("p", pvcs=["data", "logs"]),
    )
    assert fitting(v) == {"a"}


def test_the_smallest_claim_takes_the_smallest_volume_first() -> None:
    """A 5Gi and a 20Gi claim, volumes of 10Gi and 30Gi on node a: sorted by size, the
    5Gi claim takes the 10Gi volume and the 20Gi claim the 30Gi one. Listed the other
    way round on node b (the 20Gi claim first in the pod): the same sort, so the same fit;
    and a 10Gi + 10Gi pair of volumes cannot serve the 20Gi claim."""
    v = run(
        LOCAL,
        pvc("big", sc="local", size="20Gi"),
        pvc("small", sc="local", size="5Gi"),
        pv("a-10", sc="local", node_name="a", size="10Gi"),
        pv("a-30", sc="local", node_name="a", size="30Gi"),
        pv("b-10", sc="local", node_name="b", size="10Gi"),
        pv("b-10x", sc="local", node_name="b", size="10Gi"),
        pod("p", pvcs=["big", "small"]),
    )
    assert fitting(v) == {"a"}


def test_a_greedy_smallest_choice_can_leave_the_bigger_claim_without_a_volume() -> None:
    """Upstream is greedy: the 5Gi claim takes the smallest volume that fits it (20Gi,
    smaller than 30Gi); the 25Gi claim then has the 30Gi one. With volumes 30Gi and 20Gi
    where the 20Gi one lacks the claim's access mode, the 5Gi claim takes the 30Gi one
    and the 25Gi claim finds nothing."""
    v = run(
        LOCAL,
        pvc("small", sc="local", size="5Gi"),
        pvc("big", sc="local", size="25Gi"),
        pv("a-20", sc="local", node_name="a", size="20Gi"),
        pv("a-30", sc="local", node_name="a", size="30Gi"),
        pod("p", pvcs=["small", "big"]),
    )
    assert fitting(v) == {"a"}
    rwx = pv("a-20", sc="local", node_name="a", size="20Gi")
    rwx["spec"]["accessModes"] = ["ReadWriteMany"]
    v = run(
        LOCAL,
        pvc("small", sc="local", size="5Gi"),
        pvc("big", sc="local", size="25Gi"),
        rwx,
        pv("a-30", sc="local", node_name="a", size="30Gi"),
        pod("p", pvcs=["small", "big"]),
    )
    assert fitting(v) == set()


def test_an_unmatched_claim_falls_back_to_provisioning() -> None:
    """A claim left without a volume is provisioned when its class has a provisioner
    (checkVolumeProvisions); the local class has none."""
    csi = sc("csi", "example.com/csi")
    v = run(
        LOCAL,
        csi,
        pvc("data", sc="local"),
        pvc("scratch", sc="csi"),
        pv("pv-a", sc="local", node_name="a"),
        pod("p", pvcs=["data", "scratch"]),
    )
    assert fitting(v) == {"a"}


def test_a_volume_pre_bound_to_the_claim_decides_alone() -> None:
    """FindMatchingVolume returns a volume whose claimRef names the claim, or nothing
    when its node affinity excludes the node -- even if another volume would match."""
    v = run(
        LOCAL,
        pvc("data", sc="local"),
        pv("mine-on-a", sc="local", node_name="a", claim="data"),
        pv("free-on-b", sc="local", node_name="b"),
        pod("p", pvcs=["data"]),
    )
    assert fitting(v) == {"a"}
