"""What only a read of the cluster can tell reaches the workers: the publisher reads custom
controllers' ``/scale`` (agent.scales, as the live agent does before each pass) and sends
each reading as a ``scale`` record before ``ready``; its ``synced`` markers tell the worker
which kinds were listed in full (a missing ResourceClaim is then judged). The records come
from the real watcher and publisher against the in-process Kubernetes API over HTTP; the
worker's verdict is compared with the single-process agent's on the same cluster."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent.fakecluster import FakeCluster
from agent.kube.gateway import Gateway
from agent.kube.watcher import Watcher
from agent.pipeline import PipelineConfig
from agent.runner import AgentHost, ClusterAgent
from agent.scales import ScaleReader
from agent.stream import codec
from agent.stream.fleet import Fleet
from agent.stream.publisher import DeltaPublisher, ScaleRelay, announce_ready, custom_controlled
from analyzers.disruption import budget_status
from analyzers.records import ScaleReading
from storage.models import Incident
from tests.agent.test_live_resource_claims import claimed_web
from tests.agent.test_scales import _database, _state_objects, _uid
from tests.core.test_disruption_scale import SCALE, crd
from tests.rules.placement_fixtures import node

FORBIDDEN = (
    'databases.db.example.com "orders" is forbidden: User "system:serviceaccount:unstick:unstick" '
    'cannot get resource "databases/scale" in API group "db.example.com" in the namespace "default"'
)


@contextlib.asynccontextmanager
async def custom_cluster(*, forbid_scale: bool = False) -> AsyncIterator[FakeCluster]:
    """A node being drained runs 3 Ready pods of a Database whose /scale says 5 (the PDB's
    stale status says 1 disruption is allowed; only the /scale read shows 0)."""
    async with FakeCluster() as cluster:
        cluster.apply(crd(scale=SCALE))
        cluster.apply(_database(5))
        for obj in _state_objects(_uid(cluster)):
            cluster.apply(obj)
        if forbid_scale:
            cluster.faults.fail(403, verb="get", kind="databases", message=FORBIDDEN, times=1000)
        yield cluster


@contextlib.asynccontextmanager
async def publishing(
    cluster: FakeCluster, tmp_path: Path
) -> AsyncIterator[tuple[DeltaPublisher, ScaleRelay]]:
    """What ``unstick watch --publish`` runs (watcher, relay, ``ready``) into a publisher
    that never sends: its buffer is what it would send. Waits for ``ready``."""
    gateway = Gateway(str(cluster.write_kubeconfig(tmp_path / "kubeconfig")), request_timeout=5)
    publisher = DeltaPublisher("c1", bootstrap="127.0.0.1:1", topic="unused", partitions=1)
    async with gateway:
        publisher.hello("1.30")
        relay = ScaleRelay(ScaleReader(gateway), publisher, debounce=0.05)
        publisher.observers.append(relay.observe)
        watcher = Watcher(gateway, publisher)
        tasks = [
            asyncio.create_task(watcher.run()),
            asyncio.create_task(announce_ready(watcher, relay, publisher)),
        ]
        try:
            async with asyncio.timeout(30):
                while not any(codec.decode(v).type == "ready" for v in publisher.buffer):
                    await asyncio.sleep(0.05)
            yield publisher, relay
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def recorded(cluster: FakeCluster, tmp_path: Path) -> list[bytes]:
    """What ``unstick watch --publish`` sends up to its ``ready`` marker (and a moment after)."""
    async with publishing(cluster, tmp_path) as (publisher, _):
        await asyncio.sleep(0.3)
        return list(publisher.buffer)


def new_fleet(sessions: Any, table: dict[bytes, bytes]) -> Fleet:
    async def dead_letter(*args: Any) -> None:
        raise AssertionError(f"dead letter: {args}")

    return Fleet(
        sessions=sessions,
        table=table,
        dead_letter=dead_letter,
        config=PipelineConfig(grace=0, debounce=0.01),
    )


async def open_incidents(sessions: Any, rule_id: str | None = None) -> list[Incident]:
    """Open incidents (of one rule, or all), by rule and fingerprint."""
    async with sessions() as s:
        rows = (await s.execute(select(Incident).order_by(Incident.rule_id, Incident.fingerprint))).scalars()
        return [i for i in rows if i.status == "open" and rule_id in (None, i.rule_id)]


Verdict = tuple[list[Incident], dict[str, Any] | None]  # open incidents, the budget's figures


def _budget(snapshot: Any) -> dict[str, Any] | None:
    pdbs = list(snapshot.pdbs.values())
    return budget_status(snapshot, pdbs[0]).as_dict() if pdbs else None


async def fleet_verdict(records: list[bytes], sessions: Any, rule_id: str) -> Verdict:
    """What a worker records from the stream: after its first analysis pass."""
    fleet = new_fleet(sessions, {})
    for offset, value in enumerate(records):
        await fleet.handle(0, offset, b"c1", value)
    rt = fleet.runtimes["c1"]
    try:
        async with asyncio.timeout(30):
            while rt.pipeline.stats.passes < 1:
                await asyncio.sleep(0.05)
        return await open_incidents(sessions, rule_id), _budget(rt.cache.state.snapshot())
    finally:
        await fleet.close()


async def agent_verdict(cluster: FakeCluster, tmp_path: Path, rule_id: str | None = None) -> Verdict:
    """What the single-process agent (``unstick watch``) records for the same cluster."""
    host = await AgentHost.open(f"sqlite+aiosqlite:///{tmp_path}/agent.db")
    try:
        agent = await ClusterAgent.connect(
            cluster="c1",
            gateway=Gateway(str(cluster.write_kubeconfig(tmp_path / "agent.kubeconfig")), request_timeout=5),
            sessions=host.sessions,
            config=PipelineConfig(grace=0, debounce=0.05, resync=0.5),
            renderer=host.renderer,
        )
        host.agents.append(agent)
        stop = asyncio.Event()
        agent.start(stop)
        try:
            async with asyncio.timeout(30):
                while agent.pipeline.stats.passes < 1:
                    await asyncio.sleep(0.05)
            return await open_incidents(host.sessions, rule_id), _budget(agent.cache.state.snapshot())
        finally:
            stop.set()
    finally:
        await host.close()


def _evidence(incidents: list[Incident], key: str) -> list[Any]:
    return [(i.rule_id, i.fingerprint, i.evidence[key]) for i in incidents]


@pytest.mark.parametrize("forbid_scale", [False, True], ids=["scale-read", "scale-forbidden"])
async def test_the_worker_budget_equals_the_live_agents(
    sessions: Any, tmp_path: Path, forbid_scale: bool
) -> None:
    async with custom_cluster(forbid_scale=forbid_scale) as cluster:
        records = await recorded(cluster, tmp_path)
        types = [codec.decode(v).type for v in records]
        assert types.index("scale") < types.index("ready")  # the first pass has the reading
        (scale,) = [codec.decode(v) for v in records if codec.decode(v).type == "scale"]
        reading = codec.scale_reading(scale)
        if forbid_scale:
            assert reading.replicas is None and reading.unknown is not None and "403" in reading.unknown
        else:
            assert (reading.kind, reading.name, reading.replicas, reading.uid) == (
                "Database",
                "orders",
                5,
                _uid(cluster),
            )
        worker_incidents, worker = await fleet_verdict(records, sessions, "pdb-blocks-eviction")
        agent_incidents, agent = await agent_verdict(cluster, tmp_path, "pdb-blocks-eviction")
    assert worker == agent and worker is not None
    assert _evidence(worker_incidents, "pdbs") == _evidence(agent_incidents, "pdbs")
    if forbid_scale:  # the PDB's own status (1 allowed): no incident, the reason in the figures
        assert worker["figures"] == "status" and "scaleSubresource" in worker["unknown"]
        assert worker_incidents == []
    else:
        assert (worker["expected_pods"], worker["desired_healthy"], worker["disruptions_allowed"]) == (
            5,
            4,
            0,
        )
        assert worker["figures"] == "computed" and len(worker_incidents) == 1


async def test_a_worker_that_takes_over_keeps_the_readings_and_the_listed_kinds(
    sessions: Any, tmp_path: Path
) -> None:
    async with custom_cluster() as cluster:
        records = await recorded(cluster, tmp_path)
    table: dict[bytes, bytes] = {}
    first = new_fleet(sessions, table)
    for offset, value in enumerate(records):
        await first.handle(0, offset, b"c1", value)
    before = first.runtimes["c1"].cache.state.snapshot()
    await first.close()
    second = new_fleet(sessions, table)
    try:
        assert second.adopt({0}) == ["c1"]
        after = second.runtimes["c1"].cache.state.snapshot()
        assert dict(after.scales) == dict(before.scales) and len(after.scales) == 1
        assert after.collected == before.collected
        assert after.holds_every("ResourceClaim", "default")
    finally:
        await second.close()


async def test_the_worker_judges_a_missing_claim_as_the_live_agent(sessions: Any, tmp_path: Path) -> None:
    async with FakeCluster() as cluster:
        for obj in [node("w-0"), *claimed_web()]:
            cluster.apply(obj)
        records = await recorded(cluster, tmp_path)
        assert "ResourceClaim" in [codec.decode(v).kind for v in records if codec.decode(v).type == "synced"]
        (worker,), _ = await fleet_verdict(records, sessions, "scheduler-silent")
        (agent,), _ = await agent_verdict(cluster, tmp_path, "scheduler-silent")
    assert worker.evidence["cause"] == agent.evidence["cause"] == "missing-resourceclaim"
    assert worker.evidence["preenqueue_status"] == agent.evidence["preenqueue_status"]


async def test_a_new_scale_target_is_read_and_sent_after_ready(tmp_path: Path) -> None:
    """A PDB created later over pods of a custom controller: the relay reads its /scale
    on the change and publishes it (the live agent reads it before its next pass)."""
    async with FakeCluster() as cluster:
        cluster.apply(crd(scale=SCALE))
        cluster.apply(_database(5))
        objs = _state_objects(_uid(cluster))
        for obj in objs:
            if obj["kind"] != "PodDisruptionBudget":
                cluster.apply(obj)
        async with publishing(cluster, tmp_path) as (publisher, relay):
            assert relay.sent == 0  # no budget: nothing to read
            (pdb,) = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
            cluster.apply(pdb)
            async with asyncio.timeout(30):
                while relay.sent == 0:
                    await asyncio.sleep(0.05)
        (scale,) = [codec.decode(v) for v in publisher.buffer if codec.decode(v).type == "scale"]
        assert codec.scale_reading(scale).replicas == 5


def test_only_pods_of_custom_controllers_are_kept_by_the_relay() -> None:
    def pod(api_version: str, *, controller: bool = True) -> dict[str, Any]:
        ref = {"apiVersion": api_version, "kind": "X", "name": "x", "uid": "u", "controller": controller}
        return {"metadata": {"name": "p", "ownerReferences": [ref]}}

    assert custom_controlled(pod("db.example.com/v1"))
    assert not custom_controlled(pod("apps/v1"))  # a ReplicaSet: read from its record
    assert not custom_controlled(pod("db.example.com/v1", controller=False))
    assert not custom_controlled(pod("v1"))
    assert not custom_controlled({"metadata": {"name": "p"}})


@pytest.mark.parametrize(
    "reading",
    [
        ScaleReading("default", "db.example.com", "Database", "orders", uid="u-1", replicas=5),
        ScaleReading("default", "db.example.com", "Database", "orders", problem="no scale"),
        ScaleReading("", "db.example.com", "Database", "orders", unknown="GET … was refused"),
        ScaleReading("default", "db.example.com", "Database", "gone"),
    ],
)
def test_a_scale_record_carries_the_reading_whole(reading: ScaleReading) -> None:
    value = codec.encode_scale("c1", 1, 7, reading)
    assert codec.scale_reading(codec.decode(value, b"c1")) == reading


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"kind": "", "name": "orders"}, "without 'kind'"),
        ({"name": None}, "without 'name'"),
        ({"namespace": 5}, "'namespace' is not a string"),
        ({"replicas": "5"}, "'replicas' is not an integer"),
        ({"replicas": True}, "'replicas' is not an integer"),
        ({"unknown": ["x"]}, "'unknown' is not a string"),
    ],
)
def test_a_malformed_scale_record_is_refused(fields: dict[str, Any], error: str) -> None:
    good = {
        "kind": "Database",
        "namespace": "default",
        "group": "db.example.com",
        "name": "orders",
        "replicas": 5,
    }
    value = codec.encode("c1", 1, 1, "scale", **{**good, **fields})
    with pytest.raises(codec.CodecError, match=error):
        codec.decode(value)
