"""The worker's plain core without faust or a broker: records a real watcher
produced (against the in-process Kubernetes API) go through ``Fleet.handle`` into
the same cache, pipeline and tracker as the in-process agent, with a real SQLite
database. A worker that takes over rebuilds the cluster from the state table,
and records delivered again never duplicate an incident or a notification."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
from sqlalchemy import func, select

from agent.demo import SCENARIOS
from agent.fakecluster.scenario import Scenario, play_step
from agent.kube.gateway import Gateway
from agent.kube.watcher import Watcher
from agent.pipeline import PipelineConfig
from agent.stream import codec
from agent.stream.fleet import BACKLOG_HOLD, Fleet, meta_key
from agent.stream.publisher import DeltaPublisher
from storage.models import Incident, Notification

SCENARIO = SCENARIOS / "gpu-rollout-deadlock"
# What a publisher in the recorded cluster says in its hello: the release's major.minor.
KUBE_VERSION = ".".join(Scenario.load(SCENARIO).server_version.removeprefix("v").split(".")[:2])


async def recorded_stream(tmp_path: Path) -> list[list[bytes]]:
    """The gpu-rollout-deadlock scenario as a publisher encodes it: [initial list, step 1, step 2, …]."""
    scenario = Scenario.load(SCENARIO)
    cluster = scenario.cluster()
    await cluster.start()
    gateway = Gateway(str(cluster.write_kubeconfig(tmp_path / "kubeconfig")))
    publisher = DeltaPublisher("seed-1", bootstrap="127.0.0.1:1", topic="unused", partitions=1)  # never sends
    await gateway.open()
    try:
        publisher.hello(KUBE_VERSION)
        watcher = Watcher(gateway, publisher)
        task = asyncio.create_task(watcher.run())
        await asyncio.wait_for(watcher.wait_synced(), 30)
        publisher.ready(watcher.unavailable_kinds)
        parts = [list(publisher.buffer)]
        for step in scenario.timeline:
            publisher.buffer.clear()
            play_step(cluster, step)
            seen = -1
            while seen != len(publisher.buffer):  # quiet for a moment: the step is all delivered
                seen = len(publisher.buffer)
                await asyncio.sleep(0.3)
            parts.append(list(publisher.buffer))
        task.cancel()
        return parts
    finally:
        await gateway.close()
        await cluster.stop()


def new_fleet(sessions, table: dict[bytes, bytes], dead: list, **options) -> Fleet:
    async def dead_letter(key, value, error, partition, offset):
        dead.append((key, value, error, partition, offset))

    return Fleet(
        sessions=sessions,
        table=table,
        dead_letter=dead_letter,
        config=PipelineConfig(grace=0, debounce=0.01, sinks=("webhook",)),
        **options,
    )


async def feed(fleet: Fleet, records: list[bytes], offset: int = 0) -> int:
    for value in records:
        await fleet.handle(0, offset, b"seed-1", value)
        offset += 1
    return offset


async def counts(sessions) -> tuple[list[tuple[str, str]], int]:
    async with sessions() as s:
        rows = [(i.rule_id, i.status) for i in (await s.execute(select(Incident).order_by(Incident.id))).scalars()]
        outbox = (await s.execute(select(func.count()).select_from(Notification))).scalar_one()
    return rows, outbox


async def test_takeover_rebuilds_from_the_table_and_redelivery_duplicates_nothing(sessions, tmp_path) -> None:
    initial, deadlock, *fix = await recorded_stream(tmp_path)
    table: dict[bytes, bytes] = {}
    dead: list = []
    first = new_fleet(sessions, table, dead)
    offset = await feed(first, initial + deadlock)
    rt = first.runtimes["seed-1"]
    assert rt.synced and rt.cache.state.kube_version == KUBE_VERSION
    await rt.pipeline.run_pass()
    assert await counts(sessions) == ([("rollout-surge-deadlock", "open")], 1)  # one outbox row: opened
    objects = len(rt.cache.state.snapshot().pods), len(rt.cache.state.snapshot().deployments)
    await first.close()  # the worker dies (its in-memory state with it)

    # Another worker is assigned the partition: the cluster comes back from the table alone…
    second = new_fleet(sessions, table, dead)
    assert second.adopt({0}) == ["seed-1"]
    rt2 = second.runtimes["seed-1"]
    snap = rt2.cache.state.snapshot()
    assert (len(snap.pods), len(snap.deployments)) == objects
    assert rt2.synced and rt2.cache.state.kube_version == KUBE_VERSION
    assert rt2.applied_seq == codec.decode((initial + deadlock)[-1]).seq  # how far it was applied
    # …and the records after the last commit arrive again: applied again, nothing duplicated.
    await feed(second, deadlock, offset - len(deadlock))
    await rt2.pipeline.run_pass()
    assert await counts(sessions) == ([("rollout-surge-deadlock", "open")], 1)
    async with sessions() as s:
        (inc,) = (await s.execute(select(Incident))).scalars()
    assert inc.occurrences == 1  # the FailedScheduling event counted once, though applied twice

    for step in fix:
        await feed(second, step)
    await rt2.pipeline.run_pass()
    assert await counts(sessions) == ([("rollout-surge-deadlock", "resolved")], 2)  # opened + resolved
    assert dead == []
    await second.close()


async def test_copies_of_a_resent_round_are_skipped_and_the_state_never_steps_back(sessions, tmp_path) -> None:
    """A publisher re-sends the rest of a round that failed half-way, part of which had landed:
    the copies (not newer than the last record applied) are skipped, so a pass between them
    never sees an object back at an older version."""
    initial, deadlock, *fix = await recorded_stream(tmp_path)
    assert fix and fix[0], "the scenario has a step after the deadlock"
    fleet = new_fleet(sessions, {}, [])
    offset = await feed(fleet, initial + deadlock + fix[0])
    rt = fleet.runtimes["seed-1"]
    state = rt.cache.state
    generation, before = state.generation, state.snapshot()

    await feed(fleet, deadlock + fix[0], offset)  # the copies: older versions first
    assert rt.copies == len(deadlock) + len(fix[0])
    assert state.generation == generation  # nothing applied
    after = state.snapshot()
    assert after.pods == before.pods and after.deployments == before.deployments
    assert rt.status()["copies"] == rt.copies
    await fleet.close()


async def test_a_poison_record_is_dead_lettered_and_the_partition_goes_on(sessions, tmp_path) -> None:
    table: dict[bytes, bytes] = {}
    dead: list = []
    fleet = new_fleet(sessions, table, dead)
    bad_object = codec.encode_delta("seed-1", 1, 2, "Pod", "ADDED", {"metadata": {"name": "x"}, "spec": "nope"}, False)
    good = codec.encode_delta(
        "seed-1", 1, 3, "Node", "ADDED", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}, False
    )
    await fleet.handle(0, 10, b"seed-1", b"{broken")
    await fleet.handle(0, 11, b"seed-1", bad_object)
    await fleet.handle(0, 12, b"seed-1", good)
    assert [(d[3], d[4]) for d in dead] == [(0, 10), (0, 11)]
    assert "undecodable record: not JSON" in dead[0][2]
    assert "Pod 'x' rejected by the decoder" in dead[1][2]
    assert dead[1][1] == bad_object  # the record itself travels with the error
    assert "n1" in fleet.runtimes["seed-1"].cache.state.snapshot().nodes
    assert fleet.dead_letters == 2
    assert not any(k.startswith(b"O\x00seed-1\x00Pod") for k in table)  # the bad object is not kept
    assert orjson.loads(table[meta_key("seed-1")])["partition"] == 0
    await fleet.close()


async def test_a_pass_lets_its_partitions_backlog_in_first(sessions, tmp_path) -> None:
    """While more than BACKLOG_HOLD (none) records of the cluster's partition wait, a pass waits for
    them (each would change the state it analyses) — at most max_hold seconds."""
    initial, deadlock, *_ = await recorded_stream(tmp_path)
    backlog = {0: BACKLOG_HOLD + 1}
    fleet = new_fleet(sessions, {}, [], backlog=lambda partition: backlog[partition], max_hold=30.0)
    await feed(fleet, initial)
    rt = fleet.runtimes["seed-1"]
    await asyncio.sleep(0.2)  # the pipeline's first pass is due (debounce 0.01 s) but held
    assert rt.pipeline.stats.passes == 0 and fleet.held_passes == 1

    await feed(fleet, deadlock)
    backlog[0] = BACKLOG_HOLD  # drained to the hold: the held pass runs, over everything handled
    await asyncio.wait_for(_until(lambda: rt.pipeline.caught_up and rt.pipeline.stats.passes >= 1), 30)
    assert await counts(sessions) == ([("rollout-surge-deadlock", "open")], 1)
    await fleet.close()

    # A backlog that never drains holds a pass only max_hold seconds.
    stuck = new_fleet(sessions, {}, [], backlog=lambda partition: 10**6, max_hold=0.3)
    await feed(stuck, initial)
    await asyncio.wait_for(_until(lambda: stuck.runtimes["seed-1"].pipeline.stats.passes >= 1), 30)
    assert stuck.held_passes >= 1
    await stuck.close()


async def _until(check) -> None:
    while not check():
        await asyncio.sleep(0.02)
