"""VolumeBinding at its boundaries (kubernetes v1.35.4,
pkg/scheduler/framework/plugins/volumebinding/binder.go): FindPodVolumes appends every reason a
node fails with (node conflict, then bind conflict, then PV not exist), a claim with
``spec.volumeName`` that is not bound yet is an unbound immediate claim, a bound claim's missing PV
fails every node, and FindMatchingVolume (component-helpers/storage/volume/pv_helpers.go) takes
only an Available PV of the claim's class that is not reserved for another claim; a claim with a
selected node is provisioned on that node only."""

from __future__ import annotations

from typing import Any

from analyzers.simulator import simulate
from analyzers.simulator.results import PodVerdict
from tests.simulator.builders import node, pod, pod_of, snapshot
from tests.simulator.test_filters_resources_volumes import pv, pvc, sc

CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND = "node(s) didn't find available persistent volumes to bind"
NO_PV = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
LOCAL = sc("local", "kubernetes.io/no-provisioner")


def run(*objs: dict[str, Any], kube_version: str = "1.35") -> PodVerdict:
    snap = snapshot(node("a"), node("b"), *objs)
    return simulate(snap, pod_of(snap, "p"), kube_version=kube_version)


def fitting(v: PodVerdict) -> set[str]:
    return {n.node for n in v.nodes if n.fits}


def test_only_an_available_pv_of_the_class_not_reserved_for_another_claim_binds() -> None:
    claim = pvc("data", sc="local")
    wanted = pod("p", pvcs=["data"])
    assert fitting(run(LOCAL, claim, wanted, pv("ok", sc="local", node_name="a"))) == {"a"}
    for unusable in (
        pv("released", sc="local", node_name="a", phase="Released"),
        pv("reserved", sc="local", node_name="a", claim="someone-else"),
        pv("other-class", sc="standard", node_name="a"),
    ):
        v = run(LOCAL, claim, wanted, unusable)
        assert v.message.startswith(f"0/2 nodes are available: 2 {BIND}."), unusable["metadata"]["name"]


def test_a_node_failing_two_ways_prints_both_reasons() -> None:
    v = run(
        LOCAL,
        pvc("bound", sc="standard", volume="pv-a", phase="Bound"),
        pv("pv-a", node_name="a", claim="bound", phase="Bound"),
        pvc("later", sc="local"),
        pod("p", pvcs=["bound", "later"]),
    )
    assert v.message.startswith(f"0/2 nodes are available: 1 {CONFLICT}, 2 {BIND}.")
    assert v.node_at(0).filters[0].reasons == (BIND,)
    assert v.node_at(1).filters[0].reasons == (CONFLICT, BIND)


def test_a_bound_claims_missing_volume_fails_every_node_beside_the_other_reasons() -> None:
    """Until 1.26 (v1.26.15) VolumeZone had no PreFilter: VolumeBinding's Filter reports
    the missing PV on every node. Since 1.27 (v1.27.16 to v1.37.2) VolumeZone's PreFilter
    reads the bound claim's PV first and refuses the pod with the lister's NotFound."""
    objs = (
        LOCAL,
        pvc("bound", sc="standard", volume="gone", phase="Bound"),
        pvc("later", sc="local"),
        pv("pv-a", sc="local", node_name="a"),
        pod("p", pvcs=["bound", "later"]),
    )
    v = run(*objs, kube_version="1.26.15")
    assert v.node_at(0).filters[0].reasons == (NO_PV,)
    assert v.node_at(1).filters[0].reasons == (BIND, NO_PV)
    v = run(*objs, kube_version="1.35.4")
    assert v.prefilter is not None and v.prefilter.plugin == "VolumeZone"
    assert v.message == '0/2 nodes are available: persistentvolume "gone" not found. not found'


def test_a_claim_naming_a_volume_but_not_bound_yet_is_an_unbound_immediate_claim() -> None:
    v = run(pvc("data", volume="pv-x", phase="Pending"), pv("pv-x", claim="data"), pod("p", pvcs=["data"]))
    assert v.prefilter is not None
    assert v.prefilter.reasons == ("pod has unbound immediate PersistentVolumeClaims",)


def test_a_claim_whose_selected_node_is_gone_fits_no_node() -> None:
    provisioned = sc("fast", "ebs.csi.aws.com")
    v = run(provisioned, pvc("data", sc="fast", selected="gone"), pod("p", pvcs=["data"]))
    assert v.message.startswith(f"0/2 nodes are available: 2 {BIND}.")
    assert fitting(run(provisioned, pvc("data", sc="fast", selected="b"), pod("p", pvcs=["data"]))) == {"b"}
