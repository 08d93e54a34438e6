"""The watcher against the fake API endpoint, through the real gateway and
kubernetes-asyncio over HTTP: pagination, bookmarks, 410 relist and
reconcile, cut streams, 5xx/429 backoff, stalls, malformed frames."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent.fakecluster import FakeCluster
from agent.fakecluster.samples import node, pod
from agent.kube.gateway import Gateway
from agent.kube.kinds import NODE, PDB, POD
from agent.kube.watcher import Backoff, KindWatcher, Watcher, WatchListMode


def no_jitter() -> float:
    return 0.0


@asynccontextmanager
async def running(coro: Awaitable[Any]) -> AsyncIterator[asyncio.Task[Any]]:
    task = asyncio.ensure_future(coro)
    try:
        yield task
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def make_watcher(gateway: Gateway, sink: Any, sleep: Callable[[float], Awaitable[None]], **kw: Any) -> KindWatcher:
    kw.setdefault("random", no_jitter)
    kw.setdefault("min_watch_duration", 0.0)
    # These tests are about the paginated list (tests/kube/test_watch_list.py streams it).
    kw.setdefault("watch_list", WatchListMode(False))
    return KindWatcher(gateway, kw.pop("kind", POD), sink, sleep=sleep, **kw)


def watch_requests(cluster: FakeCluster, kind: str = "Pod") -> list[dict[str, str]]:
    return [r.query for r in cluster.requests if r.verb == "watch" and r.kind == kind]


async def test_initial_list_is_paginated_then_watched_from_its_version(
    cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any
) -> None:
    for i in range(7):
        cluster.apply(pod(f"web-{i}", "shop"))
    list_rv = str(cluster.resource_version)
    watcher = make_watcher(gateway, sink, sleep, page_size=2)
    async with running(watcher.run()):
        await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
        assert sink.seen() == [("ADDED", f"web-{i}") for i in range(7)]
        await cluster.wait_for_watches("Pod")
        cluster.apply(pod("web-7", "shop"))
        await sink.wait_for(lambda s: len(s.deltas) == 8)
    lists = [r.query for r in cluster.requests if r.verb == "list"]
    assert [q["limit"] for q in lists] == ["2", "2", "2", "2"]
    assert all(q.get("continue") for q in lists[1:])
    [first_watch] = watch_requests(cluster)
    assert first_watch["resourceVersion"] == list_rv
    assert first_watch["allowWatchBookmarks"] == "true"
    assert sink.deltas[-1].type == "ADDED" and sink.deltas[-1].object["kind"] == "Pod"
    assert watcher.stats.lists == 1 and watcher.stats.listed == 7 and watcher.stats.events == 1


async def test_gone_mid_watch_relists_and_reconciles(cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any) -> None:
    for name in ("a", "b", "c"):
        cluster.apply(pod(name))
    watcher = make_watcher(gateway, sink, sleep)
    async with running(watcher.run()):
        await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
        await cluster.wait_for_watches("Pod")
        # Changes the watch never delivers, then the history is gone: the
        # watch gets an ERROR 410 event and the watcher must relist.
        cluster.faults.freeze("Pod")
        cluster.delete("Pod", "a")
        cluster.apply(pod("b", phase="Failed"))
        cluster.apply(pod("d"))
        assert cluster.faults.expire_watches("Pod") == 1
        cluster.faults.thaw("Pod")
        await sink.wait_for(lambda s: len(s.deltas) >= 6)
        await cluster.wait_for_watches("Pod", count=2)
        cluster.apply(pod("e"))
        await sink.wait_for(lambda s: len(s.deltas) >= 7)
    after = sink.deltas[3:]
    assert [(d.type, d.object["metadata"]["name"]) for d in after] == [
        ("MODIFIED", "b"),
        ("ADDED", "d"),
        ("DELETED", "a"),
        ("ADDED", "e"),
    ]
    deleted = after[2]
    assert deleted.final_state_unknown
    assert deleted.object["metadata"]["namespace"] == "default"
    assert after[0].object["status"]["phase"] == "Failed"
    assert not any(d.object["metadata"]["name"] == "c" for d in after)  # unchanged: not repeated
    assert watcher.stats.relists == 1
    assert watcher.stats.lists == 2
    assert watcher.stats.synthesised_deletes == 1
    assert sink.synced_kinds == ["Pod"]  # synced once
    assert sleep.delays == []  # a relist needs no backoff


async def test_gone_as_http_status_on_watch_relists_without_duplicates(
    cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any
) -> None:
    cluster.apply(pod("a"))
    cluster.faults.fail(410, verb="watch", kind="Pod")
    watcher = make_watcher(gateway, sink, sleep)
    async with running(watcher.run()):
        await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
        await cluster.wait_for_watches("Pod", count=2)
        cluster.apply(pod("b"))
        await sink.wait_for(lambda s: len(s.deltas) == 2)
    assert sink.seen() == [("ADDED", "a"), ("ADDED", "b")]
    assert watcher.stats.relists == 1
    assert watcher.stats.lists == 2


async def test_gone_on_next_watch_error_event(cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any) -> None:
    cluster.apply(pod("a"))
    cluster.faults.gone_on_next_watch(kind="Pod")
    watcher = make_watcher(gateway, sink, sleep)
    async with running(watcher.run()):
        await cluster.wait_for_watches("Pod", count=2)
        cluster.apply(pod("b"))
        await sink.wait_for(lambda s: len(s.deltas) == 2)
    assert sink.seen() == [("ADDED", "a"), ("ADDED", "b")]
    assert watcher.stats.relists == 1


async def test_continue_token_expiring_mid_list_falls_back_to_a_full_list(
    cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any
) -> None:
    for i in range(5):
        cluster.apply(pod(f"web-{i}"))
    cluster.faults.expire_next_continue()
    watcher = make_watcher(gateway, sink, sleep, page_size=2)
    async with running(watcher.run()):
        await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
    assert sink.seen() == [("ADDED", f"web-{i}") for i in range(5)]  # the first page is not repeated
    assert [r.query.get("limit") for r in cluster.requests if r.verb == "list"] == ["2", "2", None]


async def test_stream_cut_mid_object_resumes_from_the_last_version(
    cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any
) -> None:
    watcher = make_watcher(gateway, sink, sleep)
    async with running(watcher.run()):
        await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
        await cluster.wait_for_watches("Pod")
        cluster.faults.freeze("Pod")
        for name in ("x1", "x2", "x3"):
            cluster.apply(pod(name))
        x1_rv = cluster.get("Pod", "x1")["metadata"]["resourceVersion"]  # type: ignore[index]
        cluster.faults.cut_watches("Pod", after_events=1)  # x1 whole, then half of x2
        cluster.faults.thaw("Pod")
        await sink.wait_for(lambda s: len(s.deltas) == 3)
    assert sink.seen() == [("ADDED", "x1"), ("ADDED", "x2"), ("ADDED", "x3")]
    assert watcher.stats.errors == {"Unavailable": 1}
    assert watcher.stats.malformed == 0  # the half line is dropped, not parsed
    assert watcher.stats.lists == 1  # a cut needs no relist
    assert watch_requests(cluster)[1]["resourceVersion"] == x1_rv
    assert sleep.delays == [0.8]  # one backoff step (jitter pinned to 0)


async def test_server_errors_back_off_exponentially(cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any) -> None:
    cluster.apply(pod("a"))
    cluster.faults.fail(500, verb="list", times=3)
    cluster.faults.fail(503, verb="watch", times=1)
    watcher = make_watcher(gateway, sink, sleep, random=lambda: 0.5)
    async with running(watcher.run()):
        await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
        await cluster.wait_for_watches("Pod", count=2)
    # 0.8s doubling, plus jitter of up to 100% (random pinned to 0.5).
    assert sleep.delays == pytest.approx([1.2, 2.4, 4.8, 9.6])
    assert watcher.stats.errors == {"ServerError": 4}
    assert sink.seen() == [("ADDED", "a")]


async def test_throttling_honours_retry_after(cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any) -> None:
    cluster.faults.throttle(retry_after=7, verb="watch", kind="Pod")
    cluster.faults.throttle(retry_after=2, verb="list", kind="Pod")
    watcher = make_watcher(gateway, sink, sleep, random=lambda: 0.5)
    async with running(watcher.run()):
        await cluster.wait_for_watches("Pod", count=2)
        cluster.apply(pod("a"))
        await sink.wait_for(lambda s: len(s.deltas) == 1)
    assert sleep.delays == [2.0, 7.0]
    assert watcher.stats.errors == {"Throttled": 2}


async def test_retry_after_of_a_5xx_is_honoured_and_every_retry_after_is_bounded(
    cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any
) -> None:
    """client-go's checkWait (rest/with_retry.go, v0.37.2) waits for Retry-After on a 429 and on
    any 5xx; a server asking for an hour is waited for at most the backoff's cap (30 s)."""
    cluster.faults.fail(503, retry_after=5, verb="list", kind="Pod")
    cluster.faults.throttle(retry_after=3600, verb="watch", kind="Pod")
    cluster.faults.fail(500, verb="watch", kind="Pod")  # no Retry-After: the backoff
    watcher = make_watcher(gateway, sink, sleep, random=lambda: 0.5)
    async with running(watcher.run()):
        await cluster.wait_for_watches("Pod", count=3)
        cluster.apply(pod("a"))
        await sink.wait_for(lambda s: len(s.deltas) == 1)
    assert sleep.delays == pytest.approx([5.0, 30.0, 1.2])
    assert watcher.stats.errors == {"ServerError": 2, "Throttled": 1}


async def test_failing_names_the_error_until_the_api_server_serves_the_kind_again(
    cluster: FakeCluster, gateway: Gateway, sink: Any
) -> None:
    failing_seen: list[str | None] = []

    async def sleep(seconds: float) -> None:  # each backoff: what the watcher says meanwhile
        failing_seen.append(watcher.stats.failing)
        await asyncio.sleep(0)

    cluster.faults.fail(503, verb="list", kind="Pod", times=2)
    watcher = make_watcher(gateway, sink, sleep)
    assert watcher.stats.failing is None
    async with running(watcher.run()):
        await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
    assert [(f or "").split(":")[0] for f in failing_seen] == ["ServerError", "ServerError"]
    assert watcher.stats.failing is None  # listed since


async def test_a_stalled_watch_times_out_and_reconnects(
    cluster: FakeCluster, kubeconfig: Path, sink: Any, sleep: Any
) -> None:
    cluster.faults.stall(30, verb="watch", kind="Pod")
    cluster.bookmark_interval = 0.05  # a healthy watch is never idle for long
    async with Gateway(kubeconfig, watch_idle_timeout=0.5) as gw:
        watcher = make_watcher(gw, sink, sleep)
        async with running(watcher.run()):
            await cluster.wait_for_watches("Pod", count=2)
            cluster.apply(pod("a"))
            await sink.wait_for(lambda s: len(s.deltas) == 1)
    assert watcher.stats.errors == {"Timeout": 1}
    assert watcher.stats.lists == 1
    assert sleep.delays == [0.8]


async def test_watch_timeout_reconnects_from_the_last_version(
    cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any
) -> None:
    watcher = make_watcher(gateway, sink, sleep, watch_timeout=1)
    async with running(watcher.run()):
        await cluster.wait_for_watches("Pod")
        cluster.apply(pod("a"))
        await cluster.wait_for_watches("Pod", count=2, timeout=5)
        cluster.apply(pod("b"))
        await sink.wait_for(lambda s: len(s.deltas) == 2)
    first, second = watch_requests(cluster)[:2]
    assert first["timeoutSeconds"] == "1"
    assert second["resourceVersion"] == cluster.get("Pod", "a")["metadata"]["resourceVersion"]  # type: ignore[index]
    assert watcher.stats.lists == 1 and watcher.stats.restarts >= 1
    assert sleep.delays == []  # a clean end re-watches at once


async def test_bookmarks_advance_the_version(kubeconfig: Path, tmp_path: Path, sink: Any, sleep: Any) -> None:
    async with FakeCluster(bookmark_interval=0.05) as cluster:
        path = cluster.write_kubeconfig(tmp_path / "kc")
        async with Gateway(path) as gw:
            watcher = make_watcher(gw, sink, sleep)
            async with running(watcher.run()):
                await cluster.wait_for_watches("Pod")
                for i in range(3):
                    cluster.apply(node(f"node-{i}"))  # other kinds move the global version
                target = str(cluster.resource_version)

                async def caught_up() -> None:
                    while watcher.resource_version != target:
                        await asyncio.sleep(0.01)

                await asyncio.wait_for(caught_up(), 5)
                assert watcher.stats.bookmarks >= 1
                cluster.faults.cut_watches("Pod")
                await cluster.wait_for_watches("Pod", count=2)
    assert watch_requests(cluster)[1]["resourceVersion"] == target
    assert sink.deltas == []


async def test_malformed_frames_are_counted_and_skipped(
    cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any
) -> None:
    watcher = make_watcher(gateway, sink, sleep)
    async with running(watcher.run()):
        await cluster.wait_for_watches("Pod")
        cluster.faults.inject_line(b"this is not json", kind="Pod")
        cluster.faults.inject_line(b'{"type": "ADDED"}', kind="Pod")
        cluster.faults.inject_line(b'{"type": "ADDED", "object": {"kind": "Pod", "metadata": {}}}', kind="Pod")
        cluster.faults.inject_line(b'{"type": "SURPRISE", "object": {}}', kind="Pod")
        cluster.apply(pod("a"))
        await sink.wait_for(lambda s: len(s.deltas) == 1)
        cluster.faults.cut_watches("Pod")  # the stream's count is added when it ends
        await cluster.wait_for_watches("Pod", count=2)
    assert sink.seen() == [("ADDED", "a")]
    assert watcher.stats.malformed == 4
    assert watcher.stats.errors == {"Unavailable": 1}  # only the cut, not the bad lines


async def test_watcher_scopes_namespaces_and_signals_sync_per_kind(
    cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any
) -> None:
    for ns in ("a", "b", "c"):
        cluster.apply(pod(f"web-{ns}", ns))
    cluster.apply(node("node-1"))
    cluster.faults.fail(404, verb="list", kind="PodDisruptionBudget")
    watcher = Watcher(gateway, sink, kinds=[NODE, POD, PDB], namespaces=["a", "b"], sleep=sleep, random=no_jitter)
    assert len(watcher.watchers) == 5  # nodes once, pods and PDBs per namespace
    async with running(watcher.run()):
        await asyncio.wait_for(watcher.wait_synced(), 5)
        assert watcher.synced
    assert sorted(sink.seen()) == [("ADDED", "node-1"), ("ADDED", "web-a"), ("ADDED", "web-b")]
    assert sorted(sink.synced_kinds) == ["Node", "Pod"]
    assert watcher.unavailable_kinds == ["PodDisruptionBudget"]
    stats = watcher.stats()
    assert stats["Pod"].listed == 2 and stats["Pod"].synced
    assert not stats["PodDisruptionBudget"].available
    pod_lists = {r.path for r in cluster.requests if r.verb == "list" and r.kind == "Pod"}
    assert pod_lists == {"/api/v1/namespaces/a/pods", "/api/v1/namespaces/b/pods"}


async def test_forbidden_is_retried_with_backoff(cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any) -> None:
    cluster.faults.fail(403, verb="list", kind="Pod", times=2)
    watcher = make_watcher(gateway, sink, sleep)
    async with running(watcher.run()):
        await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
    assert sleep.delays == [0.8, 1.6]
    assert watcher.stats.errors == {"Forbidden": 2}


def test_backoff_grows_caps_and_resets() -> None:
    now = [0.0]
    backoff = Backoff(initial=1, cap=8, factor=2, jitter=1.0, reset_after=60, clock=lambda: now[0], random=lambda: 0.25)
    assert [backoff.next() for _ in range(5)] == [1.25, 2.5, 5.0, 10.0, 10.0]
    now[0] = 61.0
    assert backoff.next() == 1.25


async def test_gone_on_a_plain_list_backs_off(cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any) -> None:
    cluster.faults.fail(410, verb="list", kind="Pod", times=2)
    watcher = make_watcher(gateway, sink, sleep)
    async with running(watcher.run()):
        await sink.wait_for(lambda s: s.synced_kinds == ["Pod"])
    assert sleep.delays == [0.8, 1.6]  # no tight relist loop
    assert watcher.stats.errors == {"Gone": 2}


async def test_repeated_gone_right_after_relisting_backs_off(
    cluster: FakeCluster, gateway: Gateway, sink: Any, sleep: Any
) -> None:
    cluster.faults.gone_on_next_watch(kind="Pod", times=3)
    watcher = make_watcher(gateway, sink, sleep)
    async with running(watcher.run()):
        await cluster.wait_for_watches("Pod", count=4)
    assert watcher.stats.relists == 3
    assert sleep.delays == [0.8, 1.6]  # the first relist is immediate
