"""Benchmark of the filter simulator on a generated cluster (default 5,000 nodes,
150,000 pods, ~100 workloads). Prints figures; not a timed test.

    .venv/bin/python bench/bench_simulate.py [--nodes 5000 --pods 150000 --runs 50]

Reports the one-time precompute (the per-snapshot node table) and the median /
p90 time of one ``simulate`` call for: a pending pod that fits nowhere (with
its preemption), a pod that fits, a pod with required anti-affinity and a
DoNotSchedule topology spread constraint, and a pod with required pod
affinity; plus the cost of materialising all 5,000 per-node verdicts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzers.ingest import Decoder
from analyzers.simulator import node_table, simulate
from analyzers.snapshot import ClusterSnapshot
from bench.generate import DEFAULT_TOLERATIONS, generate


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float, object]:
    samples = []
    result: object = None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.9) - 1] * 1000, result


def hypothetical(
    decoder: Decoder,
    name: str,
    spec_extra: dict[str, object],
    labels: dict[str, str],
    requests: dict[str, str],
):  # type: ignore[no-untyped-def]
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "search", "uid": f"bench-{name}", "labels": labels},
        "spec": {
            "schedulerName": "default-scheduler",
            "tolerations": DEFAULT_TOLERATIONS,
            "containers": [{"name": "app", "image": "app:1", "resources": {"requests": requests}}],
            **spec_extra,
        },
        "status": {"phase": "Pending"},
    }
    return decoder.decode(obj)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="filter simulator benchmark")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--workloads", type=int, default=100)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    objects = generate(args.nodes, args.pods, args.workloads)
    t1 = time.perf_counter()
    snap = ClusterSnapshot.from_objects(objects)
    t2 = time.perf_counter()
    del objects
    table = node_table(snap)
    t3 = time.perf_counter()
    print(
        f"cluster: {len(snap.nodes)} nodes, {len(snap.pods)} pods "
        f"(generate {t1 - t0:.1f} s, load {t2 - t1:.1f} s)"
    )
    print(
        f"precompute (node table, once per snapshot): {(t3 - t2) * 1000:.0f} ms "
        f"({len(table.label_index)} label keys, {sum(len(g) for g in table.pod_groups.values())} pod groups, "
        f"{len(table.anti_affinity_groups)} anti-affinity groups)"
    )

    decoder = Decoder()
    app = {"app.kubernetes.io/name": "bench"}
    cases = {
        "pending pod (GPU request no node has; preemption runs)": next(
            p for p in snap.unscheduled_pods() if "nvidia.com/gpu" in p.spec.requests
        ),
        "pending pod (nodeSelector of a missing pool)": next(
            p for p in snap.unscheduled_pods() if p.spec.node_selector
        ),
        "pod that fits (500m, 1Gi)": hypothetical(decoder, "fits", {}, app, {"cpu": "500m", "memory": "1Gi"}),
        "anti-affinity (hostname) + topology spread (zone)": hypothetical(
            decoder,
            "spread",
            {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "svc-014"}},
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                },
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "svc-016"}},
                    }
                ],
            },
            {"app.kubernetes.io/name": "svc-016"},
            {"cpu": "500m", "memory": "1Gi"},
        ),
        "pod affinity (zone) to an existing workload": hypothetical(
            decoder,
            "affine",
            {
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "svc-010"}},
                                "topologyKey": "topology.kubernetes.io/zone",
                            }
                        ]
                    }
                }
            },
            app,
            {"cpu": "64", "memory": "1Gi"},
        ),
    }
    print(f"simulate, {args.runs} runs each (median / p90):")
    for label, pod in cases.items():
        assert pod is not None
        median, p90, verdict = timed(lambda pod=pod: simulate(snap, pod), args.runs)  # type: ignore[misc]
        msg = getattr(verdict, "message", "") or "(fits)"
        print(f"  {median:7.2f} ms / {p90:7.2f} ms  {label}")
        print(f"      {msg[:160]}{'...' if len(msg) > 160 else ''}")
    pod = cases["pending pod (nodeSelector of a missing pool)"]
    median, p90, _ = timed(lambda: simulate(snap, pod).nodes, max(5, args.runs // 5))
    print(
        f"  {median:7.2f} ms / {p90:7.2f} ms  same, with all {len(snap.nodes)} per-node verdicts materialised"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
