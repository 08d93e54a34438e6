"""Storage fixtures: every test that takes ``db_url`` runs on SQLite and on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from storage.engine import create_engine, create_sessionmaker
from storage.models import Base
from tests import pg


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.PostgresServer]:
    yield from pg.serve()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """An empty database: a SQLite file, or a fresh database on the session's PostgreSQL server."""
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
