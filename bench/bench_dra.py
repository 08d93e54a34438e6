"""DRA benchmarks (issue 23, "Speed"). Prints figures; not a timed test.

    .venv/bin/python bench/bench_dra.py [filter|memory|all] [--nodes N] [--devices D] [--runs R]

filter  DynamicResources' Filter for one pod whose claim asks 2 GPUs with a CEL
        selector, against ``--nodes`` (1,000) nodes with ``--devices`` (8)
        devices each, half of them allocated to other claims: the whole
        simulate() of that pod (every filter plugin, the allocator on every
        node), median and p90 over ``--runs`` fresh snapshots of the same
        cluster (each run builds its own snapshot, so no allocator or CEL cache
        of a previous run is reused). Target: median < 20 ms (the real
        scheduler's DRA Filter costs 10-200 ms per pod, kubernetes#131908).
memory  ResourceSlices of 5,000 nodes x ``--devices`` devices decoded into
        the records a cache holds (ClusterState.load), the heap growth
        (tracemalloc) divided by the number of devices: bytes per device.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzers.simulator.engine import simulate
from analyzers.snapshot import ClusterSnapshot, ClusterState

DRIVER = "gpu.nvidia.com"
MODELS = ("H100", "A100-80GB")


def nodes_and_slices(n: int, per_node: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        name = f"node-{i:05d}"
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}},
            }
        )
        model = MODELS[i % len(MODELS)]
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-{DRIVER}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": f"gpu-{d}",
                            "attributes": {
                                "productName": {"string": f"NVIDIA {model}"},
                                "model": {"string": model},
                                "uuid": {"string": f"GPU-{i:05d}-{d}"},
                                "index": {"int": d},
                                "driverVersion": {"version": "550.54.15"},
                            },
                            "capacity": {"memory": {"value": "80Gi"}},
                        }
                        for d in range(per_node)
                    ],
                },
            }
        )
    return out


def cluster(n: int, per_node: int) -> list[dict[str, Any]]:
    objs = nodes_and_slices(n, per_node)
    objs.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
    # Half of every node's devices allocated, to one claim per node.
    for i in range(n):
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"held-{i}", "namespace": "default", "uid": f"held-{i}"},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {"deviceClassName": "gpu.nvidia.com", "count": per_node // 2},
                            }
                        ]
                    }
                },
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {
                                    "request": "gpu",
                                    "driver": DRIVER,
                                    "pool": f"node-{i:05d}",
                                    "device": f"gpu-{d}",
                                }
                                for d in range(0, per_node, 2)
                            ]
                        }
                    }
                },
            }
        )
    selector = f'device.attributes["{DRIVER}"].model == "H100" && device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
    objs.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "two-gpus", "namespace": "default", "uid": "two-gpus"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "count": 2,
                                "selectors": [{"cel": {"expression": selector}}],
                            },
                        }
                    ]
                }
            },
        }
    )
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer", "namespace": "default", "uid": "trainer"},
            "spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                "resourceClaims": [{"name": "gpus", "resourceClaimName": "two-gpus"}],
            },
            "status": {"phase": "Pending"},
        }
    )
    return objs


def bench_filter(n: int, per_node: int, runs: int) -> None:
    objs = cluster(n, per_node)
    cold, cold_cpu, warm, warm_cpu = [], [], [], []
    verdict = None
    for _ in range(runs):
        snap = ClusterSnapshot.from_objects(objs)
        pod = snap.pods[("default", "trainer")]
        for wall, cpu in ((cold, cold_cpu), (warm, warm_cpu)):
            start, start_cpu = time.perf_counter(), time.process_time()
            verdict = simulate(snap, pod, kube_version="v1.37.2")
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    assert verdict is not None and verdict.fits

    def fig(xs: list[float]) -> str:
        xs = sorted(xs)
        return f"median {statistics.median(xs) * 1e3:.1f} ms, p90 {xs[int(len(xs) * 0.9)] * 1e3:.1f} ms"

    print(
        f"DRA filter, 1 pod asking 2 GPUs with a CEL selector, {n} nodes x {per_node} devices, half allocated, "
        f"{runs} runs, {verdict.feasible_nodes} feasible nodes (target median < 20 ms):\n"
        f"  first pod on a snapshot (allocated set, selector caches filled): wall {fig(cold)}; CPU {fig(cold_cpu)}\n"
        f"  next pod on the same snapshot (the agent's case):              wall {fig(warm)}; CPU {fig(warm_cpu)}\n"
        f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )


def bench_memory(n: int, per_node: int) -> None:
    objs = nodes_and_slices(n, per_node)
    slices = [o for o in objs if o["kind"] == "ResourceSlice"]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    state = ClusterState()
    state.load(slices)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    devices = n * per_node
    assert len(state.collections["resource_slices"]) == n
    print(
        f"ResourceSlices of {n} nodes x {per_node} devices held: {(after - before) / 2**20:.1f} MiB, "
        f"{(after - before) / devices:.0f} bytes per device"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("part", nargs="?", default="all", choices=("filter", "memory", "all"))
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--memory-nodes", type=int, default=5000)
    args = parser.parse_args()
    if args.part in ("filter", "all"):
        bench_filter(args.nodes, args.devices, args.runs)
    if args.part in ("memory", "all"):
        bench_memory(args.memory_nodes, args.devices)


if __name__ == "__main__":
    main()
