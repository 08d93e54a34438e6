"""Benchmark of the incident tracker on SQLite and on PostgreSQL. Prints figures.

    .venv/bin/python bench/bench_tracker.py [--incidents 2000 --passes 3000 --batch 50 --coalesce 100] [--pg-url URL] [--no-pg]

The Python process is pinned to one core. An *incident update* is one open
incident seen again in a pass (occurrences + 1 from a new event key, last
seen moved, the idempotency key recorded), committed.

**A pass** (the coalesced shapes and the phases): one finding, identical to the one its open
incident's diagnosis came from (same severity, title, explanation, evidence, remedies,
pods, and the same scheduler message), one new event (a ``Trigger`` with a fresh key,
about the finding's pod), the finding's subject evaluated. Nothing a human acts on
changes: the incident's ``occurrences`` grows by one and ``last_seen`` moves, no timeline
row, no notification, no sink. Consecutive passes are about different incidents (pass k
about incident k mod ``--incidents``), so a batch of n passes updates n rows: the worst
case for the write (repeats of one incident within a batch are one row). The held copy
is warmed by one pass over every incident first (what a pipeline's first batches after
a start do: it reads the incidents once, and their first pass takes the long way), and
the start-up heap is ``gc.freeze()``d, as the agent does after its initial list.
Shapes:

* ``per-event``: one pass per Kubernetes event, one finding per pass, one
  transaction each (the worst case: every event commits on its own);
* ``coalesced``: the same one-finding, one-event passes, ``--coalesce`` and ten times
  as many of them per transaction (``track_passes``: a pipeline flushing a burst every
  ~100 ms), the open incidents read by every batch (``read``) or held in memory between
  batches (``held``, ``storage.tracker.HeldIncidents``: what the pipeline does);
* ``batched``: the pipeline's passes after a burst, ``--batch`` findings
  (each with its own new event) per pass and transaction.

PostgreSQL: a throw-away server from Debian's binaries (tests/pg.py) with
durability ON (fsync, synchronous_commit), unless ``--pg-url`` is given.
SQLite: a file in WAL mode with synchronous=NORMAL (storage.engine).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzers.findings import Finding, ObjectRef, Remedy, RemedyKind, Severity
from analyzers.lifecycle import IncidentState, decide, subject_names
from bench.machine import describe
from storage.engine import create_engine, create_sessionmaker
from storage.migrate import upgrade
from storage.tracker import HeldIncidents, Pass, Trigger, track, track_passes

T0 = datetime(2024, 5, 1, tzinfo=UTC)
YAML = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  strategy:\n    rollingUpdate: {maxSurge: 0, maxUnavailable: 1}\n"
MESSAGE = (
    "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/10 nodes are available: 1 No preemption victims found for incoming pod, 9 Preemption is not helpful for scheduling."
)


def make_findings(n: int) -> list[Finding]:
    out = []
    for i in range(n):
        subject = ObjectRef("Deployment", f"ns-{i % 40}", f"app-{i}")
        out.append(
            Finding(
                rule_id="rollout-deadlock" if i % 2 else "insufficient-resources",
                severity=Severity.CRITICAL if i % 5 == 0 else Severity.WARNING,
                subject=subject,
                title=f"Rollout of ns-{i % 40}/app-{i} cannot progress",
                explanation="25% of 1 replica rounds up to a surge of 1 and down to 0 unavailable.",
                evidence={"gpus_free": 0, "nodes": 10, "requested": {"nvidia.com/gpu": 1}},
                remedies=(
                    Remedy(
                        "maxSurge 0", RemedyKind.PATCH, subject, YAML, "kubectl patch …", True, "re-simulated"
                    ),
                ),
                cause="nvidia.com/gpu",
                pods=(f"ns-{i % 40}/app-{i}-abc",),
            )
        )
    return out


async def run_backend(name: str, url: str, args: argparse.Namespace) -> dict[str, float]:
    engine = create_engine(url)
    await upgrade(engine)
    sessions = create_sessionmaker(engine)
    findings = make_findings(args.incidents)
    results: dict[str, float] = {}

    # Open the incidents (batched) so the measured passes are updates.
    start = time.perf_counter()
    for i in range(0, len(findings), 100):
        chunk = findings[i : i + 100]
        await track(
            sessions,
            cluster="bench",
            findings=chunk,
            now=T0,
            triggers=[Trigger(f"open-{i}:1", MESSAGE)],
            sinks=["slack"],
        )
    results["opened/s (batches of 100)"] = len(findings) / (time.perf_counter() - start)

    # Per-event: one finding, one new event, one transaction.
    latencies = []
    start = time.perf_counter()
    for k in range(args.passes):
        f = findings[k % len(findings)]
        t0 = time.perf_counter()
        r = await track(
            sessions,
            cluster="bench",
            findings=[f],
            evaluated=[f.subject],
            now=T0 + timedelta(seconds=k + 1),
            triggers=[Trigger(f"ev-{k}:1", MESSAGE, f.pods[0])],
        )
        latencies.append(time.perf_counter() - t0)
        assert r.updated and not r.opened
    elapsed = time.perf_counter() - start
    results["per-event updates/s"] = args.passes / elapsed
    latencies.sort()
    results["per-event p50 ms"] = statistics.median(latencies) * 1000
    results["per-event p99 ms"] = latencies[int(len(latencies) * 0.99)] * 1000

    # Coalesced: the per-event passes, --coalesce per transaction; the open incidents read every
    # batch, then held in memory between batches (what the pipeline does).
    for label, held in (("read", None), ("held", HeldIncidents("bench"))):
        if held is not None:
            await warm(sessions, "bench", findings, held)
        for size in dict.fromkeys((args.coalesce, args.coalesce * 10)):
            batches = coalesced(findings, args.passes, size, f"c-{label}-{size}")
            updates = 0
            gc.freeze()
            start, cpu = time.perf_counter(), time.process_time()
            for passes in batches:
                for r in await track_passes(sessions, cluster="bench", passes=passes, held=held):
                    updates += len(r.updated)
            results[f"coalesced updates/s ({size}/tx, {label})"] = updates / (time.perf_counter() - start)
            # This process's CPU (SQLite's thread included): what a loaded machine distorts least.
            results[f"  per CPU second ({size}/tx, {label})"] = updates / (time.process_time() - cpu)

    # Batched: --batch findings per pass, each with a new event.
    updates = 0
    start = time.perf_counter()
    passes = max(1, args.passes // 10)
    for k in range(passes):
        base = (k * args.batch) % len(findings)
        chunk = [findings[(base + j) % len(findings)] for j in range(args.batch)]
        r = await track(
            sessions,
            cluster="bench",
            findings=chunk,
            evaluated=[f.subject for f in chunk],
            now=T0 + timedelta(hours=1, seconds=k),
            triggers=[Trigger(f"b-{k}-{j}:1", MESSAGE, f.pods[0]) for j, f in enumerate(chunk)],
        )
        updates += len(r.updated)
    results[f"batched updates/s ({args.batch}/pass)"] = updates / (time.perf_counter() - start)
    await engine.dispose()
    return results


def coalesced(findings: list[Finding], count: int, size: int, prefix: str) -> list[list[Pass]]:
    """``count`` passes (one finding, one new event each: the module's *pass*) in batches of
    ``size``, built before the clock starts (what the pipeline hands over)."""
    passes = [
        Pass(
            [f],
            T0 + timedelta(minutes=30, seconds=k),
            (f.subject,),
            (Trigger(f"{prefix}-{k}:1", MESSAGE, f.pods[0]),),
        )
        for k in range(count)
        for f in (findings[k % len(findings)],)
    ]
    return [passes[i : i + size] for i in range(0, count, size)]


async def warm(sessions: Any, cluster: str, findings: list[Finding], held: HeldIncidents) -> None:
    """Read the open incidents into ``held`` and take every one through one pass (the long way:
    a copy read from the database does not know which finding each diagnosis came from),
    with the message the measured passes repeat."""
    await track_passes(
        sessions,
        cluster=cluster,
        passes=[
            Pass(
                findings,
                T0 + timedelta(minutes=29),
                tuple(f.subject for f in findings),
                (Trigger(f"warm-{cluster}:1", MESSAGE),),  # the scheduler's message the passes repeat
            )
        ],
        held=held,
    )


def decide_only(args: argparse.Namespace) -> dict[str, float]:
    """The pure decision over the coalesced passes, with the open incidents in memory: what
    the tracker costs before a single statement is sent."""
    findings = make_findings(args.incidents)
    opened = decide(
        cluster="bench",
        open_incidents=(),
        passes=[Pass(findings, T0, triggers=(Trigger("open:1", MESSAGE),))],
        ids=range(1, len(findings) + 1),
        notify=False,
    )
    open_incidents: list[IncidentState] = list(opened.created.values())
    passes = [
        Pass(
            [findings[k % len(findings)]],
            T0 + timedelta(minutes=30, seconds=k),
            (findings[k % len(findings)].subject,),
            (Trigger(f"c-{k}:1", MESSAGE, findings[k % len(findings)].pods[0]),),
        )
        for k in range(args.passes)
    ]
    keys = {t.key for p in passes for t in p.triggers}
    read = [dataclasses.replace(o, source=None) for o in open_incidents]  # as read from the database
    results: dict[str, float] = {}
    for label, incidents, fast_path in (
        ("fast path", open_incidents, True),
        ("long way", open_incidents, False),
        ("first sight", read, True),
    ):
        for size in (args.coalesce, 1000):
            # As the tracker reads them: the open incidents of the subjects the batch concerns.
            batches = []
            for i in range(0, len(passes), size):
                chunk = passes[i : i + size]
                names = subject_names(chunk)
                batches.append((chunk, [o for o in incidents if names is None or o.subject_name in names]))
            gc.freeze()
            start = time.process_time()
            for chunk, concerned in batches:
                decide(
                    cluster="bench",
                    open_incidents=concerned,
                    passes=chunk,
                    fresh_keys=keys,
                    notify=False,
                    fast_path=fast_path,
                )
            results[f"{label}: passes per CPU s ({size}/decision)"] = len(passes) / (
                time.process_time() - start
            )
    return results


def server_cpu(data: Path) -> float:
    """CPU seconds a PostgreSQL server (its data directory) has used: the postmaster, its live
    processes (the benchmark's backends among them) and those that have exited."""
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster or ppid == postmaster:
            # utime, stime, and for the postmaster its reaped children's cutime, cstime.
            total += sum(int(v) for v in fields[11 : 15 if pid == postmaster else 13]) / tick
    return total


async def phases(url: str, args: argparse.Namespace, server_data: Path | None = None) -> dict[str, float]:
    """Where a coalesced batch's time goes: each step of ``apply_passes`` timed, in CPU time of
    this process (what a loaded machine distorts least) per 1,000 passes, batches of ten times
    ``--coalesce`` one-finding passes with the open incidents held; the tracker's functions
    wrapped for the measurement. ``server_data``: the local PostgreSQL's data directory, whose
    processes' CPU is added (a server elsewhere does its share of the work unseen)."""
    import storage.tracker as tracker

    spent: dict[str, float] = {}
    originals: dict[str, Any] = {}

    def timed_async(name: str) -> None:
        original = originals[name] = getattr(tracker, name)

        async def wrapper(*a: Any, **k: Any) -> Any:
            t = time.process_time()
            try:
                return await original(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - t

        setattr(tracker, name, wrapper)

    def timed_decide(**k: Any) -> Any:
        t = time.process_time()
        try:
            return originals["decide"](**k)
        finally:
            spent["decide"] = spent.get("decide", 0.0) + time.process_time() - t

    engine = create_engine(url)
    await upgrade(engine)
    sessions = create_sessionmaker(engine)
    findings = make_findings(args.incidents)
    for i in range(0, len(findings), 100):
        await track(sessions, cluster="phases", findings=findings[i : i + 100], now=T0)
    held = HeldIncidents("phases")  # read once here, before the measurement
    await warm(sessions, "phases", findings, held)
    size = args.coalesce * 10
    batches = coalesced(findings, args.phase_passes, size, "p")
    for name in (
        "_lock_cluster",
        "_next_generation",
        "_record_triggers",
        "_load_open",
        "_latest_resolved",
        "_reserve_ids",
        "_write",
    ):
        timed_async(name)
    originals["decide"] = tracker.decide
    tracker.decide = timed_decide  # type: ignore[assignment]
    gc.freeze()
    served = server_cpu(server_data) if server_data else 0.0
    start, cpu = time.perf_counter(), time.process_time()
    try:
        for passes in batches:
            await track_passes(sessions, cluster="phases", passes=passes, held=held)
        total, cpu = time.perf_counter() - start, time.process_time() - cpu
        served = server_cpu(server_data) - served if server_data else 0.0
    finally:
        for name, original in originals.items():
            setattr(tracker, name, original)
        await engine.dispose()
    thousands = len(batches) * size / 1000
    out = {f"{name} CPU ms/1000": seconds * 1000 / thousands for name, seconds in spent.items()}
    out["all, CPU ms/1000"] = cpu * 1000 / thousands
    out["passes per CPU second"] = thousands * 1000 / cpu
    if server_data:
        out["server CPU ms/1000"] = served * 1000 / thousands
        out["passes per CPU s, client+server"] = thousands * 1000 / (cpu + served)
    out["passes/s (wall)"] = thousands * 1000 / total
    return out


def report(name: str, results: dict[str, float]) -> None:
    print(f"\n{name}")
    for key, value in results.items():
        print(f"  {key:<34} {value:>10,.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--incidents", type=int, default=2000)
    parser.add_argument("--passes", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--coalesce", type=int, default=100)
    parser.add_argument(
        "--phase-passes",
        type=int,
        default=20000,
        help="passes of the phases' measurement (long enough to include SQLite's WAL checkpoints)",
    )
    parser.add_argument("--pg-url", help="use this PostgreSQL instead of starting one")
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--cpu", type=int, help="core to pin this process to (default: the last one allowed)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))})
    print(f"tracker benchmark: {args.incidents} open incidents, {args.passes} per-event passes, one core")
    print(
        "a pass: 1 finding, identical to its open incident's (0 diagnosis changes, same message), 1 new event;"
        " every pass of a batch about a different incident (n passes = n rows updated)"
    )
    print(f"machine: {describe()}")
    report("the lifecycle alone (analyzers.lifecycle.decide, no database)", decide_only(args))

    with tempfile.TemporaryDirectory() as tmp:
        report(
            "SQLite (file, WAL, synchronous=NORMAL)",
            asyncio.run(run_backend("sqlite", f"sqlite+aiosqlite:///{tmp}/bench.db", args)),
        )
        report(
            f"SQLite: where batches of {args.coalesce * 10} passes spend their CPU (incidents held)",
            asyncio.run(phases(f"sqlite+aiosqlite:///{tmp}/phases.db", args)),
        )

    if args.no_pg:
        return 0
    if args.pg_url:
        report("PostgreSQL (given)", asyncio.run(run_backend("postgres", args.pg_url, args)))
        return 0
    from tests.pg import PostgresServer

    server = PostgresServer(durable=True).start()
    try:
        url = server.url()
        report(
            "PostgreSQL 15 (local, fsync on, synchronous_commit on)",
            asyncio.run(run_backend("postgres", url, args)),
        )
        report(
            f"PostgreSQL: where batches of {args.coalesce * 10} passes spend this process's CPU (incidents held)",
            asyncio.run(phases(url, args, server.data)),
        )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
