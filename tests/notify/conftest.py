"""Notifier fixtures: databases (SQLite, and a real PostgreSQL), outbox rows written
by the real tracker, and the local receivers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import ObjectRef
from storage.models import Notification
from storage.tracker import EVERY_SUBJECT, NotifyPolicy, track
from tests.notify.receivers import FakeSlack, WebhookReceiver
from tests.storage.conftest import db_url, engine, pg_server, sessions
from tests.storage.factories import T0, finding

__all__ = ["db_url", "engine", "pg_server", "sessions"]  # the storage tests' database fixtures
NO_STORM = NotifyPolicy(storm_threshold=1_000_000)  # one message per incident, however many open

SECRET = b"whsec-test-0123456789abcdef"


async def open_incidents(
    sessions: async_sessionmaker[AsyncSession],
    n: int,
    sinks: Sequence[str],
    *,
    resolve: bool = False,
    namespace: str = "ml",
) -> list[Notification]:
    """``n`` incidents opened (and resolved) by the real tracker; their outbox rows, oldest first."""
    findings = [finding(ObjectRef("Deployment", namespace, f"app-{i:04d}")) for i in range(n)]
    await track(
        sessions, cluster="prod", findings=findings, now=T0, evaluated=EVERY_SUBJECT, sinks=sinks, policy=NO_STORM
    )
    if resolve:
        await track(
            sessions,
            cluster="prod",
            findings=[],
            now=T0 + timedelta(minutes=5),
            evaluated=EVERY_SUBJECT,
            sinks=sinks,
            policy=NO_STORM,
        )
    async with sessions() as s:
        return list((await s.execute(select(Notification).order_by(Notification.id))).scalars())


async def rows(sessions: async_sessionmaker[AsyncSession]) -> list[Notification]:
    async with sessions() as s:
        return list((await s.execute(select(Notification).order_by(Notification.id))).scalars())


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with WebhookReceiver(SECRET) as server:
        yield server
