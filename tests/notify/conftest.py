"""Notifier fixtures: databases (SQLite, and a real PostgreSQL), outbox rows written
by the real tracker, and the local receivers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from analyzers.findings import ObjectRef
from storage.engine import create_engine, create_sessionmaker
from storage.models import Base, Notification
from storage.tracker import EVERY_SUBJECT, track
from tests import pg
from tests.notify.receivers import FakeSlack, WebhookReceiver
from tests.storage.factories import T0, finding

SECRET = b"whsec-test-0123456789abcdef"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.PostgresServer]:
    try:
        server = pg.acquire()
    except pg.PostgresNotFound as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        pg.release()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('db')}/unstick.db"
        return
    server: pg.PostgresServer = request.getfixturevalue("pg_server")
    async with server.database() as url:
        yield url


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(db_url)
    async with eng.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    yield eng
    await eng.dispose()


@pytest.fixture
def sessions(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return create_sessionmaker(engine)


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
    await track(sessions, cluster="prod", findings=findings, now=T0, evaluated=EVERY_SUBJECT, sinks=sinks)
    if resolve:
        await track(
            sessions, cluster="prod", findings=[], now=T0 + timedelta(minutes=5), evaluated=EVERY_SUBJECT, sinks=sinks
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
