"""Bytes the watcher keeps per object to reconcile relists (``KindWatcher``'s version
bookkeeping), measured with tracemalloc. Prints figures and the machine.

    .venv/bin/python bench/bench_watch_bookkeeping.py [--objects 100000]

Objects are pods as a list page decodes them (name ``<app>-<hash>-<suffix>``, 40
namespaces, a UUID uid, a numeric resourceVersion), reconciled as a list delivers them.
The names and uids are held by the cache's records as well, so they are kept alive
outside the measurement and only what the watcher adds is counted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from agent.kube.kinds import POD
from agent.kube.watcher import Delta, KindWatcher
from bench.machine import describe


class _Sink:
    async def delta(self, delta: Delta) -> None:
        pass

    async def synced(self, kind: str) -> None:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=100_000)
    args = parser.parse_args()
    n = args.objects
    print(f"machine: {describe()}")
    raw = [
        orjson.dumps(
            {
                "metadata": {
                    "name": f"app-{i % 3000}-7d9f8c6b5-{i:05x}",
                    "namespace": f"team-{i % 40}",
                    "uid": str(uuid.uuid4()),
                    "resourceVersion": str(1_000_000 + i),
                }
            }
        )
        for i in range(n)
    ]
    objs: list[dict[str, Any]] = [orjson.loads(r) for r in raw]
    records = [
        (sys.intern(o["metadata"]["namespace"]), o["metadata"]["name"], o["metadata"]["uid"]) for o in objs
    ]
    watcher = KindWatcher(None, POD, _Sink())  # type: ignore[arg-type]  # no source: only _reconcile runs
    gc.collect()
    tracemalloc.start()

    async def reconcile(items: list[dict[str, Any]]) -> None:
        seen: set[tuple[str, str]] = set()
        for o in items:
            await watcher._reconcile(o, seen)

    asyncio.run(reconcile(objs))
    objs.clear()  # the decoded objects go; what the watcher kept of them stays
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{n:,} objects: the watcher keeps {held / n:.0f} bytes per object ({watcher.known_count:,} known)")
    assert len(records) == n
    return 0


if __name__ == "__main__":
    sys.exit(main())
