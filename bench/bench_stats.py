"""Benchmark of ``/api/v1/stats`` (storage.queries.incident_stats) over 100,000 incidents. Prints figures.

    .venv/bin/python bench/bench_stats.py [--incidents 100000 --runs 15] [--db URL]

Seeds a SQLite file as bench/bench_api.py does (50 namespaces, 12 rules, 2 clusters,
~8% open, 90 days), or uses ``--db`` (an already seeded SQLite or PostgreSQL URL),
and times the whole stats query -- unfiltered, for one namespace, for one cluster
and for a 7-day window -- p50 and p95 in one process. The page /trends and the
API run exactly this function.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_api import T_END, seed
from storage.engine import create_engine, create_sessionmaker
from storage.queries import IncidentFilter, incident_stats

FILTERS = {
    "whole table": IncidentFilter(),
    "namespace ns-9": IncidentFilter(namespace="ns-9"),
    "cluster prod": IncidentFilter(cluster="prod"),
    "last 7 days": IncidentFilter(since=T_END - timedelta(days=7)),
}


async def measure(url: str, runs: int) -> None:
    engine = create_engine(url)
    sessions = create_sessionmaker(engine)
    try:
        for label, flt in FILTERS.items():
            times = []
            for i in range(runs + 1):
                async with sessions() as session:
                    t0 = time.perf_counter()
                    stats = await incident_stats(session, flt)
                    if i:  # the first run warms the page cache
                        times.append((time.perf_counter() - t0) * 1000)
            times.sort()
            p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
            print(
                f"stats, {label:15s}: p50 {statistics.median(times):7.1f} ms, p95 {p95:7.1f} ms "
                f"({stats.total} incidents, {stats.time_to_resolve['count']} resolved)"
            )
    finally:
        await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--incidents", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--db", help="an already seeded database URL (skips seeding)")
    args = parser.parse_args()
    if args.db:
        asyncio.run(measure(args.db, args.runs))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/stats.db"
        t0 = time.perf_counter()
        asyncio.run(seed(url, args.incidents))
        print(f"seeded {args.incidents} incidents in {time.perf_counter() - t0:.1f} s")
        asyncio.run(measure(url, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
