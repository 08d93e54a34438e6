"""The bundled demo scenarios load, and rebasing moves their timestamps to the
playback clock while keeping the intervals between them."""

from __future__ import annotations

from datetime import UTC, datetime

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
    assert after[-1] == now
    assert [b - before[0] for b in before] == [a - after[0] for a in after]


def test_rebase_keeps_fractional_seconds() -> None:
    scenario = Scenario(
        name="x",
        objects=({"kind": "Event", "metadata": {"name": "e"}, "eventTime": "2026-03-12T09:45:00.250000Z",
                  "firstTimestamp": "2026-03-12T09:44:00Z"},),
    )
    (obj,) = scenario.rebased(datetime(2030, 1, 1, tzinfo=UTC)).objects
    # The latest stamp becomes "now"; the other keeps its format (whole seconds, truncated).
    assert obj["eventTime"] == "2030-01-01T00:00:00.000000Z"
    assert obj["firstTimestamp"] == "2029-12-31T23:58:59Z"
