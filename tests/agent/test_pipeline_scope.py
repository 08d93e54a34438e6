"""The pipeline's scoped passes (agent.pipeline, "Scope"): new problems first,
open incidents updated in batches, every FailedScheduling counted exactly once,
and cluster-wide changes analysed whole. A real ClusterCache fed watch deltas,
a real SQLite store; the clock is the test's."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from agent.cache import ClusterCache
from agent.fakecluster.samples import deployment, event, node, pod, replicaset
from agent.kube.watcher import Delta
from agent.pipeline import Pipeline, PipelineConfig, plan_scope
from agent.runner import AgentHost
from analyzers.findings import ObjectRef
from analyzers.snapshot import ClusterState
from storage.models import Incident

TOO_BIG = "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


def _apply(cache: ClusterCache, obj: dict[str, Any]) -> None:
    cache.apply(Delta(obj["kind"], "ADDED", obj))


def _cluster(cache: ClusterCache, workloads: int) -> dict[str, dict[str, Any]]:
    _apply(cache, node("node-a"))
    _apply(cache, node("node-b"))
    sets = {}
    for w in range(workloads):
        dep = deployment(f"app-{w}", requests={"cpu": "64"})
        rs = replicaset(dep)
        rs["spec"]["template"] = dep["spec"]["template"]  # as the Deployment controller makes it
        _apply(cache, dep)
        _apply(cache, rs)
        sets[f"app-{w}"] = rs
    return sets


class Emitter:
    """New pending pods and their FailedScheduling events (and repeats of them)."""

    def __init__(self, cache: ClusterCache, sets: dict[str, dict[str, Any]]) -> None:
        self.cache, self.sets = cache, sets
        self.events: dict[str, dict[str, Any]] = {}
        self.sent: dict[str, int] = {}  # workload -> FailedScheduling firings emitted

    def new_pod(self, workload: str, n: int) -> None:
        p = pod(
            f"{workload}-5c8d7f9b6d-{n:05d}",
            owner=self.sets[workload],
            requests={"cpu": "64"},
            unschedulable_message=TOO_BIG,
        )
        _apply(self.cache, p)
        ev = event(p, message=TOO_BIG)
        self.events[p["metadata"]["name"]] = ev
        _apply(self.cache, ev)
        self.sent[workload] = self.sent.get(workload, 0) + 1

    def repeat(self, pod_name: str) -> None:
        ev = dict(self.events[pod_name])
        ev["count"] = int(ev.get("count", 1)) + 1
        self.events[pod_name] = ev
        _apply(self.cache, ev)
        workload = pod_name.split("-5c8d")[0]
        self.sent[workload] += 1


async def _incidents(host: AgentHost) -> dict[str, Incident]:
    async with host.sessions() as session:
        rows = (await session.execute(select(Incident).where(Incident.status == "open"))).scalars()
        return {i.subject_name: i for i in rows}


def _agent(host: AgentHost, workloads: int, **config: Any) -> tuple[Pipeline, Clock, Emitter, ClusterCache]:
    """A cache with two small nodes and ``workloads`` Deployments, and a pipeline over it."""
    cache = ClusterCache(ClusterState())
    clock = Clock()
    pipeline = Pipeline(
        cache, host.sessions, PipelineConfig(grace=0, full_resync=3600, **config), clock=clock
    )
    cache.on_event = pipeline.on_event
    return pipeline, clock, Emitter(cache, _cluster(cache, workloads)), cache


async def test_a_new_problem_is_not_delayed_by_a_backlog_of_updates(host: AgentHost) -> None:
    pipeline, clock, emit, _ = _agent(host, 7, update_batch=2)
    for w in range(6):
        emit.new_pod(f"app-{w}", 0)
    first = await pipeline.run_pass()
    assert first is not None and first.scope is None  # the first pass sees the whole cluster
    assert set(await _incidents(host)) == {f"app-{w}" for w in range(6)}

    # Every open workload is touched again, and a seventh breaks.
    clock.now += 5
    for w in range(6):
        emit.new_pod(f"app-{w}", 1)
    emit.new_pod("app-6", 0)
    outcome = await pipeline.run_pass()
    assert outcome is not None and outcome.scope is not None
    assert ObjectRef("Deployment", "default", "app-6") in outcome.scope
    assert len(outcome.scope) == 1 + 2  # the new problem, and one batch of updates
    assert "app-6" in await _incidents(host)

    # The backlog drains two at a time; then every event has been counted exactly once.
    passes = 0
    while True:
        clock.now += 1
        outcome = await pipeline.run_pass()
        passes += 1
        if outcome is None or (outcome.scope is not None and len(outcome.scope) == 0):
            break
        assert passes < 10
    assert pipeline.stats.scoped_passes >= 3
    incidents = await _incidents(host)
    assert {name: i.occurrences for name, i in incidents.items()} == emit.sent


async def test_repeated_events_are_counted_once_each_across_scoped_passes(host: AgentHost) -> None:
    pipeline, clock, emit, _ = _agent(host, 3, update_batch=1)
    for w in range(3):
        emit.new_pod(f"app-{w}", 0)
    await pipeline.run_pass()
    for _ in range(4):
        clock.now += 1
        for w in range(3):
            emit.repeat(f"app-{w}-5c8d7f9b6d-00000")
        await pipeline.run_pass()
    for _ in range(12):  # let the deferred updates drain
        clock.now += 1
        await pipeline.run_pass()
    incidents = await _incidents(host)
    assert (
        {name: i.occurrences for name, i in incidents.items()}
        == emit.sent
        == {f"app-{w}": 5 for w in range(3)}
    )


async def test_a_cluster_wide_change_is_analysed_whole(host: AgentHost) -> None:
    pipeline, clock, emit, cache = _agent(host, 2)
    emit.new_pod("app-0", 0)
    await pipeline.run_pass()
    clock.now += 1
    big = node("node-c")
    big["status"]["allocatable"]["cpu"] = "96"
    big["status"]["capacity"]["cpu"] = "96"
    _apply(cache, big)  # a node arrives: every pending pod's verdict may change
    outcome = await pipeline.run_pass()
    assert outcome is not None and outcome.scope is None
    assert await _incidents(host) == {}  # the pod fits node-c now: resolved


async def test_a_node_taint_re_analyses_only_the_workloads_it_can_move(host: AgentHost) -> None:
    """node-b is tainted dedicated=batch: app-1's pods tolerate it (their verdict on node-b
    stays "Insufficient cpu"), app-0's do not (a second failing filter there). The pass
    analyses app-0 alone; app-1's incident is left as it was. A change of node-b's images
    moves no verdict of a pod that fits nowhere: nothing is analysed."""
    pipeline, clock, emit, cache = _agent(host, 2)
    emit.new_pod("app-0", 0)
    p = pod(
        "app-1-5c8d7f9b6d-00000",
        owner=emit.sets["app-1"],
        requests={"cpu": "64"},
        unschedulable_message=TOO_BIG,
    )
    p["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    _apply(cache, p)
    await pipeline.run_pass()
    before = await _incidents(host)
    assert set(before) == {"app-0", "app-1"}

    clock.now += 1
    tainted = node("node-b")
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    _apply(cache, tainted)
    outcome = await pipeline.run_pass()
    assert outcome is not None and outcome.scope == {ObjectRef("Deployment", "default", "app-0")}
    after = await _incidents(host)
    assert after["app-1"].last_seen == before["app-1"].last_seen  # not re-evaluated
    assert after["app-0"].last_seen > before["app-0"].last_seen

    clock.now += 1
    tainted["status"]["images"] = [{"names": ["registry.example/app:1"], "sizeBytes": 10_000_000}]
    _apply(cache, tainted)
    outcome = await pipeline.run_pass()
    assert outcome is not None and outcome.scope == frozenset()


def test_plan_scope_takes_new_workloads_then_a_batch_of_known_ones_oldest_first() -> None:
    state = ClusterState()
    cache = ClusterCache(state)
    sets = _cluster(cache, 4)
    before = state.snapshot()
    emit = Emitter(cache, sets)
    for w in range(4):
        emit.new_pod(f"app-{w}", 0)
    after = state.snapshot()
    ref = {w: ObjectRef("Deployment", "default", f"app-{w}") for w in range(5)}
    scope = plan_scope(
        after,
        before,
        full=False,
        known=frozenset({ref[0], ref[1], ref[2]}),
        carried=(ref[4],),
        always=frozenset(),
        batch=2,
    )
    assert scope.workloads == {ref[3], ref[4], ref[0]}
    assert scope.deferred == (ref[1], ref[2])
    assert (
        plan_scope(
            after, before, full=True, known=frozenset(), carried=(), always=frozenset(), batch=2
        ).workloads
        is None
    )
    assert (
        plan_scope(
            after, None, full=False, known=frozenset(), carried=(), always=frozenset(), batch=2
        ).workloads
        is None
    )
