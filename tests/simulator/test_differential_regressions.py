"""Disagreements the extended differential run found against the real kube-scheduler
v1.37.2, kept as regression cases: each folder holds the objects exactly as the real
API server returned them when the probe was created (``objects.yaml``) and the real
verdict (``expected.yaml``); unstick's simulation of those objects must agree with it
(tests/realcluster/verdicts.py compare: fits, the filter part byte for byte, and the
preemption verdict).

- seed5151-c19-p7, seed5151-c32-p7: a preemptor nominated with required
  anti-affinity against the probe's app. The probe has no inter-pod term and no bound
  pod's anti-affinity matches it, so InterPodAffinity's PreFilter returns Skip
  (interpodaffinity/filtering.go, v1.35.4 and v1.37.2) and the nominated pod's term is
  never checked: c19-p7 fits the preemptor's node, c32-p7 finds a preemption candidate
  there. unstick had added the nominated pod's term (engine.with_nominated_pods).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realcluster.verdicts import compare

ROOT = Path(__file__).parent / "upstream" / "differential"
CASES = sorted(p for p in ROOT.iterdir() if (p / "expected.yaml").is_file())


def _real_pod(expected: dict[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if expected["real_message"]:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "message": expected["real_message"]}
        ]
    if expected["real_nominated"]:
        status["nominatedNodeName"] = "(recorded)"
    spec = {"nodeName": expected["real_node"]} if expected["real_node"] else {}
    return {"spec": spec, "status": status}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_simulation_agrees_with_the_recorded_real_verdict(case: Path) -> None:
    objects = list(yaml.safe_load_all((case / "objects.yaml").read_text()))
    expected = yaml.safe_load((case / "expected.yaml").read_text())
    pod = expected["pod"]
    cmp = compare(objects, _real_pod(expected), pod["namespace"], pod["name"])
    assert cmp.agrees, cmp.differences()


def test_the_cases_are_there() -> None:
    assert len(CASES) >= 2
