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


@pytest.mark.postgres
async def test_readers_are_served_in_arrival_order_and_time_out_after_the_pool_timeout(pg_url: str) -> None:
    """Readers take the pool's connections first come, first served. 300 readers arriving one
    after another on a pool of 2: each is served within 2 places of its arrival. Through the
    pool's own queue a newcomer could take a connection just returned while older waiters had
    not run yet: measured, a reader was served 207 places late (under load, some API requests
    starved past the pool timeout while most were served in seconds). A reader that waits
    longer than the pool timeout gets TimeoutError (a 503 for the API)."""
    engine = create_engine(pg_url, options=EngineOptions(pool_size=2, pool_timeout=3.0))
    reads = reading_sessions(create_sessionmaker(engine))
    served: list[int] = []

    async def read(i: int, hold: asyncio.Event | None = None) -> None:
        async with reads() as session:
            # Served = given a connection (what the order is about); the queries after it may
            # finish in any order on a loaded machine.
            await session.connection()
            served.append(i)
            await session.scalar(text("SELECT 1"))
            if hold is not None:
                await hold.wait()
            await session.scalar(text("SELECT 1"))

    try:
        # Both connections made first: the first connection's set-up (tens of ms) is not a turn.
        await asyncio.gather(read(-1), read(-2))
        served.clear()
        readers = []
        for i in range(300):
            readers.append(asyncio.create_task(read(i)))
            await asyncio.sleep(0.0005)
        await asyncio.gather(*readers)
        assert sorted(served) == list(range(300))
        assert max(abs(i - place) for place, i in enumerate(served)) <= 2

        stuck = asyncio.Event()
        blockers = [asyncio.create_task(read(1000 + k, stuck)) for k in range(2)]
        while len(served) < 302:
            await asyncio.sleep(0.01)
        with pytest.raises(TimeoutError):
            await read(2000)
        stuck.set()
        await asyncio.gather(*blockers)
    finally:
        await engine.dispose()
