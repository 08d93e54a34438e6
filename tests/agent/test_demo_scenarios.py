"""The bundled demo scenarios load, and rebasing moves their timestamps to the
playback clock while keeping the intervals between them."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.demo import scenario_paths
from agent.fakecluster.scenario import Scenario, _timestamps


@pytest.mark.parametrize("path", scenario_paths(), ids=lambda p: p.name)
def test_scenario_loads_and_rebases(path) -> None:
    scenario = Scenario.load(path)
    assert scenario.timeline, "a demo scenario unfolds over time"
    now = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    before = sorted(t for o in scenario._all_objects() for t in _timestamps(o))
    after = sorted(t for o in scenario.rebased(now)._all_objects() for t in _timestamps(o))
    assert now - timedelta(seconds=1) < after[-1] <= now
    assert [b - before[0] for b in before] == [a - after[0] for a in after]


def test_rebase_keeps_fractional_seconds() -> None:
    scenario = Scenario(
        name="x",
        objects=(
            {
                "kind": "Event",
                "metadata": {"name": "e"},
                "eventTime": "2026-03-12T09:45:00.250000Z",
                "firstTimestamp": "2026-03-12T09:44:00Z",
            },
        ),
    )
    (obj,) = scenario.rebased(datetime(2030, 1, 1, tzinfo=UTC)).objects
    # Moved by whole seconds: the latest stamp lands in the second before "now" with its
    # fraction, the other keeps its format and the interval between them.
    assert obj["eventTime"] == "2029-12-31T23:59:59.250000Z"
    assert obj["firstTimestamp"] == "2029-12-31T23:58:59Z"


def _recorder_seeds() -> dict[str, Any]:
    from tests.realcluster.record_seeds import recordable

    return {s.demo: s for s in recordable() if s.demo}


def test_every_demo_scenario_is_recorded_from_a_seed() -> None:
    """What the demo plays is what the real control plane said: each scenario comes from a seed
    of tests/realcluster (``record_seeds --demo-out agent/demo/scenarios``) at the harness's
    release, and each seed that names a demo scenario has one."""
    from tests.realcluster.harness import KUBE_VERSION

    assert {p.name for p in scenario_paths()} == set(_recorder_seeds())
    for path in scenario_paths():
        text = (path / "scenario.yaml").read_text()
        assert text.startswith(
            f"# Recorded by tests/realcluster/record_seeds.py (seed {_recorder_seeds()[path.name].id})"
        )
        assert Scenario.load(path).server_version == KUBE_VERSION


def _findings(cluster: Any) -> set[tuple[str, str, str, str]]:
    from agent.kube.kinds import ALL_KINDS
    from analyzers.report import build_report
    from analyzers.snapshot import ClusterState

    state = ClusterState(cluster.version.removeprefix("v"))
    state.load([o for k in ALL_KINDS for o in cluster.objects(k.kind)])
    report = build_report(state.snapshot(), now=time.time())
    return {(f.rule_id, f.subject.kind, f.subject.name, f.severity.value) for f in report.findings}


@pytest.mark.parametrize("path", scenario_paths(), ids=lambda p: p.name)
def test_the_scenario_is_healthy_then_stuck_then_fixed(path) -> None:
    """Healthy before the timeline, the seed's finding (rule, subject kind and name, severity)
    once stuck, a verified remedy the seed's fix is among, and quiet once the recorded fix played."""
    from agent.fakecluster.scenario import play_step

    seed = _recorder_seeds()[path.name]
    scenario = Scenario.load(path).rebased(datetime.now(UTC))
    cluster = scenario.cluster()
    subject = (
        seed.rule_id,
        next(o["kind"] for o in seed.objects + seed.stick_objects if o["metadata"]["name"] == seed.subject),
        seed.subject,
        seed.severity,
    )
    assert subject not in _findings(cluster)
    stuck, fixed = scenario.timeline
    play_step(cluster, stuck)
    assert subject in _findings(cluster)
    play_step(cluster, fixed)
    assert not {f for f in _findings(cluster) if f[0] == seed.rule_id}
