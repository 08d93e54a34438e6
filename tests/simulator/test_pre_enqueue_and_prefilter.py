"""Which PreFilter rejection is the pod's: RunPreFilterPlugins
(pkg/scheduler/framework/runtime/framework.go).

- v1.30.14 .. v1.35.4 (kubernetes#119770): an UnschedulableAndUnresolvable
  status returns at once; an Unschedulable one is kept (``returnStatus = s``, so
  the last one) and the loop goes on, so a later UnschedulableAndUnresolvable
  status wins.
- v1.29.15 and before: ``if s.IsRejected() { return nil, s }`` -- the first
  rejection of either code.

And VolumeRestrictions' PreFilter (volume_restrictions.go, v1.27.16 .. v1.35.4)
reads every claim of the pod before VolumeBinding does, so a missing claim is
its rejection.
"""

from __future__ import annotations

import pytest

from analyzers.simulator import codes as C
from analyzers.simulator import engine, simulate
from analyzers.simulator.framework import Cycle, Plugin, failure
from analyzers.simulator.results import FilterFailure
from tests.simulator.builders import node, pod, pod_of, snapshot


class Rejects(Plugin):
    def __init__(self, name: str, code: str) -> None:
        self.name = name
        self.code = code

    def prefilter(self, cycle: Cycle) -> FilterFailure | None:
        return failure(self.name, self.code, (f"{self.name} says no",), (C.OTHER,))


U, UU = C.UNSCHEDULABLE, C.UNRESOLVABLE


@pytest.mark.parametrize(
    ("version", "plugins", "winner"),
    [
        ("1.35", [("A", U), ("B", UU)], "B"),  # an Unschedulable status does not end PreFilter
        ("1.30", [("A", U), ("B", UU)], "B"),
        ("1.35", [("A", U), ("B", U)], "B"),  # the last Unschedulable one is kept
        ("1.35", [("A", UU), ("B", UU)], "A"),  # the first Unresolvable one ends it
        ("1.35", [("A", UU), ("B", U)], "A"),
        ("1.29", [("A", U), ("B", UU)], "A"),  # before #119770: the first rejection
        ("1.29", [("A", U), ("B", U)], "A"),
    ],
)
def test_the_prefilter_status_is_the_one_run_prefilter_plugins_returns(
    monkeypatch: pytest.MonkeyPatch, version: str, plugins: list[tuple[str, str]], winner: str
) -> None:
    monkeypatch.setattr(engine, "PREFILTERS", tuple(Rejects(n, c) for n, c in plugins))
    snap = snapshot(node("a"), node("b"), pod("p"))
    v = simulate(snap, pod_of(snap, "p"), kube_version=version)
    assert not v.fits
    assert v.prefilter is not None and v.prefilter.plugin == winner
    assert f"{winner} says no" in v.message


def _parse_error_affinity() -> dict:
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "not a value"}}}
            ]
        }
    }


@pytest.mark.parametrize(("version", "plugin"), [("1.26", "VolumeBinding"), ("1.27", "VolumeRestrictions")])
def test_a_missing_claim_is_volume_restrictions_rejection_since_1_27(version: str, plugin: str) -> None:
    """Two rejections, both UnschedulableAndUnresolvable: the first plugin's in the
    default order (VolumeRestrictions, VolumeBinding, ..., InterPodAffinity) wins."""
    snap = snapshot(node("a"), pod("p", pvcs=["data"], affinity=_parse_error_affinity()))
    v = simulate(snap, pod_of(snap, "p"), kube_version=version)
    assert v.prefilter is not None
    assert (v.prefilter.plugin, v.prefilter.reasons) == (plugin, ('persistentvolumeclaim "data" not found',))


# --- PreEnqueue: SchedulingGates, then DynamicResources (its ResourceClaims) -----------------


def _claim(name: str) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": []}},
    }


def _with_claims(obj: dict, *entries: dict) -> dict:
    obj["spec"]["resourceClaims"] = list(entries)
    return obj


def test_a_pod_whose_claim_is_missing_is_never_tried() -> None:
    snap = snapshot(
        node("a"), _claim("other"), _with_claims(pod("p"), {"name": "gpu", "resourceClaimName": "gpu-0"})
    )
    v = simulate(snap, pod_of(snap, "p"))
    assert not v.fits and v.gated is not None
    assert (v.gated.plugin, v.gated.reasons) == (
        "DynamicResources",
        ('could not find ResourceClaim "default/gpu-0"',),
    )
    assert v.message == "" and not v.preemption.attempted  # no condition, no PostFilter


def test_an_existing_claim_lets_the_pod_be_scheduled() -> None:
    snap = snapshot(
        node("a"), _claim("gpu-0"), _with_claims(pod("p"), {"name": "gpu", "resourceClaimName": "gpu-0"})
    )
    assert simulate(snap, pod_of(snap, "p")).fits


def test_scheduling_gates_come_first() -> None:
    obj = _with_claims(
        pod("p", gates=["example.com/hold"]), {"name": "gpu", "resourceClaimTemplateName": "t"}
    )
    snap = snapshot(node("a"), obj)
    v = simulate(snap, pod_of(snap, "p"))
    assert v.gated is not None and v.gated.plugin == "SchedulingGates"
    assert v.message == "Scheduling is blocked due to non-empty scheduling gates"
