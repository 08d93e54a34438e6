"""Benchmark: what nominated pods (preemptions in flight) cost the simulator. Prints
figures; not a timed test.

    .venv/bin/python bench/bench_nominated.py [--nodes 2000 --pods 40000 --nominated 20 --runs 20]

On a generated cluster (bench/generate.py) it times one ``simulate`` call for a pod
that fits and a pod with a DoNotSchedule zone spread constraint, first with no pod
nominated, then with ``--nominated`` high-priority pending pods nominated to as many
nodes (analyzers/simulator/engine.py with_nominated_pods: one extra filter pass for
the plain pod, one per nominated node for the spread pod). The first call of each
kind builds the what-if snapshot and node table; it is reported apart.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzers.simulator import node_table, simulate
from analyzers.snapshot import ClusterSnapshot
from bench.generate import DEFAULT_TOLERATIONS, generate


def pod(name: str, *, extra: dict[str, object] | None = None, nominated: str = "", priority: int = 0) -> dict:  # type: ignore[type-arg]
    status: dict[str, object] = {"phase": "Pending"}
    if nominated:
        status["nominatedNodeName"] = nominated
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "search", "uid": f"bench-{name}", "labels": {"app": name}},
        "spec": {
            "schedulerName": "default-scheduler",
            "priority": priority,
            "tolerations": DEFAULT_TOLERATIONS,
            "containers": [
                {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
            ],
            **(extra or {}),
        },
        "status": status,
    }


SPREAD = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "svc-016"}},
        }
    ]
}


def timed(fn, runs: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    first = time.perf_counter()
    fn()
    first = time.perf_counter() - first
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return first * 1000, statistics.median(samples) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="nominated-pods benchmark")
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=40_000)
    parser.add_argument("--nominated", type=int, default=20)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)

    objects = generate(args.nodes, args.pods, 60)
    plain, spread = pod("probe"), pod("probe-spread", extra=SPREAD)
    base = ClusterSnapshot.from_objects([*objects, plain, spread])
    names = sorted(base.nodes)
    rng = random.Random(1)
    held = [pod(f"preemptor-{i}", nominated=rng.choice(names), priority=1000) for i in range(args.nominated)]
    busy = ClusterSnapshot.from_objects([*objects, plain, spread, *held])
    del objects
    node_table(base)
    node_table(busy)
    print(
        f"cluster: {len(base.nodes)} nodes, {len(base.pods)} pods; {args.nominated} pods nominated in the second run"
    )
    for label, snap in (("no nomination", base), (f"{args.nominated} nominated", busy)):
        for what, name in (("pod that fits", "probe"), ("zone spread pod", "probe-spread")):
            target = snap.pods[("search", name)]
            first, median = timed(lambda s=snap, t=target: simulate(s, t), args.runs)
            print(f"{label:>16} | {what:<16} first call {first:8.1f} ms, then median {median:8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
