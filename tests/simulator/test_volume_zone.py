"""VolumeZone (pkg/scheduler/framework/plugins/volumezone/volume_zone.go, v1.35.4 and
v1.37.2): a bound PersistentVolume's zone/region labels restrict the pod to nodes of
those zones; the reason is ``node(s) had no available volume zone``."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.simulator import simulate
from analyzers.simulator.volumes import label_zones
from tests.simulator.builders import node, pod, pod_of, snapshot

V = "1.35.4"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"


def bound_claim(name: str, pv: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"storageClassName": "", "volumeName": pv, "accessModes": ["ReadWriteOnce"]},
        "status": {"phase": "Bound"},
    }


def volume(name: str, labels: dict[str, str], claim: str = "data") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "claimRef": {"namespace": "default", "name": claim},
            "hostPath": {"path": "/tmp/x"},
        },
        "status": {"phase": "Bound"},
    }


def _verdict(pv_labels: dict[str, str], *nodes: dict[str, Any]) -> Any:
    snap = snapshot(
        *nodes,
        bound_claim("data", "pv-1"),
        volume("pv-1", pv_labels),
        pod("app", pvcs=["data"]),
    )
    return simulate(snap, pod_of(snap, "app"), kube_version=V)


def test_a_zonal_volume_keeps_the_pod_in_its_zone() -> None:
    verdict = _verdict(
        {ZONE: "za"},
        node("n-a", labels={ZONE: "za"}),
        node("n-b", labels={ZONE: "zb"}),
        node("n-c", labels={ZONE: "zc"}),
    )
    assert verdict.fits and verdict.feasible_nodes == 1 and verdict.node("n-a").fits
    assert verdict.node("n-b").filters[0].plugin == "VolumeZone"


def test_no_zone_left_is_the_scheduler_message() -> None:
    verdict = _verdict({ZONE: "zx"}, node("n-a", labels={ZONE: "za"}), node("n-b", labels={ZONE: "zb"}))
    assert not verdict.fits
    assert verdict.message == (
        "0/2 nodes are available: 2 node(s) had no available volume zone. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_multi_zone_values_and_region() -> None:
    verdict = _verdict(
        {ZONE: "za__zb", REGION: "r1"},
        node("n-a", labels={ZONE: "za", REGION: "r1"}),
        node("n-b", labels={ZONE: "zb", REGION: "r2"}),
        node("n-c", labels={ZONE: "zc", REGION: "r1"}),
    )
    assert [n.node for n in verdict.nodes if n.fits] == ["n-a"]


def test_a_node_without_zone_labels_passes_but_one_missing_the_key_does_not() -> None:
    verdict = _verdict(
        {ZONE: "za", REGION: "r1"},
        node("plain"),  # no topology label at all: single-zone cluster
        node("zoned", labels={ZONE: "za"}),  # has a zone label, lacks the region
    )
    assert verdict.node("plain").fits
    assert not verdict.node("zoned").fits


def test_legacy_beta_label_on_the_volume_matches_the_nodes_ga_label() -> None:
    verdict = _verdict(
        {BETA_ZONE: "za"},
        node("ga", labels={ZONE: "za"}),
        node("beta-other", labels={BETA_ZONE: "zb", ZONE: "za"}),  # has the beta key: it decides
    )
    assert verdict.node("ga").fits
    assert not verdict.node("beta-other").fits


def test_a_malformed_multi_zone_label_is_ignored() -> None:
    assert label_zones("za__") is None
    assert label_zones(" za __zb") == frozenset({"za", "zb"})
    verdict = _verdict({ZONE: "za____zb"}, node("n-c", labels={ZONE: "zc"}))
    assert verdict.fits


def test_a_bound_claims_missing_volume_is_refused_at_prefilter() -> None:
    snap = snapshot(
        node("n-a", labels={ZONE: "za"}), bound_claim("data", "pv-gone"), pod("app", pvcs=["data"])
    )
    verdict = simulate(snap, pod_of(snap, "app"), kube_version=V)
    assert not verdict.fits
    assert verdict.prefilter is not None and verdict.prefilter.plugin == "VolumeZone"
    assert verdict.message.startswith('0/1 nodes are available: persistentvolume "pv-gone" not found.')


@pytest.mark.parametrize("kube_version", ["1.29", "1.35.4", "1.37.2"])
def test_the_reason_is_the_same_across_releases(kube_version: str) -> None:
    snap = snapshot(
        node("n-b", labels={ZONE: "zb"}),
        bound_claim("data", "pv-1"),
        volume("pv-1", {ZONE: "za"}),
        pod("app", pvcs=["data"]),
    )
    verdict = simulate(snap, pod_of(snap, "app"), kube_version=kube_version)
    assert "1 node(s) had no available volume zone" in verdict.message
