"""Benchmark of the notification outbox: drain rate to a local webhook receiver on
SQLite and on PostgreSQL, and a slow receiver beside a fast one. Prints figures.

    .venv/bin/python bench/bench_notify.py [--incidents 1500] [--pg-url URL] [--no-pg]

Drain: ``--incidents`` incidents opened and resolved by the real tracker (two
outbox rows each, one sink), then an ``OutboxWorker`` sends every row as a
signed webhook over HTTP to an aiohttp receiver in the same process (which
verifies nothing, answers 204) and records the outcomes; the figure is rows
per second from start to drained. Target: at least 500/s on both backends.

Slow sink: the same receiver once answering after 2 s per request, once at
once, as two sinks of one worker; printed is how long the fast sink took for
all its rows while the slow one was still on its first ones.

PostgreSQL: a throw-away server from Debian's binaries (tests/pg.py) with
durability ON, unless ``--pg-url`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiohttp import web

from agent.notify.render import Renderer
from agent.notify.webhook import WebhookSink
from agent.notify.worker import OutboxWorker
from agent.settings import Secret
from analyzers.findings import ObjectRef
from storage.engine import EngineOptions, create_engine, create_sessionmaker
from storage.migrate import upgrade
from storage.outbox import unfinished_count
from storage.tracker import EVERY_SUBJECT, NotifyPolicy, track
from tests.storage.factories import T0, finding

SECRET = "bench-secret-0123456789"


async def receiver(delay: float = 0.0) -> tuple[web.AppRunner, str, list[float]]:
    arrivals: list[float] = []

    async def hook(request: web.Request) -> web.Response:
        await request.read()
        arrivals.append(time.perf_counter())
        if delay:
            await asyncio.sleep(delay)
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/hook", arrivals


async def seed(url: str, incidents: int, sinks: list[str]) -> None:
    engine = create_engine(url)
    await upgrade(engine)
    sessions = create_sessionmaker(engine)
    findings = [finding(ObjectRef("Deployment", "ml", f"app-{i:05d}")) for i in range(incidents)]
    no_storm = NotifyPolicy(storm_threshold=10**9)  # one message per incident: the drain is measured
    await track(
        sessions, cluster="bench", findings=findings, now=T0, evaluated=EVERY_SUBJECT, sinks=sinks, policy=no_storm
    )
    from datetime import timedelta

    await track(
        sessions,
        cluster="bench",
        findings=[],
        now=T0 + timedelta(minutes=1),
        evaluated=EVERY_SUBJECT,
        sinks=sinks,
        policy=no_storm,
    )
    await engine.dispose()


def sink(name: str, url: str) -> WebhookSink:
    return WebhookSink(name, Secret(url), Secret(SECRET), Renderer("https://unstick.example.com"), concurrency=32)


async def drain_rate(db_url: str, incidents: int) -> tuple[int, float]:
    await seed(db_url, incidents, ["webhook"])
    runner, url, _ = await receiver()
    engine = create_engine(db_url, options=EngineOptions(pool_size=10))
    sessions = create_sessionmaker(engine)
    worker = OutboxWorker(sessions, [sink("webhook", url)])
    started = time.perf_counter()
    await worker.start()
    left = await worker.drain(600)
    seconds = time.perf_counter() - started
    await worker.stop()
    async with sessions() as s:
        assert await unfinished_count(s) == 0 and left == 0
    await engine.dispose()
    await runner.cleanup()
    return worker.stats()["webhook"].sent, seconds


async def slow_beside_fast(db_url: str, incidents: int) -> tuple[float, int]:
    await seed(db_url, incidents, ["slow", "fast"])
    slow_runner, slow_url, slow_arrivals = await receiver(delay=2.0)
    fast_runner, fast_url, fast_arrivals = await receiver()
    engine = create_engine(db_url)
    sessions = create_sessionmaker(engine)
    worker = OutboxWorker(sessions, [sink("slow", slow_url), sink("fast", fast_url)])
    started = time.perf_counter()
    await worker.start()
    while len(fast_arrivals) < incidents * 2:
        await asyncio.sleep(0.005)
    fast_seconds = time.perf_counter() - started
    slow_done = len(slow_arrivals)
    await worker.stop(grace=0.1)
    await engine.dispose()
    await slow_runner.cleanup()
    await fast_runner.cleanup()
    return fast_seconds, slow_done


async def run(label: str, db_url_for: object, incidents: int) -> None:
    url = await db_url_for()  # type: ignore[operator]
    sent, seconds = await drain_rate(url, incidents)
    print(f"{label:10s} drain: {sent} notifications in {seconds:.2f} s = {sent / seconds:,.0f}/s (target >= 500/s)")
    url = await db_url_for()  # type: ignore[operator]
    fast_seconds, slow_done = await slow_beside_fast(url, 100)
    print(
        f"{label:10s} slow sink (2 s per request) beside a fast one: the fast sink's 200 notifications took "
        f"{fast_seconds:.2f} s; the slow one had received {slow_done} meanwhile"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--incidents", type=int, default=1500)
    parser.add_argument("--pg-url", help="an empty PostgreSQL database (default: a throw-away server)")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(100))

        async def sqlite_url() -> str:
            return f"sqlite+aiosqlite:///{tmp}/bench-{next(counter)}.db"

        asyncio.run(run("SQLite", sqlite_url, args.incidents))
    if args.no_pg:
        return 0
    server = None
    if args.pg_url:
        pg_urls = iter([args.pg_url])

        async def pg_url() -> str:
            return next(pg_urls)

    else:
        from tests.pg import PostgresServer

        server = PostgresServer(durable=True).start()

        async def pg_url() -> str:
            return server.url(await server.create_database())

    try:
        asyncio.run(run("PostgreSQL", pg_url, args.incidents))
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
