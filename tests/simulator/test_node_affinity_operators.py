"""Required node affinity, operator by operator, on a cluster whose first node ("a") must not
match (kubernetes v1.35.4: component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go and
apimachinery's labels.Requirement.Matches: In/NotIn/Exists/DoesNotExist, Gt/Lt with exactly one
integer value; matchFields: In/NotIn with exactly one value against metadata.name)."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.simulator import simulate
from tests.simulator.builders import node, pod, pod_of, snapshot

NODES = [
    node("a", labels={"disk": "hdd", "gen": "3"}),
    node("b", labels={"disk": "ssd", "gen": "4", "gpu": "t4"}),
]


def fitting(field: str, *requirements: dict[str, Any]) -> set[str]:
    term = {field: list(requirements)}
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    snap = snapshot(*NODES, pod("p", affinity=affinity))
    v = simulate(snap, pod_of(snap, "p"), kube_version="1.35")
    return {n.node for n in v.nodes if n.fits}


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (req("disk", "In", "ssd", "nvme"), {"b"}),
        (req("disk", "In", "nvme"), set()),
        (req("disk", "NotIn", "hdd"), {"b"}),
        (req("disk", "NotIn", "nvme"), {"a", "b"}),
        (req("gpu", "Exists"), {"b"}),
        (req("fpga", "Exists"), set()),
        (req("gpu", "DoesNotExist"), {"a"}),
        (req("fpga", "DoesNotExist"), {"a", "b"}),
        (req("gen", "Gt", "3"), {"b"}),  # at the threshold: not greater
        (req("gen", "Lt", "4"), {"a"}),
        (req("gen", "Gt", "2", "3"), set()),  # Gt takes exactly one value
        (req("gen", "Gt", "three"), set()),  # ... and an integer
    ],
)
def test_match_expressions(requirement: dict[str, Any], expected: set[str]) -> None:
    assert fitting("matchExpressions", requirement) == expected


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (req("metadata.name", "In", "b"), {"b"}),
        (req("metadata.name", "In", "gone"), set()),
        (req("metadata.name", "NotIn", "b"), {"a"}),
        (req("metadata.name", "In", "a", "b"), set()),  # In takes exactly one value here
    ],
)
def test_match_fields(requirement: dict[str, Any], expected: set[str]) -> None:
    assert fitting("matchFields", requirement) == expected
