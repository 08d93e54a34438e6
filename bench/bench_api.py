"""Benchmark of the incident API's listing over 100,000 incidents in SQLite. Prints figures.

    .venv/bin/python bench/bench_api.py [--incidents 100000 --requests 200] [--db URL]

Seeds a SQLite file (migrated schema, bulk inserts: 50 namespaces, 12 rules,
3 severities, 2 clusters, ~8% open, 90 days), serves the real app over HTTP
on 127.0.0.1 and times requests with an HTTP client in the same process
(one core). Reports p50/p95 per filter combination and over all listing
requests; the target is p95 < 50 ms. Text search (a LIKE scan) and the stats
endpoint are reported separately.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
from aiohttp import web
from sqlalchemy import insert, text

from agent.api.app import create_app
from agent.api.pages import build_jinja_env
from agent.settings import ApiSettings, Secret
from storage.engine import create_engine, create_sessionmaker
from storage.migrate import upgrade
from storage.models import Incident

TOKEN = "bench-token-0123456789abcdef"
T_END = datetime(2024, 8, 1, tzinfo=UTC)
RULES = [f"rule-{i}" for i in range(12)]
NAMESPACES = [f"ns-{i}" for i in range(50)]
YAML = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: y}\nspec:\n  strategy:\n    rollingUpdate: {maxSurge: 0, maxUnavailable: 1}\n"


async def seed(url: str, n: int) -> None:
    engine = create_engine(url)
    await upgrade(engine)
    rnd = random.Random(7)
    rows = []
    for i in range(n):
        first = T_END - timedelta(seconds=rnd.randint(0, 90 * 86400))
        last = first + timedelta(seconds=rnd.randint(0, 6 * 3600))
        is_open = rnd.random() < 0.08
        ns = NAMESPACES[int(rnd.paretovariate(1.2)) % 50]
        name = f"app-{rnd.randint(0, 4000)}"
        rows.append(
            {
                "cluster": "prod" if i % 3 else "staging",
                "fingerprint": f"{i:032x}",
                "rule_id": RULES[rnd.randint(0, 11)],
                "cause": "cpu",
                "severity": ("info", "warning", "critical")[rnd.randint(0, 2)],
                "status": "open" if is_open else "resolved",
                "subject_kind": "Deployment" if i % 4 else "StatefulSet",
                "namespace": ns,
                "subject_name": name,
                "title": f"Rollout of {ns}/{name} cannot progress: needs {rnd.randint(1, 8)} GPU",
                "explanation": "25% of 1 replica rounds up to a surge of 1 and down to 0 unavailable; the new pod needs a second GPU.",
                "evidence": {"gpus_free": 0, "nodes": 10, "requested": {"nvidia.com/gpu": 1}},
                "remedies": [
                    {
                        "title": "maxSurge 0",
                        "kind": "patch",
                        "yaml": YAML,
                        "command": "kubectl patch …",
                        "verified": True,
                        "verification": "re-simulated",
                    }
                ],
                "pods": [f"{ns}/{name}-abc"],
                "first_seen": first,
                "last_seen": last,
                "resolved_at": None if is_open else last + timedelta(seconds=rnd.randint(30, 7200)),
                "occurrences": rnd.randint(1, 500),
                "last_message": "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node affinity/selector.",
                "previous_id": None,
            }
        )
    async with engine.begin() as conn:
        for i in range(0, len(rows), 5000):
            await conn.execute(insert(Incident), rows[i : i + 5000])
        await conn.execute(text("ANALYZE"))
    await engine.dispose()


QUERIES: list[tuple[str, dict[str, str]]] = [
    ("newest 50", {}),
    ("status=open", {"status": "open"}),
    ("namespace", {"namespace": "ns-7"}),
    ("namespace + status", {"namespace": "ns-3", "status": "resolved"}),
    ("rule + severity", {"rule_id": "rule-4", "severity": "critical"}),
    ("kind + name", {"kind": "Deployment", "name": "app-123"}),
    ("cluster + status + rule", {"cluster": "staging", "status": "open", "rule_id": "rule-1"}),
    ("since/until window", {"since": "2024-07-01T00:00:00Z", "until": "2024-07-02T00:00:00Z"}),
    ("sort -occurrences", {"sort": "-occurrences", "status": "open"}),
    ("limit 200 (the maximum)", {"limit": "200"}),
    (
        "window, sort -first_seen",
        {"since": "2024-07-01T00:00:00Z", "until": "2024-07-02T00:00:00Z", "sort": "-first_seen"},
    ),
]
EXTRA: list[tuple[str, str, dict[str, str]]] = [
    ("text search q=", "/api/v1/incidents", {"q": "needs 7 GPU"}),
    ("text search + namespace", "/api/v1/incidents", {"q": "needs 7 GPU", "namespace": "ns-2"}),
    ("stats (whole table)", "/api/v1/stats", {}),
    ("stats namespace", "/api/v1/stats", {"namespace": "ns-9"}),
    ("page /incidents (HTML)", "/incidents", {"status": "open"}),
]


async def measure(url: str, requests: int) -> None:
    engine = create_engine(url)
    app = create_app(
        sessions=create_sessionmaker(engine),
        settings=ApiSettings(tokens=(Secret(TOKEN),)),
        jinja=build_jinja_env(),
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}

    async def timed(http: aiohttp.ClientSession, path: str, params: dict[str, str], n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            async with http.get(base + path, params=params, headers=headers) as r:
                await r.read()
                assert r.status == 200, (r.status, await r.text())
            out.append((time.perf_counter() - t0) * 1000)
        return out

    def pct(values: list[float], q: float) -> float:
        values = sorted(values)
        return values[min(len(values) - 1, int(q * len(values)))]

    async with aiohttp.ClientSession() as http:
        all_listing: list[float] = []
        print(f"\n{'listing (target p95 < 50 ms)':<34}{'p50 ms':>9}{'p95 ms':>9}{'rows':>7}")
        for label, params in QUERIES:
            await timed(http, "/api/v1/incidents", params, 3)  # warm
            lat = await timed(http, "/api/v1/incidents", params, requests)
            all_listing += lat
            async with http.get(base + "/api/v1/incidents", params=params, headers=headers) as r:
                rows = len((await r.json())["items"])
            print(f"  {label:<32}{statistics.median(lat):>9.1f}{pct(lat, 0.95):>9.1f}{rows:>7}")
        # Deep pagination: follow next_cursor 20 pages down.
        lat = []
        cursor = None
        for _ in range(20):
            params = {"status": "resolved"} | ({"cursor": cursor} if cursor else {})
            t0 = time.perf_counter()
            async with http.get(base + "/api/v1/incidents", params=params, headers=headers) as r:
                cursor = (await r.json())["next_cursor"]
            lat.append((time.perf_counter() - t0) * 1000)
        all_listing += lat
        print(f"  {'cursor pages 1-20 (resolved)':<32}{statistics.median(lat):>9.1f}{pct(lat, 0.95):>9.1f}")
        print(
            f"  {'ALL listing requests':<32}{statistics.median(all_listing):>9.1f}{pct(all_listing, 0.95):>9.1f}"
        )

        print(f"\n{'other (no target)':<34}{'p50 ms':>9}{'p95 ms':>9}")
        for label, path, params in EXTRA:
            lat = await timed(http, path, params, max(10, requests // 10))
            print(f"  {label:<32}{statistics.median(lat):>9.1f}{pct(lat, 0.95):>9.1f}")
    await runner.cleanup()
    await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--incidents", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200, help="requests per filter combination")
    parser.add_argument("--db", help="an already seeded SQLite URL (skips seeding)")
    parser.add_argument("--cpu", type=int, help="core to pin this process to (default: the last one allowed)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))})
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite+aiosqlite:///{tmp}/api-bench.db"
        if not args.db:
            t0 = time.perf_counter()
            asyncio.run(seed(url, args.incidents))
            print(f"seeded {args.incidents:,} incidents in {time.perf_counter() - t0:.1f} s")
        print(f"API listing benchmark over {args.incidents:,} incidents (SQLite, one core, real HTTP)")
        asyncio.run(measure(url, args.requests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
