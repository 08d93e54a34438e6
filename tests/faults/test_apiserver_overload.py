"""The API server throttling and failing for a while: `unstick watch` (its own process, the
real kubernetes-asyncio client over HTTP) against the fake API endpoint, whose overload
window answers every list and watch 429 (with ``Retry-After``), 503 and 500 in turn after
cutting the live watches, while the cluster changes underneath.

What holds afterwards:

* the agent waits what ``Retry-After`` asks between refused requests of a kind (client-go's
  ``checkWait``: 429 and 5xx), never hammering the server;
* ``/readyz`` is 503 during the window (naming nothing secret) and 200 after;
* nothing is lost: the incident opened before the window is resolved by the changes made
  during it; nothing is duplicated: one "opened" and one "resolved" delivery, each idempotency
  key accepted once, on SQLite and on PostgreSQL;
* the recovery time (window end → ready, → resolution delivered) is printed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path

from sqlalchemy import select

from agent.fakecluster.scenario import play_step
from storage.engine import create_engine, create_sessionmaker
from storage.models import Incident, Notification, TimelineEntry
from tests.agent.conftest import gpu_scenario, start_unstick
from tests.faults.receivers import ChaosReceiver, Collector
from tests.waiting import eventually

__all__ = ["gpu_scenario"]  # the fixture

WINDOW, RETRY_AFTER = 7.0, 3.0


async def readyz_is(url: str, status: int) -> dict[str, object] | None:
    """``/readyz``'s body when it answers ``status`` (asked off the loop: the fake API server
    runs on it)."""
    got, body = await asyncio.to_thread(_readyz, url)
    return body if got == status else None


def _readyz(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=5) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read())


async def test_throttling_and_5xx_are_waited_out_without_loss_or_duplicates(
    gpu_scenario, db_url: str, tmp_path: Path
) -> None:
    secret = tmp_path / "hmac"
    secret.write_text("whsec-fault-tests-0123456789abcdef")
    cluster = gpu_scenario.cluster()
    await cluster.start()
    proc = None
    try:
        async with Collector() as elsewhere, ChaosReceiver(redirect_to=elsewhere.port) as receiver:
            kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
            play_step(cluster, gpu_scenario.timeline[0])  # the rollout deadlocks
            proc, url = await start_unstick(
                "watch", "--kubeconfig", str(kubeconfig), "--cluster", "seed-1", "--listen", "127.0.0.1:0",
                "--no-auth", "--grace", "0", "--webhook-url", receiver.url + "/hook",
                "--webhook-secret-file", str(secret),
                env={**os.environ, "UNSTICK_DB_URL": db_url},
            )  # fmt: skip
            await eventually(lambda: len(receiver.accepted) == 1, timeout=60)  # "opened"
            await eventually(lambda: readyz_is(url, 200), timeout=30)

            cluster.faults.overload(WINDOW, statuses=(429, 503, 500), retry_after=RETRY_AFTER)
            window_from = time.monotonic()
            for step in gpu_scenario.timeline[1:]:  # the incident resolves while the API refuses
                play_step(cluster, step)
            body = await eventually(lambda: readyz_is(url, 503), timeout=WINDOW - 1, interval=0.2)
            assert body["status"] == "not ready" and len(receiver.accepted) == 1
            window_to = window_from + WINDOW
            await eventually(lambda: time.monotonic() >= window_to, timeout=WINDOW + 1)
            await eventually(lambda: readyz_is(url, 200), timeout=3 * RETRY_AFTER + 10, interval=0.1)
            ready_after = time.monotonic() - window_to
            await eventually(lambda: len(receiver.accepted) == 2, timeout=60)  # "resolved"
            sent_after = time.monotonic() - window_to
            await asyncio.sleep(2)  # time enough for a duplicate, were one coming
            accepted = dict(receiver.accepted)
    finally:
        if proc is not None and proc.returncode is None:
            proc.terminate()
            await proc.wait()
        await cluster.stop()

    refused = [r for r in cluster.requests if r.status]
    assert {r.status for r in refused} == {429, 503, 500}, cluster.faults.overload_answers
    by_kind: dict[tuple[str | None, str | None], list[float]] = defaultdict(list)
    for r in refused:
        by_kind[(r.kind, r.namespace)].append(r.at)
    gaps = [b - a for times in by_kind.values() for a, b in itertools.pairwise(times)]
    assert gaps and min(gaps) >= RETRY_AFTER - 0.25, sorted(gaps)[:5]  # Retry-After was waited for
    assert max(len(t) for t in by_kind.values()) <= WINDOW // RETRY_AFTER + 1

    engine = create_engine(db_url)
    sessions = create_sessionmaker(engine)
    async with sessions() as s:
        rows = list((await s.execute(select(Notification))).scalars())
        timeline = list((await s.execute(select(TimelineEntry.kind))).scalars())
        incidents = list((await s.execute(select(Incident))).scalars())
    await engine.dispose()
    assert [i.status for i in incidents] == ["resolved"]
    assert timeline.count("opened") == 1 and timeline.count("resolved") == 1
    assert {r.status for r in rows} == {"sent"} and len(rows) == 2
    assert set(accepted.values()) == {1}  # each idempotency key exactly once
    print(
        f"\nAPI overload {WINDOW:.0f} s (429/503/500, Retry-After {RETRY_AFTER:.0f} s; "
        f"{len(refused)} requests refused: {dict(cluster.faults.overload_answers)}; "
        f"shortest wait between a kind's refused requests {min(gaps):.2f} s): "
        f"ready {ready_after:.2f} s after the window, the resolution delivered {sent_after:.2f} s after"
    )
