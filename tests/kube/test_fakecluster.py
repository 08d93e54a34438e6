"""Wire-level checks of the fake API endpoint: what a real API server sends,
byte for byte where clients depend on it (Status bodies, watch frames,
continue tokens, resourceVersion semantics)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from agent.fakecluster import FakeCluster
from agent.fakecluster.samples import node, pod


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def get(http: aiohttp.ClientSession, cluster: FakeCluster, path: str, **params: str) -> tuple[int, Any]:
    async with http.get(cluster.url + path, params=params) as resp:
        return resp.status, await resp.json()


async def watch_lines(
    http: aiohttp.ClientSession, cluster: FakeCluster, path: str, expect: int | None = None, **params: str
) -> list[dict[str, Any]]:
    """Watch frames until the stream ends, or until ``expect`` frames came."""
    params.setdefault("watch", "true")
    params.setdefault("timeoutSeconds", "5")
    frames: list[dict[str, Any]] = []
    async with http.get(cluster.url + path, params=params) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("application/json")
        async for line in resp.content:
            frames.append(orjson.loads(line))
            if expect is not None and len(frames) >= expect:
                break
    return frames


async def test_resource_version_is_global_and_monotonic(cluster: FakeCluster) -> None:
    start = cluster.resource_version
    a = cluster.apply(pod("a"))
    n = cluster.apply(node("n"))
    a2 = cluster.apply(pod("a", phase="Failed"))
    gone = cluster.delete("Pod", "a")
    assert [int(o["metadata"]["resourceVersion"]) for o in (a, n, a2, gone)] == [start + 1, start + 2, start + 3, start + 4]  # type: ignore[index]
    assert a2["metadata"]["uid"] == a["metadata"]["uid"]
    assert cluster.delete("Pod", "a") is None


async def test_paginated_list_reads_one_snapshot(http: aiohttp.ClientSession, cluster: FakeCluster) -> None:
    for i in range(5):
        cluster.apply(pod(f"p{i}"))
    status, first = await get(http, cluster, "/api/v1/pods", limit="2")
    assert status == 200
    token = first["metadata"]["continue"]
    assert first["metadata"]["remainingItemCount"] == 3
    decoded = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    assert decoded == {"v": "meta.k8s.io/v1", "rv": cluster.resource_version, "start": "default/p1\x00"}
    assert "kind" not in first["items"][0]  # list items carry no kind, as from the API server
    cluster.apply(pod("p2", phase="Failed"))  # after the snapshot: not seen by its pages
    cluster.apply(pod("p9"))
    _, second = await get(http, cluster, "/api/v1/pods", limit="2", **{"continue": token})
    assert [i["metadata"]["name"] for i in second["items"]] == ["p2", "p3"]
    assert second["items"][0]["status"]["phase"] == "Pending"
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    _, third = await get(http, cluster, "/api/v1/pods", limit="2", **{"continue": second["metadata"]["continue"]})
    assert [i["metadata"]["name"] for i in third["items"]] == ["p4"]
    assert "continue" not in third["metadata"]


async def test_expired_continue_token_is_a_410_status(http: aiohttp.ClientSession, cluster: FakeCluster) -> None:
    for i in range(3):
        cluster.apply(pod(f"p{i}"))
    _, first = await get(http, cluster, "/api/v1/namespaces/default/pods", limit="1")
    cluster.apply(pod("p3"))
    cluster.compact()  # etcd compaction past the snapshot's revision
    status, body = await get(http, cluster, "/api/v1/namespaces/default/pods", limit="1", **{"continue": first["metadata"]["continue"]})
    assert status == 410
    assert {k: body[k] for k in ("kind", "apiVersion", "status", "reason", "code")} == {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
    }
    assert body["message"].startswith("The provided continue parameter is too old to display a consistent list result.")


async def test_watch_replays_history_after_the_version(http: aiohttp.ClientSession, cluster: FakeCluster) -> None:
    cluster.apply(pod("a"))
    rv = str(cluster.resource_version)
    cluster.apply(pod("b"))
    cluster.apply(node("n"))
    cluster.delete("Pod", "a")
    frames = await watch_lines(http, cluster, "/api/v1/pods", 2, resourceVersion=rv)
    assert [(f["type"], f["object"]["metadata"]["name"]) for f in frames] == [("ADDED", "b"), ("DELETED", "a")]
    assert frames[0]["object"]["kind"] == "Pod" and frames[0]["object"]["apiVersion"] == "v1"


async def test_watch_from_zero_starts_with_the_current_state(http: aiohttp.ClientSession, cluster: FakeCluster) -> None:
    cluster.apply(pod("a"))
    cluster.apply(pod("a", phase="Failed"))
    frames = await watch_lines(http, cluster, "/api/v1/namespaces/default/pods", 1, resourceVersion="0")
    assert [(f["type"], f["object"]["status"]["phase"]) for f in frames] == [("ADDED", "Failed")]


async def test_too_old_version_is_an_error_event(http: aiohttp.ClientSession, cluster: FakeCluster) -> None:
    cluster.apply(pod("a"))
    cluster.apply(pod("b"))
    oldest = cluster.compact()
    frames = await watch_lines(http, cluster, "/api/v1/pods", resourceVersion="1")
    assert frames == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: 1 ({oldest})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]


async def test_history_window_is_bounded() -> None:
    async with FakeCluster(history_size=10) as cluster:
        for i in range(30):
            cluster.apply(pod(f"p{i}"))
        async with aiohttp.ClientSession() as http:
            frames = await watch_lines(http, cluster, "/api/v1/pods", resourceVersion="5")
            assert frames[0]["type"] == "ERROR" and frames[0]["object"]["code"] == 410
            recent = str(cluster.resource_version - 3)
            frames = await watch_lines(http, cluster, "/api/v1/pods", 3, resourceVersion=recent)
            assert len(frames) == 3


async def test_a_watch_behind_the_history_window_fails_rather_than_skips() -> None:
    async with FakeCluster(history_size=10) as cluster, aiohttp.ClientSession() as http:
        cluster.faults.freeze("Pod")
        params = {"watch": "true", "resourceVersion": str(cluster.resource_version), "timeoutSeconds": "5"}
        async with http.get(cluster.url + "/api/v1/pods", params=params) as resp:
            await cluster.wait_for_watches("Pod")
            for i in range(30):
                cluster.apply(pod(f"p{i}"))
            cluster.faults.thaw("Pod")
            frames = [orjson.loads(line) async for line in resp.content]
        assert [(f["type"], f["object"]["code"]) for f in frames] == [("ERROR", 410)]


async def test_bookmarks_carry_only_the_version() -> None:
    async with FakeCluster(bookmark_interval=0.05) as cluster, aiohttp.ClientSession() as http:
        cluster.apply(node("n"))
        frames = await watch_lines(http, cluster, "/api/v1/pods", 2, resourceVersion="1", allowWatchBookmarks="true")
        bookmarks = [f for f in frames if f["type"] == "BOOKMARK"]
        assert bookmarks, frames
        assert bookmarks[-1]["object"] == {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(cluster.resource_version)},
        }
        plain = await watch_lines(http, cluster, "/api/v1/pods", resourceVersion="1", timeoutSeconds="1")
        assert not [f for f in plain if f["type"] == "BOOKMARK"]


async def test_timeout_seconds_ends_the_stream(http: aiohttp.ClientSession, cluster: FakeCluster) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await watch_lines(http, cluster, "/api/v1/nodes", timeoutSeconds="1") == []
    assert 0.9 < loop.time() - started < 3


async def test_selectors_and_their_errors(http: aiohttp.ClientSession, cluster: FakeCluster) -> None:
    cluster.apply(pod("web-1", labels={"tier": "front"}))
    cluster.apply(pod("web-2", node_name="n1", labels={"tier": "front"}))
    cluster.apply(pod("db-0", node_name="n1", labels={"tier": "db"}))

    async def names(**params: str) -> list[str]:
        status, body = await get(http, cluster, "/api/v1/pods", **params)
        assert status == 200, body
        return [i["metadata"]["name"] for i in body["items"]]

    assert await names(fieldSelector="spec.nodeName==n1") == ["db-0", "web-2"]
    assert await names(fieldSelector="spec.nodeName=n1,metadata.name!=db-0") == ["web-2"]
    assert await names(fieldSelector="status.phase=Pending") == ["web-1"]
    assert await names(labelSelector="tier=front,app!=web") == []
    assert await names(labelSelector="tier notin (db)") == ["web-1", "web-2"]
    assert await names(labelSelector="!tier") == []
    status, body = await get(http, cluster, "/api/v1/pods", fieldSelector="spec.bogus=1")
    assert (status, body["reason"], body["message"]) == (400, "BadRequest", "field label not supported: spec.bogus")


async def test_discovery(http: aiohttp.ClientSession) -> None:
    async with FakeCluster(metrics=True) as cluster:
        _, apis = await get(http, cluster, "/apis")
        assert "metrics.k8s.io" in [g["name"] for g in apis["groups"]]
        _, core = await get(http, cluster, "/api/v1")
        pods = next(r for r in core["resources"] if r["name"] == "pods")
        assert pods == {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["get", "list", "watch"]}
        _, metrics = await get(http, cluster, "/apis/metrics.k8s.io/v1beta1")
        assert {r["kind"]: r["verbs"] for r in metrics["resources"]} == {"NodeMetrics": ["get", "list"], "PodMetrics": ["get", "list"]}
    async with FakeCluster() as cluster:
        status, body = await get(http, cluster, "/apis/metrics.k8s.io/v1beta1/nodes")
        assert (status, body["reason"]) == (404, "NotFound")
        status, _ = await get(http, cluster, "/apis/metrics.k8s.io")
        assert status == 404


async def test_token_is_required_when_set(http: aiohttp.ClientSession) -> None:
    async with FakeCluster(token="t0k") as cluster:
        status, body = await get(http, cluster, "/api/v1/pods")
        assert (status, body["reason"]) == (401, "Unauthorized")
        async with http.get(cluster.url + "/api/v1/pods", headers={"Authorization": "Bearer t0k"}) as resp:
            assert resp.status == 200


async def test_events_are_aggregated_like_the_recorder(cluster: FakeCluster) -> None:
    p = cluster.apply(pod("web-1"))
    first = cluster.record_event(p, "FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu.")
    again = cluster.record_event(p, "FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu.")
    other = cluster.record_event(p, "FailedScheduling", "0/4 nodes are available: 4 Insufficient cpu.")
    assert again["metadata"]["name"] == first["metadata"]["name"]
    assert (first["count"], again["count"]) == (1, 2)
    assert other["metadata"]["name"] != first["metadata"]["name"]
    assert first["involvedObject"]["uid"] == p["metadata"]["uid"]
    assert first["source"] == {"component": "default-scheduler"}


async def test_request_faults_match_verb_and_kind(http: aiohttp.ClientSession, cluster: FakeCluster) -> None:
    cluster.faults.fail(500, verb="list", kind="Node", times=2)
    assert (await get(http, cluster, "/api/v1/pods"))[0] == 200
    assert (await get(http, cluster, "/api/v1/nodes"))[0] == 500
    status, body = await get(http, cluster, "/api/v1/nodes")
    assert (status, body["reason"], body["code"]) == (500, "InternalError", 500)
    assert (await get(http, cluster, "/api/v1/nodes"))[0] == 200
    cluster.faults.throttle(retry_after=3)
    async with http.get(cluster.url + "/api/v1/nodes") as resp:
        assert resp.status == 429
        assert resp.headers["Retry-After"] == "3"
        assert (await resp.json())["details"] == {"retryAfterSeconds": 3}
