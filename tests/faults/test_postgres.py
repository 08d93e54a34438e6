"""PostgreSQL failing under the agent, for real: its connections killed with
``pg_terminate_backend`` and the server stopped and started again, in the middle of a burst
of incidents (written by the real tracker) and their deliveries (the real outbox worker to a
real webhook receiver), with ``/readyz`` asked throughout.

The burst is played as the pipeline plays it: each pass hands the tracker every finding that
is true now; a pass the database refuses is simply run again (the pipeline's "retry on the
next change").

What holds afterwards:

* ``/readyz`` answers 503 while the server is down and 200 once it is back; the API answers
  503 with ``Retry-After`` meanwhile (a store that cannot answer, not a fault: no 500);
* every incident is opened once (one row per fingerprint, none lost);
* every outbox row is sent, and the receiver accepted each idempotency key exactly once;
* the recovery time (server back → ready; → everything delivered) is printed.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import func, select

from agent.api.app import create_app
from agent.notify.render import Renderer
from agent.notify.webhook import WebhookSink
from agent.notify.worker import OutboxWorker, RetryPolicy
from agent.settings import ApiSettings, Secret
from analyzers.findings import ObjectRef
from storage.engine import create_engine, create_sessionmaker
from storage.migrate import upgrade
from storage.models import Incident, Notification
from storage.outbox import delivery_id
from storage.tracker import EVERY_SUBJECT, NotifyPolicy, track
from tests import pg
from tests.faults.receivers import ChaosReceiver, Collector
from tests.notify.conftest import SECRET
from tests.storage.factories import T0, finding

INCIDENTS = 30
WAVES = 10
NO_STORM = NotifyPolicy(storm_threshold=1_000_000)
FAST = RetryPolicy(max_attempts=1000, base_delay=0.05, max_delay=0.5)


class RestartablePostgres(pg.PostgresServer):
    """A server of its own (the suite's shared one must not go down), stopped and started
    again on the same data and port."""

    def down(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)  # fast shutdown: every client is disconnected
        self.proc.wait(30)

    def up(self) -> None:
        env = {"LC_ALL": "C.UTF-8", "HOME": str(self.root), "PATH": "/usr/bin:/bin"}
        self.proc = subprocess.Popen(
            [
                str(self.bindir / "postgres"), "-D", str(self.data), "-k", str(self.root),
                "-h", "127.0.0.1", "-p", str(self.port),
                "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
            ],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=self.root,
            **self._run_as(),  # type: ignore[call-overload]
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not self._accepting():
            assert time.monotonic() < deadline, "PostgreSQL did not come back"
            time.sleep(0.05)


@pytest.fixture
def server() -> Iterator[RestartablePostgres]:
    try:
        srv = RestartablePostgres()
        srv.start()
    except pg.PostgresNotFound as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield srv
    finally:
        srv.stop()


async def _terminate_all(server: RestartablePostgres, database: str) -> int:
    admin = await asyncpg.connect(host="127.0.0.1", port=server.port, user="postgres", database="postgres")
    try:
        return len(
            await admin.fetch(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()",
                database,
            )
        )
    finally:
        await admin.close()


@pytest.fixture
async def url(server: RestartablePostgres) -> AsyncIterator[str]:
    name = await server.create_database("faults")
    engine = create_engine(server.url(name))
    await upgrade(engine)
    await engine.dispose()
    yield server.url(name)


async def test_postgres_killed_and_restarted_mid_burst(server: RestartablePostgres, url: str) -> None:
    engine = create_engine(url)
    sessions = create_sessionmaker(engine)
    refs = [ObjectRef("Deployment", "ml", f"app-{i:03d}") for i in range(INCIDENTS)]
    failures = {"passes refused": 0}

    async def burst() -> None:
        for wave in range(1, WAVES + 1):
            firing = [finding(r) for r in refs[: wave * INCIDENTS // WAVES]]
            while True:  # the pipeline runs a refused pass again
                try:
                    async with asyncio.timeout(10):
                        await track(
                            sessions, cluster="prod", findings=firing, now=T0, evaluated=EVERY_SUBJECT,
                            sinks=["webhook"], policy=NO_STORM,
                        )  # fmt: skip
                    break
                except Exception:
                    failures["passes refused"] += 1
                    await asyncio.sleep(0.1)
            await asyncio.sleep(0.15)

    api = ApiSettings(tokens=(Secret("t0ken-for-the-fault-tests-0123"),))
    async with (
        Collector() as elsewhere,
        ChaosReceiver(redirect_to=elsewhere.port) as receiver,
        TestClient(TestServer(create_app(sessions=sessions, settings=api))) as client,
    ):
        sink = WebhookSink("webhook", Secret(receiver.url + "/hook"), Secret(SECRET.decode()), Renderer())
        worker = OutboxWorker(sessions, [sink], policy=FAST, poll_interval=0.05, lease=10.0)
        await worker.start()
        producer = asyncio.create_task(burst())
        try:
            assert (await client.get("/readyz")).status == 200
            await asyncio.sleep(0.4)
            killed = await _terminate_all(server, "faults")
            await asyncio.sleep(0.4)
            await asyncio.to_thread(server.down)
            down_statuses = [(await client.get("/readyz")).status for _ in range(3)]
            listing = await client.get("/api/v1/incidents", headers={"Authorization": f"Bearer {api.tokens[0].reveal()}"})
            assert listing.status == 503 and listing.headers["Retry-After"] == "2", await listing.text()
            await asyncio.sleep(1.5)  # down, while the burst goes on
            down_statuses.append((await client.get("/readyz")).status)
            await asyncio.to_thread(server.up)
            back = time.monotonic()
            async with asyncio.timeout(30):
                while (await client.get("/readyz")).status != 200:
                    await asyncio.sleep(0.05)
            ready_after = time.monotonic() - back
            await asyncio.wait_for(producer, 60)
            assert await worker.drain(60) == 0
            delivered_after = time.monotonic() - back
        finally:
            producer.cancel()
            await worker.stop()
    async with sessions() as s:
        fingerprints = (await s.execute(select(Incident.fingerprint, func.count()).group_by(Incident.fingerprint))).all()
        outbox = list((await s.execute(select(Notification))).scalars())
    await engine.dispose()
    assert down_statuses == [503] * 4
    assert len(fingerprints) == INCIDENTS and {n for _, n in fingerprints} == {1}  # none lost, none twice
    assert len(outbox) == INCIDENTS and {r.status for r in outbox} == {"sent"}
    assert set(receiver.accepted) == {delivery_id(r) for r in outbox}
    assert set(receiver.accepted.values()) == {1}  # exactly once per idempotency key
    print(
        f"\nPostgreSQL: {killed} connection(s) terminated, then stopped ~2 s mid-burst; "
        f"{failures['passes refused']} pass(es) refused and run again; ready {ready_after:.2f} s after "
        f"it was back, all {len(outbox)} deliveries sent once {delivered_after:.2f} s after"
    )
