"""A PostgreSQL that stalls: another session holds an ACCESS EXCLUSIVE lock on the incidents
table for longer than the agent's ``lock_timeout`` (``UNSTICK_DB_LOCK_TIMEOUT``, set on each
connection: storage.engine.EngineOptions), while the tracker keeps running passes.

What holds afterwards:

* while the lock is held, a pass fails within about ``lock_timeout`` with PostgreSQL's own
  clear error ("canceling statement due to lock timeout") instead of hanging, and leaves
  nothing behind (its transaction rolls back); ``/readyz`` stays 200 (the server answers);
* once the lock is released the pass, run again, opens every incident once with one outbox
  row each; the stall and the recovery time are printed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import func, select

from agent.api.app import create_app
from agent.settings import ApiSettings, Secret
from analyzers.findings import ObjectRef
from storage.engine import EngineOptions, create_engine, create_sessionmaker
from storage.migrate import upgrade
from storage.models import Incident, Notification
from storage.tracker import EVERY_SUBJECT, NotifyPolicy, track
from tests import pg
from tests.storage.factories import T0, finding

LOCK_TIMEOUT = 1.0
STALL = 4.0


@pytest.fixture
def server() -> Iterator[pg.PostgresServer]:
    yield from pg.serve()


@pytest.fixture
async def url(server: pg.PostgresServer) -> AsyncIterator[str]:
    async with server.database() as url:
        engine = create_engine(url)
        await upgrade(engine)
        await engine.dispose()
        yield url


async def test_a_lock_held_longer_than_lock_timeout(server: pg.PostgresServer, url: str) -> None:
    engine = create_engine(url, options=EngineOptions(lock_timeout=LOCK_TIMEOUT))
    sessions = create_sessionmaker(engine)
    firing = [finding(ObjectRef("Deployment", "ml", f"app-{i:02d}")) for i in range(20)]
    holder = await asyncpg.connect(host="127.0.0.1", port=server.port, user="postgres", database=url.rsplit("/", 1)[1])
    tx = holder.transaction()
    await tx.start()
    await holder.execute("LOCK TABLE incidents IN ACCESS EXCLUSIVE MODE")
    released = asyncio.get_running_loop().create_future()

    async def release_later() -> None:
        await asyncio.sleep(STALL)
        await tx.rollback()
        await holder.close()
        released.set_result(time.monotonic())

    releaser = asyncio.create_task(release_later())
    errors: list[tuple[float, str]] = []
    api = ApiSettings(tokens=(Secret("t0ken-for-the-fault-tests-0123"),))
    async with TestClient(TestServer(create_app(sessions=sessions, settings=api))) as client:
        started = time.monotonic()
        while True:
            t = time.monotonic()
            try:
                await track(sessions, cluster="prod", findings=firing, now=T0, evaluated=EVERY_SUBJECT,
                            sinks=["webhook"], policy=NotifyPolicy(storm_threshold=1_000_000))  # fmt: skip
                break
            except Exception as exc:  # the pipeline logs it and runs the pass again
                errors.append((time.monotonic() - t, str(getattr(exc, "orig", exc))))
                assert (await client.get("/readyz")).status == 200
                await asyncio.sleep(0.2)
        done = time.monotonic()
    await releaser
    async with sessions() as s:
        per_fingerprint = (await s.execute(select(Incident.fingerprint, func.count()).group_by(Incident.fingerprint))).all()
        rows = await s.scalar(select(func.count()).select_from(Notification))
    await engine.dispose()
    assert errors, "the pass ran into the held lock"
    assert all("lock timeout" in e for _, e in errors), errors
    assert max(d for d, _ in errors) < LOCK_TIMEOUT + 2.0  # failed in about lock_timeout, never hung
    assert done >= released.result()  # it succeeded only once the lock was gone
    assert len(per_fingerprint) == 20 and {n for _, n in per_fingerprint} == {1} and rows == 20
    print(
        f"\nPostgreSQL lock held {STALL:.0f} s (lock_timeout {LOCK_TIMEOUT:.0f} s): {len(errors)} pass(es) refused "
        f"in at most {max(d for d, _ in errors):.2f} s each; succeeded {done - released.result():.2f} s after release "
        f"({done - started:.1f} s in all)"
    )
