"""The DRA-backed extended resource (DRAExtendedResource, GA in 1.37): a plain
``nvidia.com/gpu`` request, on a node that does not advertise it, is allocated by
DynamicResources from the DeviceClass naming it (noderesources/fit.go
shouldDelegateResourceToDRA; dynamicresources/extendeddynamicresources.go)."""

from __future__ import annotations

from typing import Any

from analyzers.simulator.engine import simulate
from analyzers.snapshot import ClusterSnapshot
from tests.dra.test_dra_allocation import DRIVER, claim, device, device_class, node, slice_


def gpu_pod(count: int = 1, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {
                        "requests": {"cpu": "1", resource: str(count)},
                        "limits": {resource: str(count)},
                    },
                }
            ]
        },
        "status": {"phase": "Pending"},
    }


def mapped_class() -> dict[str, Any]:
    cls = device_class()
    cls["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    return cls


def run(*objects: dict[str, Any], version: str = "v1.37.2") -> Any:
    snap = ClusterSnapshot.from_objects(list(objects))
    return simulate(snap, snap.pods[("default", "p")], kube_version=version)


def test_a_plain_gpu_request_is_served_by_dra_on_a_node_without_the_device_plugin() -> None:
    v = run(node("a"), slice_("a", [device("gpu-0"), device("gpu-1")]), mapped_class(), gpu_pod(2))
    assert v.fits
    # cpu, nvidia.com/gpu sorted: the GPU is the container's request #1.
    assert [(r.request, r.device) for r in v.allocations["a"]] == [
        ("container-0-request-1", "gpu-0"),
        ("container-0-request-1", "gpu-1"),
    ]


def test_not_enough_devices_is_dynamic_resources_verdict_not_insufficient() -> None:
    held = claim(
        "held",
        [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}],
        status={
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": "gpu-0"}]}
            }
        },
    )
    v = run(node("a"), slice_("a", [device("gpu-0")]), mapped_class(), held, gpu_pod(1))
    assert not v.fits
    assert v.message.startswith("0/1 nodes are available: 1 cannot allocate all claims.")


def test_a_node_advertising_the_resource_is_judged_by_node_resources_fit() -> None:
    b = node("b")
    b["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    v = run(b, mapped_class(), slice_("a", []), gpu_pod(2))
    assert v.message.startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")


def test_the_implicit_class_name_and_older_releases() -> None:
    v = run(
        node("a"),
        slice_("a", [device("gpu-0")]),
        device_class(),
        gpu_pod(1, "deviceclass.resource.kubernetes.io/gpu"),
    )
    assert v.fits and [r.device for r in v.allocations["a"]] == ["gpu-0"]
    v = run(node("a"), slice_("a", [device("gpu-0")]), mapped_class(), gpu_pod(1), version="v1.35.4")
    assert not v.fits and "Insufficient nvidia.com/gpu" in v.message  # DRAExtendedResource off before 1.36
