"""The gateway through the real kubernetes-asyncio client, over HTTP, against
the fake API endpoint: API-shaped dicts out, the project's errors raised."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.fakecluster import FakeCluster, kubeconfig_dict, write_kubeconfig
from agent.fakecluster.samples import event, node, pod
from agent.kube.errors import (
    ConfigError,
    Forbidden,
    Gone,
    MethodNotAllowed,
    NotFound,
    ServerError,
    Throttled,
    Timeout,
    Unauthorized,
    Unavailable,
)
from agent.kube.gateway import Gateway
from agent.kube.kinds import POD


async def test_version_and_discovery(gateway: Gateway) -> None:
    version = await gateway.version()
    assert (version["major"], version["minor"], version["gitVersion"]) == ("1", "30", "v1.30.2")
    groups = await gateway.api_groups()
    assert groups[""] == ["v1"]
    assert {"apps", "batch", "policy", "scheduling.k8s.io", "storage.k8s.io"} <= set(groups)
    assert await gateway.has_api("policy", "v1")
    assert not await gateway.metrics_available()


async def test_list_items_get_kind_and_api_version(cluster: FakeCluster, gateway: Gateway) -> None:
    cluster.apply(pod("web-1", "shop"))
    cluster.apply(node("node-a"))
    pods = await gateway.list_page("Pod")
    assert pods["kind"] == "PodList"
    assert pods["apiVersion"] == "v1"
    assert pods["metadata"]["resourceVersion"] == str(cluster.resource_version)
    [item] = pods["items"]
    # The API server leaves kind/apiVersion out of list items; the gateway
    # fills them in, so every object downstream is a whole object.
    assert (item["kind"], item["apiVersion"], item["metadata"]["name"]) == ("Pod", "v1", "web-1")
    deployments = await gateway.list_page("deployments.apps", namespace="shop")
    assert deployments["kind"] == "DeploymentList"
    assert deployments["apiVersion"] == "apps/v1"
    assert deployments["items"] == []


async def test_list_objects_reads_every_page(cluster: FakeCluster, gateway: Gateway) -> None:
    for i in range(7):
        cluster.apply(pod(f"web-{i}", "shop"))
    listing = await gateway.list_objects(POD, page_size=3)
    assert [p["metadata"]["name"] for p in listing["items"]] == [f"web-{i}" for i in range(7)]
    assert all(p["kind"] == "Pod" for p in listing["items"])
    assert listing["metadata"]["resourceVersion"] == str(cluster.resource_version)
    lists = [r.query for r in cluster.requests if r.verb == "list"]
    assert [q.get("limit") for q in lists] == ["3", "3", "3"]
    assert "continue" not in lists[0] and all(q.get("continue") for q in lists[1:])


async def test_list_objects_restarts_in_full_when_the_continue_token_expires(cluster: FakeCluster, gateway: Gateway) -> None:
    for i in range(5):
        cluster.apply(pod(f"web-{i}"))
    cluster.faults.expire_next_continue()
    listing = await gateway.list_objects(POD, page_size=2)
    assert [p["metadata"]["name"] for p in listing["items"]] == [f"web-{i}" for i in range(5)]
    assert [r.query.get("limit") for r in cluster.requests if r.verb == "list"] == ["2", "2", None]


async def test_get_and_not_found(cluster: FakeCluster, gateway: Gateway) -> None:
    cluster.apply(pod("web-1", "shop"))
    got = await gateway.get(POD, "web-1", "shop")
    assert (got["kind"], got["metadata"]["namespace"]) == ("Pod", "shop")
    with pytest.raises(NotFound) as info:
        await gateway.get(POD, "nope", "shop")
    assert info.value.status == 404
    assert info.value.reason == "NotFound"
    assert not info.value.transient
    assert 'pods "nope" not found' in str(info.value)


@pytest.mark.parametrize(
    ("status", "error", "transient"),
    [(403, Forbidden, False), (500, ServerError, True), (503, ServerError, True), (410, Gone, False)],
)
async def test_status_errors_are_translated(
    cluster: FakeCluster, gateway: Gateway, status: int, error: type[Exception], transient: bool
) -> None:
    cluster.faults.fail(status, verb="list")
    with pytest.raises(error) as info:
        await gateway.list_page("Node")
    assert info.value.status == status  # type: ignore[attr-defined]
    assert info.value.transient is transient  # type: ignore[attr-defined]
    assert info.value.body["kind"] == "Status"  # type: ignore[attr-defined]
    assert info.value.__cause__ is None  # a status answer, not a client exception
    # The next request is served normally.
    assert (await gateway.list_page("Node"))["kind"] == "NodeList"


async def test_throttled_carries_retry_after(cluster: FakeCluster, gateway: Gateway) -> None:
    cluster.faults.throttle(retry_after=7, verb="list")
    with pytest.raises(Throttled) as info:
        await gateway.list_page(POD)
    assert info.value.retry_after == 7.0
    assert info.value.reason == "TooManyRequests"
    assert info.value.transient


async def test_watch_of_a_list_only_resource_is_refused(tmp_path: Path) -> None:
    async with FakeCluster(metrics=True) as cluster:
        path = cluster.write_kubeconfig(tmp_path / "kc")
        async with Gateway(path) as gw:
            with pytest.raises(MethodNotAllowed):
                async with gw.watch("NodeMetrics"):
                    pass


async def test_bearer_token_from_kubeconfig(tmp_path: Path) -> None:
    async with FakeCluster(token="s3cret") as cluster:
        good = cluster.write_kubeconfig(tmp_path / "good")
        async with Gateway(good) as gw:
            assert (await gw.version())["major"] == "1"
            assert "s3cret" not in repr(gw)
        bad = write_kubeconfig(tmp_path / "bad", cluster.url, token="wrong")
        async with Gateway(bad) as gw:
            with pytest.raises(Unauthorized):
                await gw.version()


async def test_context_is_selectable(cluster: FakeCluster, tmp_path: Path) -> None:
    live = kubeconfig_dict(cluster.url, context="live")
    dead = kubeconfig_dict("http://127.0.0.1:9", context="dead")
    merged = {
        **live,
        "clusters": live["clusters"] + dead["clusters"],
        "users": live["users"] + dead["users"],
        "contexts": live["contexts"] + dead["contexts"],
        "current-context": "dead",
    }
    import yaml

    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(merged))
    async with Gateway(path, context="live") as gw:
        assert gw.server == cluster.url
        assert (await gw.version())["major"] == "1"
    async with Gateway(path, connect_timeout=1) as gw:  # current-context: dead
        with pytest.raises(Unavailable):
            await gw.version()


async def test_missing_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        await Gateway(tmp_path / "missing").open()


async def test_a_stalled_list_times_out(cluster: FakeCluster, kubeconfig: Path) -> None:
    cluster.faults.stall(2.0, verb="list")
    async with Gateway(kubeconfig, request_timeout=0.3) as gw:
        with pytest.raises(Timeout) as info:
            await gw.list_page(POD)
    assert info.value.transient
    assert isinstance(info.value, Unavailable)


async def test_server_side_selectors(cluster: FakeCluster, gateway: Gateway) -> None:
    pending = cluster.apply(pod("web-1", "shop"))
    cluster.apply(pod("web-2", "shop", node_name="node-a"))
    cluster.apply(pod("db-0", "shop", node_name="node-b", labels={"tier": "db"}))
    cluster.apply(event(pending))
    cluster.apply(event(pending, "Scheduled", "Successfully assigned shop/web-1 to node-a", type="Normal"))

    unscheduled = await gateway.list_page(POD, field_selector="spec.nodeName=")
    assert [p["metadata"]["name"] for p in unscheduled["items"]] == ["web-1"]
    on_node = await gateway.list_page(POD, namespace="shop", field_selector="spec.nodeName!=,metadata.name!=db-0")
    assert [p["metadata"]["name"] for p in on_node["items"]] == ["web-2"]
    db = await gateway.list_page(POD, label_selector="tier in (db,cache),app")
    assert [p["metadata"]["name"] for p in db["items"]] == ["db-0"]
    failed = await gateway.list_page("Event", field_selector="involvedObject.kind=Pod,reason=FailedScheduling,type=Warning")
    assert [e["reason"] for e in failed["items"]] == ["FailedScheduling"]
    assert failed["items"][0]["kind"] == "Event"


async def test_watch_yields_api_shaped_dicts(cluster: FakeCluster, gateway: Gateway) -> None:
    rv = str(cluster.resource_version)
    events = []
    async with gateway.watch(POD, resource_version=rv, timeout_seconds=5) as stream:
        cluster.apply(pod("web-1"))
        cluster.delete("Pod", "web-1")
        async for e in stream:
            events.append(e)
            if len(events) == 2:
                break
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]
    assert all(e["object"]["kind"] == "Pod" and e["object"]["apiVersion"] == "v1" for e in events)
    assert int(events[1]["object"]["metadata"]["resourceVersion"]) == cluster.resource_version
    assert stream.malformed == 0


async def test_watch_with_a_selector_sees_objects_leave_it(cluster: FakeCluster, gateway: Gateway) -> None:
    cluster.apply(pod("web-1"))
    rv = str(cluster.resource_version)
    events = []
    async with gateway.watch(POD, resource_version=rv, field_selector="spec.nodeName=", timeout_seconds=5) as stream:
        cluster.apply(pod("web-2"))
        cluster.apply(pod("web-1", node_name="node-a"))  # scheduled: leaves the selection
        async for e in stream:
            events.append((e["type"], e["object"]["metadata"]["name"]))
            if len(events) == 2:
                break
    assert events == [("ADDED", "web-2"), ("DELETED", "web-1")]


async def test_watch_error_event_raises_gone(cluster: FakeCluster, gateway: Gateway) -> None:
    cluster.apply(pod("web-1"))
    cluster.compact()
    with pytest.raises(Gone) as info:
        async with gateway.watch(POD, resource_version="1", timeout_seconds=5) as stream:
            async for _ in stream:
                pass
    assert info.value.reason == "Expired"
    assert "too old resource version" in info.value.message
