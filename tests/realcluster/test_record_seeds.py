"""The fixture recorder (record_seeds.py) on the real control plane: a seed recorded as a
golden case reads back offline with the seed's finding, and as a demo scenario plays
quiet → incident → resolved on the in-process API."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.fakecluster.scenario import Scenario, play_step
from agent.kube.kinds import ALL_KINDS
from analyzers.report import build_report
from analyzers.snapshot import ClusterState
from tests.realcluster.harness import KUBE_VERSION, ControlPlane
from tests.realcluster.record_seeds import record_seed, recordable
from tests.scenarios.test_golden import analyse, load_case

pytestmark = pytest.mark.realcluster

SEED = "untolerated-taint"


def findings_of(objects: list[dict[str, Any]], now: float) -> set[tuple[str, str]]:
    state = ClusterState(KUBE_VERSION)
    state.load(objects)
    return {(f.rule_id, f.subject.name) for f in build_report(state.snapshot(), now=now).findings}


def test_a_recorded_seed_reads_back_as_a_golden_case_and_plays_as_a_demo(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    (seed,) = [s for s in recordable() if s.id == SEED]
    golden, demo = tmp_path / "golden", tmp_path / "demo"
    record_seed(control_plane, seed, golden, demo)

    objects, expected = load_case(golden)
    assert [(f["rule_id"], f["subject"]["name"]) for f in expected["findings"]] == [
        (seed.rule_id, seed.subject)
    ]
    report = analyse(objects, expected)
    assert {(f.rule_id, f.subject.name) for f in report.findings} == {(seed.rule_id, seed.subject)}
    pod = next(o for o in objects if o["kind"] == "Pod" and not o["spec"].get("nodeName"))
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["message"] == seed.message  # what the real scheduler wrote, recorded as is
    assert any(o["kind"] == "Event" and o["reason"] == "FailedScheduling" for o in objects)

    scenario = Scenario.load(demo).rebased(datetime.now(UTC))
    assert [s.at for s in scenario.timeline] == [2, 12]
    cluster = scenario.cluster()

    def now_findings() -> set[tuple[str, str]]:
        return findings_of([o for k in ALL_KINDS for o in cluster.objects(k.kind)], time.time())

    assert (seed.rule_id, seed.subject) not in now_findings()  # healthy before
    play_step(cluster, scenario.timeline[0])
    assert (seed.rule_id, seed.subject) in now_findings()  # stuck
    play_step(cluster, scenario.timeline[1])
    assert (seed.rule_id, seed.subject) not in now_findings()  # the remedy applied: resolved
