"""Benchmark of the Score phase and of placement prediction on generated
clusters (bench/generate.py, 30 pods per node). Prints figures; not a timed test.

    .venv/bin/python bench/bench_scoring.py [--sizes 500,1000,2000,5000 --runs 15 --replicas 20]

For each size: the median / p90 time of the Score phase for one pod over every
feasible node (the node table already built); the first attempt alone (every
filter on every node, then the Score phase, with the per-node rows); and a
``--replicas`` placement prediction (the first attempt, then each placement state
-- a multiset of bound nodes, over tie branches or seeded runs -- scored with the
copies counted), with how many states it computed and the time per state.
Last line: how each figure grows from the smallest to the largest size.
Targets at 5,000 nodes: one pod < 10 ms, 20 replicas < 200 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dataclasses import replace

from analyzers.records import FrozenMap, Pod
from analyzers.simulator import node_table, simulate
from analyzers.simulator.scoring import score_pod
from analyzers.simulator.scoring.placement import attempt, feasible_nodes, place
from analyzers.snapshot import ClusterSnapshot
from bench.generate import generate
from bench.machine import describe


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """Median, p90 and minimum in ms (on a shared machine the minimum is the steadiest)."""
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return (
        statistics.median(samples) * 1000,
        samples[max(0, int(len(samples) * 0.9) - 1)] * 1000,
        samples[0] * 1000,
    )


def a_running_pod(snap: ClusterSnapshot) -> Pod:
    """A pod of a ReplicaSet (so the system default spread constraints apply), made
    small (50m, 64Mi) so that most nodes are feasible, scheduled anew."""
    for p in sorted(snap.pods.values(), key=lambda p: p.key):
        if p.node_name and p.owner is not None and p.owner.kind == "ReplicaSet" and not p.spec.host_ports:
            small = FrozenMap({"cpu": 50, "memory": 64 * 2**20})
            spec = replace(p.spec, requests=small, nonzero_requests=small, node_selector=FrozenMap())
            return replace(p, name=p.name + "-next", uid=p.uid + "-next", node_name="", spec=spec)
    raise SystemExit("no ReplicaSet pod in the generated cluster")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="500,1000,2000,5000")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--replicas", type=int, default=20, help="0: scores only, no placement")
    args = ap.parse_args()
    print(f"machine: {describe()}")
    print(f"{'nodes':>6} {'pods':>7} {'feasible':>8} {'score 1 pod ms p50/p90/min':>27} {'1st attempt ms':>14} "
          f"{args.replicas}-replica placement ms p50/min  states  ms/state")  # fmt: skip
    figures: dict[int, tuple[float, float]] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        snap = ClusterSnapshot.from_objects(generate(nodes=size, pods=size * 30, seed=1))
        table = node_table(snap)
        pod = a_running_pod(snap)
        verdict = simulate(snap, pod)
        feasible = feasible_nodes(verdict, table.size)
        score = timed(lambda s=snap, p=pod, f=feasible: score_pod(s, p, f), args.runs)
        placement = (float("nan"), float("nan"), float("nan"))
        first = (float("nan"), float("nan"), float("nan"))
        states = 0
        if args.replicas:
            runs = max(3, args.runs // 5)
            first = timed(lambda s=snap, p=pod: attempt(s, p), runs)
            placement = timed(lambda s=snap, p=pod: place(s, p, args.replicas), runs)
            states = place(snap, pod, args.replicas).states
        figures[size] = (score[0], placement[0])
        per_state = (placement[0] - first[0]) / states if states else float("nan")
        print(f"{size:>6} {len(snap.pods):>7} {len(feasible):>8} {score[0]:>9.2f} / {score[1]:.2f} / {score[2]:<6.2f} "
              f"{first[0]:>14.1f} {placement[0]:>17.1f} / {placement[2]:<14.1f} {states:>6} {per_state:>9.2f}")  # fmt: skip
    if len(figures) > 1:
        small, large = min(figures), max(figures)
        grow = [figures[large][j] / figures[small][j] for j in (0, 1)]
        print(
            f"growth {small} -> {large} nodes (x{large / small:g}): score x{grow[0]:.1f}, placement x{grow[1]:.1f}"
        )


if __name__ == "__main__":
    main()
