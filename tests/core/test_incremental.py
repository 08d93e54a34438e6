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
from analyzers.report import build_report
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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(change, min_size=1, max_size=10))
def test_scoped_passes_keep_what_a_full_pass_finds(steps: list[tuple[Any, ...]]) -> None:
    state = ClusterState()
    for name in NODES:
        state.apply_object(node(name, cpu="4"))
    for w in WORKLOADS:
        state.apply_object(replicaset(w))
    state.apply_object(member("web", 0, 6, None))
    previous = state.snapshot()
    held = findings_by_subject(previous)
    scoped_passes = 0
    for step in steps:
        kind = step[0]
        if kind == "pending":
            state.apply_object(member(step[1], step[2], step[3], None))
        elif kind == "bind":
            state.apply_object(member(step[1], step[2], 1, step[3]))
        elif kind == "delete":
            state.delete("Pod", "default", f"{step[1]}-rs-{step[2]}")
        elif kind == "node":
            state.apply_object(node(step[1], cpu=str(step[2]), unschedulable=step[3]))
        elif kind == "node-meta":
            state.apply_object(node_with(step[1], step[2], step[3], step[4]))
        else:
            state.apply_object(failed_scheduling(step[1], step[2], step[3]))
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
