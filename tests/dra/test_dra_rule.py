"""dra-devices-unavailable: the cause of ``cannot allocate all claims`` and its remedy,
re-simulated (tests/scenarios/dra-devices-unavailable has the golden cases)."""

from __future__ import annotations

import time
from typing import Any

from analyzers.report import build_report
from analyzers.snapshot import ClusterSnapshot
from tests.dra.test_dra_allocation import DRIVER, claim, device, device_class, exactly, node, pod, slice_


def findings(*objects: dict[str, Any]) -> list[Any]:
    snap = ClusterSnapshot.from_objects(list(objects), kube_version="v1.37.2")
    assert not snap.warnings, snap.warnings
    return [f for f in build_report(snap, now=time.time()).findings if f.rule_id == "dra-devices-unavailable"]


def held_by(name: str, device_name: str, reserved: list[dict[str, str]]) -> dict[str, Any]:
    return claim(
        name,
        [exactly()],
        status={
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": device_name}]
                }
            },
            "reservedFor": reserved,
        },
    )


def finished_pod(name: str) -> dict[str, Any]:
    p = pod(name)
    p["spec"]["nodeName"] = "a"
    p["status"] = {"phase": "Succeeded"}
    return p


def test_devices_held_for_a_finished_pod_are_named_and_releasing_them_is_verified() -> None:
    (f,) = findings(
        node("a"),
        slice_("a", [device("gpu-0")]),
        device_class(),
        finished_pod("done"),
        held_by("old", "gpu-0", [{"resource": "pods", "name": "done", "uid": "uid-done"}]),
        claim("c", [exactly()]),
        pod("p", "c"),
    )
    assert f.evidence["cause"] == "devices-allocated"
    assert "ResourceClaim default/old holds gpu.example.com/a/gpu-0 for pod done (Succeeded" in f.explanation
    assert f.evidence["holders"][0]["stale"] is True
    (remedy,) = f.remedies
    assert remedy.command == "kubectl delete resourceclaim -n default old" and remedy.verified
    # A node whose devices are all held has 0 free, written as 0 (not left out of the column).
    assert f.evidence["devices_per_node"]["in_pools"] == {"a": 1}
    assert f.evidence["devices_per_node"]["free"] == {"a": 0}
    assert f.evidence["devices_per_node"]["free_and_tolerated"] == {"a": 0}


def test_devices_held_for_a_running_pod_have_no_release_remedy() -> None:
    running = pod("busy")
    running["spec"]["nodeName"] = "a"
    running["status"] = {"phase": "Running"}
    (f,) = findings(
        node("a"),
        slice_("a", [device("gpu-0")]),
        device_class(),
        running,
        held_by("old", "gpu-0", [{"resource": "pods", "name": "busy", "uid": "uid-busy"}]),
        claim("c", [exactly()]),
        pod("p", "c"),
    )
    assert f.evidence["cause"] == "devices-allocated" and f.remedies == ()
    assert f.evidence["holders"][0]["stale"] is False


def test_a_count_larger_than_any_node_offers() -> None:
    (f,) = findings(
        node("a"),
        node("b"),
        slice_("a", [device("gpu-0"), device("gpu-1")]),
        slice_("b", [device("gpu-0"), device("gpu-1")]),
        device_class(),
        claim("c", [exactly(count=3)]),
        pod("p", "c"),
    )
    assert f.evidence["cause"] == "count-exceeds-node"
    assert "4 matching devices exist, but the most on any one node is 2" in f.explanation


def test_an_untolerated_device_taint_gets_a_verified_toleration() -> None:
    taint = {"key": "gpu.example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}
    (f,) = findings(
        node("a"),
        slice_("a", [device("gpu-0", taints=[taint])]),
        device_class(),
        claim("c", [exactly()]),
        pod("p", "c"),
    )
    assert f.evidence["cause"] == "untolerated-device-taint"
    (remedy,) = f.remedies
    assert remedy.verified and "key: gpu.example.com/unhealthy" in remedy.yaml


def test_a_missing_device_class_names_the_classes_there_are() -> None:
    (f,) = findings(
        node("a"),
        slice_("a", [device("gpu-0")]),
        device_class(),
        claim("c", [exactly(cls="gpus")]),
        pod("p", "c"),
    )
    assert f.evidence["cause"] == "device-class-missing"
    assert "DeviceClass gpus, which does not exist; the cluster has gpu" in f.explanation
    (remedy,) = f.remedies
    assert remedy.verified and "deviceClassName: gpu\n" in remedy.yaml


def test_quiet_when_the_devices_are_free() -> None:
    assert (
        findings(
            node("a"), slice_("a", [device("gpu-0")]), device_class(), claim("c", [exactly()]), pod("p", "c")
        )
        == []
    )


def test_spent_shared_counters_are_named() -> None:
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
        [exactly(count=2)],
        status={
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": "a", "device": "half-0"},
                        {"request": "gpu", "driver": DRIVER, "pool": "a", "device": "half-1"},
                    ]
                }
            }
        },
    )
    (f,) = findings(node("a"), counters, parts, device_class(), held, claim("c", [exactly()]), pod("p", "c"))
    assert f.evidence["cause"] == "shared-counters-spent"
    assert f.evidence["counters_spent_by"] == {"gpu-0-mem": ["half-0", "half-1"]}
