"""unstick's simulation side by side with the real kube-scheduler, same pods, same objects,
same run. Prints figures and the machine.

    .venv/bin/python bench/bench_side_by_side.py [--nodes 5000] [--pods 40]

Starts the real control plane of tests/realcluster (the pinned release), stops its fake
kubelet (5,000 Node objects and no kubelets: nothing renews leases, and no node lifecycle
controller runs, so the nodes stay Ready), creates ``--nodes`` Nodes (4 CPUs, 16 GiB, three
zones) and one low-priority filler pod bound to each (3.5 CPUs, ``nodeName`` set: created
bound, as a kubelet-less cluster holds them). Then, one shape after the other, a stream of
``--pods`` pods for the real kube-scheduler (default profile):

* ``fits``: 100m CPU; the scheduler binds it;
* ``resources``: 64 CPUs; ``Insufficient cpu`` everywhere, no preemption victims;
* ``affinity``: a nodeSelector no node matches; preemption is not helpful;
* ``preemption``: 2 CPUs at priority 1000; ``Insufficient cpu`` everywhere, and evicting a
  node's filler makes room: DefaultPreemption finds candidates on every node.

For each shape the scheduler's own histograms are read from its ``/metrics`` before and
after (``scheduler_scheduling_attempt_duration_seconds``: one attempt, the algorithm and
the binding; ``scheduler_framework_extension_point_duration_seconds``: PreFilter, Filter,
PostFilter, …): the mean time per attempt is the sum over the count of the difference.
Then the nodes and pods are read back from the API server into a ClusterSnapshot (what the
agent holds), the simulator's node table and its victim classes are built once (as the agent
carries them between passes, ``analyzers.scope.carry_over``; their build time is printed),
the garbage of reading back is collected (``gc.collect()``, untimed: else the first pod's
time would hold that collection), and ``analyzers.simulator.simulate`` is timed on each
pod of each shape: its verdict for that pod against every node, with preemption. The ratio
per shape is the scheduler's mean attempt over unstick's mean simulation. Target: ≥ 20×.

kube-scheduler filters only until it has found enough feasible nodes
(``percentageOfNodesToScore``: 10 % of 5,000 here) and stops; unstick evaluates every
filter on every node (it says why not on each). For the unschedulable shapes both look
at every node.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import re
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzers.simulator import node_table, simulate
from analyzers.snapshot import ClusterState
from bench.machine import describe
from tests.realcluster.harness import ControlPlane, build_binaries, node

ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
FILLER_CPU = "3500m"
SHAPES = ("fits", "resources", "affinity", "preemption")
_SAMPLE = re.compile(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-z_]+)="([^"]*)"')


def pod_for(shape: str, i: int, namespace: str) -> dict[str, Any]:
    cpu = {"fits": "100m", "resources": "64", "affinity": "100m", "preemption": "2"}[shape]
    spec: dict[str, Any] = {
        "containers": [
            {"name": "app", "image": "registry.example/app:1", "resources": {"requests": {"cpu": cpu}}}
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if shape == "affinity":
        spec["nodeSelector"] = {"node-pool": "arm64"}
    if shape == "preemption":
        spec["priorityClassName"] = "bench-high"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{shape}-{i:04d}", "namespace": namespace, "labels": {"shape": shape}},
        "spec": spec,
    }


def filler(node_name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"filler-{node_name}", "namespace": namespace, "labels": {"app": "filler"}},
        "spec": {
            "nodeName": node_name,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/filler:1",
                    "resources": {"requests": {"cpu": FILLER_CPU}},
                }
            ],
        },
    }


class Api:
    def __init__(self, http: aiohttp.ClientSession, server: str) -> None:
        self.http, self.server = http, server

    async def create_all(
        self, path_of: Callable[[dict[str, Any]], str], bodies: list[dict[str, Any]]
    ) -> float:
        sem = asyncio.Semaphore(48)
        start = time.perf_counter()

        async def one(body: dict[str, Any]) -> None:
            async with sem:
                for attempt in range(5):
                    async with self.http.post(f"{self.server}{path_of(body)}", json=body) as resp:
                        if resp.status in (201, 409):
                            return
                        if attempt == 4:
                            raise RuntimeError(
                                f"creating {body['metadata']['name']}: HTTP {resp.status}: {await resp.text()}"
                            )
                    await asyncio.sleep(0.2 * (attempt + 1))

        await asyncio.gather(*(one(b) for b in bodies))
        return time.perf_counter() - start

    async def get(self, path: str) -> Any:
        async with self.http.get(f"{self.server}{path}") as resp:
            resp.raise_for_status()
            return await resp.json()

    async def items(self, path: str, kind: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        token = ""
        while True:
            page = await self.get(f"{path}?limit=2000" + (f"&continue={token}" if token else ""))
            for item in page["items"]:
                item["kind"] = kind
                item.setdefault("apiVersion", "v1")
            out.extend(page["items"])
            token = page["metadata"].get("continue") or ""
            if not token:
                return out


def parse_metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for line in text.splitlines():
        if not line.startswith("scheduler_"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        name, labels, value = m.groups()
        out[(name, tuple(sorted(_LABEL.findall(labels or ""))))] = float(value)
    return out


def delta(
    before: dict[tuple[str, tuple[tuple[str, str], ...]], float],
    after: dict[tuple[str, tuple[tuple[str, str], ...]], float],
    name: str,
    where: Callable[[dict[str, str]], bool] = lambda _: True,
) -> float:
    total = 0.0
    for key, value in after.items():
        if key[0] == name and where(dict(key[1])):
            total += value - before.get(key, 0.0)
    return total


async def wait_attempted(api: Api, namespace: str, count: int, timeout: float = 300) -> None:
    """Until every pod of the namespace is bound or has PodScheduled=False."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = (await api.get(f"/api/v1/namespaces/{namespace}/pods"))["items"]
        done = sum(
            1
            for p in pods
            if p["spec"].get("nodeName")
            or any(c.get("type") == "PodScheduled" for c in (p.get("status") or {}).get("conditions") or ())
        )
        if done >= count:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"{namespace}: the scheduler did not try every pod in {timeout:.0f} s")


async def run(plane: ControlPlane, args: argparse.Namespace) -> None:
    ctx = ssl.create_default_context(cafile=str(plane.work / "ca.crt"))
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    sched = next(p for p in plane.processes if p.name == "kube-scheduler")
    port = next(a.split("=", 1)[1] for a in sched.popen.args if str(a).startswith("--secure-port="))  # type: ignore[union-attr]
    sched_url = f"https://127.0.0.1:{port}/metrics"
    headers = {"Authorization": f"Bearer {plane.admin_token}"}
    async with aiohttp.ClientSession(
        headers=headers, connector=aiohttp.TCPConnector(ssl=ctx, limit=64)
    ) as http:
        api = Api(http, plane.server)

        async def scheduler_metrics() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            async with http.get(sched_url, ssl=insecure) as resp:
                resp.raise_for_status()
                return parse_metrics(await resp.text())

        names = [f"node-{i:05d}" for i in range(args.nodes)]
        took = await api.create_all(
            lambda b: "/api/v1/nodes",
            [
                node(n, labels={"topology.kubernetes.io/zone": ZONES[i % 3], "node-pool": "general"})
                for i, n in enumerate(names)
            ],
        )
        print(f"created {args.nodes:,} nodes in {took:.0f} s", flush=True)
        await api.create_all(
            lambda b: "/apis/scheduling.k8s.io/v1/priorityclasses",
            [
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": "bench-high"},
                    "value": 1000,
                }
            ],
        )
        fill_ns = plane.new_namespace("bench-filler")
        took = await api.create_all(
            lambda b: f"/api/v1/namespaces/{b['metadata']['namespace']}/pods",
            [filler(n, fill_ns) for n in names],
        )
        print(f"created {args.nodes:,} bound filler pods ({FILLER_CPU} CPU each) in {took:.0f} s", flush=True)
        await asyncio.sleep(3)

        scheduler: dict[str, dict[str, float]] = {}
        ours: dict[str, tuple[list[float], Any]] = {}
        version = plane_version(plane)
        for shape in SHAPES:
            ns = plane.new_namespace(f"bench-{shape}")
            # unstick's view of the objects the scheduler is about to see (read back, as the agent has them)
            t0 = time.perf_counter()
            state = ClusterState(version)
            state.load(await api.items("/api/v1/nodes", "Node"))
            state.load(await api.items("/api/v1/pods", "Pod"))
            state.load(await api.items("/apis/scheduling.k8s.io/v1/priorityclasses", "PriorityClass"))
            state.load(await api.items("/api/v1/namespaces", "Namespace"))
            snapshot = state.snapshot()
            read = time.perf_counter() - t0
            t0 = time.perf_counter()
            node_table(snapshot).victim_classes()
            table = time.perf_counter() - t0
            gc.collect()  # the read-back's garbage, collected before the timed simulations
            before = await scheduler_metrics()
            await api.create_all(
                lambda b: f"/api/v1/namespaces/{b['metadata']['namespace']}/pods",
                [pod_for(shape, i, ns) for i in range(args.pods)],
            )
            await wait_attempted(api, ns, args.pods)
            await asyncio.sleep(2)  # the last attempts' metrics
            after = await scheduler_metrics()
            result = "scheduled" if shape == "fits" else "unschedulable"

            def of_result(labels: dict[str, str], result: str = result) -> bool:
                return labels.get("result") == result

            attempts = delta(before, after, "scheduler_scheduling_attempt_duration_seconds_count", of_result)
            seconds = delta(before, after, "scheduler_scheduling_attempt_duration_seconds_sum", of_result)
            algorithm = delta(before, after, "scheduler_scheduling_algorithm_duration_seconds_sum")
            algorithm_n = delta(before, after, "scheduler_scheduling_algorithm_duration_seconds_count")
            points = {
                point: delta(
                    before,
                    after,
                    "scheduler_framework_extension_point_duration_seconds_sum",
                    lambda labels, point=point: labels.get("extension_point") == point,
                )
                for point in ("Filter", "PostFilter")
            }
            scheduler[shape] = {
                "attempts": attempts,
                "seconds": seconds,
                "algorithm": algorithm / max(algorithm_n, 1),
                "all": delta(before, after, "scheduler_scheduling_attempt_duration_seconds_count"),
                **{k: v / max(algorithm_n, 1) for k, v in points.items()},
            }
            # The same pods, as the API server holds them, against the objects from before they
            # came (their nodeName and nomination, set by the scheduler since, taken off).
            pods = []
            for obj in await api.items(f"/api/v1/namespaces/{ns}/pods", "Pod"):
                obj["spec"].pop("nodeName", None)
                obj["status"] = {"phase": "Pending"}
                record = ClusterState(version).apply_object(obj)
                pods.append(record)
            times: list[float] = []
            verdict = None
            for pod in pods:
                t0 = time.perf_counter()
                verdict = simulate(snapshot, pod)
                times.append(time.perf_counter() - t0)
            ours[shape] = (times, verdict)
            print(
                f"  {shape}: {args.pods} pods, {scheduler[shape]['all']:.0f} scheduling attempts "
                f"({attempts:.0f} {result}); unstick read back {len(snapshot.nodes):,} nodes and "
                f"{len(snapshot.pods):,} pods in {read:.1f} s, node table and its victim classes built in "
                f"{table * 1000:.0f} ms (the agent carries both between passes)",
                flush=True,
            )
        print(
            f"{'shape':<12}{'scheduler ms/attempt':>21}{'algorithm':>10}{'Filter':>8}{'PostFilter':>11}"
            f"{'unstick mean':>13}{'median':>8}{'first':>8}{'ratio':>8}   unstick's verdict"
        )
        for shape in SHAPES:
            s = scheduler[shape]
            times, verdict = ours[shape]
            mean = statistics.fmean(times)
            attempt = s["seconds"] / max(s["attempts"], 1)
            said = (
                "fits" if verdict is not None and verdict.fits else (verdict.message[:80] if verdict else "")
            )
            print(
                f"{shape:<12}{1000 * attempt:>21.2f}{1000 * s['algorithm']:>10.2f}{1000 * s['Filter']:>8.2f}"
                f"{1000 * s['PostFilter']:>11.2f}{1000 * mean:>13.2f}{1000 * statistics.median(times):>8.2f}"
                f"{1000 * times[0]:>8.2f}"
                f"{attempt / mean:>7.1f}×   {said}"
            )
        print(
            "ms per attempt: scheduling_attempt_duration (result scheduled for fits, unschedulable for the "
            "others; binding included); algorithm, Filter, PostFilter: per algorithm run. "
            "first: unstick's first pod of the shape (it sorts the node table's resource columns, kept for the "
            "others; the mean includes it). ratio: attempt over unstick's mean. Target: ≥ 20× per shape"
        )


def plane_version(plane: ControlPlane) -> str:
    name = plane.bin_dir.parent.name  # …/kube/v1.37.2/bin
    return ".".join(name.lstrip("v").split(".")[:2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=40, help="pods per shape")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    work = Path(tempfile.mkdtemp(prefix="unstick-bench-side-by-side-"))
    plane = ControlPlane(bin_dir=build_binaries(work), work=work)
    plane.start()
    try:
        kubelet = next(p for p in plane.processes if p.name == "fake-kubelet")
        kubelet.popen.terminate()
        kubelet.popen.wait(10)
        plane.processes.remove(kubelet)
        print(
            f"real control plane {plane.server} ({plane.bin_dir.parent.name}) up in {plane.started_in:.0f} s; no kubelet"
        )
        asyncio.run(run(plane, args))
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
