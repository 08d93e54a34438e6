"""API fixtures: a migrated, seeded database (SQLite, or PostgreSQL where asked) behind the real app."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.api.app import create_app
from agent.api.pages import build_jinja_env
from agent.settings import ApiSettings, Secret
from storage.engine import create_engine, create_sessionmaker
from storage.migrate import upgrade
from tests import pg
from tests.api.seed import NOW, seed

TOKEN = "t0ken-for-the-api-tests-0123456789"
OTHER_TOKEN = "another-valid-token-abcdefghijkl"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.PostgresServer]:
    yield from pg.serve()


async def _migrate_and_seed(url: str) -> None:
    eng = create_engine(url)
    try:
        await upgrade(eng)
        await seed(create_sessionmaker(eng))
    finally:
        await eng.dispose()


@pytest.fixture(scope="session")
def seeded_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated and seeded SQLite file per session; each test gets a copy."""
    path = tmp_path_factory.mktemp("template") / "seeded.db"
    asyncio.run(_migrate_and_seed(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(params=["sqlite"])
async def db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, seeded_sqlite: Path
) -> AsyncIterator[str]:
    """A migrated database holding the seed (tests/api/seed.py): SQLite by default; tests that
    also run on PostgreSQL parametrize ``db_url`` indirectly."""
    if request.param == "sqlite":
        target = tmp_path_factory.mktemp("db") / "unstick.db"
        shutil.copyfile(seeded_sqlite, target)
        yield f"sqlite+aiosqlite:///{target}"
        return
    server: pg.PostgresServer = request.getfixturevalue("pg_server")
    async with server.database() as url:
        await _migrate_and_seed(url)
        yield url


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(db_url)
    yield eng
    await eng.dispose()


@pytest.fixture
def sessions(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return create_sessionmaker(engine)


@pytest.fixture
def api_settings() -> ApiSettings:
    return ApiSettings(tokens=(Secret(TOKEN), Secret(OTHER_TOKEN)), max_page_size=100, max_request_bytes=4096)


@pytest.fixture
async def client(
    sessions: async_sessionmaker[AsyncSession], api_settings: ApiSettings
) -> AsyncIterator[TestClient]:
    app = create_app(sessions=sessions, settings=api_settings, jinja=build_jinja_env(), clock=lambda: NOW)
    async with TestClient(TestServer(app)) as c:
        as_browser(c)
        yield c


def as_browser(client: TestClient) -> TestClient:
    """Send ``Origin: <this server>`` on every request, as browsers do on the pages' own form
    posts (tests of cross-site requests override or drop it)."""
    client.session.headers["Origin"] = str(client.make_url("")).rstrip("/")
    return client


@pytest.fixture
def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def open_settings(api_settings: ApiSettings) -> ApiSettings:
    return replace(api_settings, auth=False, tokens=())
