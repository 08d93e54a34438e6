"""Autoscaler awareness, end to end: the real agent against the fake Kubernetes API
(kubernetes-asyncio over HTTP) and a real SQLite database. A pending pod that
cluster-autoscaler is adding a node for becomes an incident *waiting for scale-up*
(stored, not paged); the page comes when the scale-up fails or takes too long,
and never when the new node fixes it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent.fakecluster.scenario import Scenario, play_step
from agent.fakecluster.server import FakeCluster
from agent.kube.gateway import Gateway
from agent.pipeline import PipelineConfig
from agent.runner import AgentHost, ClusterAgent
from storage.models import Incident, Notification, TimelineEntry
from tests.agent.conftest import incidents, stuck_pod
from tests.waiting import eventually

TRIGGERED = "pod triggered scale-up: [{eks-gpu-pool 1->2 (max: 4)}]"
FAILED = "Node group eks-gpu-pool increase failed: InsufficientInstanceCapacity"


async def notifications(host: AgentHost) -> list[tuple[int, str, str]]:
    async with host.sessions() as session:
        rows = await session.execute(
            select(Notification.incident_id, Notification.sink, Notification.event).order_by(Notification.id)
        )
        return [(i, sink, event) for i, sink, event in rows]


async def timeline(host: AgentHost, incident_id: int) -> list[tuple[str, str, dict[str, Any]]]:
    async with host.sessions() as session:
        rows = await session.execute(
            select(TimelineEntry.kind, TimelineEntry.message, TimelineEntry.detail)
            .where(TimelineEntry.incident_id == incident_id)
            .order_by(TimelineEntry.id)
        )
        return [(k, m, d) for k, m, d in rows]


def autoscaler_event(cluster: FakeCluster, scenario: Scenario, reason: str, message: str) -> None:
    """cluster-autoscaler's event about the pod the scenario's rollout leaves Pending."""
    meta = stuck_pod(scenario)["metadata"]
    pod = {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"]}
    cluster.record_event(pod, reason, message, type="Normal", component="cluster-autoscaler")


@pytest.fixture
def scale_up_timeout() -> float:
    return 600.0


@pytest.fixture
async def running(
    host: AgentHost, gpu_scenario: Scenario, tmp_path: Path, scale_up_timeout: float
) -> AsyncIterator[tuple[FakeCluster, ClusterAgent]]:
    """The agent with its pipeline loop running, paging to one sink."""
    cluster = gpu_scenario.cluster(bookmark_interval=1)
    await cluster.start()
    stop = asyncio.Event()
    try:
        agent = await ClusterAgent.connect(
            cluster="seed-1",
            gateway=Gateway(
                str(cluster.write_kubeconfig(tmp_path / "kubeconfig")),
                request_timeout=5,
                connect_timeout=2,
                watch_idle_timeout=5,
            ),
            sessions=host.sessions,
            config=PipelineConfig(
                grace=0, debounce=0.05, resync=0.2, scale_up_timeout=scale_up_timeout, sinks=("slack",)
            ),
            renderer=host.renderer,
        )
        host.agents.append(agent)
        agent.start(stop)
        await asyncio.wait_for(agent.watcher.wait_synced(), 10)
        yield cluster, agent
    finally:
        stop.set()
        await cluster.stop()


async def start_waiting(
    host: AgentHost, cluster: FakeCluster, agent: ClusterAgent, scenario: Scenario
) -> Incident:
    """cluster-autoscaler answers the pending pod with TriggeredScaleUp; the rollout deadlocks.

    The autoscaler's event is in the agent's cache before the pod goes pending, so no pass
    sees the deadlock without it (such a pass would rightly page at once)."""
    autoscaler_event(cluster, scenario, "TriggeredScaleUp", TRIGGERED)
    await eventually(
        lambda: any(e.reason == "TriggeredScaleUp" for e in agent.cache.state.snapshot().events.values())
    )
    play_step(cluster, scenario.timeline[0])
    (opened,) = await eventually(lambda: incidents(host))
    return opened


def metric(host: AgentHost, name: str) -> float | None:
    return host.registry.get_sample_value(name, {"cluster": "seed-1"})


async def test_scale_up_waits_then_failed_scale_up_pages_exactly_once(
    host: AgentHost, gpu_scenario: Scenario, running: tuple[FakeCluster, ClusterAgent]
) -> None:
    cluster, agent = running
    opened = await start_waiting(host, cluster, agent, gpu_scenario)
    assert (opened.rule_id, opened.status, opened.waiting_for) == (
        "rollout-surge-deadlock",
        "open",
        "scale-up",
    )
    assert opened.waiting_since is not None
    await asyncio.sleep(0.5)  # several passes while waiting: still nobody paged
    assert await notifications(host) == []
    assert [k for k, _, _ in await timeline(host, opened.id)] == ["opened", "waiting"]
    assert metric(host, "unstick_incidents_waiting") == 1.0
    assert metric(host, "unstick_findings_held") == 0.0  # waiting is tracked, not held back

    autoscaler_event(cluster, gpu_scenario, "FailedScaleUp", FAILED)

    async def escalated() -> list[tuple[int, str, str]]:
        return await notifications(host)

    assert await eventually(escalated) == [(opened.id, "slack", "escalated")]
    (inc,) = await incidents(host)
    assert inc.id == opened.id and inc.status == "open" and inc.waiting_for is None
    entries = await timeline(host, inc.id)
    escalation = [e for e in entries if e[0] == "escalated"]
    assert len(escalation) == 1 and escalation[0][1] == FAILED and escalation[0][2]["for"] == "scale-up"
    assert metric(host, "unstick_incidents_escalated_total") == 1.0
    await eventually(lambda: metric(host, "unstick_incidents_waiting") == 0.0)

    # More passes and the autoscaler repeating itself add no page.
    autoscaler_event(cluster, gpu_scenario, "FailedScaleUp", FAILED)
    await asyncio.sleep(0.6)
    assert await notifications(host) == [(opened.id, "slack", "escalated")]

    # Paged, so the fix is news: one resolve notification.
    for step in gpu_scenario.timeline[1:]:
        play_step(cluster, step)

    async def resolved() -> list[tuple[int, str, str]] | None:
        rows = await notifications(host)
        return rows if len(rows) == 2 else None

    assert await eventually(resolved) == [(opened.id, "slack", "escalated"), (opened.id, "slack", "resolved")]


@pytest.mark.parametrize("scale_up_timeout", [1.5])
async def test_a_scale_up_that_takes_too_long_pages_without_any_new_event(
    host: AgentHost, gpu_scenario: Scenario, running: tuple[FakeCluster, ClusterAgent]
) -> None:
    cluster, agent = running
    opened = await start_waiting(host, cluster, agent, gpu_scenario)
    assert opened.waiting_for == "scale-up" and await notifications(host) == []
    # Nothing changes in the cluster; the resync passes notice the timeout.
    assert await eventually(lambda: notifications(host), timeout=10) == [(opened.id, "slack", "escalated")]
    (inc,) = await incidents(host)
    assert inc.waiting_for is None
    assert [k for k, _, _ in await timeline(host, inc.id)][:3] == ["opened", "waiting", "escalated"]


async def test_the_new_node_fixes_it_and_nobody_is_ever_paged(
    host: AgentHost, gpu_scenario: Scenario, running: tuple[FakeCluster, ClusterAgent]
) -> None:
    cluster, agent = running
    opened = await start_waiting(host, cluster, agent, gpu_scenario)
    for step in gpu_scenario.timeline[1:]:
        play_step(cluster, step)

    async def resolved() -> list[Incident] | None:
        rows = await incidents(host)
        return rows if rows and rows[0].status == "resolved" else None

    (done,) = await eventually(resolved)
    assert done.id == opened.id and done.waiting_for == "scale-up"  # kept: it never paged anyone
    entries = await timeline(host, done.id)
    assert entries[-1][0] == "resolved" and entries[-1][2] == {"waiting_for": "scale-up"}
    await asyncio.sleep(0.3)
    assert await notifications(host) == []
