"""Fencing: two `unstick watch --leader-elect` processes (one PostgreSQL, the fake API
endpoint through the real kubernetes-asyncio client, a real webhook receiver). The leader is
paused with SIGSTOP for longer than its lease while the incident resolves; the follower takes
over and sends. Then the old leader is resumed (SIGCONT).

What holds afterwards:

* the resumed replica notices it lost the Lease before sending anything: it reports itself
  a follower, and the receiver never sees a delivery from it (each idempotency key arrives
  exactly once, one "opened" and one "resolved");
* the incident is opened once and resolved once (timeline), and the takeover time is printed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from agent.fakecluster.scenario import play_step
from storage.engine import create_engine, create_sessionmaker
from storage.models import Incident, Notification, TimelineEntry
from tests import pg
from tests.agent.conftest import gpu_scenario, start_unstick
from tests.agent.test_ha import _role
from tests.faults.receivers import ChaosReceiver, Collector
from tests.waiting import eventually

__all__ = ["gpu_scenario"]  # the fixture

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5


@pytest.fixture(scope="module")
def pg_server() -> Iterator[pg.PostgresServer]:
    yield from pg.serve()


@pytest.fixture
async def pg_url(pg_server: pg.PostgresServer) -> AsyncIterator[str]:
    async with pg_server.database() as url:
        yield url


async def _replica(kubeconfig: Path, db: str, name: str, hook: str, secret: Path) -> tuple[asyncio.subprocess.Process, str, list[str]]:
    env = {**os.environ, "POD_NAME": name, "UNSTICK_DB_URL": db}
    proc, url = await start_unstick(
        "watch", "--kubeconfig", str(kubeconfig), "--cluster", "seed-1", "--listen", "127.0.0.1:0",
        "--no-auth", "--grace", "0", "--leader-elect", "--leader-elect-resource-namespace", "unstick",
        "--leader-elect-lease-duration", f"{LEASE}s", "--leader-elect-renew-deadline", f"{RENEW}s",
        "--leader-elect-retry-period", f"{RETRY}s", "--webhook-url", hook, "--webhook-secret-file", str(secret),
        env=env,
    )  # fmt: skip
    lines: list[str] = []

    async def drain() -> None:  # keep reading: a full pipe would block the replica
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            lines.append(line.decode(errors="replace"))

    asyncio.get_running_loop().create_task(drain())
    return proc, url, lines


async def test_a_paused_leader_is_fenced_when_it_resumes(gpu_scenario, pg_url: str, tmp_path: Path) -> None:
    engine = create_engine(pg_url)
    sessions = create_sessionmaker(engine)
    secret = tmp_path / "hmac"
    secret.write_text("whsec-fault-tests-0123456789abcdef")
    cluster = gpu_scenario.cluster()
    await cluster.start()
    procs: list[asyncio.subprocess.Process] = []
    try:
        async with Collector() as elsewhere, ChaosReceiver(redirect_to=elsewhere.port) as receiver:
            kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
            play_step(cluster, gpu_scenario.timeline[0])  # the rollout deadlocks
            hook = receiver.url + "/hook"
            a, url_a, log_a = await _replica(kubeconfig, pg_url, "unstick-a", hook, secret)
            procs.append(a)
            await eventually(lambda: _role(url_a, "leader"), timeout=30)
            b, url_b, _ = await _replica(kubeconfig, pg_url, "unstick-b", hook, secret)
            procs.append(b)
            await eventually(lambda: _role(url_b, "follower", leader="unstick-a"), timeout=30)
            await eventually(lambda: len(receiver.accepted) >= 1, timeout=60)  # A sent "opened"

            a.send_signal(signal.SIGSTOP)
            paused = time.monotonic()
            await eventually(lambda: _role(url_b, "leader"), timeout=LEASE + 15)
            took = time.monotonic() - paused
            for step in gpu_scenario.timeline[1:]:
                play_step(cluster, step)

            async def resolved_and_sent() -> bool:
                async with sessions() as s:
                    statuses = set((await s.execute(select(Incident.status))).scalars())
                    unsent = await s.scalar(
                        select(func.count()).select_from(Notification).where(Notification.status != "sent")
                    )
                return statuses == {"resolved"} and unsent == 0

            await eventually(resolved_and_sent, timeout=60)
            keys_before = dict(receiver.accepted)
            a.send_signal(signal.SIGCONT)
            resumed = time.monotonic()
            await eventually(lambda: _role(url_a, "follower", leader="unstick-b"), timeout=15)
            await asyncio.sleep(3 * RETRY + 2)  # time enough for anything it would still send
            assert dict(receiver.accepted) == keys_before, "the resumed old leader sent something"
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                await proc.wait()
        await cluster.stop()
    async with sessions() as s:
        rows = list((await s.execute(select(Notification))).scalars())
        timeline = list((await s.execute(select(TimelineEntry.kind))).scalars())
        incidents = list((await s.execute(select(Incident))).scalars())
    await engine.dispose()
    assert len(incidents) == 1 and timeline.count("opened") == 1 and timeline.count("resolved") == 1
    assert {r.status for r in rows} == {"sent"} and len(receiver.accepted) == len(rows)
    assert set(receiver.accepted.values()) == {1}  # each idempotency key exactly once
    print(
        f"\nleader paused {resumed - paused:.1f} s (lease {LEASE:.0f} s): follower led after {took:.1f} s; "
        f"the resumed replica sent nothing ({len(rows)} deliveries, each once); its last log lines: "
        f"{[ln.strip()[:120] for ln in log_a if 'lease' in ln.lower() or 'leader' in ln.lower()][-2:]}"
    )
