"""Benchmark of the incident page with a 5,000-node nodes × filter plugins grid. Prints figures.

    .venv/bin/python bench/bench_pages.py [--nodes 5000 --pods 20000 --requests 30]

Generates a cluster (bench/generate.py: node pools, zones, taints, cordoned
nodes, pending pods), analyses it (analyzers.report.build_report, which puts
each finding's grid in its evidence), stores the finding whose grid covers the
most nodes and has the most rows as an incident in a migrated SQLite file,
serves the real app on 127.0.0.1 and times ``GET /incidents/{id}`` (HTML) with
a client in the same process: p50/p95 of the whole request (database read,
JSON decode, Jinja2 rendering) and the page's size. Targets: < 200 ms, < 500 KB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
from aiohttp import web
from sqlalchemy import insert

from agent.api.app import create_app
from agent.api.pages import build_jinja_env
from agent.settings import ApiSettings, Secret
from analyzers.grid import GRID_KEY
from analyzers.report import build_report
from analyzers.snapshot import ClusterState
from bench.generate import generate
from storage.engine import create_engine, create_sessionmaker
from storage.migrate import upgrade
from storage.models import Incident

TOKEN = "bench-token-0123456789abcdef"
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def analysed(nodes: int, pods: int) -> tuple[dict[str, Any], float, float]:
    objects = generate(nodes=nodes, pods=pods, workloads=60, pending=20)
    state = ClusterState(None)
    state.load(objects)
    snapshot = state.snapshot()
    t0 = time.perf_counter()
    report = build_report(snapshot, now=NOW.timestamp())
    analysis_ms = (time.perf_counter() - t0) * 1000
    with_grid = [f for f in report.findings if f.evidence.get(GRID_KEY)]
    if not with_grid:
        raise SystemExit("no finding with a grid in the generated cluster")

    def weight(f: Any) -> tuple[int, int]:
        grid = f.evidence[GRID_KEY][0]
        return sum(r["count"] for r in grid["rows"]), len(grid["rows"])

    finding = max(with_grid, key=weight)
    doc = json.loads(json.dumps(finding.as_dict(), default=str))
    grid = doc["evidence"][GRID_KEY][0]
    print(
        f"cluster: {nodes} nodes, {pods} pods; analysis with grids {analysis_ms:.0f} ms; "
        f"finding {finding.rule_id} on {finding.subject}: grid of {sum(r['count'] for r in grid['rows'])} nodes "
        f"in {len(grid['rows'])} rows, {len(grid['capacity'])} capacity bars"
    )
    return doc, analysis_ms, float(len(json.dumps(doc["evidence"])))


async def seed(url: str, doc: dict[str, Any]) -> int:
    engine = create_engine(url)
    await upgrade(engine)
    subject = doc["subject"]
    row = {
        "cluster": "prod",
        "fingerprint": doc["fingerprint"],
        "rule_id": doc["rule_id"],
        "cause": doc.get("cause") or "",
        "severity": doc["severity"],
        "status": "open",
        "subject_kind": subject["kind"],
        "namespace": subject["namespace"],
        "subject_name": subject["name"],
        "title": doc["title"],
        "explanation": doc["explanation"],
        "evidence": doc["evidence"],
        "remedies": doc["remedies"],
        "pods": doc.get("pods") or [],
        "first_seen": NOW,
        "last_seen": NOW,
        "resolved_at": None,
        "occurrences": 1,
        "last_message": "",
        "previous_id": None,
    }
    async with engine.begin() as conn:
        result = await conn.execute(insert(Incident).returning(Incident.id), [row])
        incident_id = int(result.scalar_one())
    await engine.dispose()
    return incident_id


async def measure(url: str, incident_id: int, requests: int) -> tuple[float, float, int]:
    engine = create_engine(url)
    app = create_app(
        sessions=create_sessionmaker(engine),
        settings=ApiSettings(tokens=(Secret(TOKEN),)),
        jinja=build_jinja_env(),
        clock=lambda: NOW,
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "text/html"}
    times: list[float] = []
    size = 0
    try:
        async with aiohttp.ClientSession() as http:
            for i in range(requests + 3):
                t0 = time.perf_counter()
                async with http.get(f"http://127.0.0.1:{port}/incidents/{incident_id}", headers=headers) as r:
                    body = await r.read()
                    assert r.status == 200, (r.status, body[:500])
                if i >= 3:  # the first requests warm the template cache
                    times.append((time.perf_counter() - t0) * 1000)
                size = len(body)
    finally:
        await runner.cleanup()
        await engine.dispose()
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))], size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args(argv)
    doc, _, evidence_bytes = analysed(args.nodes, args.pods)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/pages.db"
        incident_id = asyncio.run(seed(url, doc))
        p50, p95, size = asyncio.run(measure(url, incident_id, args.requests))
    print(f"stored evidence: {evidence_bytes / 1024:.0f} KB of JSON")
    print(f"GET /incidents/{incident_id} (HTML, {args.requests} requests): p50 {p50:.1f} ms, p95 {p95:.1f} ms (target < 200 ms)")
    print(f"page size: {size / 1024:.0f} KB (target < 500 KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
