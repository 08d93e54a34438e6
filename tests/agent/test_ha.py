"""Two `unstick watch --leader-elect` processes against one PostgreSQL and one API endpoint
(the fake cluster, through the real kubernetes-asyncio client): one leads, both serve;
SIGKILL the leader, the follower takes over within the lease duration, and every incident
and every timeline event is recorded exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import func, select

from agent.fakecluster.scenario import play_step
from storage.engine import create_engine, create_sessionmaker
from storage.models import Incident, TimelineEntry
from tests import pg
from tests.agent.conftest import start_unstick
from tests.waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3.0, 2.0, 0.5


@pytest.fixture(scope="module")
def pg_server() -> Iterator[pg.PostgresServer]:
    yield from pg.serve()


@pytest.fixture
async def pg_url(pg_server: pg.PostgresServer) -> AsyncIterator[str]:
    async with pg_server.database() as url:
        yield url


async def start_replica(kubeconfig: Path, db: str, name: str) -> tuple[asyncio.subprocess.Process, str]:
    env = {**os.environ, "POD_NAME": name, "UNSTICK_DB_URL": db}  # the URL never on the command line
    return await start_unstick(
        "watch",
        "--kubeconfig",
        str(kubeconfig),
        "--cluster",
        "seed-1",
        "--listen",
        "127.0.0.1:0",
        "--no-auth",
        "--grace",
        "0",
        "--leader-elect",
        "--leader-elect-resource-namespace",
        "unstick",
        "--leader-elect-lease-duration",
        f"{LEASE_DURATION}s",
        "--leader-elect-renew-deadline",
        f"{RENEW_DEADLINE}s",
        "--leader-elect-retry-period",
        f"{RETRY_PERIOD}s",
        env=env,
    )


async def readyz(url: str) -> dict[str, Any]:
    try:
        async with aiohttp.ClientSession() as http, http.get(f"{url}/readyz") as resp:
            body: dict[str, Any] = await resp.json()
            return {**body, "http": resp.status}
    except aiohttp.ClientError:
        return {}


async def test_kill_the_leader_the_follower_takes_over_exactly_once(
    gpu_scenario, pg_url: str, tmp_path: Path
) -> None:
    engine = create_engine(pg_url)
    sessions = create_sessionmaker(engine)

    async def incidents() -> list[Incident]:
        async with sessions() as session:
            return list((await session.execute(select(Incident).order_by(Incident.id))).scalars())

    async def timeline() -> list[tuple[int, str]]:
        async with sessions() as session:
            rows = await session.execute(
                select(TimelineEntry.incident_id, TimelineEntry.kind, func.count())
                .group_by(TimelineEntry.incident_id, TimelineEntry.kind)
                .order_by(TimelineEntry.incident_id, TimelineEntry.kind)
            )
            return [(i, k) for i, k, n in rows for _ in range(n)]

    cluster = gpu_scenario.cluster()
    await cluster.start()
    procs: list[asyncio.subprocess.Process] = []
    try:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        play_step(cluster, gpu_scenario.timeline[0])  # the rollout deadlocks
        a, url_a = await start_replica(kubeconfig, pg_url, "unstick-a")
        procs.append(a)
        await eventually(lambda: _role(url_a, "leader"), timeout=30)
        b, url_b = await start_replica(kubeconfig, pg_url, "unstick-b")
        procs.append(b)
        # A follower names the holder once it has read the Lease (before that: null).
        follower = await eventually(lambda: _role(url_b, "follower", leader="unstick-a"), timeout=30)
        assert follower["http"] == 200  # ready: it serves
        (first,) = await eventually(incidents, timeout=60)
        # Both replicas serve the same history from the shared database.
        for url in (url_a, url_b):
            async with aiohttp.ClientSession() as http, http.get(f"{url}/api/v1/incidents") as resp:
                assert [i["id"] for i in (await resp.json())["items"]] == [first.id]

        a.kill()  # SIGKILL: no release; the Lease must expire
        killed = time.monotonic()
        await a.wait()
        await eventually(lambda: _role(url_b, "leader"), timeout=LEASE_DURATION + 10)
        took = time.monotonic() - killed
        assert took <= LEASE_DURATION + RETRY_PERIOD * 2.2 + 1.5, took
        lease = cluster.get("Lease", "unstick-leader", "unstick")
        assert lease is not None and lease["spec"]["holderIdentity"] == "unstick-b"

        for step in gpu_scenario.timeline[1:]:
            play_step(cluster, step)

        async def resolved() -> list[Incident] | None:
            rows = await incidents()
            return rows if rows and all(r.status == "resolved" for r in rows) else None

        (done,) = await eventually(resolved, timeout=60)
        assert done.id == first.id and done.fingerprint == first.fingerprint
        events = await timeline()
        assert events.count((first.id, "opened")) == 1 and events.count((first.id, "resolved")) == 1

        b.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(b.wait(), 40) == 0
        released = cluster.get("Lease", "unstick-leader", "unstick")
        assert released is not None and not released["spec"].get("holderIdentity")  # released on a clean stop
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await cluster.stop()
        await engine.dispose()


async def _role(url: str, role: str, *, leader: str | None = None) -> dict[str, Any] | None:
    body = await readyz(url)
    if body.get("role") != role or (leader is not None and body.get("leader") != leader):
        return None
    return body
