"""The agent watches a cluster, opens an incident when the seed-1 rollout
deadlocks and resolves it when the fix lands; faults in the watch do not lose
or duplicate anything."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from agent.fakecluster.scenario import Scenario, play_step
from agent.kube.gateway import Gateway
from agent.pipeline import PipelineConfig
from agent.runner import AgentHost, ClusterAgent
from tests.agent.conftest import first_of, incidents
from tests.waiting import eventually


async def start_agent(host: AgentHost, scenario: Scenario, tmp_path: Path, **config: object):
    cluster = scenario.cluster(bookmark_interval=1)
    await cluster.start()
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    agent = await ClusterAgent.connect(
        cluster="seed-1",
        gateway=Gateway(str(kubeconfig), request_timeout=5, connect_timeout=2, watch_idle_timeout=5),
        sessions=host.sessions,
        config=PipelineConfig(grace=0, debounce=0.05, resync=0.5, **config),  # type: ignore[arg-type]
        renderer=host.renderer,
    )
    host.agents.append(agent)
    return cluster, agent


async def test_incident_opens_on_the_deadlock_and_resolves_with_the_fix(host, gpu_scenario, tmp_path) -> None:
    cluster, agent = await start_agent(host, gpu_scenario, tmp_path)
    stop = asyncio.Event()
    try:
        agent.start(stop)
        await asyncio.wait_for(agent.watcher.wait_synced(), 10)
        # read from /version: the release the scenario was recorded from
        assert (
            agent.cluster
            and agent.pipeline.config.kube_version == gpu_scenario.server_version.removeprefix("v")
        )
        # Healthy at first: a pass runs and opens nothing.
        await eventually(lambda: agent.pipeline.stats.passes >= 1)
        assert await incidents(host) == []

        play_step(cluster, gpu_scenario.timeline[0])  # the rollout starts and deadlocks
        (opened,) = await eventually(lambda: incidents(host))
        deployment = first_of(gpu_scenario, "Deployment")["metadata"]
        assert (
            opened.rule_id,
            opened.status,
            opened.subject_kind,
            opened.namespace,
            opened.subject_name,
        ) == (
            "rollout-surge-deadlock",
            "open",
            "Deployment",
            deployment["namespace"],
            deployment["name"],
        )
        assert opened.cluster == "seed-1"
        assert "rounds up to a surge of 1 and down to 0 unavailable" in opened.explanation
        # The stored remedy patches exactly the strategy the analysis simulated.
        first = opened.remedies[0]
        strategy = yaml.safe_load(first["yaml"])["spec"]["strategy"]
        assert strategy["rollingUpdate"]["maxSurge"] == 0
        assert strategy["rollingUpdate"]["maxUnavailable"] == 1
        (gpu_node,) = [
            n["metadata"]["name"]
            for n in gpu_scenario.objects
            if "nvidia.com/gpu" in n.get("status", {}).get("allocatable", {})
        ]
        assert (
            first["verified"]
            and f"scaled down first: the new pod fits on {gpu_node}" in first["verification"]
        )

        for step in gpu_scenario.timeline[1:]:  # maxSurge 0 / maxUnavailable 1, old pod gone, new pod runs
            play_step(cluster, step)

        async def resolved():
            rows = await incidents(host)
            return rows if rows and rows[0].status == "resolved" else None

        (done,) = await eventually(resolved)
        assert done.id == opened.id and done.resolved_at is not None
    finally:
        stop.set()
        await cluster.stop()


async def test_410_and_cut_streams_mid_watch_lose_nothing_and_duplicate_nothing(
    host, gpu_scenario, tmp_path
) -> None:
    cluster, agent = await start_agent(host, gpu_scenario, tmp_path)
    stop = asyncio.Event()
    try:
        agent.start(stop)
        await asyncio.wait_for(agent.watcher.wait_synced(), 10)
        for kind in ("Pod", "ReplicaSet", "Event"):
            await asyncio.wait_for(cluster.wait_for_watches(kind), 10)
        cluster.faults.expire_watches("Pod")  # 410 Gone in the middle of the pod watch
        cluster.faults.cut_watches("ReplicaSet")  # a stream dropped mid-object
        cluster.faults.throttle(retry_after=0.2, verb="watch", kind="Deployment")
        cluster.faults.inject_line(b'{"type": "ADDED", "object": {"kind": "Pod", "metadata": ', kind="Event")
        play_step(cluster, gpu_scenario.timeline[0])
        (opened,) = await eventually(lambda: incidents(host))
        stats = agent.watcher.stats()
        assert stats["Pod"].relists >= 1
        # The state the agent holds equals the cluster's, object for object.
        await eventually(lambda: len(agent.cache.state.snapshot().pods) == len(cluster.objects("Pod")))
        cluster.faults.expire_watches()
        await asyncio.sleep(1.0)
        rows = await incidents(host)
        assert [r.id for r in rows] == [opened.id] and rows[0].status == "open"
    finally:
        stop.set()
        await cluster.stop()


async def test_malformed_objects_are_counted_and_skipped(host, gpu_scenario, tmp_path) -> None:
    cluster, agent = await start_agent(host, gpu_scenario, tmp_path)
    stop = asyncio.Event()
    try:
        agent.start(stop)
        await asyncio.wait_for(agent.watcher.wait_synced(), 10)
        namespace = first_of(gpu_scenario, "Deployment")["metadata"]["namespace"]
        bad = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "broken", "namespace": namespace, "uid": "u-broken"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "a lot"}}}]},
        }
        cluster.apply(bad)
        await eventually(lambda: agent.cache.stats.malformed >= 1)
        play_step(cluster, gpu_scenario.timeline[0])
        (opened,) = await eventually(lambda: incidents(host))
        assert opened.rule_id == "rollout-surge-deadlock"
        assert (namespace, "broken") not in agent.cache.state.snapshot().pods
    finally:
        stop.set()
        await cluster.stop()


async def test_demo_once_json_shows_every_seed_incident_opened_and_resolved(tmp_path) -> None:
    import json
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent",
        "demo",
        "--once",
        "--json",
        "--db",
        f"sqlite+aiosqlite:///{tmp_path}/d.db",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode == 0, err.decode()
    items = json.loads(out)
    by_rule = {i["rule_id"]: i for i in items}
    assert {
        "rollout-surge-deadlock",
        "pdb-blocks-eviction",
        "requests-missing-load-skew",
        "node-selector-mismatch",
    } <= set(by_rule)
    for inc in items:
        assert set(inc) >= {
            "id",
            "fingerprint",
            "rule_id",
            "severity",
            "status",
            "subject",
            "title",
            "explanation",
            "evidence",
            "remedies",
            "first_seen",
            "last_seen",
            "resolved_at",
            "occurrences",
        }
        assert inc["status"] == "resolved" and inc["resolved_at"]
        assert any(r["verified"] for r in inc["remedies"])
