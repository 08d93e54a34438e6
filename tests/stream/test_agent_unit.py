"""The faust agent of ``unstick worker`` under faust's ``test_context()``: no broker
(the app points at a closed port), the real Table, the real Fleet behind it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.pipeline import PipelineConfig
from agent.settings import StreamSettings
from agent.stream import codec
from agent.stream.fleet import object_key
from storage.engine import create_engine, create_sessionmaker
from storage.migrate import upgrade
from tests.kafka import free_port


@pytest.fixture
async def worker(tmp_path: Path):
    from agent.stream.app import StreamWorker

    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/w.db")
    await upgrade(engine)
    settings = StreamSettings(brokers=("127.0.0.1:1",), topic_prefix=f"unit{tmp_path.name[-6:]}", partitions=4,
                              web_host="127.0.0.1", web_port=free_port(), datadir=str(tmp_path / "data"))
    w = StreamWorker(settings, create_sessionmaker(engine), PipelineConfig(grace=0), app_id=f"unit-{tmp_path.name}")
    w.app.finalize()
    w.app.flow_control.resume()
    dead: list[tuple] = []

    async def dead_letter(key, value, error, partition, offset):
        dead.append((key, value, error))

    w.fleet.dead_letter = dead_letter
    w.dead = dead  # type: ignore[attr-defined]
    try:
        yield w
    finally:
        await w.fleet.close()
        await engine.dispose()


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


async def test_agent_applies_deltas_into_the_table_and_the_cache(worker) -> None:
    async with worker.agent.test_context() as agent:
        await agent.put(key=b"c1", value=codec.encode("c1", 1, 1, "hello", kube_version="1.31"))
        await agent.put(key=b"c1", value=codec.encode_delta("c1", 1, 2, "Node", "ADDED", node("n1"), False))
        await agent.put(key=b"c1", value=codec.encode_delta("c1", 1, 3, "Node", "ADDED", node("n2"), False))
        await agent.put(key=b"c1", value=codec.encode_delta("c1", 1, 4, "Node", "DELETED", node("n1"), False))
    rt = worker.fleet.runtimes["c1"]
    assert set(rt.cache.state.snapshot().nodes) == {"n2"}
    assert rt.cache.state.kube_version == "1.31" and rt.applied_seq == 4
    assert object_key("c1", "Node", node("n2")) in worker.objects
    assert object_key("c1", "Node", node("n1")) not in worker.objects  # deleted from the table too
    assert worker.dead == []


async def test_agent_survives_poison_records(worker) -> None:
    async with worker.agent.test_context() as agent:
        await agent.put(key=b"c2", value=b"\x00garbage")
        await agent.put(key=b"c2", value=b'{"v": 99}')
        await agent.put(key=b"c2", value=codec.encode_delta("c2", 1, 1, "Node", "ADDED", node("n9"), False))
    assert [d[2].split(":")[0] for d in worker.dead] == ["undecodable record", "undecodable record"]
    assert "unsupported format version 99" in worker.dead[1][2]
    assert "n9" in worker.fleet.runtimes["c2"].cache.state.snapshot().nodes  # the partition went on


@pytest.mark.parametrize("level", [logging.WARNING, logging.ERROR, logging.INFO])
def test_the_worker_keeps_the_log_level_it_was_given(level: int) -> None:
    """faust's terminal spinner would set the root logger to DEBUG at WARN and above, making
    every debug() call on the per-record path (aiokafka's send, each request) build a record.
    (A logger of its own stands for the root logger: the test changes no global state.)"""
    import faust

    from agent.stream.app import faust_worker

    app = faust.App(f"loglevel-{level}", broker="kafka://127.0.0.1:1", web_enabled=False)
    root = logging.Logger("root-stand-in", level)
    root.addHandler(logging.NullHandler())
    faust_worker(app, logging.getLevelName(level).lower()).on_setup_root_logger(root, level)
    assert root.level == level and not root.isEnabledFor(logging.DEBUG)
