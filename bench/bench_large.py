"""The largest cluster unstick is measured at: 20,000 nodes / 600,000 pods (issue 20). Prints figures.

    .venv/bin/python bench/bench_large.py [--nodes 20000 --pods 600000 --workloads 400] [--watched] [--per-object]

1. **load** (wall and CPU seconds): a generated dump (``bench.generate``, written as one JSON ``List`` by another
   process, so its dicts never touch this heap) read into a ``ClusterState`` and its
   snapshot, as ``unstick analyze`` does. Target < 60 s.
2. **first full analysis**: ``analyzers.report.build_report`` over the whole snapshot, what the
   agent's first pass does. Target < 20 s.
3. **RSS** after both (current and peak; the dump is read item by item, so the peak is the
   records plus one item and a 4 MiB read buffer). Target < 1 GB.
4. ``--per-object``: bytes the loaded snapshot holds (tracemalloc, a second load) per node (a
   dump of the nodes alone) and per pod (the whole dump minus the nodes-only one).
5. ``--watched``: the same cluster served by the fake API (``agent.fakecluster``) over HTTP and
   synced through the real ``Gateway`` + ``Watcher`` (``bench/bench_agent.py memory-http``).

Not in pytest: one run takes minutes and gigabytes. Run it once or twice, on a quiet machine.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe

NOW = 1_714_564_800.0  # 2024-05-01T12:00:00Z, the generator's clock


def _write_dump(path: str, nodes: int, pods: int, workloads: int, kinds: frozenset[str] | None) -> int:
    """Generate the cluster and write it as one ``List`` (in a child process); returns the object count."""
    import orjson

    from bench.generate import generate

    objs = generate(nodes=nodes, pods=pods, workloads=workloads)
    if kinds is not None:
        objs = [o for o in objs if o["kind"] in kinds]
    with open(path, "wb") as fh:
        fh.write(b'{"apiVersion":"v1","kind":"List","items":[')
        for i, obj in enumerate(objs):
            if i:
                fh.write(b",")
            fh.write(orjson.dumps(obj))
        fh.write(b"]}")
    return len(objs)


def _dump(tmp: str, name: str, args: argparse.Namespace, kinds: frozenset[str] | None = None) -> str:
    path = os.path.join(tmp, name)
    with mp.get_context("spawn").Pool(1) as pool:
        count = pool.apply(_write_dump, (path, args.nodes, args.pods, args.workloads, kinds))
    print(f"dump {name}: {count:,} objects, {os.path.getsize(path) / 2**20:,.0f} MiB of JSON", flush=True)
    return path


def _rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process, MiB."""
    current = 0.0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) / 1024
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _load(path: str) -> object:
    from agent.dumps import expand, load_into
    from analyzers.snapshot import ClusterState

    state = ClusterState()
    load_into(state, expand([path]))
    return state.snapshot()


def _held_bytes(path: str) -> tuple[int, object]:
    """Bytes a loaded snapshot holds (tracemalloc), and the snapshot."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    snap = _load(path)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return held, snap


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--pods", type=int, default=600_000)
    ap.add_argument("--workloads", type=int, default=400, help="workloads of the generated cluster")
    ap.add_argument("--per-object", action="store_true", help="also measure bytes held per node and per pod")
    ap.add_argument("--watched", action="store_true", help="also sync it through the fake API's list+watch")
    args = ap.parse_args(argv)
    # The agent as `unstick analyze` imports it, before the baseline.
    import agent.dumps  # noqa: F401
    import analyzers.report  # noqa: F401
    from analyzers.report import build_report

    print(f"large-cluster benchmark: {args.nodes:,} nodes, {args.pods:,} pods, {args.workloads} workloads")
    print(f"machine: {describe()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = _dump(tmp, "cluster.json", args)
        gc.collect()
        base, _ = _rss_mb()
        t0, c0 = time.perf_counter(), time.process_time()
        snap = _load(path)
        load_s, load_cpu = time.perf_counter() - t0, time.process_time() - c0
        after_load, _ = _rss_mb()
        pods = len(snap.pods)  # type: ignore[attr-defined]
        print(
            f"load: {load_s:.1f} s (target < 60 s), {load_cpu:.1f} s of CPU: {len(snap.nodes):,} nodes, {pods:,} pods",  # type: ignore[attr-defined]
            flush=True,
        )

        t0, c0 = time.perf_counter(), time.process_time()
        report = build_report(snap, now=NOW)  # type: ignore[arg-type]
        analysis_s, analysis_cpu = time.perf_counter() - t0, time.process_time() - c0
        findings = len(report.findings)
        print(
            f"first full analysis: {analysis_s:.1f} s (target < 20 s), {analysis_cpu:.1f} s of CPU, {findings} findings",
            flush=True,
        )
        gc.collect()
        rss, peak = _rss_mb()
        print(
            f"RSS: {rss:,.0f} MiB after load and analysis (target < 1024), {after_load:,.0f} MiB after load, "
            f"{base:,.0f} MiB before; peak {peak:,.0f} MiB",
            flush=True,
        )
        del snap, report
        gc.collect()

        if args.per_object:
            nodes_only = _dump(tmp, "nodes.json", args, frozenset({"Node"}))
            node_bytes, nsnap = _held_bytes(nodes_only)
            del nsnap
            total_bytes, snap = _held_bytes(path)
            per_node = node_bytes / max(1, args.nodes)
            per_pod = (total_bytes - node_bytes) / max(1, len(snap.pods))  # type: ignore[attr-defined]
            print(
                f"held (tracemalloc): {total_bytes / 2**20:,.0f} MiB; {per_node:,.0f} bytes per node; "
                f"{per_pod:,.0f} bytes per pod with its share of workloads and interned values (target <= 400)",
                flush=True,
            )
            del snap
    if args.watched:
        cmd = [
            sys.executable,
            str(Path(__file__).resolve().parent / "bench_agent.py"),
            "memory-http",
            "--nodes",
            str(args.nodes),
            "--pods",
            str(args.pods),
            "--workloads",
            str(args.workloads),
        ]
        return subprocess.run(cmd, check=False).returncode
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
