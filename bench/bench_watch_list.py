"""The real kube-apiserver during the agent's initial sync of many pods: paginated list versus
streaming list (watch-list). Prints figures and the machine.

    .venv/bin/python bench/bench_watch_list.py [--pods 20000] [--rounds 2]

Starts the real control plane of tests/realcluster (the pinned release; build.sh builds or
waits for it), creates ``--pods`` Pods in one namespace directly through the API (no
scheduler takes them, no kubelet is needed), then syncs them with the agent's own
``KindWatcher`` through the real gateway, alternating:

* ``list``: ``limit=500``/``continue`` pages, then a watch (``Watcher(watch_list=False)``);
* ``watch-list``: one watch with ``sendInitialEvents=true``, up to the
  ``k8s.io/initial-events-end`` bookmark.

For each sync it reads from the API server's own ``/metrics`` the Go heap bytes allocated
(``go_memstats_alloc_bytes_total``, what the request made the server build) and the CPU
seconds it used (``process_cpu_seconds_total``), and samples its resident memory from
``/proc`` every 10 ms (peak above the value before the sync; Go keeps freed heap for a
while, so the first sync of a run pays for heap growth the next may reuse).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.kube.gateway import Gateway
from agent.kube.kinds import POD
from agent.kube.watcher import Delta, KindWatcher, WatchListMode
from bench.machine import describe
from tests.realcluster.harness import ControlPlane, build_binaries


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, _rss_kib(self.pid))
            time.sleep(0.01)


async def metrics(http: aiohttp.ClientSession, server: str) -> dict[str, float]:
    async with http.get(f"{server}/metrics") as resp:
        text = await resp.text()
    wanted = {"go_memstats_alloc_bytes_total", "process_cpu_seconds_total", "go_memstats_heap_inuse_bytes"}
    out: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name in wanted:
            out[name] = float(value)
        elif (
            name.startswith(
                ("apiserver_watch_list_duration_seconds_sum{", "apiserver_watch_list_duration_seconds_count{")
            )
            and 'resource="pods"' in name
        ):
            key = name.split("{", 1)[0]
            out[key] = out.get(key, 0.0) + float(value)
    return out


async def create_pods(
    http: aiohttp.ClientSession, server: str, namespace: str, count: int, concurrency: int
) -> float:
    sem = asyncio.Semaphore(concurrency)
    start = time.perf_counter()

    async def one(i: int) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"web-{i:06d}",
                "namespace": namespace,
                "labels": {"app": f"web-{i % 300}", "tier": "frontend"},
            },
            "spec": {
                "schedulerName": "nobody",
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.example/web:1.2.3",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    }
                ],
            },
        }
        async with sem:
            for attempt in range(5):
                async with http.post(f"{server}/api/v1/namespaces/{namespace}/pods", json=body) as resp:
                    if resp.status in (201, 409):
                        return
                    if attempt == 4:
                        raise RuntimeError(f"creating pod {i}: HTTP {resp.status}: {await resp.text()}")
                await asyncio.sleep(0.2 * (attempt + 1))

    progress = asyncio.ensure_future(_report_progress(http, server, namespace, count, start))
    try:
        await asyncio.gather(*(one(i) for i in range(count)))
    finally:
        progress.cancel()
    return time.perf_counter() - start


async def _report_progress(
    http: aiohttp.ClientSession, server: str, namespace: str, count: int, start: float
) -> None:
    while True:
        await asyncio.sleep(60)
        async with http.get(f"{server}/api/v1/namespaces/{namespace}/pods", params={"limit": "1"}) as resp:
            remaining = (await resp.json()).get("metadata", {}).get("remainingItemCount", 0)
        made = remaining + 1
        took = time.perf_counter() - start
        print(f"  … {made:,}/{count:,} pods after {took:.0f} s ({made / took:,.0f}/s)", flush=True)


async def sync_once(kubeconfig: Path, namespace: str, streaming: bool) -> tuple[float, int, WatchListMode]:
    done = asyncio.Event()
    counted = [0]

    class Sink:
        async def delta(self, delta: Delta) -> None:
            counted[0] += 1

        async def synced(self, kind: str) -> None:
            done.set()

    mode = WatchListMode(streaming)
    async with Gateway(str(kubeconfig), request_timeout=300) as gateway:
        watcher = KindWatcher(gateway, POD, Sink(), namespace=namespace, watch_timeout=600, watch_list=mode)
        start = time.perf_counter()
        task = asyncio.ensure_future(watcher.step())
        await asyncio.wait_for(done.wait(), 900)
        seconds = time.perf_counter() - start
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    return seconds, counted[0], mode


async def run(plane: ControlPlane, args: argparse.Namespace) -> None:
    ctx = ssl.create_default_context(cafile=str(plane.work / "ca.crt"))
    headers = {"Authorization": f"Bearer {plane.admin_token}"}
    apiserver = next(p for p in plane.processes if p.name == "kube-apiserver").popen.pid
    async with aiohttp.ClientSession(
        headers=headers, connector=aiohttp.TCPConnector(ssl=ctx, limit=64)
    ) as http:
        namespace = plane.new_namespace("bench-watch-list")
        seconds = await create_pods(http, plane.server, namespace, args.pods, args.create_concurrency)
        print(f"created {args.pods:,} pods in {seconds:.0f} s ({args.pods / seconds:,.0f}/s) through the API")
        await asyncio.sleep(3)
        print(
            f"{'shape':<12}{'synced s':>10}{'objects':>10}{'server alloc MiB':>18}"
            f"{'server CPU s':>14}{'server RSS peak +MiB':>22}{'heap in use after MiB':>23}"
            f"{'watch-list s (server)':>23}",
            flush=True,
        )
        for _ in range(args.rounds):
            for shape in ("watch-list", "list"):
                before = await metrics(http, plane.server)
                rss0 = _rss_kib(apiserver)
                sampler = RssSampler(apiserver)
                sampler.start()
                took, objects, mode = await sync_once(plane.kubeconfig, namespace, shape == "watch-list")
                sampler.stop.set()
                sampler.join()
                after = await metrics(http, plane.server)
                alloc = after["go_memstats_alloc_bytes_total"] - before["go_memstats_alloc_bytes_total"]
                cpu = after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]
                label = shape if shape == "list" or mode.enabled else f"{shape} (refused: {mode.reason})"
                served = after.get("apiserver_watch_list_duration_seconds_sum", 0.0) - before.get(
                    "apiserver_watch_list_duration_seconds_sum", 0.0
                )
                print(
                    f"{label:<12}{took:>10.1f}{objects:>10,}{alloc / 2**20:>18,.0f}"
                    f"{cpu:>14.2f}{max(0, sampler.peak - rss0) / 1024:>22,.0f}"
                    f"{after['go_memstats_heap_inuse_bytes'] / 2**20:>23,.0f}{served:>23.1f}",
                    flush=True,
                )
                await asyncio.sleep(2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--create-concurrency", type=int, default=64, help="pod creations in flight")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    work = Path(tempfile.mkdtemp(prefix="unstick-bench-watch-list-"))
    plane = ControlPlane(bin_dir=build_binaries(work), work=work)
    plane.start()
    try:
        print(
            f"real control plane {plane.server} ({os.path.basename(str(plane.bin_dir.parent))}) up in {plane.started_in:.0f} s"
        )
        asyncio.run(run(plane, args))
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
