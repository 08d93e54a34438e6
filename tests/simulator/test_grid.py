"""The nodes × filter plugins grid (analyzers.grid) of the golden scenarios.

kube-scheduler stops at a node's first failing filter; the grid marks it, calls
the later plugins "not evaluated by the scheduler", and shows apart what
unstick's own evaluation finds after it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from analyzers.grid import GRID_KEY
from analyzers.ingest import parse_time
from analyzers.report import build_report
from analyzers.simulator.engine import filter_order
from analyzers.simulator.versions import wording_for
from analyzers.snapshot import ClusterState
from tests.scenarios.test_golden import CASES, load_case

GPU_TRACKER = Path(__file__).parents[1] / "scenarios" / "rollout-surge-deadlock" / "gpu-tracker"


def report_of(case: Path):  # type: ignore[no-untyped-def]
    objects, expected = load_case(case)
    state = ClusterState(expected.get("kube_version"))
    state.load(objects)
    now = parse_time(expected["now"])
    assert now is not None
    return build_report(state.snapshot(), now=now)


def test_columns_follow_the_release_order() -> None:
    """1.37 runs NodeName before NodeUnschedulable (default_plugins.go, v1.37.0); the grid's
    columns are the filters in the order the dump's release runs them."""
    objects, expected = load_case(GPU_TRACKER)
    for version, first in (("1.36", "NodeUnschedulable"), ("1.37", "NodeName")):
        state = ClusterState(version)
        state.load(objects)
        now = parse_time(expected["now"])
        assert now is not None
        [finding] = [
            f for f in build_report(state.snapshot(), now=now).findings if f.rule_id == "rollout-surge-deadlock"
        ]
        [grid] = finding.evidence[GRID_KEY]
        plugins = list(grid["plugins"])
        assert plugins[:2] == [first, ({"NodeName", "NodeUnschedulable"} - {first}).pop()], version


def test_the_gpu_deadlock_grid_marks_the_first_failure_and_the_plugins_never_run() -> None:
    [finding] = [f for f in report_of(GPU_TRACKER).findings if f.rule_id == "rollout-surge-deadlock"]
    [grid] = finding.evidence[GRID_KEY]
    assert grid["total_nodes"] == 10 and grid["feasible_nodes"] == 0
    assert tuple(grid["plugins"]) == tuple(p.name for p in filter_order(wording_for("1.30")))
    near, far = grid["rows"]  # nearest first: one failing filter before two
    assert (near["count"], near["nodes"], near["failing"], near["first"]) == (
        1,
        ["tracker-node"],
        1,
        "NodeResourcesFit",
    )
    states = {c["plugin"]: c["state"] for c in near["cells"]}
    assert states["NodeAffinity"] == "pass" and states["NodeResourcesFit"] == "fail"
    assert states["InterPodAffinity"] == "not-evaluated"
    assert near["preemption"] == "no-victims"
    assert far["count"] == 9 and far["first"] == "NodeAffinity" and far["preemption"] == "not-helpful"
    far_states = {c["plugin"]: c for c in far["cells"]}
    assert far_states["NodeResourcesFit"]["state"] == "extra-fail"  # unstick's evaluation, apart
    assert far_states["NodeResourcesFit"]["reasons"] == ["Insufficient nvidia.com/gpu"]
    assert far_states["NodePorts"]["state"] == "not-evaluated"
    # Capacity only for the candidate, where the resource is what stops the pod.
    assert grid["capacity"] == [
        {
            "node": "tracker-node",
            "resource": "nvidia.com/gpu",
            "allocatable": 1,
            "requested_by_others": 1,
            "request": 1,
            "free": 0,
            "allocatable_text": "1",
            "requested_by_others_text": "1",
            "request_text": "1",
            "free_text": "0",
        }
    ]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_every_golden_grid_is_consistent_with_the_scheduler_verdict(case: Path) -> None:
    report = report_of(case)
    verdicts = {f"{p.pod.namespace}/{p.pod.name}": p.verdict for p in report.pods}
    for finding in report.findings:
        for grid in finding.evidence.get(GRID_KEY, ()):
            json.dumps(grid)  # JSON-safe: stored as is
            verdict = verdicts[grid["pods"][0]]
            assert sum(r["count"] for r in grid["rows"]) == verdict.total_nodes
            assert sum(r["count"] for r in grid["rows"] if r["fits"]) == verdict.feasible_nodes
            failing = [r["failing"] for r in grid["rows"] if not r["fits"]]
            assert failing == sorted(failing)
            for row in grid["rows"]:
                states = [c["state"] for c in row["cells"]]
                if row["fits"]:
                    assert set(states) == {"pass"}
                    continue
                first = states.index("fail") if "fail" in states else None
                if first is None:  # a PreFilter result's rejection: a plugin outside the order
                    continue
                assert set(states[:first]) <= {"pass"} and states.count("fail") == 1
                assert set(states[first + 1 :]) <= {"not-evaluated", "extra-fail"}
                assert row["failing"] == 1 + states.count("extra-fail")
                for name in row["nodes"]:  # every node of the row fails alike
                    node = verdict.node(name)
                    assert node is not None and node.first is not None
                    assert row["cells"][first]["plugin"] == node.first.plugin
                    assert row["cells"][first]["reasons"] == list(node.first.reasons)
                    assert [f.plugin for f in node.filters] == [
                        c["plugin"] for c in row["cells"] if c["state"] in ("fail", "extra-fail")
                    ]


def test_the_fast_grouping_equals_building_every_node() -> None:
    """The bit-set grouping (one node built per homogeneous group) gives the grid that
    building every node's verdict gives, on the generated 300-node cluster."""
    from dataclasses import replace

    from analyzers.grid import build_grid

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/ is not a package of the wheel
    from bench.generate import generate

    state = ClusterState(None)
    state.load(generate(nodes=300, pods=3000, workloads=30, pending=20))
    report = build_report(state.snapshot(), now=1.8e9)
    compared = 0
    for p in report.pods:
        if p.verdict.fits or not p.verdict.node_names:
            continue
        fast = build_grid(p.verdict, ["x"])
        slow = build_grid(replace(p.verdict, node_names=()), ["x"])  # no bit sets: every node built
        key = lambda r: (r["first"] or "", r["failing"], r["count"], r["nodes"])  # noqa: E731
        assert sorted(fast["rows"], key=key) == sorted(slow["rows"], key=key)
        assert fast["capacity"] == slow["capacity"]
        compared += 1
    assert compared >= 5


def test_capacity_bars_carry_the_nodes_real_usage_where_metrics_exist() -> None:
    case = Path(__file__).parents[1] / "scenarios" / "insufficient-resources" / "fragmented-cpu"
    objects, expected = load_case(case)
    nodes = [o["metadata"]["name"] for o in objects if o.get("kind") == "Node"]
    metrics = [
        {
            "apiVersion": "metrics.k8s.io/v1beta1",
            "kind": "NodeMetrics",
            "metadata": {"name": name},
            "timestamp": "2026-11-20T10:00:00Z",
            "window": "10s",
            "usage": {"cpu": f"{1200 + 100 * i}m", "memory": "2Gi"},
        }
        for i, name in enumerate(nodes[:-1])  # the last node has no metrics
    ]
    state = ClusterState(expected.get("kube_version"))
    state.load([*objects, *metrics])
    now = parse_time(expected["now"])
    assert now is not None
    report = build_report(state.snapshot(), now=now)
    bars = [b for f in report.findings for g in f.evidence.get(GRID_KEY, ()) for b in g["capacity"]]
    assert bars
    want = {name: 1200 + 100 * i for i, name in enumerate(nodes[:-1])}
    for bar in bars:
        if bar["resource"] == "cpu" and bar["node"] in want:
            assert bar["usage"] == want[bar["node"]] and bar["usage_text"] == f"{want[bar['node']]}m"
        elif bar["node"] not in want:
            assert "usage" not in bar
    assert any("usage" in b for b in bars)
