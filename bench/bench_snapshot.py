"""Snapshot benchmark: load a generated 5,000-node / 150,000-pod dump from a
JSON file into a ClusterSnapshot, the way ``unstick analyze`` does.

Prints load time, bytes held per pod (tracemalloc, a second run) and the
process RSS. Targets (issue 2): load < 30 s, < 1 KB per pod once loaded.

    .venv/bin/python bench/bench_snapshot.py [--nodes 5000 --pods 150000]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.dumps import expand, load_into
from analyzers.snapshot import ClusterState
from bench.generate import generate


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150_000)
    ap.add_argument("--workloads", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cluster.json")
        objs = generate(nodes=args.nodes, pods=args.pods, workloads=args.workloads)
        with open(path, "w") as fh:
            json.dump({"apiVersion": "v1", "kind": "List", "items": objs}, fh)
        del objs
        gc.collect()
        size = os.path.getsize(path)
        print(f"dump: {args.nodes} nodes, {args.pods} pods, {size / 2**20:.0f} MiB of JSON")

        t0 = time.perf_counter()
        state = ClusterState()
        used = load_into(state, expand([path]))
        snap = state.snapshot()
        seconds = time.perf_counter() - t0
        print(f"load: {used} objects in {seconds:.1f} s (target < 30 s); {len(snap.pods)} pods")
        print(f"RSS after load (peak, includes the parsed JSON transiently): {rss_mb():.0f} MiB")

        del state, snap
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        state = ClusterState()
        load_into(state, expand([path]))
        snap = state.snapshot()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        per_pod = held / max(1, len(snap.pods))
        print(f"held by the snapshot: {held / 2**20:.0f} MiB, {per_pod:.0f} bytes per pod incl. nodes/workloads (target < 1024)")


if __name__ == "__main__":
    main()
