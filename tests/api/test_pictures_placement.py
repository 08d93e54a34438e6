"""The placement picture of requests-missing-load-skew (seed 003): the predicted replicas
per node today and after the proposed requests, and each node's real CPU use, drawn from
the stored evidence — every number in the SVG and its table equals the API's."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.api.charts import PLACEMENT_BAR, placement_rows
from storage.tracker import track
from tests.simulator.test_grid import report_of

HTML = {"Accept": "text/html"}
SEED_003 = (
    Path(__file__).parent.parent
    / "scenarios"
    / "requests-missing-load-skew"
    / "seed-003-cassandra-no-requests"
)


async def stored(
    sessions: async_sessionmaker[AsyncSession], case: Path, client: TestClient, auth: dict[str, str]
) -> dict[str, Any]:
    """The case's findings tracked as incidents; the first one's API document."""
    findings = list(report_of(case).findings)
    cluster = f"pictures.{case.name}"
    await track(sessions, cluster=cluster, findings=findings, now=datetime(2024, 5, 4, 11, tzinfo=UTC))
    items = (await (await client.get("/api/v1/incidents", params={"cluster": cluster}, headers=auth)).json())[
        "items"
    ]
    assert items, case
    doc: dict[str, Any] = await (await client.get(f"/api/v1/incidents/{items[0]['id']}", headers=auth)).json()
    return doc


def attrs(tag: str) -> dict[str, str]:
    return dict(re.findall(r'([a-z-]+)="([^"]*)"', tag))


async def test_seed_003_placement_shows_the_apis_numbers(
    sessions: async_sessionmaker[AsyncSession], client: TestClient, auth: dict[str, str]
) -> None:
    doc = await stored(sessions, SEED_003, client, auth)
    assert doc["rule_id"] == "requests-missing-load-skew"
    want = doc["evidence"]["predicted_placement"]
    assert want["cpu_use"]["node2"]["percent"] == 81  # 3177m of 3920m (seed 003's metrics)
    html = await (await client.get(f"/incidents/{doc['id']}", headers={**auth, **HTML})).text()
    figure = re.search(r'<figure class="placement".*?</figure>', html, re.S)
    assert figure, "no placement picture"
    svg = figure.group(0)
    assert '<title id="pl-title">' in svg and '<desc id="pl-desc">' in svg and 'role="img"' in svg
    rows = [attrs(t) for t in re.findall(r'<g class="placement-row"[^>]*>', svg)]
    nodes = set(want["before"]) | set(want["after"])
    assert {r["data-node"] for r in rows} == nodes
    for r in rows:
        node = r["data-node"]
        assert float(r["data-before"]) == want["before"].get(node, 0)
        assert float(r["data-after"]) == want["after"].get(node, 0)
        assert int(r["data-cpu-percent"]) == want["cpu_use"][node]["percent"]
        assert r["data-hot"] == str(node in want["hot_nodes"]).lower()
    # Hot nodes first; the picture's text says the same without colour.
    assert {r["data-node"] for r in rows[:2]} == set(want["hot_nodes"])
    assert "▲ hot" in svg and "today" in svg and "after" in svg
    desc = re.search(r'<desc id="pl-desc">(.*?)</desc>', svg, re.S)
    assert (
        desc
        and f"node2 (hot): {want['before']['node2']:g} today, {want['after']['node2']:g} after"
        in desc.group(1)
    )
    # The data table alternative: the same numbers.
    table = re.findall(
        r'<tr data-node="([^"]+)"><th scope="row">.*?</th><td class="num">([^<]+)</td><td class="num">([^<]+)</td><td class="num">(\d+)%',
        svg,
    )
    assert {(n, float(b), float(a), int(c)) for n, b, a, c in table} == {
        (n, want["before"].get(n, 0), want["after"].get(n, 0), want["cpu_use"][n]["percent"]) for n in nodes
    }


def test_bars_share_one_scale_and_missing_numbers_are_not_invented() -> None:
    drawn = placement_rows(
        {
            "replicas": 20,
            "hot_nodes": ["b"],
            "before": {"a": 4.0, "b": 16.0},
            "after": {"a": 12.0, "b": 8.0},
            "cpu_use": {"b": {"usage": "3", "allocatable": "4", "percent": 75}},
        }
    )
    by = {r["node"]: r for r in drawn["rows"]}
    assert [r["node"] for r in drawn["rows"]] == ["b", "a"]
    assert by["b"]["w_before"] == PLACEMENT_BAR and by["a"]["w_after"] == PLACEMENT_BAR * 12 / 16
    assert by["a"]["cpu"] is None and by["b"]["w_cpu"] == 90.0
    only_today = placement_rows({"replicas": 20, "before": {"a": 20.0}, "after": None})
    assert not only_today["has_after"] and only_today["rows"][0]["after"] is None
