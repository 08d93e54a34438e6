"""Watch throughput: the gateway's watch path against a bare orjson decode of
the same stream over the same loopback connection.

The fake API endpoint runs in a child process (on its own CPU when there is
more than one) holding a history of N changes — a realistic mix of pods,
nodes and core/v1 events, built by ``agent.fakecluster.samples`` — and the
benchmark process (pinned to one CPU) watches pods, nodes and events from
the start of that history, concurrently, three ways:

1. bare:    plain aiohttp client, ``async for line in resp.content``, orjson.loads
2. gateway: ``Gateway.watch`` (kubernetes-asyncio config/auth/session, raw
            bytes, orjson) → every event handed to a no-op async sink
3. watcher: ``KindWatcher.watch_once`` on the gateway (version tracking,
            duplicate suppression, ``Delta`` objects) → no-op sink

and prints events/s for each and the ratios to the bare decode. Targets:
gateway ≥ 20,000 events/s and ≥ 0.4 of bare.

Usage: .venv/bin/python bench/bench_watch.py [--events 120000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agent.fakecluster import FakeCluster  # noqa: E402
from agent.fakecluster.samples import event, node, pod  # noqa: E402
from agent.kube.gateway import Gateway  # noqa: E402
from agent.kube.kinds import EVENT, NODE, POD, Kind  # noqa: E402
from agent.kube.watcher import Delta, KindWatcher  # noqa: E402

KINDS: tuple[Kind, ...] = (POD, NODE, EVENT)


def _pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[cpu % len(cpus)]})


def _populate(cluster: FakeCluster, total: int, mix: dict[str, float]) -> dict[str, int]:
    """Apply ``total`` changes: pods and nodes are created then updated
    (status churn), events created and bumped, in an interleaved order."""
    n_nodes, n_pods = 200, 3000
    nodes = [node(f"ip-10-0-{i // 250}-{i % 250}.eu-west-1.compute.internal") for i in range(n_nodes)]
    pods = [
        pod(f"web-{i % 50:02d}-5c8d7f9b6d-{i:05d}", f"team-{i % 20}", node_name=nodes[i % n_nodes]["metadata"]["name"])
        for i in range(n_pods)
    ]
    counts = {k.kind: 0 for k in KINDS}
    weights = [mix["Pod"], mix["Node"], mix["Event"]]
    acc = [0.0, 0.0, 0.0]
    for i in range(total):
        # Deterministic weighted round robin.
        for j, w in enumerate(weights):
            acc[j] += w
        j = max(range(3), key=lambda x: acc[x])
        acc[j] -= sum(weights)
        if j == 0:
            obj = pods[counts["Pod"] % n_pods]
            obj["status"]["containerStatuses"][0]["restartCount"] = counts["Pod"] // n_pods
            cluster.apply(obj, copy=True)
            counts["Pod"] += 1
        elif j == 1:
            obj = nodes[counts["Node"] % n_nodes]
            obj["status"]["conditions"][-1]["lastHeartbeatTime"] = f"2024-06-01T12:{i // 60 % 60:02d}:{i % 60:02d}Z"
            cluster.apply(obj, copy=True)
            counts["Node"] += 1
        else:
            involved = pods[(i * 7) % n_pods]
            ev = event(involved, name=f"{involved['metadata']['name']}.{counts['Event']:016x}")
            cluster.apply(ev, copy=False)
            counts["Event"] += 1
    return counts


def _serve(conn: Connection, total: int, mix: dict[str, float], pin: bool) -> None:
    if pin:
        _pin(1)
    # The server holds the whole history; the cyclic GC would rescan it on
    # every collection while it is built. The client side keeps GC on.
    gc.disable()

    async def main() -> None:
        cluster = FakeCluster(history_size=total + 10_000, bookmark_interval=3600)
        start_rv = cluster.resource_version
        built = time.perf_counter()
        counts = _populate(cluster, total, mix)
        for change in cluster._history:  # encode every frame once, up front
            change.line()
        built = time.perf_counter() - built
        url = await cluster.start()
        conn.send({"url": url, "start_rv": start_rv, "counts": counts, "build_s": built})
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, conn.recv)  # wait for "stop"
        await cluster.stop()

    asyncio.run(main())


class _Done(Exception):
    pass


class _CountingSink:
    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen = 0

    async def delta(self, delta: Delta) -> None:
        self.seen += 1
        if self.seen >= self.expected:
            raise _Done

    async def synced(self, kind: str) -> None:  # pragma: no cover - never listed here
        pass


async def bare(url: str, start_rv: int, counts: dict[str, int]) -> int:
    async with aiohttp.ClientSession() as session:

        async def one(kind: Kind) -> int:
            n = 0
            want = counts[kind.kind]
            params = {"watch": "true", "resourceVersion": str(start_rv), "timeoutSeconds": "600"}
            async with session.get(url + kind.path(), params=params) as resp:
                async for line in resp.content:
                    orjson.loads(line)
                    n += 1
                    if n >= want:
                        break
            return n

        return sum(await asyncio.gather(*(one(k) for k in KINDS)))


async def via_gateway(gateway: Gateway, start_rv: int, counts: dict[str, int]) -> int:
    async def one(kind: Kind) -> int:
        sink = _CountingSink(counts[kind.kind])
        try:
            async with gateway.watch(kind, resource_version=str(start_rv), timeout_seconds=600) as stream:
                async for ev in stream:
                    await sink.delta(ev)  # type: ignore[arg-type]
        except _Done:
            pass
        return sink.seen

    return sum(await asyncio.gather(*(one(k) for k in KINDS)))


async def via_watcher(gateway: Gateway, start_rv: int, counts: dict[str, int]) -> int:
    async def one(kind: Kind) -> int:
        sink = _CountingSink(counts[kind.kind])
        watcher = KindWatcher(gateway, kind, sink, watch_timeout=600, min_watch_duration=0)
        watcher.resource_version = str(start_rv)
        with contextlib.suppress(_Done):
            await watcher.watch_once()
        return sink.seen

    return sum(await asyncio.gather(*(one(k) for k in KINDS)))


async def measure(run: Callable[[], Coroutine[Any, Any, int]]) -> tuple[int, float]:
    started = time.perf_counter()
    n = await run()
    return n, time.perf_counter() - started


async def bench(info: dict[str, Any], repeat: int) -> dict[str, list[float]]:
    url, start_rv, counts = info["url"], info["start_rv"], info["counts"]
    total = sum(counts.values())
    rates: dict[str, list[float]] = {"bare": [], "gateway": [], "watcher": []}
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        from agent.fakecluster import write_kubeconfig

        write_kubeconfig(kubeconfig, url)
        async with Gateway(kubeconfig, watch_idle_timeout=60) as gateway:
            runs: dict[str, Callable[[], Coroutine[Any, Any, int]]] = {
                "bare": lambda: bare(url, start_rv, counts),
                "gateway": lambda: via_gateway(gateway, start_rv, counts),
                "watcher": lambda: via_watcher(gateway, start_rv, counts),
            }
            await runs["bare"]()  # warm up both paths (connections, caches)
            await runs["gateway"]()
            for _ in range(repeat):
                for name, run in runs.items():
                    n, seconds = await measure(run)
                    if n != total:
                        raise SystemExit(f"{name}: got {n} events, expected {total}")
                    rates[name].append(n / seconds)
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=120_000, help="watch events in the stream (all kinds)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mix", default="Pod=0.6,Node=0.1,Event=0.3", help="share of each kind")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to CPUs")
    args = parser.parse_args()
    mix = {k: float(v) for k, v in (part.split("=") for part in args.mix.split(","))}

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(child, args.events, mix, not args.no_pin), daemon=True)
    server.start()
    info = parent.recv()
    if not args.no_pin:
        _pin(0)
    try:
        rates = asyncio.run(bench(info, args.repeat))
    finally:
        parent.send("stop")
        server.join(10)

    counts = info["counts"]
    total = sum(counts.values())
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"stream: {total:,} watch events over loopback ({', '.join(f'{k} {v:,}' for k, v in counts.items())})")
    print(f"server: child process, history built in {info['build_s']:.1f}s; client on {cpus} CPU(s)")
    med = {name: statistics.median(values) for name, values in rates.items()}
    for name, label in (
        ("bare", "bare aiohttp lines + orjson.loads"),
        ("gateway", "Gateway.watch → no-op sink"),
        ("watcher", "KindWatcher (gateway + bookkeeping) → no-op sink"),
    ):
        runs = ", ".join(f"{r:,.0f}" for r in rates[name])
        print(f"  {label:<50} {med[name]:>10,.0f} events/s   (runs: {runs})")
    print(f"ratio gateway/bare: {med['gateway'] / med['bare']:.2f}   ratio watcher/bare: {med['watcher'] / med['bare']:.2f}")
    ok = med["gateway"] >= 20_000 and med["gateway"] / med["bare"] >= 0.4
    print(f"targets (gateway ≥ 20,000 events/s and ≥ 0.4 of bare): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
