"""Benchmark of the nodes × filter plugins grids on the rules benchmark's cluster. Prints figures.

    .venv/bin/python bench/bench_grids.py [--nodes 5000 --pods 150000]

Builds bench/bench_rules.py's cluster (5,000 nodes, 150,000 pods, 1,000 pending pods
in 100 workloads stuck for every reason the rules explain), runs ``build_report`` once,
then rebuilds every finding's grids from the report's verdicts (``analyzers.grid.grids_for``,
what ``build_report`` runs for each finding) and prints the CPU time: in all, per finding
(p50 and max), and the rows and the nodes they cover.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzers.grid import GRID_KEY, grids_for
from analyzers.report import build_report
from analyzers.snapshot import ClusterSnapshot
from bench.bench_rules import Builder
from bench.generate import generate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150_000)
    args = ap.parse_args(argv)
    objs = generate(args.nodes, args.pods - 1000, 100, pending=0, seed=0)
    builder = Builder(objs)
    builder.build(100, 1000)
    builder.pdbs(10)
    builder.metrics(12, True)
    objs.extend(builder.extra)
    snap = ClusterSnapshot.from_objects(objs)
    del objs, builder
    gc.collect()
    gc.freeze()
    t0 = time.process_time()
    report = build_report(snap, now=1.8e9)
    total = time.process_time() - t0
    verdicts = {f"{p.pod.namespace}/{p.pod.name}": p.verdict for p in report.pods}
    usage = {name: m.usage for name, m in snap.node_metrics.items()}
    per_finding: list[float] = []
    rows = nodes = 0
    for f in report.findings:
        if not f.evidence.get(GRID_KEY):
            continue
        t = time.process_time()
        grids = grids_for(list(f.pods), verdicts, usage)
        per_finding.append((time.process_time() - t) * 1000)
        rows += sum(len(g["rows"]) for g in grids)
        nodes += sum(r["count"] for g in grids for r in g["rows"])
    print(f"cluster: {len(snap.nodes)} nodes, {len(snap.pods)} pods; build_report {total:.2f} s CPU")
    print(
        f"grids of {len(per_finding)} findings: {sum(per_finding) / 1000:.2f} s CPU in all, per finding "
        f"p50 {statistics.median(per_finding):.1f} ms, max {max(per_finding):.1f} ms "
        f"({rows} rows covering {nodes} nodes)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
