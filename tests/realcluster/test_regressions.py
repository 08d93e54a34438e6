"""Disagreements the differential run found, kept as regression cases (no control plane needed).

Each folder under tests/realcluster/regressions/ holds ``objects.yaml`` (the cluster as
the real API server returned it, the pending pod included) and ``expected.yaml`` with
the real kube-scheduler's verdict (``real_fits``, ``real_message``, ``real_nominated``).
The simulator must now say the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.realcluster.verdicts import Comparison, preemption_histogram, simulate_objects

ROOT = Path(__file__).parent / "regressions"
CASES = sorted(p.parent for p in ROOT.glob("*/expected.yaml"))


def test_there_are_regression_cases() -> None:
    assert CASES, f"no regression cases under {ROOT}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_simulator_matches_the_recorded_real_verdict(case: Path) -> None:
    objects = list(yaml.safe_load_all((case / "objects.yaml").read_text()))
    expected = yaml.safe_load((case / "expected.yaml").read_text())
    pod = expected["pod"]
    verdict = simulate_objects(objects, pod["namespace"], pod["name"])
    real = expected["real_message"]
    cmp = Comparison(
        real_fits=expected["real_fits"],
        sim_fits=verdict.fits,
        real_message=real,
        sim_message=verdict.message,
        real_preemption=preemption_histogram(real) if real else (None, {}),
        sim_preemption=preemption_histogram(verdict.message) if verdict.message else (None, {}),
        real_nominated=expected["real_nominated"],
        sim_candidates=tuple(verdict.preemption.candidates),
    )
    assert cmp.agrees, "\n".join(cmp.differences())
