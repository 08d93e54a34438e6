"""The incident's timeline on one time axis and the trends page (linked from the list): every marker and
every number is the API's (the timeline, the notifications, /api/v1/stats)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from aiohttp.test_utils import TestClient

from agent.api.charts import AXIS_WIDTH, day_columns, share, timeline_axis

HTML = {"Accept": "text/html"}


async def test_the_timeline_axis_marks_every_entry_and_notification(
    client: TestClient, auth: dict[str, str]
) -> None:
    html = await (await client.get("/incidents/1", headers={**auth, **HTML})).text()
    api = await (await client.get("/api/v1/incidents/1", headers=auth)).json()
    figure = re.search(r'<figure class="timeline-axis".*?</figure>', html, re.S)
    assert figure
    markers = re.findall(r'data-kind="([a-z_-]+)" data-lane="(\w+)"', figure.group(0))
    assert sorted(k for k, lane in markers if lane == "incident") == sorted(
        e["kind"] for e in api["timeline"]
    )
    outcomes = {"sent": "delivered", "failed": "dead-lettered", "silenced": "silenced"}
    assert sorted(k for k, lane in markers if lane == "notifications") == sorted(
        outcomes.get(n["status"], "pending") for n in api["notifications"]
    )
    assert '<title id="tl-title">' in figure.group(0) and '<desc id="tl-desc">' in figure.group(0)


def test_markers_sit_where_their_time_is() -> None:
    class Entry:
        def __init__(self, kind: str, at: datetime) -> None:
            self.kind, self.at = kind, at

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    axis = timeline_axis(
        t0,
        t0 + timedelta(hours=4),
        [
            Entry("opened", t0),
            Entry("root_cause_changed", t0 + timedelta(hours=1)),
            Entry("resolved", t0 + timedelta(hours=4)),
        ],
        [
            {
                "sink": "slack",
                "event": "opened",
                "status": "sent",
                "created_at": "2026-01-01T00:00:00Z",
                "sent_at": "2026-01-01T00:00:01Z",
            },
            {
                "sink": "webhook",
                "event": "resolved",
                "status": "failed",
                "created_at": "2026-01-01T04:00:00Z",
                "sent_at": None,
            },
        ],
    )
    xs = {(m.lane, m.kind): m.x for m in axis["markers"]}
    assert xs[("incident", "opened")] == 0 and xs[("incident", "resolved")] == AXIS_WIDTH
    assert xs[("incident", "root_cause_changed")] == AXIS_WIDTH / 4
    assert xs[("notifications", "dead-lettered")] == AXIS_WIDTH
    assert [m.shape for m in axis["markers"]] == ["circle", "diamond", "check", "square", "cross"]


async def test_the_trends_page_draws_the_stats(client: TestClient, auth: dict[str, str]) -> None:
    listing = await (await client.get("/incidents?namespace=batch", headers={**auth, **HTML})).text()
    link = re.search(r'id="trends-link" href="([^"]+)"', listing)
    assert link and link.group(1) == "/trends?namespace=batch"  # the list's filter, carried over
    html = await (await client.get("/trends", headers={**auth, **HTML})).text()
    stats = await (await client.get("/api/v1/stats", headers=auth)).json()
    section = re.search(r'<section class="trends".*?</section>', html, re.S)
    assert section
    columns = {d: int(n) for d, n in re.findall(r'data-day="([0-9-]+)" data-count="(\d+)"', section.group(0))}
    assert len(columns) == 30
    for day in stats["by_day"]:
        if day["day"] in columns:
            assert columns[day["day"]] == day["count"]
    rows = re.findall(
        r'<tr data-rule="([^"]+)"><th scope="row"><code>[^<]*</code></th><td class="num">(\d+)</td><td class="num">(\d+)</td>',
        section.group(0),
    )
    assert rows == [(r["rule_id"], str(r["count"]), str(r["open"])) for r in stats["by_rule"][: len(rows)]]
    assert rows
    t = stats["time_to_resolve"]
    assert t["count"] > 0 and 'id="ttr-p50"' in section.group(0)


def test_day_columns_fill_missing_days_and_scale_to_the_busiest() -> None:
    days = day_columns(
        [{"day": "2026-01-30", "count": 4}, {"day": "2026-01-29", "count": 2}], date(2026, 1, 30), days=3
    )
    assert [(c["day"], c["count"], c["h"]) for c in days["columns"]] == [
        ("2026-01-28", 0, 0.0),
        ("2026-01-29", 2, 40.0),
        ("2026-01-30", 4, 80.0),
    ]
    assert [r["width"] for r in share([{"count": 5}, {"count": 1}])] == [100.0, 20.0]


async def test_the_trends_follow_the_filter(client: TestClient, auth: dict[str, str]) -> None:
    html = await (await client.get("/trends?namespace=batch", headers={**auth, **HTML})).text()
    stats = await (await client.get("/api/v1/stats?namespace=batch", headers=auth)).json()
    rows = re.findall(r'<tr data-namespace="([^"]*)">', html)
    assert rows == [r["namespace"] for r in stats["by_namespace"]][: len(rows)] == ["batch"]


async def test_the_trends_page_needs_a_sign_in(client: TestClient) -> None:
    assert (await client.get("/trends", headers=HTML)).status == 401
    assert (await client.get("/incidents/1/remedies/0.apply.yaml", headers=HTML)).status == 401
