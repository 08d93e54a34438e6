"""DRA devices in the capacity pictures: per node and DeviceClass, the devices allocated (to
which claims, reserved for which pods), tainted and free, one square per device; and, for a
DRA pod that fits, the devices the allocator would give on each feasible node — every number
the API's, the allocations the simulator's (``pods[].scheduling.nodes[].allocation``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from aiohttp.test_utils import TestClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import Finding, ObjectRef, Severity
from analyzers.grid import GRID_KEY, grids_for
from storage.tracker import track
from tests.api.test_pictures_placement import HTML, attrs, stored
from tests.simulator.test_grid import report_of

DRA = Path(__file__).parent.parent / "scenarios" / "dra-devices-unavailable"


async def test_devices_held_and_tainted_show_the_apis_numbers(
    sessions: async_sessionmaker[AsyncSession], client: TestClient, auth: dict[str, str]
) -> None:
    doc = await stored(sessions, DRA / "held-and-tainted", client, auth)
    [grid] = doc["evidence"][GRID_KEY]
    want = {d["node"]: d for d in grid["devices"]}
    # What the cluster holds: gpu-a's two GPUs allocated, gpu-b's one tainted.
    assert [(a["device"], a["claim"], a["reserved_for"]) for a in want["gpu-a"]["allocated"]] == [
        ("gpu-0", "ml/inference-gpu", [{"pod": "ml/inference", "state": "Running"}]),
        (
            "gpu-1",
            "ml/old-job-gpu",
            [{"pod": "ml/old-job", "state": "Succeeded"}],
        ),  # finished, still holds it
    ]
    assert [t["taints"] for t in want["gpu-b"]["tainted"]] == [["gpu.nvidia.com/unhealthy=xid-79:NoSchedule"]]
    html = await (await client.get(f"/incidents/{doc['id']}", headers={**auth, **HTML})).text()
    rows = re.findall(r'<tr class="device-row"[^>]*>.*?</tr>', html, re.S)
    assert len(rows) == len(grid["devices"])
    for row in rows:
        a = attrs(row[: row.index(">")])
        d = want[a["data-node"]]
        assert a["data-device-class"] == d["device_class"]
        counts = {k: int(a[f"data-{k}"]) for k in ("total", "allocated", "tainted", "free")}
        assert counts == {"total": d["total"], **{k: len(d[k]) for k in ("allocated", "tainted", "free")}}
        # One square per device, its state spelled out (readable without colour).
        states = re.findall(r'data-device="([^"]+)" data-state="(\w+)"', row)
        assert states == [(x["device"], s) for s in ("allocated", "tainted", "free") for x in d[s]]
        assert 'role="img"' in row and "<desc id=" in row
        for x in d["allocated"]:
            assert f"{x['device']} to claim {x['claim']}" in row and f"claim <code>{x['claim']}</code>" in row
            for r in x["reserved_for"]:
                assert f"{r['pod']} ({r['state']})" in row  # the holder's state, in the square's title
        for x in d["tainted"]:
            assert x["taints"][0] in row


async def test_a_dra_pod_that_fits_shows_the_devices_the_allocator_gives(
    sessions: async_sessionmaker[AsyncSession], client: TestClient, auth: dict[str, str]
) -> None:
    report = report_of(DRA / "devices-free")
    [pod] = report.pods
    assert pod.verdict.fits and pod.verdict.allocations
    grids = grids_for(["ml/trainer"], {"ml/trainer": pod.verdict})
    [grid] = grids
    simulated = pod.verdict.as_dict()
    assert [(a["node"], a["devices"]) for a in grid["allocations"]] == [
        (n["node"], n["allocation"]) for n in simulated["nodes"] if n["allocation"] is not None
    ]
    assert grid["allocation"] == simulated["allocation"]
    finding = Finding(
        rule_id="scheduler-silent",
        severity=Severity.WARNING,
        subject=ObjectRef("Pod", "ml", "trainer"),
        title="trainer fits but is not scheduled",
        explanation="The pictures' allocations",
        evidence={GRID_KEY: grids},
        pods=("ml/trainer",),
    )
    await track(
        sessions, cluster="pictures.allocations", findings=[finding], now=datetime(2024, 5, 4, 11, tzinfo=UTC)
    )
    items = (
        await (
            await client.get("/api/v1/incidents", params={"cluster": "pictures.allocations"}, headers=auth)
        ).json()
    )["items"]
    html = await (await client.get(f"/incidents/{items[0]['id']}", headers={**auth, **HTML})).text()
    shown = [
        (a["data-node"], a["data-request"], a["data-device"])
        for a in map(attrs, re.findall(r'<tr class="allocation-row"[^>]*>', html))
    ]
    assert shown == [
        (a["node"], r["request"], r["device"]) for a in grid["allocations"] for r in a["devices"]
    ]
    assert shown == [("gpu-a", "gpu", "gpu-0"), ("gpu-b", "gpu", "gpu-0")]


def test_pods_without_dra_get_no_device_pictures() -> None:
    report = report_of(Path(__file__).parent.parent / "scenarios" / "rollout-surge-deadlock" / "gpu-tracker")
    grids = [g for f in report.findings for g in f.evidence.get(GRID_KEY, ())]
    assert grids and all(g["devices"] == [] and "allocations" not in g for g in grids)
