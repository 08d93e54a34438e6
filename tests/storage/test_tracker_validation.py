"""What the tracker refuses and forgets, at its boundaries (found by ``bench/mutation.py
storage/tracker.py``): the notification policy's limits, a pass's inputs (an aware
clock, waiting reasons that fit incidents.waiting_for), and pruning applied events."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from storage.models import AppliedEvent
from storage.tracker import WAITING_REASON_MAX, NotifyPolicy, prune_applied_events, track
from tests.storage.factories import T0


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


async def test_pruning_forgets_only_what_was_applied_before(sessions: async_sessionmaker[AsyncSession]) -> None:
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
