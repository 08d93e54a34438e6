"""Boundaries of the live pipeline that a wrong comparison would cross: the
grace period (held while younger, tracked once it has passed, the oldest pod
of a workload decides), the count an event's trigger is keyed by, and the
order of autoscaler events. A real ClusterCache fed watch deltas, a real
SQLite store, the test's clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from agent.cache import ClusterCache
from agent.fakecluster.samples import deployment, event, node, pod, replicaset
from agent.kube.watcher import Delta
from agent.pipeline import Pipeline, PipelineConfig
from agent.runner import AgentHost
from analyzers.ingest import Decoder, trigger_from_event
from analyzers.snapshot import ClusterState
from storage.models import Incident, Notification

TOO_BIG = (
    "0/2 nodes are available: 2 Insufficient cpu. "
    "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
)
T0 = 1_900_000_000.0  # when the first pod started waiting
GRACE = 60.0


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Cluster:
    """Two small nodes and one Deployment whose pods ask for more than a node has."""

    def __init__(self, host: AgentHost, clock: Clock, **config: Any) -> None:
        self.cache = ClusterCache(ClusterState())
        self.pipeline = Pipeline(
            self.cache,
            host.sessions,
            PipelineConfig(full_resync=3600, sinks=("slack",), **config),
            clock=clock,
        )
        self.cache.on_event = self.pipeline.on_event
        for name in ("node-a", "node-b"):
            self.apply(node(name))
        dep = deployment("trainer", requests={"cpu": "64"})
        self.rs = replicaset(dep)
        self.rs["spec"]["template"] = dep["spec"]["template"]
        self.apply(dep)
        self.apply(self.rs)

    def apply(self, obj: dict[str, Any]) -> None:
        self.cache.apply(Delta(obj["kind"], "ADDED", obj))

    def pending_pod(self, n: int, since: float) -> dict[str, Any]:
        p = pod(
            f"trainer-5c8d7f9b6d-{n:05d}",
            owner=self.rs,
            requests={"cpu": "64"},
            unschedulable_message=TOO_BIG,
        )
        p["metadata"]["creationTimestamp"] = iso(since)
        p["status"]["conditions"][0]["lastTransitionTime"] = iso(since)
        self.apply(p)
        ev = event(p, message=TOO_BIG)
        ev["firstTimestamp"] = ev["lastTimestamp"] = iso(since)
        self.apply(ev)
        return p

    def autoscaler(self, p: dict[str, Any], reason: str, message: str, at: float) -> None:
        ev = event(p, reason, message, type="Normal", component="cluster-autoscaler")
        ev["firstTimestamp"] = ev["lastTimestamp"] = iso(at)
        self.apply(ev)


async def open_incidents(host: AgentHost) -> list[Incident]:
    async with host.sessions() as session:
        return list((await session.execute(select(Incident).where(Incident.status == "open"))).scalars())


async def pages(host: AgentHost) -> list[tuple[int, str]]:
    async with host.sessions() as session:
        rows = await session.execute(
            select(Notification.incident_id, Notification.event).order_by(Notification.id)
        )
        return [(i, e) for i, e in rows]


async def test_a_finding_younger_than_the_grace_period_is_held_then_tracked(host: AgentHost) -> None:
    clock = Clock(T0)
    cluster = Cluster(host, clock, grace=GRACE)
    cluster.pending_pod(0, since=T0)
    for age in (0.0, 30.0, GRACE - 1):
        clock.now = T0 + age
        outcome = await cluster.pipeline.run_pass()
        assert outcome is not None, age  # held findings are looked at again on every pass
        assert [f.rule_id for f, _ in outcome.held] == ["insufficient-resources"], age
        assert outcome.tracked == () and await open_incidents(host) == [], age
        assert cluster.pipeline.stats.held == 1
    clock.now = T0 + GRACE  # exactly the grace period: it has passed
    outcome = await cluster.pipeline.run_pass()
    assert outcome is not None and outcome.held == ()
    assert [f.rule_id for f in outcome.tracked] == ["insufficient-resources"]
    (incident,) = await open_incidents(host)
    assert incident.subject_name == "trainer"
    assert await pages(host) == [(incident.id, "opened")]


@pytest.mark.parametrize(
    ("ages", "tracked"),
    [
        ((GRACE + 40, 5.0), True),  # the oldest pod waited past the grace period: the workload is stuck
        ((5.0, GRACE + 40), True),  # in whichever order the pods arrive
        ((5.0, 20.0), False),  # every pod is young
    ],
)
async def test_with_several_pending_pods_the_oldest_decides(
    host: AgentHost, ages: tuple[float, float], tracked: bool
) -> None:
    now = T0 + 1000
    clock = Clock(now)
    cluster = Cluster(host, clock, grace=GRACE)
    for n, age in enumerate(ages):
        cluster.pending_pod(n, since=now - age)
    outcome = await cluster.pipeline.run_pass()
    assert outcome is not None
    (finding,) = [*outcome.tracked, *(f for f, _ in outcome.held)]
    assert len(finding.pods) == 2  # one finding for the workload, both pods in it
    assert bool(outcome.tracked) is tracked
    assert len(await open_incidents(host)) == (1 if tracked else 0)


def test_an_event_with_both_counts_is_keyed_by_the_series_count() -> None:
    # events.k8s.io/v1 EventSeries.count is the live count of an aggregated event;
    # the core/v1 count beside it is the deprecated copy the recorder stops updating.
    p = pod("trainer-5c8d7f9b6d-00000", unschedulable_message=TOO_BIG)
    ev = event(p, message=TOO_BIG, count=3)
    ev["series"] = {"count": 7, "lastObservedTime": "2024-06-01T12:05:00.000000Z"}
    assert trigger_from_event(ev).key.endswith(":7")
    assert Decoder().event(ev).count == 7
    del ev["series"]
    assert trigger_from_event(ev).key.endswith(":3")
    assert Decoder().event(ev).count == 3
    regarding = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "ml", "uid": "u-1"},
        "regarding": {"kind": "Pod", "namespace": "ml", "name": "p"},
        "deprecatedCount": 2,
        "series": {"count": 9, "lastObservedTime": "2024-06-01T12:05:00.000000Z"},
        "note": TOO_BIG,
        "reason": "FailedScheduling",
    }
    assert trigger_from_event(regarding).key == "u-1:9"
    assert Decoder().event(regarding).count == 9


async def test_an_old_failed_scale_up_then_a_newer_triggered_one_waits_and_pages_nobody(
    host: AgentHost,
) -> None:
    clock = Clock(T0 + 120)
    cluster = Cluster(host, clock, grace=0, scale_up_timeout=600)
    p = cluster.pending_pod(0, since=T0)
    cluster.autoscaler(
        p, "FailedScaleUp", "Node group pool increase failed: InsufficientInstanceCapacity", at=T0 + 10
    )
    cluster.autoscaler(p, "TriggeredScaleUp", "pod triggered scale-up: [{pool 1->2 (max: 4)}]", at=T0 + 60)
    await cluster.pipeline.run_pass()
    (incident,) = await open_incidents(host)
    assert incident.waiting_for == "scale-up"
    assert await pages(host) == []


async def test_a_failed_scale_up_newer_than_the_trigger_pages(host: AgentHost) -> None:
    # The same two events the other way round: the scale-up failed after it started.
    clock = Clock(T0 + 120)
    cluster = Cluster(host, clock, grace=0, scale_up_timeout=600)
    p = cluster.pending_pod(0, since=T0)
    cluster.autoscaler(p, "TriggeredScaleUp", "pod triggered scale-up: [{pool 1->2 (max: 4)}]", at=T0 + 10)
    cluster.autoscaler(
        p, "FailedScaleUp", "Node group pool increase failed: InsufficientInstanceCapacity", at=T0 + 60
    )
    await cluster.pipeline.run_pass()
    (incident,) = await open_incidents(host)
    assert incident.waiting_for is None
    assert await pages(host) == [(incident.id, "opened")]
