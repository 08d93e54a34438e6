"""PostgreSQL's pool and timeouts come from ``EngineOptions`` (``UNSTICK_DB_POOL_SIZE``,
``UNSTICK_DB_POOL_TIMEOUT``, ``UNSTICK_DB_STATEMENT_TIMEOUT``, ``UNSTICK_DB_LOCK_TIMEOUT``):
every connection carries the timeouts, the pool never opens more than its size, and a request
that waits past the pool timeout fails (the API answers that with 503 and Retry-After).
SQLite: WAL and a busy timeout."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.exc import TimeoutError as PoolTimeout

from agent.settings import Settings
from storage.engine import EngineOptions, create_engine, create_sessionmaker, reading_sessions


@pytest.fixture
async def pg_url(pg_server) -> str:  # type: ignore[no-untyped-def]
    async with pg_server.database() as url:
        yield url


@pytest.mark.postgres
async def test_defaults_set_both_timeouts_on_every_connection(pg_url: str) -> None:
    engine = create_engine(pg_url)
    try:
        async with engine.connect() as conn:
            statement = await conn.scalar(text("SHOW statement_timeout"))
            lock = await conn.scalar(text("SHOW lock_timeout"))
        assert (statement, lock) == ("1min", "10s")
        assert engine.pool.size() == EngineOptions().pool_size  # type: ignore[attr-defined]
    finally:
        await engine.dispose()


@pytest.mark.postgres
async def test_environment_sizes_the_pool_and_zero_leaves_the_database_setting(pg_url: str) -> None:
    env = {
        "UNSTICK_DB_URL": pg_url,
        "UNSTICK_DB_POOL_SIZE": "2",
        "UNSTICK_DB_POOL_TIMEOUT": "300ms",
        "UNSTICK_DB_STATEMENT_TIMEOUT": "0",
        "UNSTICK_DB_LOCK_TIMEOUT": "1500ms",
    }
    options = Settings.from_args(None, env).db.engine
    assert options == EngineOptions(pool_size=2, pool_timeout=0.3, statement_timeout=None, lock_timeout=1.5)
    engine = create_engine(pg_url, options=options)
    try:
        async with engine.connect() as a, engine.connect() as b:
            assert await a.scalar(text("SHOW lock_timeout")) == "1500ms"
            assert await b.scalar(text("SHOW statement_timeout")) == "0"  # the server's default
            started = asyncio.get_running_loop().time()
            with pytest.raises(PoolTimeout):
                async with engine.connect() as c:  # a third: no overflow
                    await c.scalar(text("SELECT 1"))
            assert asyncio.get_running_loop().time() - started < 2
    finally:
        await engine.dispose()


async def test_sqlite_is_wal_with_a_busy_timeout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Readers never wait for the writer (WAL), and a writer waits 5 s for another's lock."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/wal.db")
    try:
        async with engine.connect() as conn:
            assert await conn.scalar(text("PRAGMA journal_mode")) == "wal"
            assert await conn.scalar(text("PRAGMA busy_timeout")) == 5000
    finally:
        await engine.dispose()


@pytest.mark.postgres
async def test_reading_sessions_run_each_statement_on_its_own(pg_url: str) -> None:
    """The API's GET handlers read through ``reading_sessions``: no BEGIN/ROLLBACK round trips,
    so two statements are two transactions (now() differs); the writing sessions keep one."""
    engine = create_engine(pg_url)
    writing = create_sessionmaker(engine)
    try:
        async with reading_sessions(writing)() as session:
            first = await session.scalar(text("SELECT now()"))
            await asyncio.sleep(0.05)
            second = await session.scalar(text("SELECT now()"))
        assert first != second
        async with writing() as session:
            first = await session.scalar(text("SELECT now()"))
            await asyncio.sleep(0.05)
            second = await session.scalar(text("SELECT now()"))
        assert first == second
    finally:
        await engine.dispose()
