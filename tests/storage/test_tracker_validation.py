"""What the tracker refuses and forgets, at its boundaries (found by ``bench/mutation.py
storage/tracker.py``): the notification policy's limits, a pass's inputs (an aware
clock, waiting reasons that fit incidents.waiting_for), and pruning applied events."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import Finding, ObjectRef
from storage.models import AppliedEvent, Incident, Notification
from storage.tracker import (
    EVERY_SUBJECT,
    WAITING_REASON_MAX,
    NotifyPolicy,
    prune_applied_events,
    track,
    track_reminders,
)
from tests.storage.factories import T0, finding


class NoOffset(tzinfo):
    """A tzinfo that does not know its offset: as unusable as none."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


def test_the_notification_policy_limits() -> None:
    NotifyPolicy(storm_threshold=1, storm_window=timedelta(seconds=1), reminder_interval=timedelta(seconds=1))
    with pytest.raises(ValueError, match="storm_threshold"):
        NotifyPolicy(storm_threshold=0)
    with pytest.raises(ValueError, match="positive"):
        NotifyPolicy(storm_window=timedelta(0))
    with pytest.raises(ValueError, match="positive"):
        NotifyPolicy(reminder_interval=timedelta(0))


async def test_a_pass_needs_an_aware_clock(sessions: async_sessionmaker[AsyncSession]) -> None:
    for now in (T0.replace(tzinfo=None), T0.replace(tzinfo=NoOffset())):
        with pytest.raises(ValueError, match="timezone-aware"):
            await track(sessions, cluster="prod", findings=[], now=now)


async def test_waiting_reasons_fit_the_column(sessions: async_sessionmaker[AsyncSession]) -> None:
    for reason in ("x", "x" * WAITING_REASON_MAX):
        await track(sessions, cluster="prod", findings=[], now=T0, waiting={"fp": reason})
    for reason in ("", "x" * (WAITING_REASON_MAX + 1)):
        with pytest.raises(ValueError, match="waiting reason"):
            await track(sessions, cluster="prod", findings=[], now=T0, waiting={"fp": reason})


async def test_pruning_forgets_only_what_was_applied_before(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with sessions.begin() as s:
        assert await prune_applied_events(s, before=T0) == 0  # nothing to forget: says so
        s.add_all(
            [
                AppliedEvent(cluster="prod", key="old:1", applied_at=T0 - timedelta(seconds=1)),
                AppliedEvent(cluster="prod", key="edge:1", applied_at=T0),
            ]
        )
    async with sessions.begin() as s:
        assert await prune_applied_events(s, before=T0) == 1
    async with sessions() as s:
        assert list((await s.execute(select(AppliedEvent.key))).scalars()) == ["edge:1"]


async def test_of_two_equally_severe_findings_of_one_fingerprint_the_first_is_kept(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    first = finding(title="first words", pods=("ml/trainer-a",))
    second = finding(title="second words", pods=("ml/trainer-b",))
    assert first.fingerprint == second.fingerprint
    await track(sessions, cluster="prod", findings=[first, second], now=T0, evaluated=EVERY_SUBJECT)
    async with sessions() as s:
        (incident,) = (await s.execute(select(Incident))).scalars()
    assert incident.title == "first words"
    assert incident.pods == ["ml/trainer-a", "ml/trainer-b"]  # pods are pooled


async def test_new_outbox_rows_start_with_no_attempt(sessions: async_sessionmaker[AsyncSession]) -> None:
    await track(
        sessions, cluster="prod", findings=[finding()], now=T0, evaluated=EVERY_SUBJECT, sinks=["slack"]
    )
    async with sessions() as s:
        rows = list((await s.execute(select(Notification))).scalars())
    assert [(r.event, r.status, r.attempts) for r in rows] == [("opened", "pending", 0)]


async def test_an_open_exactly_one_storm_window_ago_no_longer_counts(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """storm_threshold 1: a second new incident inside the window makes a digest; one
    exactly a window after the first does not (the window is open at its start)."""
    policy = NotifyPolicy(storm_threshold=1, storm_window=timedelta(minutes=5))

    def one(name: str) -> list[Finding]:
        return [finding(ObjectRef("Deployment", "ml", name))]

    await track(
        sessions, cluster="prod", findings=one("a"), now=T0, evaluated=[], sinks=["slack"], policy=policy
    )
    at_edge = T0 + timedelta(minutes=5)
    await track(
        sessions, cluster="prod", findings=one("b"), now=at_edge, evaluated=[], sinks=["slack"], policy=policy
    )
    async with sessions() as s:
        events = [
            r.event for r in (await s.execute(select(Notification).order_by(Notification.id))).scalars()
        ]
    assert events == ["opened", "opened"]


async def test_reminders_need_an_aware_clock_and_have_a_default_policy(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    assert await track_reminders(sessions, cluster="prod", now=T0) == []
    for now in (T0.replace(tzinfo=None), T0.replace(tzinfo=NoOffset())):
        with pytest.raises(ValueError, match="timezone-aware"):
            await track_reminders(sessions, cluster="prod", now=now)
