"""Custom controllers' /scale read live: the agent's gateway through kubernetes-asyncio's
CustomObjectsApi over HTTP to the fake API endpoint (agent/fakecluster serves CRDs, their
discovery and the Scale apiextensions-apiserver builds), mirroring getScaleController
(pkg/controller/disruption/disruption.go, v1.35.4)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.fakecluster import FakeCluster
from agent.kube.gateway import Gateway
from agent.pipeline import PipelineConfig
from agent.runner import AgentHost, ClusterAgent
from agent.scales import ScaleReader, implements_scale
from analyzers.disruption import budget_status
from analyzers.records import OwnerRef
from analyzers.snapshot import ClusterState
from tests.agent.conftest import incidents
from tests.core.helpers import node, pdb, pod
from tests.core.test_disruption_scale import SCALE, crd, with_status
from tests.waiting import eventually

SEL = {"matchLabels": {"app": "db"}}


@pytest.mark.parametrize(
    "api_resources, implements",
    [
        # TestScaleFinderNoResource (pkg/controller/disruption/disruption_test.go, v1.35.4)
        (
            [
                {"kind": "customresource", "name": "customresources/status"},
                {"kind": "Scale", "group": "autoscaling", "version": "v1", "name": "customresources/scale"},
                {"kind": "customresource", "name": "customresources"},
            ],
            True,
        ),  # "resource implements scale"
        (
            [
                {"kind": "customresource", "name": "customresources"},
                {"kind": "customresource", "name": "customresources/scale"},
            ],
            False,
        ),  # "resource implements unsupported data format for scale subresource"
        (
            [{"kind": "customresource", "name": "customresources"}],
            False,
        ),  # "resource does not implement scale"
    ],
)
def test_scale_finder_no_resource(api_resources: list[dict[str, Any]], implements: bool) -> None:
    assert implements_scale(api_resources, "customresources") is implements


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async with FakeCluster() as c:
        yield c


@pytest.fixture
async def gateway(cluster: FakeCluster, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with Gateway(str(cluster.write_kubeconfig(tmp_path / "kubeconfig")), request_timeout=5) as g:
        yield g


def _database(replicas: int = 5) -> dict[str, Any]:
    return {
        "apiVersion": "db.example.com/v1",
        "kind": "Database",
        "metadata": {"name": "orders", "namespace": "default"},
        "spec": {"replicas": replicas},
    }


def _ref(cluster: FakeCluster) -> OwnerRef:
    return OwnerRef("Database", "orders", _uid(cluster), "db.example.com/v1")


def _uid(cluster: FakeCluster) -> str:
    (obj,) = cluster.custom.objects[("db.example.com", "Database")].values()
    return str(obj["metadata"]["uid"])


async def test_the_scale_is_read_through_custom_objects_api(cluster: FakeCluster, gateway: Gateway) -> None:
    cluster.apply(crd(scale=SCALE))
    cluster.apply(_database(7))
    reading = await ScaleReader(gateway).read("default", _ref(cluster))
    assert (reading.replicas, reading.uid, reading.problem, reading.unknown) == (7, _uid(cluster), None, None)
    paths = [r.path for r in cluster.requests]
    assert "/apis/db.example.com/v1" in paths  # the RESTMapper's discovery
    assert "/apis/db.example.com/v1/namespaces/default/databases/orders/scale" in paths


async def test_forbidden_is_unknown_with_the_reason(cluster: FakeCluster, gateway: Gateway) -> None:
    cluster.apply(crd(scale=SCALE))
    cluster.apply(_database())
    message = (
        'databases.db.example.com "orders" is forbidden: User "system:serviceaccount:unstick:unstick" '
        'cannot get resource "databases/scale" in API group "db.example.com" in the namespace "default"'
    )
    cluster.faults.fail(403, verb="get", kind="databases", message=message)
    reading = await ScaleReader(gateway).read("default", _ref(cluster))
    assert reading.replicas is None and reading.problem is None
    assert reading.unknown is not None
    assert "403 Forbidden" in reading.unknown and "cannot get resource" in reading.unknown
    assert "scaleSubresource" in reading.unknown


async def test_a_missing_object_is_no_controller_found(cluster: FakeCluster, gateway: Gateway) -> None:
    cluster.apply(crd(scale=SCALE))
    ref = OwnerRef("Database", "orders", "uid-gone", "db.example.com/v1")
    reading = await ScaleReader(gateway).read("default", ref)
    assert (reading.replicas, reading.problem, reading.unknown) == (None, None, None)
    state = _state_with_pods(ref.uid)
    state.apply(reading)
    snap = state.snapshot()
    assert (
        budget_status(snap, snap.pdbs[("default", "orders")]).error
        == 'found no controllers for pod "orders-0"'
    )


async def test_a_crd_without_scale_and_an_unserved_kind_are_upstreams_errors(
    cluster: FakeCluster, gateway: Gateway
) -> None:
    cluster.apply(crd(scale=None))
    cluster.apply(_database())
    reader = ScaleReader(gateway)
    reading = await reader.read("default", _ref(cluster))
    assert reading.problem == "databases.db.example.com does not implement the scale subresource"
    other = OwnerRef("TestWorkload", "fake-controller", "u", "apps.test.io/v1")
    assert (await reader.read("default", other)).problem == (
        'no matches for kind "TestWorkload" in version "apps.test.io/v1"'
    )


def _state_with_pods(uid: str) -> ClusterState:
    state = ClusterState()
    state.load(_state_objects(uid))
    return state


async def test_refresh_reads_each_controller_once_per_interval(
    cluster: FakeCluster, gateway: Gateway
) -> None:
    cluster.apply(crd(scale=SCALE))
    cluster.apply(_database(5))
    state = _state_with_pods(_uid(cluster))
    now = [1000.0]
    reader = ScaleReader(gateway, interval=60, clock=lambda: now[0])

    def status():
        snap = state.snapshot()
        return budget_status(snap, snap.pdbs[("default", "orders")])

    assert await reader.refresh(state) == 1
    # 5 replicas - maxUnavailable 1 = 4 must stay healthy; 3 are.
    assert (status().expected_pods, status().desired_healthy, status().disruptions_allowed) == (5, 4, 0)
    generation = state.generation
    cluster.apply(_database(3))
    assert await reader.refresh(state) == 0 and reader.reads == 1 and state.generation == generation
    now[0] += 61
    assert await reader.refresh(state) == 1 and reader.reads == 2
    assert (status().expected_pods, status().disruptions_allowed) == (3, 1)
    now[0] += 61
    assert await reader.refresh(state) == 0 and state.generation == generation + 1  # same reading: no change


async def test_the_live_agent_opens_the_drain_incident_from_the_custom_controllers_scale(
    host: AgentHost, tmp_path: Path
) -> None:
    """A node being drained runs 3 Ready pods of a Database whose /scale says 5: 5 - 1 = 4
    must stay healthy, so no eviction is allowed, although the PDB's (stale) status says 1.
    Only the /scale read can tell; the incident opens."""
    cluster = FakeCluster(bookmark_interval=1)
    await cluster.start()
    cluster.apply(crd(scale=SCALE))
    cluster.apply(_database(5))
    for obj in _state_objects(_uid(cluster)):
        cluster.apply(obj)
    agent = await ClusterAgent.connect(
        cluster="custom",
        gateway=Gateway(str(cluster.write_kubeconfig(tmp_path / "kubeconfig")), request_timeout=5),
        sessions=host.sessions,
        config=PipelineConfig(grace=0, debounce=0.05, resync=0.5),
        renderer=host.renderer,
    )
    host.agents.append(agent)
    stop = asyncio.Event()
    try:
        agent.start(stop)
        (opened,) = await eventually(lambda: incidents(host))
        assert opened.rule_id == "pdb-blocks-eviction"
        (budget,) = opened.evidence["pdbs"]
        assert (budget["expected_pods"], budget["desired_healthy"], budget["disruptions_allowed"]) == (
            5,
            4,
            0,
        )
        assert budget["figures"] == "computed"
        assert any(r.path.endswith("/databases/orders/scale") for r in cluster.requests)
    finally:
        stop.set()
        await cluster.stop()


def _state_objects(uid: str) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [node("n1", unschedulable=True), node("n2")]
    for i in range(3):
        p = pod(f"orders-{i}", node_name="n1", labels={"app": "db"}, ready=True, phase="Running")
        p["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "db.example.com/v1",
                "kind": "Database",
                "name": "orders",
                "uid": uid,
                "controller": True,
            }
        ]
        objs.append(p)
    objs.append(with_status(pdb("orders", selector=SEL, max_unavailable=1), 3, 2, 3, 1))
    return objs


async def test_a_reading_no_budget_needs_any_more_is_dropped(cluster: FakeCluster, gateway: Gateway) -> None:
    """Readings live only as long as a budget needs them: a deleted PDB takes its
    controllers' readings (and their read times) with it."""
    cluster.apply(crd(scale=SCALE))
    cluster.apply(_database(5))
    state = _state_with_pods(_uid(cluster))
    reader = ScaleReader(gateway, interval=60, clock=lambda: 1000.0)
    assert await reader.refresh(state) == 1 and len(state.snapshot().scales) == 1
    assert state.delete("PodDisruptionBudget", "default", "orders")
    assert await reader.refresh(state) == 0
    assert dict(state.snapshot().scales) == {} and reader._read_at == {}
