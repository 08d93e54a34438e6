"""Fixtures for the Kubernetes gateway and watcher tests.

Everything here runs the real kubernetes-asyncio client over real HTTP
against ``agent.fakecluster.FakeCluster`` on a loopback port; nothing of the
client is mocked.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agent.fakecluster import FakeCluster
from agent.kube.gateway import Gateway
from agent.kube.watcher import Delta


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async with FakeCluster(bookmark_interval=3600) as c:
        yield c


@pytest.fixture
def kubeconfig(cluster: FakeCluster, tmp_path: Path) -> Path:
    return cluster.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
async def gateway(kubeconfig: Path) -> AsyncIterator[Gateway]:
    async with Gateway(kubeconfig, request_timeout=5, connect_timeout=2, watch_idle_timeout=5) as gw:
        yield gw


class RecordingSink:
    """A Sink that keeps every delta and sync signal."""

    def __init__(self) -> None:
        self.deltas: list[Delta] = []
        self.synced_kinds: list[str] = []
        self._changed = asyncio.Event()

    async def delta(self, delta: Delta) -> None:
        self.deltas.append(delta)
        self._changed.set()

    async def synced(self, kind: str) -> None:
        self.synced_kinds.append(kind)
        self._changed.set()

    def seen(self, type_: str | None = None) -> list[tuple[str, str]]:
        return [(d.type, d.object["metadata"]["name"]) for d in self.deltas if type_ is None or d.type == type_]

    async def wait_for(self, predicate: Callable[[RecordingSink], bool], timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()


class RecordingSleep:
    """An injectable sleep: records each delay and yields to the loop
    instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()

