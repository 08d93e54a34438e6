"""The publisher's markers come from the real watcher: ``synced`` per kind once its
initial list is sent, and ``relisted`` when a 410 Gone forced a relist (after the
reconciled deltas)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.demo import SCENARIOS
from agent.fakecluster.scenario import Scenario
from agent.kube.gateway import Gateway
from agent.kube.watcher import Watcher
from agent.stream import codec
from agent.stream.publisher import DeltaPublisher
from tests.stream.conftest import eventually


async def test_synced_and_relisted_markers(tmp_path: Path) -> None:
    cluster = Scenario.load(SCENARIOS / "gpu-rollout-deadlock").cluster()
    await cluster.start()
    gateway = Gateway(str(cluster.write_kubeconfig(tmp_path / "kubeconfig")))
    await gateway.open()
    publisher = DeltaPublisher("c1", bootstrap="127.0.0.1:1", topic="unused", partitions=1)  # never sends
    watcher = Watcher(gateway, publisher)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.wait_synced(), 30)

        def markers(type_: str) -> list[str]:
            return [m.kind for m in map(codec.decode, publisher.buffer) if m.type == type_]

        assert "Pod" in markers("synced") and "Node" in markers("synced")
        assert markers("relisted") == []
        # 410 Gone on the live pod watch, once it is open (called on the loop: it wakes the streams).
        async with asyncio.timeout(30):
            while cluster.faults.expire_watches("Pod") < 1:
                await asyncio.sleep(0.1)
        await eventually(lambda: markers("relisted") == ["Pod"], 30, "a relisted marker for Pod")
        assert watcher.stats()["Pod"].relists == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await gateway.close()
        await cluster.stop()
