"""Load held: `unstick serve` under concurrent API and page clients while an agent writes
to the same database. Prints figures; asserts nothing (a benchmark, not a test).

    .venv/bin/python bench/bench_serve_load.py [--db sqlite|postgres|both] [--clients 200]
        [--seconds 60] [--events 1000]

For each database: a migrated store; `unstick serve` started as its own process (the real
command, real HTTP on 127.0.0.1, bearer token); a writer process applying ``--events``
findings per second through the real tracker (passes of 100 findings every 0.1 s over 500
workloads, so incidents open, continue and resolve, and the outbox fills); ``--clients``
concurrent clients, each in a loop over the incident list (API), one incident (API), the
silences list (API) and the incidents page (HTML). Reported: requests, errors (any status
but 200, any exception), requests/s, p50/p99 latency, and the event rate the writer achieved.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
WORKLOADS = 500
PASS_EVERY = 0.1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _writer(url: str, events_per_second: int, seconds: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    """The agent's side: passes through the real tracker, ``events_per_second`` findings a second."""
    from analyzers.findings import ObjectRef
    from storage.engine import create_engine, create_sessionmaker
    from storage.tracker import EVERY_SUBJECT, NotifyPolicy, track
    from tests.storage.factories import finding

    async def go() -> tuple[int, int]:
        engine = create_engine(url)
        sessions = create_sessionmaker(engine)
        per_pass = max(1, int(events_per_second * PASS_EVERY))
        refs = [ObjectRef("Deployment", f"ns-{i % 20}", f"app-{i:04d}") for i in range(WORKLOADS)]
        rng = random.Random(7)
        start = time.monotonic()
        now = datetime(2026, 1, 1, tzinfo=UTC)
        events = passes = 0
        while time.monotonic() - start < seconds:
            tick = time.monotonic()
            firing = [finding(r) for r in rng.sample(refs, per_pass)]
            now += timedelta(seconds=PASS_EVERY)
            await track(sessions, cluster="bench", findings=firing, now=now, evaluated=EVERY_SUBJECT, sinks=["webhook"],
                        policy=NotifyPolicy(storm_threshold=1_000_000))  # fmt: skip
            events += per_pass
            passes += 1
            await asyncio.sleep(max(0.0, PASS_EVERY - (time.monotonic() - tick)))
        await engine.dispose()
        return events, passes

    out.put(asyncio.run(go()))


async def _migrate(url: str) -> None:
    from storage.engine import create_engine
    from storage.migrate import upgrade

    engine = create_engine(url)
    await upgrade(engine)
    await engine.dispose()


ROUTES = {  # route class → path
    "api list": "/api/v1/incidents?limit=50",
    "api one": "/api/v1/incidents/1",
    "silences": "/api/v1/silences",
    "page": "/incidents",
}


async def _clients(
    base: str, n: int, seconds: float
) -> tuple[dict[str, list[float]], dict[str, int], list[str]]:
    """Latencies per route class, errors by kind, and the first error of each kind in full."""
    latencies: dict[str, list[float]] = {route: [] for route in ROUTES}
    errors: dict[str, int] = {}
    first: dict[str, str] = {}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    routes = list(ROUTES.items())
    deadline = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=n)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=30)) as http:

        def failed(kind: str, detail: str) -> None:
            errors[kind] = errors.get(kind, 0) + 1
            first.setdefault(kind, detail)

        async def one(i: int) -> None:
            k = i
            while time.monotonic() < deadline:
                route, path = routes[k % len(routes)]
                k += 1
                t = time.perf_counter()
                try:
                    h = {**headers, "Accept": "text/html"} if route == "page" else headers
                    async with http.get(base + path, headers=h) as resp:
                        body = await resp.read()
                        ok = resp.status == 200 or (route == "api one" and resp.status == 404)
                        if not ok:
                            failed(f"HTTP {resp.status} {route}", body[:300].decode(errors="replace"))
                except Exception as exc:  # every failure is counted, by kind
                    failed(f"{type(exc).__name__} {route}", f"after {time.perf_counter() - t:.1f} s: {exc!r}")
                latencies[route].append(time.perf_counter() - t)

        await asyncio.gather(*(one(i) for i in range(n)))
    return latencies, errors, [f"{kind}: {detail}" for kind, detail in first.items()]


def _quantile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] * 1000


def _run(label: str, url: str, args: argparse.Namespace) -> None:
    asyncio.run(_migrate(url))
    port = _free_port()
    env = {**os.environ, "UNSTICK_API_TOKENS": TOKEN, "PYTHONPATH": str(ROOT)}
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below; a pipe nobody reads would block serve
    serve = subprocess.Popen(
        [sys.executable, "-m", "agent", "serve", "--db", url, "--listen", f"127.0.0.1:{port}"],
        env=env, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert serve.poll() is None, "serve exited"
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
        results: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
        writer = multiprocessing.Process(target=_writer, args=(url, args.events, args.seconds, results))
        writer.start()
        started = time.monotonic()
        load_before = os.getloadavg()[0]
        latencies, kinds, first_errors = asyncio.run(_clients(base, args.clients, args.seconds))
        elapsed = time.monotonic() - started
        load_after = os.getloadavg()[0]
        writer.join(120)
        events, passes = results.get(timeout=10) if not results.empty() else (0, 0)
    finally:
        serve.terminate()
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            print(f"{label}: serve did not stop within 30 s of SIGTERM; killed")
            serve.kill()
            serve.wait(10)
        log.seek(0)
        serve_log = log.read().decode(errors="replace").splitlines()
        log.close()
    every = sorted(x for values in latencies.values() for x in values)
    errors = sum(kinds.values())
    print(
        f"{label:<10} {args.clients} clients {elapsed:.0f} s: {len(every)} requests, {errors} errors, "
        f"{len(every) / elapsed:.0f} req/s, p50 {_quantile(every, 0.5):.0f} ms, p99 {_quantile(every, 0.99):.0f} ms, "
        f"max {every[-1] * 1000:.0f} ms; writer {events / args.seconds:.0f} events/s in {passes} passes"
        f" (asked {args.events}/s); load average {load_before:.1f} → {load_after:.1f} on {os.cpu_count()} cpus"
    )
    for route, values in latencies.items():
        values.sort()
        if values:
            print(
                f"           {route:<9} {len(values):>6} requests  p50 {_quantile(values, 0.5):>6.0f} ms"
                f"  p99 {_quantile(values, 0.99):>6.0f} ms"
            )
    if kinds:
        print(f"           errors by kind: {kinds}")
        for line in first_errors:
            print(f"           first {line}")
    problems = [line for line in serve_log if "WARNING" in line or "ERROR" in line or "Traceback" in line]
    print(f"           serve logged {len(problems)} warning/error line(s)")
    for line in list(dict.fromkeys(problems))[:8]:
        print(f"           | {line[:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--events", type=int, default=1000, help="findings applied per second")
    args = parser.parse_args()
    print(f"cpus: {os.cpu_count()} (shared); python {sys.version.split()[0]}")
    if args.db in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            _run("sqlite", f"sqlite+aiosqlite:///{tmp}/load.db", args)
    if args.db in ("postgres", "both"):
        from tests import pg

        server = pg.PostgresServer().start()
        try:
            name = asyncio.run(server.create_database("load"))
            _run("postgres", server.url(name), args)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
