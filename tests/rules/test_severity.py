"""Placement findings are CRITICAL when the workload has no Ready pod left, for a
StatefulSet exactly as for a Deployment; WARNING while one still serves."""

from __future__ import annotations

import pytest

from analyzers.findings import Severity
from tests.rules.placement_fixtures import deployment, findings, node, snapshot, statefulset, template

TPL = template(node_selector={"pool": "missing"})


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_no_ready_pod_left_is_critical(kind: str) -> None:
    objs = (
        deployment("web", TPL, replicas=1, bound=[], pending=1)
        if kind == "Deployment"
        else statefulset("web", TPL, replicas=1, bound=[], pending=1)
    )
    [finding] = findings(snapshot(node("w-0"), objs), "node-selector-mismatch")
    assert (finding.subject.kind, finding.severity) == (kind, Severity.CRITICAL)


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_a_ready_pod_still_serving_is_a_warning(kind: str) -> None:
    objs = (
        deployment("web", TPL, replicas=2, bound=["w-0"], pending=1)
        if kind == "Deployment"
        else statefulset("web", TPL, replicas=2, bound=["w-0"], pending=1)
    )
    [finding] = findings(snapshot(node("w-0"), objs), "node-selector-mismatch")
    assert (finding.subject.kind, finding.severity) == (kind, Severity.WARNING)
