"""Contracts with the rest of unstick: the canonical codes agree with the message
parser's (analyzers.messages), the node table is computed once per snapshot,
and the benchmark generator yields a cluster the simulator handles end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from analyzers.simulator import codes as C
from analyzers.simulator import node_table, simulate, simulate_pending
from analyzers.snapshot import ClusterSnapshot
from tests.simulator.builders import node, pod, pod_of, snapshot, taint

ROOT = Path(__file__).resolve().parents[2]

EMITTED = [
    ("Insufficient nvidia.com/gpu", C.INSUFFICIENT_RESOURCE),
    ("Too many pods", C.TOO_MANY_PODS),
    ("node(s) didn't match Pod's node affinity/selector", C.NODE_AFFINITY_MISMATCH),
    ("node(s) didn't satisfy plugin(s) [NodeAffinity]", C.NODE_AFFINITY_MISMATCH),
    ("node is filtered out by the prefilter result", C.NODE_AFFINITY_MISMATCH),
    ("node(s) had untolerated taint {dedicated: gpu}", C.UNTOLERATED_TAINT),
    ("node(s) had taint {dedicated: gpu}, that the pod didn't tolerate", C.UNTOLERATED_TAINT),
    ("node(s) had untolerated taint(s)", C.UNTOLERATED_TAINT),
    ("node(s) were unschedulable", C.NODE_UNSCHEDULABLE),
    ("node(s) didn't match the requested node name", C.NODE_NAME_MISMATCH),
    ("node(s) didn't have free ports for the requested pod ports", C.NODE_PORTS),
    ("node(s) didn't match pod affinity rules", C.POD_AFFINITY_MISMATCH),
    ("node(s) didn't match pod anti-affinity rules", C.POD_ANTI_AFFINITY_MISMATCH),
    ("node(s) didn't satisfy existing pods anti-affinity rules", C.EXISTING_POD_ANTI_AFFINITY),
    ("node(s) didn't match pod topology spread constraints", C.TOPOLOGY_SPREAD_MISMATCH),
    (
        "node(s) didn't match pod topology spread constraints (missing required label)",
        C.TOPOLOGY_SPREAD_MISMATCH,
    ),
    ("pod has unbound immediate PersistentVolumeClaims", C.VOLUME_UNBOUND_PVC),
    ("node(s) didn't find available persistent volumes to bind", C.VOLUME_NO_PV),
    ("node(s) had volume node affinity conflict", C.VOLUME_NODE_AFFINITY_CONFLICT),
    ("node(s) didn't match PersistentVolume's node affinity", C.VOLUME_NODE_AFFINITY_CONFLICT),
    ('persistentvolumeclaim "data" not found', C.PVC_NOT_FOUND),
    ("No preemption victims found for incoming pod", C.PREEMPTION_NO_VICTIMS),
    ("Preemption is not helpful for scheduling", C.PREEMPTION_NOT_HELPFUL),
    ("not eligible due to preemptionPolicy=Never.", C.PREEMPTION_NOT_ELIGIBLE),
]


@pytest.mark.parametrize(("text", "code"), EMITTED)
def test_codes_agree_with_the_message_parser(text: str, code: str) -> None:
    reasons = pytest.importorskip("analyzers.messages.reasons")
    assert reasons.classify_reason(text).code == code


def test_node_table_is_computed_once_per_snapshot_and_shared() -> None:
    snap = snapshot(node("a"), node("b"), pod("x", node_name="a", requests={"cpu": "1"}), pod("p"))
    table = node_table(snap)
    simulate(snap, pod_of(snap, "p"))
    assert node_table(snap) is table
    assert table.requested["cpu"] == [1000, 0]
    changed = snap.replace(remove=[("pods", ("default", "x"))])
    assert node_table(changed) is not table
    assert node_table(changed).requested["cpu"] == [0, 0]


def test_simulate_pending_covers_only_default_scheduler_pods_waiting() -> None:
    other = pod("q", requests={"cpu": "64"})
    other["spec"]["schedulerName"] = "volcano"
    snap = snapshot(
        node("a"),
        pod("p", requests={"cpu": "64"}),
        other,
        pod("done", phase="Failed"),
        pod("run", node_name="a"),
    )
    verdicts = simulate_pending(snap)
    assert list(verdicts) == [("default", "p")]
    assert verdicts[("default", "p")].message.startswith("0/1 nodes are available: 1 Insufficient cpu.")


def test_generated_cluster_end_to_end() -> None:
    sys.path.insert(0, str(ROOT))
    from bench.generate import generate

    objs = generate(nodes=60, pods=900, workloads=15, pending=4, seed=3)
    assert objs == generate(nodes=60, pods=900, workloads=15, pending=4, seed=3)
    json.dumps(objs)
    assert sum(1 for o in objs if o["kind"] == "Node") == 60
    assert sum(1 for o in objs if o["kind"] == "Pod") == 900
    snap = ClusterSnapshot.from_objects(objs)
    verdicts = simulate_pending(snap, kube_version="1.30")
    assert len(verdicts) == 4
    for v in verdicts.values():
        assert not v.fits
        assert v.message.startswith("0/60 nodes are available: ")
        assert sum(v.reasons.values()) >= 60
        assert len(v.nodes) == 60
        assert all(n.filters for n in v.nodes)


def test_every_node_is_counted_once_under_its_first_failing_filter() -> None:
    objs = [
        node("a", cpu="1", taints=[taint("x")]),
        node("b", cpu="1", unschedulable=True),
        node("c", cpu="1"),
        pod("p", requests={"cpu": "2"}),
    ]
    snap = snapshot(*objs)
    v = simulate(snap, pod_of(snap, "p"))
    firsts = [n.filters[0].reasons[0] for n in v.nodes]
    assert sorted(firsts) == sorted(r for r, c in v.reasons.items() for _ in range(c))
