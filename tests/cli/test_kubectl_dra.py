"""`kubectl unstick` (the installed entry point) against the fake API endpoint: for a pending
pod with ResourceClaims it shows the devices DynamicResources' structured allocator would
give on each feasible node, and on the node kube-scheduler would choose, as `unstick
analyze` does; ``-o json`` carries ``scheduling.nodes[].allocation``,
``scheduling.allocation`` and the GPU capacity table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.fakecluster import FakeCluster
from tests.cli.test_kubectl_plugin import PLUGIN, UNSTICK, run
from tests.dra.test_dra_allocation import DRIVER, claim, device, device_class, exactly, node, pod, slice_


def cluster(b_devices: int) -> list[dict[str, Any]]:
    """Node a: gpu-0 held by claim "held", gpu-1 and gpu-2 free; node b: ``b_devices`` free.
    Pod p's claim asks two GPUs."""
    held = claim(
        "held",
        [exactly()],
        status={
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": "gpu-0"}]}
            }
        },
    )
    return [
        node("a"),
        node("b"),
        slice_("a", [device("gpu-0"), device("gpu-1"), device("gpu-2")]),
        slice_("b", [device(f"gpu-{i}") for i in range(b_devices)]),
        device_class(),
        held,
        claim("c", [exactly(count=2)]),
        pod("p", "c"),
    ]


async def kubectl_unstick(objects: list[dict[str, Any]], tmp_path: Path, *args: str) -> str:
    async with FakeCluster() as fake:
        for obj in objects:
            fake.apply(obj)
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = await run(PLUGIN, "pod/p", "-n", "default", "--kubeconfig", str(kubeconfig), *args)
    assert code == 0, err
    return out


def devices_section(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "devices the DRA allocator gives it" in line)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("      ")), len(lines))
    return lines[start:end]


async def test_the_devices_per_feasible_node(tmp_path: Path) -> None:
    out = await kubectl_unstick(cluster(b_devices=2), tmp_path)
    assert devices_section(out) == [
        "    devices the DRA allocator gives it (per feasible node):",
        # gpu-0 of a is held: the allocator takes the next two in slice order
        f"      on a: request gpu: {DRIVER}/a/gpu-1, {DRIVER}/a/gpu-2",
        f"      on b: request gpu: {DRIVER}/b/gpu-0, {DRIVER}/b/gpu-1",
        "      which of them kube-scheduler picks depends on its scores, which are not simulated here",
    ]


async def test_the_devices_on_the_node_kube_scheduler_chooses(tmp_path: Path) -> None:
    out = await kubectl_unstick(cluster(b_devices=1), tmp_path)  # b has one GPU: only a fits
    assert devices_section(out) == [
        "    devices the DRA allocator gives it (on the only feasible node, the one kube-scheduler chooses):",
        f"      on a: request gpu: {DRIVER}/a/gpu-1, {DRIVER}/a/gpu-2",
    ]


async def test_json_carries_the_allocation_fields_and_the_gpu_capacity(tmp_path: Path) -> None:
    objects = cluster(b_devices=1)
    out = await kubectl_unstick(objects, tmp_path, "-o", "json")
    doc = json.loads(out)
    (p,) = doc["pods"]
    want = [{"request": "gpu", "driver": DRIVER, "pool": "a", "device": d} for d in ("gpu-1", "gpu-2")]
    assert p["scheduling"]["allocation"] == want
    assert {n["node"]: n["allocation"] for n in p["scheduling"]["nodes"]} == {"a": want, "b": None}
    assert {"node": "a", "source": "dra", "name": "gpu", "total": 3, "allocated": 1, "free": 2} in doc[
        "gpu_capacity"
    ]
    # the same fields as `unstick analyze --json` on a dump of the same objects
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    code, analysed, err = await run(UNSTICK, "analyze", str(dump), "--json")
    assert code == 0, err
    (q,) = [q for q in json.loads(analysed)["pods"] if q["name"] == "p"]
    assert q["scheduling"]["allocation"] == p["scheduling"]["allocation"]
    assert q["scheduling"]["nodes"] == p["scheduling"]["nodes"]
