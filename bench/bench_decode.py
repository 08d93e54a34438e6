"""The decoders alone against a bare orjson decode of the same objects (issue 20).

A watch stream is mostly new Events and MODIFIED pods and nodes whose scheduling fields did not move
(a container restarted, a heartbeat): this decodes such a stream, built by
``agent.fakecluster.samples`` as ``bench_watch.py`` builds it, three ways, each over the
same serialised objects:

1. bare:   ``orjson.loads`` of each object's bytes
2. fresh:  ``orjson.loads`` + ``Decoder.decode`` with nothing held (a list, a dump)
3. known:  ``orjson.loads`` + ``Decoder.decode`` against the held records (the watch path)

and prints objects per CPU second (process time: what a shared machine distorts least) and
the ratios to bare, per kind. ``--profile`` prints the known
path's top functions (cProfile).

    .venv/bin/python bench/bench_decode.py [--objects 60000] [--repeat 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.fakecluster.samples import event, node, pod
from analyzers.ingest import Decoder
from bench.machine import describe


def stream(kind: str, total: int) -> tuple[list[bytes], list[bytes]]:
    """(first versions, changes): serialised objects as a watch would carry them."""
    if kind == "Pod":
        n = 3000
        nodes = [f"ip-10-0-{i // 250}-{i % 250}.eu-west-1.compute.internal" for i in range(200)]
        objs = [
            pod(f"web-{i % 50:02d}-5c8d7f9b6d-{i:05d}", f"team-{i % 20}", node_name=nodes[i % 200])
            for i in range(n)
        ]
    elif kind == "Node":
        n = 200
        objs = [node(f"ip-10-0-{i // 250}-{i % 250}.eu-west-1.compute.internal") for i in range(n)]
    else:  # Events: each one new (a watch's ADDED), about the pods above
        involved = [pod(f"web-{i % 50:02d}-5c8d7f9b6d-{i:05d}", f"team-{i % 20}") for i in range(3000)]
        events = [event(involved[(i * 7) % 3000], name=f"e.{i:016x}") for i in range(total)]
        return [], [orjson.dumps(e) for e in events]
    first = [orjson.dumps(o) for o in objs]
    changes = []
    for i in range(total):
        o = objs[i % n]
        if kind == "Pod":
            o["status"]["containerStatuses"][0]["restartCount"] = i // n + 1
        else:
            o["status"]["conditions"][-1]["lastHeartbeatTime"] = (
                f"2024-06-01T12:{i // 60 % 60:02d}:{i % 60:02d}Z"
            )
        changes.append(orjson.dumps(o))
    return first, changes


def _key(record: Any) -> Any:
    return record.name if record.__class__.__name__ == "Node" else (record.namespace, record.name)


def run(first: list[bytes], changes: list[bytes]) -> dict[str, float]:
    loads = orjson.loads
    t = time.process_time()
    for raw in changes:
        loads(raw)
    bare = time.process_time() - t

    decoder = Decoder()
    t = time.process_time()
    for raw in changes:
        decoder.decode(loads(raw))
    fresh = time.process_time() - t

    decoder = Decoder()
    held: dict[Any, Any] = {}
    for raw in first:
        r = decoder.decode(loads(raw))
        held[_key(r)] = r
    t = time.process_time()
    for raw in changes:
        r = decoder.decode(loads(raw), known=held)
        held[_key(r)] = r
    known = time.process_time() - t
    n = len(changes)
    return {"bare": n / bare, "fresh": n / fresh, "known": n / known}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=60_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    print(f"machine: {describe()}")
    for kind in ("Pod", "Node", "Event"):
        first, changes = stream(kind, args.objects)
        runs = [run(first, changes) for _ in range(args.repeat)]
        best = {k: max(r[k] for r in runs) for k in runs[0]}
        if not first:  # Events: nothing is held, every one is decoded fresh
            print(
                f"{kind}: {len(changes):,} objects, {sum(map(len, changes)) / len(changes):,.0f} bytes each; best of "
                f"{args.repeat}: bare {best['bare']:,.0f}/s, decode {best['fresh']:,.0f}/s "
                f"({best['fresh'] / best['bare']:.2f} of bare); decoder alone "
                f"{1e6 / best['fresh'] - 1e6 / best['bare']:.1f} µs per object",
                flush=True,
            )
            continue
        print(
            f"{kind}: {len(changes):,} objects, {sum(map(len, changes)) / len(changes):,.0f} bytes each; best of "
            f"{args.repeat}: bare {best['bare']:,.0f}/s, fresh decode {best['fresh']:,.0f}/s "
            f"({best['fresh'] / best['bare']:.2f} of bare), known decode {best['known']:,.0f}/s "
            f"({best['known'] / best['bare']:.2f} of bare); decoder alone {1e6 / best['known'] - 1e6 / best['bare']:.1f} µs "
            f"per object (known), {1e6 / best['fresh'] - 1e6 / best['bare']:.1f} µs (fresh)",
            flush=True,
        )
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            run(first, changes)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(14)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
