"""Listing, reading and counting incidents; the outbox claim protocol."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import ObjectRef, Severity
from storage.models import Notification
from storage.outbox import claim_due, mark_failed, mark_sent, thread_ref_for
from storage.queries import (
    IncidentFilter,
    InvalidCursor,
    Sort,
    distinct_values,
    get_incident,
    incident_stats,
    list_incidents,
)
from storage.tracker import track
from storage.views import incident_detail_dict, incident_dict
from tests.storage.factories import at, finding, trigger

Sessions = async_sessionmaker[AsyncSession]


async def seed(sessions: Sessions) -> None:
    """12 incidents over 3 namespaces, 2 rules, 2 severities; 4 of them resolved after 10/20/30/40 min."""
    for i in range(12):
        ns = ("ml", "web", "batch")[i % 3]
        rule = "rollout-deadlock" if i % 2 else "insufficient-resources"
        f = finding(
            ObjectRef("Deployment", ns, f"app-{i}"),
            rule_id=rule,
            severity=Severity.CRITICAL if i % 4 == 0 else Severity.WARNING,
            title=f"app-{i} is stuck" + (" on a GPU" if i == 7 else ""),
            explanation="needs 100% of a node" if i == 5 else "plain words",
        )
        await track(sessions, cluster="prod", findings=[f], now=at(i), triggers=[trigger(f"e{i}")])
        for r in range(i % 3):  # occurrences 1..3
            await track(
                sessions, cluster="prod", findings=[f], now=at(i + 0.5), triggers=[trigger(f"e{i}", 2 + r)]
            )
    for k, i in enumerate((0, 3, 6, 9)):
        await track(
            sessions,
            cluster="prod",
            findings=[],
            evaluated=[ObjectRef("Deployment", ("ml", "web", "batch")[i % 3], f"app-{i}")],
            now=at(i + 10 * (k + 1)),
        )


async def names(sessions: Sessions, flt: IncidentFilter, **kw: object) -> list[str]:
    async with sessions() as s:
        page = await list_incidents(s, flt, **kw)  # type: ignore[arg-type]
    return [i.subject_name for i in page.items]


async def test_filters(sessions: Sessions) -> None:
    await seed(sessions)
    newest_first = [f"app-{i}" for i in reversed(range(12)) if i not in (0, 3, 6, 9)]
    assert await names(sessions, IncidentFilter(status="open")) == newest_first
    assert set(await names(sessions, IncidentFilter(status="resolved"))) == {
        "app-0",
        "app-3",
        "app-6",
        "app-9",
    }
    assert await names(sessions, IncidentFilter(namespace="web", status="open")) == [
        "app-10",
        "app-7",
        "app-4",
        "app-1",
    ]
    assert await names(sessions, IncidentFilter(namespace="ml", status="open")) == []
    assert await names(sessions, IncidentFilter(rule_id="rollout-deadlock", severity="critical")) == []
    assert await names(sessions, IncidentFilter(severity="critical"), sort=Sort.ID) == [
        "app-0",
        "app-4",
        "app-8",
    ]
    assert await names(sessions, IncidentFilter(kind="Deployment", name="app-5")) == ["app-5"]
    assert await names(sessions, IncidentFilter(kind="StatefulSet")) == []
    assert await names(sessions, IncidentFilter(cluster="elsewhere")) == []
    # Text search: title or explanation, case-insensitive, LIKE wildcards taken literally.
    assert await names(sessions, IncidentFilter(text="gpu")) == ["app-7"]
    assert await names(sessions, IncidentFilter(text="100%")) == ["app-5"]
    assert await names(sessions, IncidentFilter(text="10_%")) == []
    # Active in a window: open or resolved at/after since, first seen before until.
    got = await names(sessions, IncidentFilter(since=at(24), until=at(6)), sort=Sort.ID)
    assert got == ["app-1", "app-2", "app-4", "app-5"]
    got = await names(sessions, IncidentFilter(since=at(23), until=at(6)), sort=Sort.ID)
    assert got == ["app-1", "app-2", "app-3", "app-4", "app-5"]


@pytest.mark.parametrize("sort", list(Sort))
async def test_cursor_pages_cover_everything_once_in_order(sessions: Sessions, sort: Sort) -> None:
    await seed(sessions)
    seen: list[int] = []
    cursor: str | None = None
    pages = 0
    async with sessions() as s:
        while True:
            page = await list_incidents(s, IncidentFilter(), sort=sort, limit=5, cursor=cursor)
            seen += [i.id for i in page.items]
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        everything = (await list_incidents(s, IncidentFilter(), sort=sort, limit=100)).items
    assert pages == 3 and len(seen) == len(set(seen)) == 12
    assert seen == [i.id for i in everything]
    key = sort.value.lstrip("-")
    values = [(getattr(i, key), i.id) for i in everything]
    assert values == sorted(values, reverse=sort.descending)


async def test_bad_cursors_are_refused(sessions: Sessions) -> None:
    await seed(sessions)
    async with sessions() as s:
        page = await list_incidents(s, sort=Sort.LAST_SEEN_DESC, limit=2)
        assert page.next_cursor
        with pytest.raises(InvalidCursor, match="sort"):
            await list_incidents(s, sort=Sort.OCCURRENCES, cursor=page.next_cursor)
        for bad in ("%%%", "bm90IGpzb24", "WzEsMiwzXQ", "WyItbGFzdF9zZWVuIiwiYSIsMV0"):
            with pytest.raises(InvalidCursor):
                await list_incidents(s, sort=Sort.LAST_SEEN_DESC, cursor=bad)


async def test_get_incident_with_timeline_and_json_contract(sessions: Sessions) -> None:
    await seed(sessions)
    async with sessions() as s:
        page = await list_incidents(s, IncidentFilter(name="app-3"))
        found = await get_incident(s, page.items[0].id)
        assert await get_incident(s, 10_000) is None
    assert found is not None
    inc, entries = found
    assert [e.kind for e in entries] == ["opened", "resolved"]
    doc = incident_dict(inc)
    assert list(doc) == [
        "id",
        "fingerprint",
        "rule_id",
        "severity",
        "status",
        "subject",
        "title",
        "explanation",
        "evidence",
        "remedies",
        "first_seen",
        "last_seen",
        "resolved_at",
        "occurrences",
        "waiting",
        "resolution",
    ]
    assert doc["waiting"] is None
    # Resolved without a view of the cluster: the resolution says the analysis no longer finds it.
    assert doc["resolution"]["summary"].startswith("The analysis no longer finds this problem")
    assert doc["resolution"]["changes"] == []
    assert doc["subject"] == {"kind": "Deployment", "namespace": "ml", "name": "app-3"}
    assert doc["first_seen"] == "2024-05-01T12:03:00Z" and doc["resolved_at"] == "2024-05-01T12:23:00Z"
    assert list(doc["remedies"][0]) == ["title", "kind", "yaml", "command", "verified", "verification"]
    detail = incident_detail_dict(inc, entries)
    assert detail["timeline"][1]["kind"] == "resolved" and detail["cluster"] == "prod"


async def test_stats(sessions: Sessions) -> None:
    await seed(sessions)
    async with sessions() as s:
        stats = await incident_stats(s)
        ml = await incident_stats(s, IncidentFilter(namespace="ml"))
        rules = await distinct_values(s, "rule_id")
    assert (stats.total, stats.open, stats.resolved) == (12, 8, 4)
    assert {r["namespace"]: (r["count"], r["open"]) for r in stats.by_namespace} == {
        "ml": (4, 0),
        "web": (4, 4),
        "batch": (4, 4),
    }
    assert {r["rule_id"]: r["count"] for r in stats.by_rule} == {
        "rollout-deadlock": 6,
        "insufficient-resources": 6,
    }
    assert stats.by_day == [{"day": "2024-05-01", "count": 12}]
    ttr = stats.time_to_resolve
    assert ttr["count"] == 4 and ttr["max_seconds"] == pytest.approx(2400, abs=0.01)
    assert ttr["mean_seconds"] == pytest.approx(1500, abs=0.01)
    assert ttr["p50_seconds"] == pytest.approx(1800, abs=0.01) and ttr["p90_seconds"] == pytest.approx(
        2400, abs=0.01
    )
    assert ml.total == 4 and ml.open == 0 and ml.time_to_resolve["count"] == 4
    assert rules == ["insufficient-resources", "rollout-deadlock"]


async def test_stats_time_to_resolve_is_the_same_from_the_index_and_from_a_filter(sessions: Sessions) -> None:
    """SQLite: the whole history's percentiles come from ix_incidents_resolve_seconds (index lookups),
    a filter's from a sort of its rows: a filter that matches everything gives the same numbers."""
    for i in range(9):  # durations 0, 600, 1200, ... 4800 s beside the seed's
        f = finding(ObjectRef("Deployment", "ttr", f"app-{i}"))
        await track(sessions, cluster="ttr", findings=[f], now=at(0))
        await track(sessions, cluster="ttr", findings=[], evaluated=[f.subject], now=at(10 * i))
    await seed(sessions)
    async with sessions() as s:
        whole = (await incident_stats(s)).time_to_resolve
        since_ever = (await incident_stats(s, IncidentFilter(since=at(-(10**6))))).time_to_resolve
        if s.get_bind().dialect.name == "sqlite":
            plan = await s.execute(
                text(
                    "EXPLAIN QUERY PLAN SELECT (julianday(resolved_at) - julianday(first_seen)) * 86400.0 "
                    "FROM incidents WHERE resolved_at IS NOT NULL "
                    "ORDER BY (julianday(resolved_at) - julianday(first_seen)) * 86400.0 LIMIT 1 OFFSET 3"
                )
            )
            assert "ix_incidents_resolve_seconds" in " ".join(str(r[-1]) for r in plan)
    assert whole == since_ever and whole["count"] == 13
    assert whole["max_seconds"] == pytest.approx(4800, abs=0.01)


async def test_outbox_claim_lease_and_outcomes(sessions: Sessions) -> None:
    await track(sessions, cluster="prod", findings=[finding()], now=at(0), sinks=["slack", "hook"])
    lease = timedelta(seconds=60)
    async with sessions.begin() as s:
        assert await claim_due(s, now=at(0) - timedelta(seconds=1)) == []  # not due yet
        claimed = await claim_due(s, now=at(0), limit=1, lease=lease)
    assert [(n.sink, n.status, n.attempts) for n in claimed] == [("slack", "sending", 1)]
    async with sessions.begin() as s:
        rest = await claim_due(s, now=at(0.5), lease=lease)
        assert [n.sink for n in rest] == ["hook"]  # the leased row is not handed out twice
        await mark_sent(s, claimed[0].id, now=at(0.5), thread_ref="1714564800.000100")
        await mark_failed(s, rest[0].id, now=at(0.5), error="HTTP 503", retry_at=at(2))
    async with sessions.begin() as s:
        assert await claim_due(s, now=at(1.5)) == []
        again = await claim_due(s, now=at(2))
        assert [(n.sink, n.attempts, n.last_error) for n in again] == [("hook", 2, "HTTP 503")]
        await mark_failed(s, again[0].id, now=at(2), error="HTTP 400", retry_at=None)
        assert await thread_ref_for(s, claimed[0].incident_id, "slack") == "1714564800.000100"
        assert await thread_ref_for(s, claimed[0].incident_id, "hook") is None
    async with sessions() as s:
        rows = {n.sink: n for n in (await s.execute(Notification.__table__.select())).all()}
    assert rows["slack"].status == "sent" and rows["slack"].sent_at is not None
    assert rows["hook"].status == "failed" and rows["hook"].attempts == 2
    # A claim whose notifier died becomes due again when the lease runs out.
    await track(sessions, cluster="prod", findings=[finding(rule_id="other")], now=at(3), sinks=["slack"])
    async with sessions.begin() as s:
        [lost] = await claim_due(s, now=at(3), lease=lease)
    async with sessions.begin() as s:
        assert await claim_due(s, now=at(3.5), lease=lease) == []
        [back] = await claim_due(s, now=at(4), lease=lease)
    assert back.id == lost.id and back.attempts == 2


async def test_waiting_filter_and_json(sessions: Sessions) -> None:
    waits = finding(ObjectRef("Deployment", "ml", "waits"), pods=("ml/waits-1",))
    quiet = finding(ObjectRef("Deployment", "ml", "quiet"), pods=("ml/quiet-1",))
    paged = finding(ObjectRef("Deployment", "ml", "paged"), pods=("ml/paged-1",))
    await track(
        sessions,
        cluster="prod",
        findings=[waits, quiet, paged],
        now=at(0),
        waiting={waits.fingerprint: "scale-up", quiet.fingerprint: "scale-up"},
    )
    await track(
        sessions,
        cluster="prod",
        findings=[waits, paged],
        evaluated=[quiet.subject],
        now=at(5),
        waiting={waits.fingerprint: "scale-up"},
    )
    assert set(await names(sessions, IncidentFilter(waiting=True))) == {"waits", "quiet"}
    assert await names(sessions, IncidentFilter(waiting=True, status="open")) == ["waits"]
    assert await names(sessions, IncidentFilter(waiting=True, status="resolved")) == ["quiet"]
    assert await names(sessions, IncidentFilter(waiting=False)) == ["paged"]
    async with sessions() as s:
        page = await list_incidents(s, IncidentFilter(name="waits"))
        stats = await incident_stats(s, IncidentFilter(waiting=True))
    assert incident_dict(page.items[0])["waiting"] == {"for": "scale-up", "since": "2024-05-01T12:00:00Z"}
    assert (stats.total, stats.open, stats.resolved) == (2, 1, 1)
