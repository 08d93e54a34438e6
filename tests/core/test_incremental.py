"""Incremental analysis equals a full pass: for any sequence of cluster changes, re-analysing
only the workloads ``analyzers.scope.affected_workloads`` names (or everything, when it says
the change is cluster-wide) and keeping every other workload's findings from before leaves
exactly the findings a full analysis of the new state has (what ``agent.pipeline`` relies on
when it resolves only the incidents of the subjects a scoped pass evaluated)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.findings import ObjectRef
from analyzers.report import build_report, deployment_reports
from analyzers.rollout import rollouts_taking_no_pod_down
from analyzers.rules.pdb_blocks_eviction import draining_nodes
from analyzers.scope import affected_workloads, carry_over, changes
from analyzers.snapshot import ClusterSnapshot, ClusterState

from ..simulator.builders import node, pod

NOW = 1_700_000_000.0
WORKLOADS = ("web", "api", "batch")
NODES = ("n1", "n2")
ZONE = "topology.kubernetes.io/zone"
# What each workload's pods ask of a node beyond cpu, so that a node's taints and labels
# move some workloads' verdicts and not others': web tolerates dedicated=web, api must
# run in zone a, batch spreads over zones.
PLACEMENT: dict[str, dict[str, Any]] = {
    "web": {
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}]
    },
    "api": {"node_selector": {ZONE: "a"}},
    "batch": {
        "spread": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "batch"}},
            }
        ]
    },
}


def replicaset(deployment: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{deployment}-rs",
            "namespace": "default",
            "uid": f"{deployment}-rs",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": deployment,
                    "uid": deployment,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": deployment}},
            "template": {
                "metadata": {"labels": {"app": deployment}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


def member(workload: str, index: int, cpu: int, bound: str | None) -> dict[str, Any]:
    obj = pod(
        f"{workload}-rs-{index}",
        node_name=bound or "",
        requests={"cpu": str(cpu)},
        labels={"app": workload},
        **PLACEMENT[workload],
    )
    obj["metadata"]["uid"] = f"{workload}-{index}"
    obj["metadata"]["creationTimestamp"] = "2023-11-14T22:00:00Z"
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": f"{workload}-rs",
            "uid": f"{workload}-rs",
            "controller": True,
        }
    ]
    if not bound:
        obj["status"] = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "lastTransitionTime": "2023-11-14T22:00:00Z",
                    "message": f"0/{len(NODES)} nodes are available: {len(NODES)} Insufficient cpu. preemption: "
                    f"0/{len(NODES)} nodes are available: {len(NODES)} No preemption victims found for incoming pod.",
                }
            ],
        }
    return obj


def failed_scheduling(workload: str, index: int, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{workload}-rs-{index}.ev",
            "namespace": "default",
            "uid": f"ev-{workload}-{index}",
        },
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": f"{workload}-rs-{index}"},
        "reason": "FailedScheduling",
        "type": "Warning",
        "count": count,
        "message": f"0/{len(NODES)} nodes are available: {len(NODES)} Insufficient cpu.",
        "lastTimestamp": "2023-11-14T22:10:00Z",
    }


change = st.one_of(
    st.tuples(st.just("pending"), st.sampled_from(WORKLOADS), st.integers(0, 3), st.integers(1, 8)),
    st.tuples(st.just("bind"), st.sampled_from(WORKLOADS), st.integers(0, 3), st.sampled_from(NODES)),
    st.tuples(st.just("delete"), st.sampled_from(WORKLOADS), st.integers(0, 3)),
    st.tuples(st.just("node"), st.sampled_from(NODES), st.integers(1, 8), st.booleans()),
    # The same node, its allocatable kept: a taint, its zone, its readiness change (narrowed passes).
    st.tuples(
        st.just("node-meta"),
        st.sampled_from(NODES),
        st.sampled_from((None, "web", "gpu")),
        st.sampled_from((None, "a", "b")),
        st.booleans(),
    ),
    st.tuples(st.just("event"), st.sampled_from(WORKLOADS), st.integers(0, 3), st.integers(1, 5)),
)


def node_with(name: str, dedicated: str | None, zone: str | None, ready: bool) -> dict[str, Any]:
    obj = node(
        name,
        cpu="4",
        labels={ZONE: zone} if zone else None,
        taints=[{"key": "dedicated", "value": dedicated, "effect": "NoSchedule"}] if dedicated else None,
    )
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return obj


def findings_by_subject(
    snapshot: ClusterSnapshot, scope: frozenset[ObjectRef] | None = None
) -> dict[ObjectRef, list[Any]]:
    report = build_report(snapshot, now=NOW, scope=scope)
    out: dict[ObjectRef, list[Any]] = {}
    for f in report.findings:
        out.setdefault(f.subject, []).append(f.as_dict())
    return out


def starting_state() -> ClusterState:
    """Two nodes, the three workloads' ReplicaSets and one pending pod of web."""
    state = ClusterState()
    for name in NODES:
        state.apply_object(node(name, cpu="4"))
    for w in WORKLOADS:
        state.apply_object(replicaset(w))
    state.apply_object(member("web", 0, 6, None))
    return state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(change, min_size=1, max_size=10))
def test_scoped_passes_keep_what_a_full_pass_finds(steps: list[tuple[Any, ...]]) -> None:
    state = starting_state()
    previous = state.snapshot()
    held = findings_by_subject(previous)
    scoped_passes = 0
    for step in steps:
        apply_step(state, step)
        current = state.snapshot()
        changed = list(changes(previous, current))
        carry_over(previous, current, changed)
        touched = affected_workloads(previous, current, changed)
        if touched is None:
            held = findings_by_subject(current)
        else:
            scoped_passes += 1
            fresh = findings_by_subject(current, touched)
            held = {s: f for s, f in held.items() if s not in touched} | fresh
        assert held == findings_by_subject(current), (step, touched)
        previous = current


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "uid": name, "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
        "status": {"observedGeneration": 1, "replicas": replicas},
    }


def orphan(workload: str, index: int) -> dict[str, Any]:
    """A pending pod of the workload whose ReplicaSet is not known: its workload is guessed
    from the ReplicaSet's name (``<deployment>-<hash>``) when the Deployment exists."""
    obj = member(workload, index, 6, None)
    obj["metadata"]["name"] = f"{workload}-orphan-{index}"
    obj["metadata"]["ownerReferences"][0]["name"] = f"{workload}-5c8d7f9b6d"
    return obj


# Changes the journal must follow beyond the ones above: a pod deleted and created again in
# one pass (it moves to the end of the state's order), ReplicaSets and Deployments added and
# removed under existing pods (their pods' workload changes), and an extra snapshot taken
# between two passes (the agent's /scale reader takes one).
journal_change = st.one_of(
    change,
    st.tuples(st.just("recreate"), st.sampled_from(WORKLOADS), st.integers(0, 3), st.integers(1, 8)),
    st.tuples(st.just("replicaset"), st.sampled_from(WORKLOADS), st.booleans()),
    st.tuples(st.just("deployment"), st.sampled_from(WORKLOADS), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("orphan"), st.sampled_from(WORKLOADS), st.integers(0, 1)),
    st.tuples(st.just("snapshot")),
)


def apply_step(state: ClusterState, step: tuple[Any, ...]) -> None:
    kind = step[0]
    if kind == "pending":
        state.apply_object(member(step[1], step[2], step[3], None))
    elif kind == "bind":
        state.apply_object(member(step[1], step[2], 1, step[3]))
    elif kind == "delete":
        state.delete("Pod", "default", f"{step[1]}-rs-{step[2]}")
    elif kind == "recreate":
        state.delete("Pod", "default", f"{step[1]}-rs-{step[2]}")
        state.apply_object(member(step[1], step[2], step[3], None))
    elif kind == "node":
        state.apply_object(node(step[1], cpu=str(step[2]), unschedulable=step[3]))
    elif kind == "node-meta":
        state.apply_object(node_with(step[1], step[2], step[3], step[4]))
    elif kind == "replicaset":
        if step[2]:
            state.apply_object(replicaset(step[1]))
        else:
            state.delete("ReplicaSet", "default", f"{step[1]}-rs")
    elif kind == "deployment":
        if step[3]:
            state.apply_object(deployment(step[1], step[2]))
        else:
            state.delete("Deployment", "default", step[1])
    elif kind == "orphan":
        state.apply_object(orphan(step[1], step[2]))
    elif kind == "snapshot":
        state.snapshot()
    else:
        state.apply_object(failed_scheduling(step[1], step[2], step[3]))


def net_changes(listed: Any) -> dict[tuple[str, Any], tuple[Any, Any]]:
    """(collection, key) → (record before, record after), a removal and re-addition of one
    key folded into one pair."""
    out: dict[tuple[str, Any], tuple[Any, Any]] = {}
    for name, old, new in listed:
        key = (name, (new if new is not None else old).key)
        first = out.get(key)
        out[key] = (old if first is None else first[0], new)
    return {k: v for k, v in out.items() if v[0] is not v[1]}


def indexes(snap: ClusterSnapshot) -> dict[str, Any]:
    """What the carried indexes say, in their order (pods per node as sets: a pod bound
    in place goes last there, as it always has)."""
    refs = {snap.workload_of(p).ref for p in snap.pods.values()}
    return {
        "pending": snap.pending_pods(),
        "by_workload": {ref: snap.pods_of_workload(ref) for ref in refs},
        "by_namespace": snap.pods_in_namespace("default"),
        "by_node": {n: set(pods) for n, pods in snap.pods_by_node().items()},
        "events": {p.key: snap.events_for("Pod", *p.key) for p in snap.pods.values()},
        "rollouts": rollouts_taking_no_pod_down(snap),
        "draining": draining_nodes(snap),
        "deployment_reports": deployment_reports(snap),
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(journal_change, min_size=1, max_size=4), min_size=1, max_size=6))
def test_passes_through_the_journal_keep_what_a_full_pass_finds(passes: list[list[tuple[Any, ...]]]) -> None:
    """The pipeline's way: several changes per pass, the changes read from the journal
    (never by comparison), the indexes carried from the last pass's snapshot. The journal
    must list exactly what differs, the carried indexes must equal rebuilt ones, and the
    scoped passes must keep what a full pass of a fresh snapshot finds."""
    state = starting_state()
    previous = state.snapshot()
    held = findings_by_subject(previous)
    indexes(previous)
    for steps in passes:
        for step in steps:
            apply_step(state, step)
        current = state.snapshot()
        journal = current.changes_since(previous)
        assert journal is not None
        assert net_changes(journal) == net_changes(changes(previous, current)), steps
        carry_over(previous, current, journal)
        fresh = ClusterSnapshot.from_records(list(current))
        assert indexes(current) == indexes(fresh), steps
        touched = affected_workloads(previous, current, journal)
        if touched is None:
            held = findings_by_subject(current)
        else:
            held = {s: f for s, f in held.items() if s not in touched} | findings_by_subject(current, touched)
        assert held == findings_by_subject(fresh), (steps, touched)
        previous = current


def test_the_journal_reads_nothing_it_cannot_vouch_for() -> None:
    """changes_since answers only from an earlier snapshot of the same state."""
    state = ClusterState()
    state.apply_object(node("n1", cpu="4"))
    first = state.snapshot()
    state.apply_object(member("web", 0, 1, None))
    second = state.snapshot()
    assert second.changes_since(second) == []
    assert [(name, old, new.name) for name, old, new in second.changes_since(first) or []] == [
        ("pods", None, "web-rs-0")
    ]
    assert first.changes_since(second) is None  # backwards
    assert second.changes_since(ClusterSnapshot.from_records(list(first))) is None  # another state
    assert second.replace().changes_since(first) is None  # a what-if
