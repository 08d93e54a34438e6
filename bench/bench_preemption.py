"""Benchmark: preemption's dry runs, one per node vs one per group of equal nodes. Prints
figures and the machine; not a timed test.

    .venv/bin/python bench/bench_preemption.py [--nodes 500,1000,5000] [--runs 20] [--profile] [--shapes]

The shape of bench/bench_side_by_side.py's ``preemption`` case, built offline as a
snapshot (no control plane): Nodes of 4 CPUs in three zones, one low-priority filler pod
of 3.5 CPUs bound to each, and a pending pod of 2 CPUs at priority 1000: ``Insufficient
cpu`` everywhere, and evicting a node's filler makes room, so DefaultPreemption dry-runs
nodes until it has max(100, 10 %) candidates. ``simulate`` is timed with the dry runs per
node (analyzers/simulator/preemption.py, ``GROUP_DRY_RUNS = False``: the test oracle) and
per group; ``--profile`` prints cProfile's top entries of the grouped run at the largest
size. ``--shapes`` also times the four shapes of bench/bench_side_by_side.py (fits,
resources, affinity, preemption) offline on the same objects at the largest size: the
first pod of each (it builds what the node table keeps for every later pod: the sorted
resource columns, the victim classes), and the median and mean of the rest.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzers.simulator import node_table, preemption, simulate
from analyzers.snapshot import ClusterSnapshot
from bench.machine import describe
from tests.realcluster.harness import node

ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")


def objects(nodes: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "bench-high"},
            "value": 1000,
        }
    ]
    for i in range(nodes):
        name = f"node-{i:05d}"
        out.append(node(name, labels={"topology.kubernetes.io/zone": ZONES[i % 3], "node-pool": "general"}))
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"filler-{name}",
                    "namespace": "bench-filler",
                    "uid": f"filler-{i}",
                    "labels": {"app": "filler"},
                    # created one after the other, as the bench's API calls make them
                    "creationTimestamp": f"2026-11-27T10:{i // 3600 % 60:02d}:{i // 60 % 60:02d}Z",
                },
                "spec": {
                    "nodeName": name,
                    "priority": 0,
                    "containers": [
                        {"name": "app", "image": "filler:1", "resources": {"requests": {"cpu": "3500m"}}}
                    ],
                },
                "status": {"phase": "Running"},
            }
        )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "preemption-0000",
                "namespace": "bench-preemption",
                "uid": "p0",
                "labels": {"shape": "preemption"},
            },
            "spec": {
                "priorityClassName": "bench-high",
                "priority": 1000,
                "containers": [{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "2"}}}],
            },
            "status": {"phase": "Pending"},
        }
    )
    return out


def shape_pod(shape: str) -> Any:
    """The pending pod of bench_side_by_side.pod_for(shape), decoded as the agent holds it."""
    from analyzers.ingest import Decoder
    from bench.bench_side_by_side import pod_for

    obj = pod_for(shape, 0, "bench-" + shape)
    obj["metadata"]["uid"] = shape
    obj["status"] = {"phase": "Pending"}
    if shape == "preemption":
        obj["spec"]["priority"] = 1000
    return Decoder().decode(obj)


def shapes(nodes: int, runs: int) -> None:
    snapshot = ClusterSnapshot.from_objects(objects(nodes))
    node_table(snapshot)
    print(f"{nodes:,} nodes, offline: ms per simulate")
    print(f"{'shape':<12}{'first':>8}{'median':>8}{'mean':>8}  verdict")
    for shape in ("fits", "resources", "affinity", "preemption"):
        pod = shape_pod(shape)
        samples = []
        verdict = None
        for _ in range(runs + 1):
            t0 = time.perf_counter()
            verdict = simulate(snapshot, pod, kube_version="1.37")
            samples.append(time.perf_counter() - t0)
        first, rest = samples[0] * 1000, samples[1:]
        said = "fits" if verdict is not None and verdict.fits else (verdict.message[:90] if verdict else "")
        print(
            f"{shape:<12}{first:>8.2f}{statistics.median(rest) * 1000:>8.2f}"
            f"{statistics.fmean(rest) * 1000:>8.2f}  {said}"
        )


def timed(snapshot: ClusterSnapshot, runs: int, grouped: bool) -> tuple[float, float, Any]:
    pod = snapshot.pods[("bench-preemption", "preemption-0000")]
    preemption.GROUP_DRY_RUNS = grouped
    samples = []
    verdict = None
    try:
        for _ in range(runs):
            t0 = time.perf_counter()
            verdict = simulate(snapshot, pod, kube_version="1.37")
            samples.append(time.perf_counter() - t0)
    finally:
        preemption.GROUP_DRY_RUNS = True
    return statistics.median(samples) * 1000, statistics.fmean(samples) * 1000, verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", default="500,1000,5000")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--shapes", action="store_true", help="also the side-by-side's four shapes, offline")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print(
        f"{'nodes':>6}{'per node median':>17}{'mean':>8}{'grouped median':>16}{'mean':>8}{'speed-up':>10}  verdict"
    )
    snapshot = None
    for n in (int(x) for x in args.nodes.split(",")):
        snapshot = ClusterSnapshot.from_objects(objects(n))
        node_table(snapshot)
        before, before_mean, v1 = timed(snapshot, args.runs, grouped=False)
        after, after_mean, v2 = timed(snapshot, args.runs, grouped=True)
        same = "same" if v1 == v2 else "DIFFERENT"
        print(
            f"{n:>6}{before:>14.2f} ms{before_mean:>8.2f}{after:>13.2f} ms{after_mean:>8.2f}{before / after:>9.1f}×"
            f"  {same}: {v2.preemption.message[:100]}"
        )
    if args.profile and snapshot is not None:
        pod = snapshot.pods[("bench-preemption", "preemption-0000")]
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.runs):
            simulate(snapshot, pod, kube_version="1.37")
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(18)
    if args.shapes:
        shapes(max(int(x) for x in args.nodes.split(",")), args.runs)
    print(f"machine after: {describe()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
