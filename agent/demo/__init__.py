"""``unstick demo``'s bundled scenarios: the seed incidents as timelines for the
in-process fake Kubernetes API, recorded from a real Kubernetes control plane
(``python -m tests.realcluster.record_seeds --demo-out agent/demo/scenarios``)."""

from __future__ import annotations

from pathlib import Path

SCENARIOS = Path(__file__).parent / "scenarios"


def scenario_paths() -> list[Path]:
    return sorted(p for p in SCENARIOS.iterdir() if (p / "scenario.yaml").is_file())
