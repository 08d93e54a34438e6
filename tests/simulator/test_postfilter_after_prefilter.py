"""What follows the filter part of the message when a claim cannot be bound, by release.

VolumeBinding's PreFilter refuses a pod with an unbound Immediate claim
(UnschedulableAndUnresolvable); RunPreFilterPlugins (framework/runtime/framework.go,
1.30+) then stops, so DynamicResources -- the last PreFilter plugin since DRA is on by
default (1.34) -- never writes its state. Its PostFilter, which runs before
DefaultPreemption, reads that state and errs with kube-scheduler/framework's
ErrNotFound, ``not found``; RunPostFilterPlugins returns the error at once. Read in
v1.34.4, v1.35.4, v1.36.4 and v1.37.2 (dynamicresources.go PostFilter/getStateData,
cycle_state.go ErrNotFound, types.go FitError.Error)."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.simulator import simulate
from tests.simulator.builders import node, pod, pod_of, snapshot
from tests.simulator.test_filters_resources_volumes import pvc, sc

UNBOUND = "pod has unbound immediate PersistentVolumeClaims"


def _unbound_immediate(kube_version: str) -> Any:
    snap = snapshot(
        node("a"),
        node("b"),
        sc("standard", "example.com/csi", mode="Immediate"),
        pvc("data", sc="standard"),
        pod("p", pvcs=["data"]),
    )
    return simulate(snap, pod_of(snap, "p"), kube_version=kube_version)


@pytest.mark.parametrize("kube_version", ["1.34.4", "1.35.4", "1.36.4", "1.37.2"])
def test_dra_releases_end_with_not_found_and_no_preemption_clause(kube_version: str) -> None:
    verdict = _unbound_immediate(kube_version)
    assert verdict.message == f"0/2 nodes are available: {UNBOUND}. not found"
    assert not verdict.preemption.attempted and not verdict.preemption.candidates


@pytest.mark.parametrize("kube_version", ["1.30.14", "1.33.5"])
def test_before_dra_preemption_says_it_cannot_help(kube_version: str) -> None:
    verdict = _unbound_immediate(kube_version)
    assert verdict.message == (
        f"0/2 nodes are available: {UNBOUND}. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_a_plain_unschedulable_prefilter_does_not_stop_dynamic_resources() -> None:
    """A Filter rejection (not PreFilter) leaves DRA's state written: the PostFilter runs
    normally and, until 1.36, words its empty claim set; 1.37.2 returns the status without
    a reason (dynamicresources.go PostFilter)."""
    objs = (node("a", cpu="1"), pod("p", requests={"cpu": "2"}))
    snap = snapshot(*objs)
    tail = "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    v136 = simulate(snap, pod_of(snap, "p"), kube_version="1.36.4")
    assert v136.message == f"0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, {tail}"
    v137 = simulate(snap, pod_of(snap, "p"), kube_version="1.37.2")
    assert v137.message == f"0/1 nodes are available: 1 Insufficient cpu. {tail}"
