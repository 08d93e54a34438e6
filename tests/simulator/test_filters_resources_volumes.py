"""NodeResourcesFit (pkg/scheduler/framework/plugins/noderesources/fit.go) and
VolumeBinding (.../volumebinding/volume_binding.go, binder.go)."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.simulator import simulate
from tests.simulator.builders import node, pod, pod_of, snapshot

UNRES = "UnschedulableAndUnresolvable"


def run(objs: list[dict[str, Any]], name: str = "p", version: str | None = None):  # type: ignore[no-untyped-def]
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, name), kube_version=version)


# --- fit.go fitsRequest ---------------------------------------------------------------------


def test_fit_cpu_and_memory_both_printed_and_counted_per_reason() -> None:
    objs = [
        node("a", cpu="2", memory="2Gi"),
        node("b", cpu="2", memory="8Gi"),
        pod("p", requests={"cpu": "3", "memory": "4Gi"}),
    ]
    v = run(objs)
    a = v.node("a")
    assert a is not None
    assert a.filters[0].reasons == ("Insufficient cpu", "Insufficient memory")
    assert a.filters[0].reason_codes == ("insufficient-resource", "insufficient-resource")
    assert v.message.startswith("0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu.")
    assert dict(v.reason_counts) == {"insufficient-resource": 3}


def test_fit_requested_is_the_sum_of_bound_pods_requests_not_the_nonzero_defaults() -> None:
    # Pods without requests count as zero (the 100m/200Mi defaults are for scoring only).
    objs = [
        node("a", cpu="1"),
        *[pod(f"be{i}", node_name="a") for i in range(5)],
        pod("p", requests={"cpu": "1"}),
    ]
    assert run(objs).fits
    objs = [
        node("a", cpu="1"),
        pod("used", node_name="a", requests={"cpu": "600m"}),
        pod("p", requests={"cpu": "500m"}),
    ]
    v = run(objs)
    detail = v.node("a").filters[0].detail["resources"][0]  # type: ignore[union-attr]
    assert dict(detail) == {
        "resource": "cpu",
        "requested": 500,
        "used": 600,
        "free": 400,
        "allocatable": 1000,
    }


def test_fit_finished_pods_free_their_requests() -> None:
    objs = [
        node("a", cpu="1"),
        pod("done", node_name="a", requests={"cpu": "1"}, phase="Succeeded"),
        pod("p", requests={"cpu": "1"}),
    ]
    assert run(objs).fits


def test_fit_too_many_pods_is_checked_even_without_requests() -> None:
    objs = [node("a", pods="2"), pod("x", node_name="a"), pod("y", node_name="a"), pod("p")]
    v = run(objs)
    f = v.node("a").filters[0]  # type: ignore[union-attr]
    assert (f.plugin, f.code, f.reasons, f.reason_codes) == (
        "NodeResourcesFit",
        "Unschedulable",
        ("Too many pods",),
        ("too-many-pods",),
    )


def test_fit_resources_the_pod_does_not_request_are_skipped() -> None:
    # The node has no GPU at all; a pod without a GPU request does not care.
    assert run([node("a"), pod("p", requests={"cpu": "1"})]).fits


@pytest.mark.parametrize(
    ("resource", "alloc", "wanted"),
    [
        ("ephemeral-storage", None, "200Gi"),
        ("hugepages-2Mi", "64Mi", "128Mi"),
        ("example.com/fpga", "1", "2"),
    ],
)
def test_fit_ephemeral_storage_hugepages_and_extended(resource: str, alloc: str | None, wanted: str) -> None:
    extra = {resource: alloc} if alloc else {}
    limits = {resource: wanted} if "/" in resource or resource.startswith("hugepages") else None
    requests = None if limits else {resource: wanted}
    v = run([node("a", extra=extra), pod("p", requests=requests, limits=limits)])
    assert v.node("a").filters[0].reasons == (f"Insufficient {resource}",)  # type: ignore[union-attr]


@pytest.mark.parametrize(("version", "code"), [("1.33", "Unschedulable"), ("1.34", UNRES)])
def test_fit_request_larger_than_the_node_is_unresolvable_since_1_34(version: str, code: str) -> None:
    v = run(
        [
            node("a", cpu="4"),
            pod("low", node_name="a", requests={"cpu": "1"}, priority=-5),
            pod("p", requests={"cpu": "8"}),
        ],
        version=version,
    )
    assert v.node("a").filters[0].code == code  # type: ignore[union-attr]
    if version == "1.33":
        # Preemption tries the node, evicts nothing useful: the filter's reason is printed.
        assert v.preemption.message == "preemption: 0/1 nodes are available: 1 Insufficient cpu."
    else:
        assert v.preemption.message == (
            "no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        )


def test_fit_init_containers_and_overhead_come_from_the_records() -> None:
    obj = pod("p")
    obj["spec"]["initContainers"] = [{"name": "init", "image": "i", "resources": {"requests": {"cpu": "3"}}}]
    obj["spec"]["overhead"] = {"cpu": "250m"}
    v = run([node("a", cpu="3"), obj])
    assert dict(v.node("a").filters[0].detail["resources"][0])["requested"] == 3250  # type: ignore[union-attr]


# --- volume_binding.go / binder.go ----------------------------------------------------------------


def pvc(
    name: str,
    *,
    sc: str | None = "standard",
    volume: str = "",
    phase: str = "Pending",
    size: str = "10Gi",
    selected: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"pvc-{name}"}
    if selected:
        meta["annotations"] = {"volume.kubernetes.io/selected-node": selected}
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if sc is not None:
        spec["storageClassName"] = sc
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase},
    }


def pv(
    name: str,
    *,
    sc: str = "standard",
    node_name: str = "",
    claim: str = "",
    phase: str = "Available",
    size: str = "10Gi",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "storageClassName": sc,
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
    }
    if node_name:
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            }
        }
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"phase": phase},
    }


def sc(
    name: str, provisioner: str, mode: str = "WaitForFirstConsumer", zones: list[str] | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if zones:
        obj["allowedTopologies"] = [{"matchLabelExpressions": [{"key": "zone", "values": zones}]}]
    return obj


THREE = [node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"}), node("c", labels={"zone": "z3"})]


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (
            "1.25",
            '0/3 nodes are available: 3 persistentvolumeclaim "data" not found. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.',
        ),
        (
            "1.27",
            '0/3 nodes are available: persistentvolumeclaim "data" not found. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..',
        ),
        (
            "1.30",
            '0/3 nodes are available: persistentvolumeclaim "data" not found. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.',
        ),
    ],
)
def test_volume_missing_pvc_is_a_prefilter_rejection_rendered_by_version(version: str, message: str) -> None:
    v = run([*THREE, pod("p", pvcs=["data"])], version=version)
    assert v.prefilter is not None
    # VolumeRestrictions reads the claims first since ReadWriteOncePod is on by default (1.27).
    assert (v.prefilter.plugin, v.prefilter.code, v.prefilter.reason_codes) == (
        "VolumeBinding" if version == "1.25" else "VolumeRestrictions",
        UNRES,
        ("pvc-not-found",),
    )
    assert v.message == message
    assert dict(v.reason_counts) == {"pvc-not-found": 3}
    assert v.node("a").filters[0] is v.prefilter  # type: ignore[union-attr]


def test_volume_unbound_immediate_claim() -> None:
    v = run(
        [*THREE, sc("standard", "ebs.csi.aws.com", mode="Immediate"), pvc("data"), pod("p", pvcs=["data"])]
    )
    assert v.message == (
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes "
        "are available: 3 Preemption is not helpful for scheduling."
    )
    assert v.prefilter is not None and v.prefilter.reason_codes == ("volume-unbound-pvc",)


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("1.32", "node(s) had volume node affinity conflict"),
        ("1.33", "node(s) didn't match PersistentVolume's node affinity"),
    ],
)
def test_volume_bound_pv_node_affinity_conflict(version: str, reason: str) -> None:
    objs = [
        *THREE,
        pvc("data", volume="pv-a", phase="Bound"),
        pv("pv-a", node_name="a", claim="data", phase="Bound"),
        pod("p", pvcs=["data"]),
    ]
    v = run(objs, version=version)
    assert v.fits and v.feasible_nodes == 1
    f = v.node("b").filters[0]  # type: ignore[union-attr]
    assert (f.plugin, f.code, f.reasons, f.reason_codes) == (
        "VolumeBinding",
        UNRES,
        (reason,),
        ("volume-node-affinity-conflict",),
    )


def test_volume_wait_for_first_consumer_without_pv_or_provisioner() -> None:
    objs = [
        *THREE,
        sc("standard", "kubernetes.io/no-provisioner"),
        pvc("data"),
        pv("local-b", node_name="b"),
        pod("p", pvcs=["data"]),
    ]
    v = run(objs)
    assert {n.node for n in v.nodes if n.fits} == {"b"}
    f = v.node("a").filters[0]  # type: ignore[union-attr]
    assert (f.reasons, f.reason_codes) == (
        ("node(s) didn't find available persistent volumes to bind",),
        ("volume-no-pv",),
    )


def test_volume_wait_for_first_consumer_small_pv_does_not_match() -> None:
    objs = [
        *THREE,
        sc("standard", "kubernetes.io/no-provisioner"),
        pvc("data", size="50Gi"),
        pv("local-b", node_name="b"),
        pod("p", pvcs=["data"]),
    ]
    assert run(objs).feasible_nodes == 0


def test_volume_wait_for_first_consumer_provisioner_allowed_topologies() -> None:
    objs = [
        *THREE,
        sc("standard", "ebs.csi.aws.com", zones=["z1", "z3"]),
        pvc("data"),
        pod("p", pvcs=["data"]),
    ]
    assert {n.node for n in run(objs).nodes if n.fits} == {"a", "c"}


def test_volume_claim_with_selected_node_fits_only_there() -> None:
    objs = [*THREE, sc("standard", "ebs.csi.aws.com"), pvc("data", selected="c"), pod("p", pvcs=["data"])]
    assert {n.node for n in run(objs).nodes if n.fits} == {"c"}
