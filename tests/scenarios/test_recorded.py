"""Golden cases recorded from the real control plane (tests/scenarios/<rule>/recorded/<seed>/,
written by ``python -m tests.realcluster.record_seeds``; re-record, do not edit).

Each is checked as tests/scenarios/test_golden.py checks the hand-written cases (exactly
the seed's finding, severity, the verified remedy that unstuck it, every verified patch
re-analysed away), and offline against what the real kube-scheduler wrote: for every
pending pod of the dump, unstick's simulation of the recorded objects prints the
recorded ``PodScheduled`` message's filter part byte for byte and its preemption
reasons by code and count."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.simulator import simulate
from analyzers.snapshot import ClusterState
from tests.realcluster.verdicts import preemption_histogram, split_message
from tests.scenarios import test_golden
from tests.scenarios.test_golden import load_case

ROOT = Path(__file__).parent
RECORDED = sorted(p.parent for p in ROOT.glob("*/recorded/*/expected.yaml"))


def test_every_real_cluster_seed_is_recorded() -> None:
    from tests.realcluster.record_seeds import recordable

    assert {(s.rule_id, s.id) for s in recordable()} == {(c.parent.parent.name, c.name) for c in RECORDED}


@pytest.mark.parametrize("case", RECORDED, ids=[f"{c.parent.parent.name}/{c.name}" for c in RECORDED])
def test_recorded_case(case: Path) -> None:
    test_golden.test_golden_scenario(case)


@pytest.mark.parametrize("case", RECORDED, ids=[f"{c.parent.parent.name}/{c.name}" for c in RECORDED])
def test_the_simulation_says_what_the_recorded_scheduler_said(case: Path) -> None:
    objects, expected = load_case(case)
    state = ClusterState(expected["kube_version"])
    state.load(objects)
    snap = state.snapshot()
    checked = 0
    for obj in objects:
        if obj["kind"] != "Pod" or obj["spec"].get("nodeName") or obj["spec"].get("schedulingGates"):
            continue
        said = next(c["message"] for c in obj["status"]["conditions"] if c["type"] == "PodScheduled")
        pod = snap.pods[(obj["metadata"]["namespace"], obj["metadata"]["name"])]
        verdict = simulate(snap, pod, kube_version=expected["kube_version"])
        assert split_message(verdict.message)[0] == split_message(said)[0], (verdict.message, said)
        assert preemption_histogram(verdict.message) == preemption_histogram(said)
        checked += 1
    gated = any(o["kind"] == "Pod" and o["spec"].get("schedulingGates") for o in objects)
    assert checked or gated or not _seed(case).pending, "no pending pod in the recording"


def _seed(case: Path):  # type: ignore[no-untyped-def]
    from tests.realcluster.record_seeds import recordable

    return next(s for s in recordable() if s.id == case.name)
