"""Streaming lists (watch-list, KEP-3157) end to end: the fake API endpoint serves them as
kube-apiserver v1.37.2 does, and the watcher syncs through them through the real gateway and
kubernetes-asyncio, falling back to paginated lists where a release refuses them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from agent.fakecluster import FakeCluster
from agent.fakecluster.samples import node, pod
from agent.kube.gateway import Gateway
from agent.kube.kinds import NODE, POD
from agent.kube.watcher import INITIAL_EVENTS_END, KindWatcher, Watcher, WatchListMode
from tests.kube.conftest import RecordingSink, RecordingSleep


@asynccontextmanager
async def served(version: str, tmp_path: Path, **kw: Any) -> AsyncIterator[tuple[FakeCluster, Gateway]]:
    async with FakeCluster(version=version, bookmark_interval=3600, **kw) as cluster:
        config = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        async with Gateway(config, request_timeout=5, connect_timeout=2, watch_idle_timeout=5) as gw:
            yield cluster, gw


@asynccontextmanager
async def running(coro: Any) -> AsyncIterator[asyncio.Task[Any]]:
    task = asyncio.ensure_future(coro)
    try:
        yield task
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def watches(cluster: FakeCluster, kind: str = "Pod") -> list[dict[str, str]]:
    return [r.query for r in cluster.requests if r.verb == "watch" and r.kind == kind]


async def read_lines(http: aiohttp.ClientSession, url: str, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async with http.get(url) as resp:
        assert resp.status == 200
        async for line in resp.content:
            out.append(orjson.loads(line))
            if len(out) == count:
                break
    return out


async def test_the_endpoint_streams_the_state_then_the_end_bookmark_then_changes() -> None:
    async with (
        FakeCluster(version="v1.37.2", bookmark_interval=3600) as cluster,
        aiohttp.ClientSession() as http,
    ):
        for name in ("b", "a", "c"):
            cluster.apply(pod(name, "shop"))
        rv = cluster.resource_version
        url = (
            f"{cluster.url}/api/v1/pods?watch=true&sendInitialEvents=true"
            "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5"
        )
        reader = asyncio.ensure_future(read_lines(http, url, 5))
        await cluster.wait_for_watches("Pod")
        cluster.apply(pod("d", "shop"))
        lines = await reader
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in lines[:3]] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("ADDED", "c"),
    ]
    end = lines[3]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"] == {
        "resourceVersion": str(rv),
        "annotations": {INITIAL_EVENTS_END: "true"},
    }
    assert (lines[4]["type"], lines[4]["object"]["metadata"]["name"]) == ("ADDED", "d")
    assert int(lines[4]["object"]["metadata"]["resourceVersion"]) == rv + 1


@pytest.mark.parametrize(
    ("version", "query", "message"),
    [
        (
            "v1.37.2",
            "watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires '
            "setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "v1.37.2",
            "watch=true&resourceVersionMatch=NotOlderThan",
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is '
            "forbidden for watch unless sendInitialEvents is provided",
        ),
        (
            "v1.33.4",
            "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden '
            "for watch unless the WatchList feature gate is enabled",
        ),
        (
            "v1.37.2",
            "sendInitialEvents=true",
            'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden '
            "for list",
        ),
    ],
)
async def test_the_endpoint_refuses_what_validation_refuses(version: str, query: str, message: str) -> None:
    async with (
        FakeCluster(version=version) as cluster,
        aiohttp.ClientSession() as http,
        http.get(f"{cluster.url}/api/v1/pods?{query}") as resp,
    ):
        body = await resp.json()
    assert resp.status == 422
    assert (body["reason"], body["message"]) == ("Invalid", message)
    assert body["details"]["kind"] == "ListOptions" and body["details"]["group"] == "meta.k8s.io"


async def test_the_watcher_syncs_from_one_stream_and_never_lists(tmp_path: Path) -> None:
    async with served("v1.37.2", tmp_path) as (cluster, gateway):
        for i in range(5):
            cluster.apply(pod(f"web-{i}", "shop"))
        sink, sleep = RecordingSink(), RecordingSleep()
        watcher = KindWatcher(gateway, POD, sink, sleep=sleep, random=lambda: 0.0, min_watch_duration=0.0)
        async with running(watcher.run()):
            await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
            assert sink.seen() == [("ADDED", f"web-{i}") for i in range(5)]
            assert watcher.resource_version == str(cluster.resource_version)
            cluster.apply(pod("web-5", "shop"))
            cluster.delete("Pod", "web-0", "shop")
            await sink.wait_for(lambda s: len(s.deltas) == 7)
        [request] = watches(cluster)
    assert not [r for r in cluster.requests if r.verb == "list"]
    assert request["sendInitialEvents"] == "true" and request["resourceVersionMatch"] == "NotOlderThan"
    assert request["allowWatchBookmarks"] == "true" and "resourceVersion" not in request
    assert sink.seen()[5:] == [("ADDED", "web-5"), ("DELETED", "web-0")]
    stats = watcher.stats
    assert (stats.lists, stats.watch_lists, stats.listed, stats.events, stats.bookmarks) == (1, 1, 5, 2, 1)


async def test_gone_streams_the_list_again_and_reconciles_what_vanished(tmp_path: Path) -> None:
    async with served("v1.37.2", tmp_path) as (cluster, gateway):
        for name in ("a", "b", "c"):
            cluster.apply(pod(name))
        sink, sleep = RecordingSink(), RecordingSleep()
        watcher = KindWatcher(gateway, POD, sink, sleep=sleep, random=lambda: 0.0, min_watch_duration=0.0)
        async with running(watcher.run()):
            await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
            await cluster.wait_for_watches("Pod")
            cluster.faults.freeze("Pod")
            cluster.delete("Pod", "a")
            cluster.apply(pod("d"))
            cluster.compact()
            cluster.faults.thaw("Pod")
            await sink.wait_for(lambda s: ("DELETED", "a") in s.seen() and ("ADDED", "d") in s.seen())
        requests = watches(cluster)
    assert len(requests) == 2 and all(r["sendInitialEvents"] == "true" for r in requests)
    deleted = [d for d in sink.deltas if d.type == "DELETED"]
    assert [d.final_state_unknown for d in deleted] == [True]  # synthesised: the watch never saw it
    assert watcher.stats.relists == 1 and watcher.stats.watch_lists == 2
    assert sink.seen("ADDED") == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c"), ("ADDED", "d")]


async def test_a_release_without_the_gate_is_listed_page_by_page_and_asked_once(tmp_path: Path) -> None:
    async with served("v1.33.4", tmp_path) as (cluster, gateway):
        cluster.apply(node("node-1"))
        for i in range(3):
            cluster.apply(pod(f"web-{i}", "shop"))
        sink, sleep = RecordingSink(), RecordingSleep()
        watcher = Watcher(gateway, sink, kinds=[NODE, POD], sleep=sleep, random=lambda: 0.0, page_size=2)
        async with running(watcher.run()):
            await asyncio.wait_for(watcher.wait_synced(), 5)
    assert sorted(sink.seen()) == [
        ("ADDED", "node-1"),
        ("ADDED", "web-0"),
        ("ADDED", "web-1"),
        ("ADDED", "web-2"),
    ]
    assert not watcher.watch_list.enabled and "WatchList feature gate" in watcher.watch_list.reason
    streaming = [r for r in cluster.requests if r.verb == "watch" and r.query.get("sendInitialEvents")]
    assert len(streaming) == 1  # one refusal ends it for every kind
    assert {r.kind for r in cluster.requests if r.verb == "list"} == {"Node", "Pod"}
    assert sum(w.stats.watch_lists for w in watcher.watchers) == 0


async def test_a_release_that_ignores_the_parameters_is_listed(tmp_path: Path) -> None:
    # Before 1.27 the parameters are unknown: the server answers a plain watch from "now",
    # whose first bookmark carries no end annotation.
    async with served("v1.26.15", tmp_path) as (cluster, gateway):
        cluster.bookmark_interval = 0.05
        cluster.apply(pod("web-0", "shop"))
        sink, sleep = RecordingSink(), RecordingSleep()
        mode = WatchListMode()
        watcher = KindWatcher(
            gateway, POD, sink, sleep=sleep, random=lambda: 0.0, min_watch_duration=0.0, watch_list=mode
        )
        async with running(watcher.run()):
            await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
    assert not mode.enabled and INITIAL_EVENTS_END in mode.reason
    assert sink.seen() == [("ADDED", "web-0")]
    assert [r.verb for r in cluster.requests if r.kind == "Pod"][:2] == ["watch", "list"]


async def test_watch_list_can_be_turned_off(tmp_path: Path) -> None:
    async with served("v1.37.2", tmp_path) as (cluster, gateway):
        cluster.apply(pod("web-0", "shop"))
        sink = RecordingSink()
        watcher = Watcher(
            gateway, sink, kinds=[POD], sleep=RecordingSleep(), random=lambda: 0.0, watch_list=False
        )
        async with running(watcher.run()):
            await asyncio.wait_for(watcher.wait_synced(), 5)
    assert not [r for r in cluster.requests if r.query.get("sendInitialEvents")]
    assert [r.verb for r in cluster.requests if r.kind == "Pod"][:1] == ["list"]
