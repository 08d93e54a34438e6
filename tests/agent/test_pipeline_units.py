"""The live pipeline's small decisions, each at its boundary: when a pod started
waiting, whether an autoscaler is still working for it, which open incidents a
pass knows of, when a pass is due, what it counts, and that its loop survives a
failing pass. A real ClusterCache fed watch deltas, a real SQLite store, the
test's clock (the boundaries found by ``bench/mutation.py agent/pipeline.py``)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import UTC, datetime, timedelta

import pytest

from agent.fakecluster.samples import deployment, pod, replicaset
from agent.pipeline import PassOutcome, open_incidents, pending_since, scale_up_state
from agent.runner import AgentHost
from analyzers.findings import ObjectRef
from analyzers.ingest import Decoder
from storage.models import Incident, IncidentStatus
from tests.agent.test_pipeline_boundaries import GRACE, T0, TOO_BIG, Clock, Cluster, iso


def decoded_pod(*, created: float, transition: float | None, status: str = "False") -> object:
    p = pod("web-0", unschedulable_message=TOO_BIG)
    p["metadata"]["creationTimestamp"] = iso(created)
    cond = p["status"]["conditions"][0]
    cond["status"] = status
    if transition is None:
        cond.pop("lastTransitionTime", None)
    else:
        cond["lastTransitionTime"] = iso(transition)
    return Decoder().pod(p)


def test_a_pod_waits_since_its_unschedulable_transition_else_since_its_creation() -> None:
    assert pending_since(decoded_pod(created=T0, transition=T0 + 300)) == T0 + 300  # type: ignore[arg-type]
    assert pending_since(decoded_pod(created=T0, transition=None)) == T0  # type: ignore[arg-type]
    # A PodScheduled=True condition's transition is not when it started waiting.
    assert pending_since(decoded_pod(created=T0, transition=T0 + 300, status="True")) == T0  # type: ignore[arg-type]


def test_scale_up_state_at_its_boundaries(host: AgentHost) -> None:
    cluster = Cluster(host, Clock(T0))
    p = cluster.pending_pod(0, since=T0)
    snapshot = cluster.cache.state.snapshot()
    pods = [snapshot.pods[("default", p["metadata"]["name"])]]
    assert scale_up_state(snapshot, pods, T0, 600) is None  # no autoscaler spoke
    cluster.autoscaler(p, "TriggeredScaleUp", "pod triggered scale-up: [{pool 1->2 (max: 4)}]", at=T0 + 10)
    snapshot = cluster.cache.state.snapshot()
    assert scale_up_state(snapshot, pods, T0 + 10 + 599, 600) == "waiting"
    assert scale_up_state(snapshot, pods, T0 + 10 + 600, 600) == "failed"  # exactly the timeout: given up
    # A failure reported in the same second as the scale-up started is about that scale-up.
    cluster.autoscaler(p, "FailedScaleUp", "Node group pool increase failed: quota", at=T0 + 10)
    assert scale_up_state(cluster.cache.state.snapshot(), pods, T0 + 20, 600) == "failed"


async def test_open_incidents_are_this_clusters_open_ones(host: AgentHost) -> None:
    now = datetime.fromtimestamp(T0, UTC)

    def incident(cluster: str, name: str, status: str) -> Incident:
        return Incident(
            cluster=cluster,
            fingerprint=f"fp-{cluster}-{name}",
            rule_id="insufficient-resources",
            cause="insufficient-resources",
            severity="critical",
            status=status,
            subject_kind="Deployment",
            namespace="shop",
            subject_name=name,
            title=name,
            explanation=name,
            evidence={},
            remedies=[],
            pods=[],
            first_seen=now,
            last_seen=now,
            occurrences=1,
            last_message=TOO_BIG,
            resolved_at=now + timedelta(minutes=1) if status == IncidentStatus.RESOLVED else None,
        )

    async with host.sessions() as session, session.begin():
        session.add_all(
            [
                incident("prod", "web", IncidentStatus.OPEN),
                incident("prod", "old", IncidentStatus.RESOLVED),
                incident("staging", "web", IncidentStatus.OPEN),
            ]
        )
    assert await open_incidents(host.sessions, "prod") == {
        "fp-prod-web": ObjectRef("Deployment", "shop", "web")
    }


async def test_passes_run_when_due_and_count_what_they_did(host: AgentHost) -> None:
    clock = Clock(T0 + 1000)
    seen: list[PassOutcome] = []

    async def on_pass(outcome: PassOutcome) -> None:  # an awaitable on_pass is awaited
        seen.append(outcome)

    cluster = Cluster(host, clock, grace=0)
    cluster.pipeline.on_pass = on_pass
    assert cluster.pipeline.caught_up is False  # the cache has changes no pass has seen
    cluster.pending_pod(0, since=T0)  # its FailedScheduling event is a trigger
    assert cluster.pipeline.stats.triggers == 1
    first = await cluster.pipeline.run_pass()
    assert first is not None and first.scope is None  # the first pass looks at the whole cluster
    assert cluster.pipeline.caught_up is True
    assert (cluster.pipeline.stats.passes, cluster.pipeline.stats.scoped_passes) == (1, 0)
    assert 0 <= cluster.pipeline.stats.last_pass_seconds < 60
    assert seen == [first]
    assert await cluster.pipeline.run_pass() is None  # nothing changed
    # A new trigger alone (no object changed) makes a pass due.
    cluster.pipeline.on_event({"reason": "FailedScheduling", **_event_identity(cluster)})
    assert cluster.pipeline.caught_up is False
    assert await cluster.pipeline.run_pass() is not None
    assert cluster.pipeline.stats.passes == 2


def _event_identity(cluster: Cluster) -> dict[str, object]:
    return {
        "metadata": {"name": "web.1", "namespace": "default", "uid": "ev-extra"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "trainer-5c8d7f9b6d-00000"},
        "count": 9,
    }


async def test_a_whole_cluster_pass_is_due_exactly_after_full_resync(host: AgentHost) -> None:
    clock = Clock(T0 + 1000)
    cluster = Cluster(host, clock, grace=0)
    cluster.pipeline.config = type(cluster.pipeline.config)(full_resync=600, sinks=("slack",), grace=0)
    cluster.pending_pod(0, since=T0)
    # A second stuck workload, which the scoped pass below does not touch.
    batch = deployment("batch", requests={"cpu": "64"})
    batch_rs = replicaset(batch)
    batch_rs["spec"]["template"] = batch["spec"]["template"]
    cluster.apply(batch)
    cluster.apply(batch_rs)
    cluster.apply(
        pod("batch-5c8d7f9b6d-00000", owner=batch_rs, requests={"cpu": "64"}, unschedulable_message=TOO_BIG)
    )
    assert (await cluster.pipeline.run_pass()).scope is None  # type: ignore[union-attr]
    both = {ObjectRef("Deployment", "default", "trainer"), ObjectRef("Deployment", "default", "batch")}
    assert set(cluster.pipeline._open.values()) == both
    clock.now += 599
    cluster.pending_pod(1, since=T0)
    scoped = await cluster.pipeline.run_pass()
    assert scoped is not None and scoped.scope == frozenset({ObjectRef("Deployment", "default", "trainer")})
    assert cluster.pipeline.stats.scoped_passes == 1
    # The open incident of the workload the scoped pass did not look at stays known.
    assert set(cluster.pipeline._open.values()) == both
    clock.now += 1  # 600 s after the last whole pass
    cluster.pending_pod(2, since=T0)
    full = await cluster.pipeline.run_pass()
    assert full is not None and full.scope is None


async def test_the_loop_survives_a_failing_pass_and_checks_reminders_on_time(host: AgentHost) -> None:
    clock = Clock(T0)
    cluster = Cluster(host, clock, grace=GRACE, resync=0.01, debounce=0.0, reminder_check=60.0)
    pipeline = cluster.pipeline
    calls: list[str] = []
    real_pass, real_reminders = pipeline.run_pass, pipeline.send_reminders

    async def failing_pass() -> PassOutcome | None:
        calls.append("pass")
        if calls.count("pass") == 1:
            raise RuntimeError("database went away")
        return await real_pass()

    async def reminders() -> list[int]:
        calls.append(f"reminders@{clock.now - T0:.0f}")
        return await real_reminders()

    pipeline.run_pass = failing_pass  # type: ignore[method-assign]
    pipeline.send_reminders = reminders  # type: ignore[method-assign]
    stop = asyncio.Event()
    loop = asyncio.create_task(pipeline.run(stop))
    try:
        while calls.count("pass") < 3:
            await asyncio.sleep(0.01)
        assert pipeline.stats.failed_passes == 1  # counted, and the loop went on
        assert calls[1] == "reminders@0"  # never checked before: due at once
        before = calls.count("reminders@0")
        clock.now = T0 + 59.5
        await asyncio.sleep(0.1)
        assert not any(c.startswith("reminders@59") for c in calls)
        clock.now = T0 + 60  # exactly reminder_check after the last look
        while not any(c == "reminders@60" for c in calls):
            await asyncio.sleep(0.01)
        assert before >= 1
    finally:
        stop.set()
        await asyncio.wait_for(loop, 10)


async def test_incidents_without_a_sink_are_logged_once_per_pass(
    host: AgentHost, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = Cluster(host, Clock(T0 + 1000), grace=0)
    cluster.pending_pod(0, since=T0)
    cluster.pipeline.config = dataclasses.replace(cluster.pipeline.config, sinks=())
    with caplog.at_level(logging.WARNING, logger="agent.pipeline"):
        await cluster.pipeline.run_pass()
    assert [r.getMessage() for r in caplog.records] == [
        "incidents: 1 opened, 0 resolved, 0 root cause changed (no notification sink configured)"
    ]
    caplog.clear()
    cluster.pending_pod(1, since=T0)  # nothing opens, resolves or changes cause: nothing to say
    with caplog.at_level(logging.WARNING, logger="agent.pipeline"):
        assert await cluster.pipeline.run_pass() is not None
    assert caplog.records == []
