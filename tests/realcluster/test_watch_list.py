"""Streaming lists against the real kube-apiserver (v1.37.2: WatchList on by default,
staging/src/k8s.io/apiserver/pkg/features/kube_features.go): the watcher syncs pods from
one watch with sendInitialEvents, ends its initial state at the real watch cache's
``k8s.io/initial-events-end`` bookmark, and goes on watching on the same stream."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.kube.gateway import Gateway
from agent.kube.kinds import POD
from agent.kube.watcher import Delta, KindWatcher, WatchListMode
from tests.realcluster.conftest import Cluster

pytestmark = pytest.mark.realcluster


def quiet_pod(name: str, namespace: str) -> dict[str, Any]:
    # No scheduler takes it: no binding or status write reaches the watch as a MODIFIED.
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]},
    }


class Recorder:
    def __init__(self) -> None:
        self.deltas: list[Delta] = []
        self.synced_kinds: list[str] = []

    async def delta(self, delta: Delta) -> None:
        self.deltas.append(delta)

    async def synced(self, kind: str) -> None:
        self.synced_kinds.append(kind)


async def test_the_real_api_server_streams_the_list_and_the_watch_goes_on(cluster: Cluster) -> None:
    for i in range(5):
        cluster.api.create(quiet_pod(f"web-{i}", cluster.ns))
    sink = Recorder()
    mode = WatchListMode()
    async with Gateway(str(cluster.plane.kubeconfig)) as gateway:
        watcher = KindWatcher(
            gateway, POD, sink, namespace=cluster.ns, watch_timeout=30, min_watch_duration=0, watch_list=mode
        )
        task = asyncio.ensure_future(watcher.step())
        try:
            async with asyncio.timeout(30):
                while not sink.synced_kinds:
                    await asyncio.sleep(0.05)
            synced_at = watcher.resource_version
            cluster.api.create(quiet_pod("web-5", cluster.ns))
            async with asyncio.timeout(30):
                while len(sink.deltas) < 6:
                    await asyncio.sleep(0.05)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    assert mode.enabled and mode.decided, mode.reason  # served, not refused
    assert watcher.stats.watch_lists == 1 and watcher.stats.lists == 1 and watcher.stats.listed == 5
    assert sorted(d.object["metadata"]["name"] for d in sink.deltas[:5]) == [f"web-{i}" for i in range(5)]
    assert all(d.type == "ADDED" for d in sink.deltas)
    assert synced_at and int(synced_at) > 0
    last = sink.deltas[5]
    assert last.object["metadata"]["name"] == "web-5" and watcher.stats.events == 1
    assert int(last.object["metadata"]["resourceVersion"]) > int(synced_at)
