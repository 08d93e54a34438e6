"""DynamicResources simulated: the structured allocator's choices and the Filter's
reasons on dumps (resource.k8s.io v1, v1beta1), CEL selectors, invalid objects."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.simulator.dra import cel
from analyzers.simulator.engine import simulate
from analyzers.snapshot import ClusterSnapshot

DRIVER = "gpu.example.com"


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def device(name: str, model: str = "H100", **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": name,
        "attributes": {"model": {"string": model}, "numa": {"int": extra.pop("numa", 0)}},
        "capacity": {"memory": {"value": extra.pop("memory", "80Gi")}},
    }
    d.update(extra)
    return d


def slice_(
    node_name: str, devices: list[dict[str, Any]], *, name: str = "", pool: str = "", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node_name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": pool or node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
            **spec,
        },
    }


def device_class(name: str = "gpu", expr: str = f'device.driver == "{DRIVER}"') -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expr}}]},
    }


def claim(
    name: str, requests: list[dict[str, Any]], *, constraints: Any = None, status: Any = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": requests, **({"constraints": constraints} if constraints else {})}},
    }
    if status:
        obj["status"] = status
    return obj


def exactly(name: str = "gpu", cls: str = "gpu", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, **fields}}


def pod(name: str, *claims: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "containers": [{"name": "c", "image": "x"}],
            "resourceClaims": [{"name": f"r{i}", "resourceClaimName": c} for i, c in enumerate(claims)],
        },
        "status": {"phase": "Pending"},
    }


def verdict(*objects: dict[str, Any], pod_name: str = "p"):  # type: ignore[no-untyped-def]
    snap = ClusterSnapshot.from_objects(list(objects))
    return snap, simulate(snap, snap.pods[("default", pod_name)], kube_version="v1.37.2")


def devices_on(v: Any, node_name: str) -> list[str] | None:
    found = v.allocations.get(node_name)
    return None if found is None else [r.device for r in found]


def test_picks_the_first_matching_devices_in_slice_order_and_leaves_the_rest() -> None:
    _, v = verdict(
        node("a"),
        node("b"),
        slice_("a", [device("gpu-0", "A100"), device("gpu-1")]),
        slice_("b", [device("gpu-0"), device("gpu-1", "A100"), device("gpu-2"), device("gpu-3")]),
        device_class(),
        claim(
            "c",
            [
                exactly(
                    count=2,
                    selectors=[{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "H100"'}}],
                )
            ],
        ),
        pod("p", "c"),
    )
    assert v.fits
    assert devices_on(v, "b") == ["gpu-0", "gpu-2"]
    assert devices_on(v, "a") is None
    assert v.node("a").filters[0].reasons == ("cannot allocate all claims",)
    assert v.as_dict()["allocation"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "b", "device": "gpu-0"},
        {"request": "gpu", "driver": DRIVER, "pool": "b", "device": "gpu-2"},
    ]


def test_devices_allocated_to_other_claims_are_in_use() -> None:
    held = claim(
        "held",
        [exactly()],
        status={
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": "gpu-0"}]}
            }
        },
    )
    _, v = verdict(
        node("a"),
        slice_("a", [device("gpu-0"), device("gpu-1")]),
        device_class(),
        held,
        claim("c", [exactly()]),
        pod("p", "c"),
    )
    assert devices_on(v, "a") == ["gpu-1"]
    _, v = verdict(
        node("a"),
        slice_("a", [device("gpu-0")]),
        device_class(),
        held,
        claim("c", [exactly()]),
        pod("p", "c"),
    )
    assert not v.fits
    assert v.message.startswith("0/1 nodes are available: 1 cannot allocate all claims.")


def test_all_mode_takes_every_matching_device_and_admin_access_ignores_use() -> None:
    _, v = verdict(
        node("a"),
        slice_("a", [device("gpu-0"), device("gpu-1", "A100"), device("gpu-2")]),
        device_class(),
        claim("c", [exactly(allocationMode="All")]),
        pod("p", "c"),
    )
    assert devices_on(v, "a") == ["gpu-0", "gpu-1", "gpu-2"]


def test_match_attribute_constraint_keeps_devices_on_one_numa_node() -> None:
    devices = [device("gpu-0", numa=0), device("gpu-1", numa=1), device("gpu-2", numa=1)]
    _, v = verdict(
        node("a"),
        slice_("a", devices),
        device_class(),
        claim("c", [exactly(count=2)], constraints=[{"matchAttribute": f"{DRIVER}/numa"}]),
        pod("p", "c"),
    )
    assert devices_on(v, "a") == ["gpu-1", "gpu-2"]  # backtracks past gpu-0
    _, v = verdict(
        node("a"),
        slice_("a", devices[:2]),
        device_class(),
        claim("c", [exactly(count=2)], constraints=[{"matchAttribute": f"{DRIVER}/numa"}]),
        pod("p", "c"),
    )
    assert not v.fits


def test_first_available_takes_the_first_subrequest_that_fits() -> None:
    request = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu", "count": 4},
            {"name": "small", "deviceClassName": "gpu", "count": 1},
        ],
    }
    _, v = verdict(
        node("a"),
        slice_("a", [device("gpu-0"), device("gpu-1")]),
        device_class(),
        claim("c", [request]),
        pod("p", "c"),
    )
    assert [(r.request, r.device) for r in v.allocations["a"]] == [("gpu/small", "gpu-0")]


def test_untolerated_device_taint_excludes_the_device_and_a_toleration_admits_it() -> None:
    taint = {"key": "broken", "value": "true", "effect": "NoSchedule"}
    devices = [device("gpu-0", taints=[taint])]
    _, v = verdict(node("a"), slice_("a", devices), device_class(), claim("c", [exactly()]), pod("p", "c"))
    assert not v.fits
    tol = [{"key": "broken", "operator": "Exists", "effect": "NoSchedule"}]
    _, v = verdict(
        node("a"), slice_("a", devices), device_class(), claim("c", [exactly(tolerations=tol)]), pod("p", "c")
    )
    assert devices_on(v, "a") == ["gpu-0"]


def test_partitions_sharing_counters_cannot_exceed_them() -> None:
    # Since 1.35 counter sets live in a slice of their own in the pool (buildPool puts a
    # slice with sharedCounters among the counter-set slices, not the device slices).
    counters = slice_(
        "a",
        [],
        name="a-counters",
        sharedCounters=[{"name": "gpu-0-mem", "counters": {"memory": {"value": "80Gi"}}}],
    )

    def part(name: str, mem: str) -> dict[str, Any]:
        return device(
            name, consumesCounters=[{"counterSet": "gpu-0-mem", "counters": {"memory": {"value": mem}}}]
        )

    parts = slice_(
        "a", [part("whole", "80Gi"), part("half-0", "40Gi"), part("half-1", "40Gi")], name="a-devices"
    )
    for s in (counters, parts):
        s["spec"]["pool"]["resourceSliceCount"] = 2
    held = claim(
        "held",
        [exactly()],
        status={
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": "half-0"}]
                }
            }
        },
    )
    _, v = verdict(node("a"), counters, parts, device_class(), held, claim("c", [exactly()]), pod("p", "c"))
    assert devices_on(v, "a") == ["half-1"]  # "whole" needs the counters half-0 spends
    _, v = verdict(
        node("a"), counters, parts, device_class(), held, claim("c", [exactly(count=2)]), pod("p", "c")
    )
    assert not v.fits
    _, v = verdict(node("a"), counters, parts, device_class(), claim("c", [exactly()]), pod("p", "c"))
    assert devices_on(v, "a") == ["whole"]


def test_incomplete_pool_is_not_used_and_all_on_it_is_an_error() -> None:
    s = slice_("a", [device("gpu-0")])
    s["spec"]["pool"]["resourceSliceCount"] = 2
    _, v = verdict(node("a"), s, device_class(), claim("c", [exactly()]), pod("p", "c"))
    assert v.node("a").filters[0].reasons == ("cannot allocate all claims",)
    _, v = verdict(node("a"), s, device_class(), claim("c", [exactly(allocationMode="All")]), pod("p", "c"))
    assert v.node("a").filters[0].reasons == (
        "claim default/c, request gpu: asks for all devices, but resource pool gpu.example.com/a is currently being updated",
    )


def test_missing_device_class_is_a_prefilter_rejection() -> None:
    _, v = verdict(
        node("a"),
        slice_("a", [device("gpu-0")]),
        device_class(),
        claim("c", [exactly(cls="nope")]),
        pod("p", "c"),
    )
    assert v.prefilter is not None
    assert v.prefilter.reasons == ("request gpu: device class nope does not exist",)


def test_allocated_claim_elsewhere_is_not_available_on_the_node() -> None:
    sel = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]
    }
    held = claim(
        "c",
        [exactly()],
        status={
            "allocation": {
                "nodeSelector": sel,
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": "b", "device": "gpu-0"}]
                },
            }
        },
    )
    _, v = verdict(node("a"), node("b"), slice_("b", [device("gpu-0")]), device_class(), held, pod("p", "c"))
    assert v.node("a").filters[0].reasons == ("resourceclaim not available on the node",)
    assert devices_on(v, "b") == ["gpu-0"]


def test_cel_runtime_error_is_kube_schedulers_error_not_a_crash() -> None:
    _, v = verdict(
        node("a"),
        slice_("a", [device("gpu-0")]),
        device_class(),
        claim(
            "c", [exactly(selectors=[{"cel": {"expression": f'device.attributes["{DRIVER}"].nosuch == 1'}}])]
        ),
        pod("p", "c"),
    )
    assert not v.fits
    (reason,) = v.node("a").filters[0].reasons
    assert reason.startswith(
        f"claim default/c: selector #0 on device {DRIVER}/a/gpu-0: CEL runtime error: no such key: nosuch"
    )


def test_invalid_objects_are_one_warning_and_unjudged() -> None:
    bad = device_class(expr="device.driver ==")
    snap, v = verdict(node("a"), slice_("a", [device("gpu-0")]), bad, claim("c", [exactly()]), pod("p", "c"))
    assert len(snap.warnings) == 1 and "spec.selectors[0].cel.expression" in snap.warnings[0]
    assert v.fits and not v.allocations  # not judged: no DRA verdict


def test_without_slices_dra_needs_are_unjudged() -> None:
    _, v = verdict(node("a"), device_class(), claim("c", [exactly()]), pod("p", "c"))
    assert v.fits and not v.allocations


def test_v1beta1_shapes_are_normalised() -> None:
    s = slice_("a", [{"name": "gpu-0", "basic": {"attributes": {"model": {"string": "H100"}}}}])
    s["apiVersion"] = "resource.k8s.io/v1beta1"
    c = claim("c", [{"name": "gpu", "deviceClassName": "gpu", "count": 1}])
    c["apiVersion"] = "resource.k8s.io/v1beta1"
    _, v = verdict(node("a"), s, device_class(), c, pod("p", "c"))
    assert devices_on(v, "a") == ["gpu-0"]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) > 0', True),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("40Gi"))', False),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.3"))', True),
        ('device.attributes["gpu.example.com"].driverVersion == semver("1.10.0")', True),
        ('device.attributes["gpu.example.com"].driverVersion.major() == 1', True),
        ('cel.bind(m, device.attributes["gpu.example.com"].model, m.startsWith("H") && m.size() == 4)', True),
        ('device.attributes["gpu.example.com"].numa == 0', True),
        ('quantity("1Gi").isGreaterThan(quantity("1000Mi"))', True),
    ],
)
def test_cel_environment(expr: str, expected: bool) -> None:
    compiled = cel.compile_selector(expr)
    assert not compiled.error, compiled.error
    var = cel.device_variable(
        DRIVER,
        {"model": ("string", "H100"), "numa": ("int", 0), "driverVersion": ("version", "1.10.0")},
        {"memory": "80Gi"},
        False,
    )
    assert cel.evaluate(compiled, var) is expected


def test_cel_compile_error_reads_like_cel_go() -> None:
    compiled = cel.compile_selector("nosuch(1)")
    assert compiled.error.startswith(
        "compilation failed: ERROR: <input>:1:7: undeclared reference to 'nosuch'"
    )


def test_preemption_does_not_free_devices() -> None:
    """The node's CPU is taken by a low-priority pod and its GPU by another claim:
    evicting the pod would make room for the CPU, not the device, so no candidate."""
    busy = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "busy", "namespace": "default", "uid": "uid-busy"},
        "spec": {
            "nodeName": "a",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "8"}}}],
        },
        "status": {"phase": "Running"},
    }
    held = claim(
        "held",
        [exactly()],
        status={
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": "gpu-0"}]}
            }
        },
    )
    wants = pod("p", "c")
    wants["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    wants["spec"]["priority"] = 1000
    _, v = verdict(
        node("a"), slice_("a", [device("gpu-0")]), device_class(), held, busy, claim("c", [exactly()]), wants
    )
    assert not v.fits
    assert v.preemption.candidates == ()
    _, v = verdict(
        node("a"),
        slice_("a", [device("gpu-0"), device("gpu-1")]),
        device_class(),
        held,
        busy,
        claim("c", [exactly()]),
        wants,
    )
    assert v.preemption.candidates == ("a",)


def test_postfilter_words_for_a_pod_with_claims_by_release() -> None:
    """v1.35.4 DynamicResources PostFilter: "still not schedulable" for a pod whose claims
    it did not deallocate ("no new claims to deallocate" is for pods without claims)."""
    objects = [node("a"), slice_("a", []), device_class(), claim("c", [exactly()]), pod("p", "c")]
    snap = ClusterSnapshot.from_objects(objects)
    v = simulate(snap, snap.pods[("default", "p")], kube_version="v1.35.4")
    assert v.message == (
        "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, preemption: 0/1 nodes are "
        "available: 1 Preemption is not helpful for scheduling."
    )


def test_postfilter_deallocates_a_claim_allocated_where_the_pod_cannot_go() -> None:
    """The claim was allocated on node b, which is gone from the dump; no pod uses it:
    PostFilter deallocates it (the next attempt can allocate anew)."""
    sel = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]
    }
    stale = claim(
        "c",
        [exactly()],
        status={
            "allocation": {
                "nodeSelector": sel,
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": "b", "device": "gpu-0"}]
                },
            }
        },
    )
    _, v = verdict(node("a"), slice_("a", [device("gpu-0")]), device_class(), stale, pod("p", "c"))
    assert v.message == (
        "0/1 nodes are available: 1 resourceclaim not available on the node. deallocation of ResourceClaim "
        "completed, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


def test_postfilter_writes_neither_text_in_1_37() -> None:
    """v1.37.2 returns PostFilter's statuses without a message (a log line only)."""
    objects = [node("a"), slice_("a", []), device_class(), claim("c", [exactly()]), pod("p", "c")]
    _, v = verdict(*objects)
    assert v.message == (
        "0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are available: "
        "1 Preemption is not helpful for scheduling."
    )


def test_a_fatal_allocator_error_on_one_node_aborts_the_attempt() -> None:
    """Seen on the real v1.37.2 scheduler (DRA differential, seed 23): 'All' devices on a
    node whose pool is incomplete is Filter's Error, and the pod is not scheduled even
    though another node fits; the condition is the error."""
    s = slice_("a", [device("gpu-0")])
    s["spec"]["pool"]["resourceSliceCount"] = 2
    _, v = verdict(
        node("a"),
        node("b"),
        s,
        slice_("b", [device("gpu-0")]),
        device_class(),
        claim("c", [exactly(allocationMode="All")]),
        pod("p", "c"),
    )
    assert not v.fits
    assert v.message == (
        'running "DynamicResources" filter plugin: claim default/c, request gpu: asks for all devices, but '
        "resource pool gpu.example.com/a is currently being updated"
    )
    assert not v.preemption.attempted
