"""`unstick analyze` on a dump with DRA objects: the GPU capacity summary (DRA devices
per class beside classic extended resources), the allocation JSON fields, and the
"were they collected" warning for ResourceSlices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.inprocess import run
from tests.dra.test_dra_allocation import DRIVER, claim, device, device_class, exactly, node, pod, slice_

NOW = "2026-11-20T10:00:00Z"


def dump(tmp_path: Path, objects: list[dict[str, Any]]) -> str:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return str(path)


def cluster() -> list[dict[str, Any]]:
    held = claim(
        "held",
        [exactly()],
        status={
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": "gpu-0"}]}
            }
        },
    )
    b = node("b")
    b["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    return [
        node("a"),
        b,
        slice_("a", [device("gpu-0"), device("gpu-1"), device("gpu-2")]),
        device_class(),
        held,
    ]


def test_gpu_capacity_summary_counts_dra_devices_and_extended_resources(tmp_path: Path) -> None:
    code, out, _ = run("analyze", dump(tmp_path, cluster()), "--now", NOW)
    assert code == 0
    section = out[out.index("GPU CAPACITY") :].splitlines()
    assert section[2].split() == ["a", "DRA", "gpu", "3", "1", "2"]
    assert section[3].split() == ["b", "extended", "resource", "nvidia.com/gpu", "4", "0", "4"]
    code, out, _ = run("analyze", dump(tmp_path, cluster()), "--now", NOW, "--json")
    doc = json.loads(out)
    assert {"node": "a", "source": "dra", "name": "gpu", "total": 3, "allocated": 1, "free": 2} in doc[
        "gpu_capacity"
    ]


def test_allocation_fields_in_json(tmp_path: Path) -> None:
    objects = [
        *cluster(),
        claim("c", [exactly(count=2, selectors=[{"cel": {"expression": "true"}}])]),
        pod("p", "c"),
    ]
    code, out, _ = run("analyze", dump(tmp_path, objects), "--now", NOW, "--json")
    assert code == 0
    (p,) = [p for p in json.loads(out)["pods"] if p["name"] == "p"]
    scheduling = p["scheduling"]
    # gpu-0 is held by claim "held": the allocator takes the next two in slice order.
    want = [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": d} for d in ("gpu-1", "gpu-2")]
    assert scheduling["allocation"] == want
    nodes = {n["node"]: n["allocation"] for n in scheduling["nodes"]}
    assert nodes == {"a": want, "b": None}


def test_without_slices_the_pods_dra_needs_are_unjudged_with_one_warning(tmp_path: Path) -> None:
    objects = [node("a"), device_class(), claim("c", [exactly()]), pod("p", "c")]
    code, _, err = run("analyze", dump(tmp_path, objects), "--now", NOW)
    assert code == 0
    assert err.count("the dump holds no ResourceSlices but 1 pending pod(s) use ResourceClaims") == 1
