"""What kube-scheduler 1.36 and 1.37 print, from their sources (k8s.io/kubernetes
v1.35.4, v1.36.5, v1.37.0 and v1.37.2 in the Go module cache).

- pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go, PostFilter:
  v1.36.5 ``return nil, fwk.NewStatus(fwk.Unschedulable, "no new claims to deallocate")``
  (line 950); v1.37.0/v1.37.2 ``return nil, fwk.NewStatus(fwk.Unschedulable)`` (line 1171),
  and ``"still not schedulable"`` is gone too.
- pkg/scheduler/framework/preemption/preemption.go, Evaluator.Preempt, v1.37.2 line 196:
  ``fwk.NewStatus(fwk.Success, fmt.Sprintf("found a potential placement for pod on node %v,
  preempting %d victims", bestCandidate.Name(), len(bestCandidate.Victims().Pods)))``, which
  default_preemption.go wraps as ``"preemption: "+msg``; v1.36.5 returns Success without one.
- pkg/scheduler/apis/config/v1/default_plugins.go: v1.36.5 lists NodeUnschedulable,
  NodeName; v1.37.0 NodeName, NodeUnschedulable.
"""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.messages.model import PREEMPTING
from analyzers.messages.parse import parse_message
from analyzers.simulator import simulate, wording_for
from tests.simulator.builders import node, pod, pod_of, snapshot

PNH = "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."


def run(objs: list[dict[str, Any]], version: str, name: str = "p"):  # type: ignore[no-untyped-def]
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, name), kube_version=version)


@pytest.mark.parametrize(
    ("version", "note"),
    [("1.34.0", True), ("1.35.4", True), ("1.36.5", True), ("1.37.0", False), ("1.37.2", False)],
)
def test_dynamic_resources_postfilter_text_is_printed_by_1_34_to_1_36_only(version: str, note: bool) -> None:
    v = run([node("a", cpu="1"), pod("p", requests={"cpu": "2"})], version)
    prefix = "no new claims to deallocate, " if note else ""
    assert v.message == f"0/1 nodes are available: 1 Insufficient cpu. {prefix}{PNH}"
    assert wording_for(version).dra_postfilter is note


def _preemptable(version: str):  # type: ignore[no-untyped-def]
    return run(
        [
            node("a", cpu="2"),
            pod("low", node_name="a", requests={"cpu": "2"}, priority=0),
            pod("p", requests={"cpu": "1"}, priority=1000),
        ],
        version,
    )


def test_a_found_candidate_is_named_by_1_37() -> None:
    v = _preemptable("1.37.2")
    assert v.message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: found a potential placement for pod on node a, preempting 1 victims"
    )
    assert v.preemption.candidates == ("a",)


@pytest.mark.parametrize("version", ["1.34.3", "1.35.4", "1.36.5"])
def test_a_found_candidate_ends_the_message_after_the_filters_before_1_37(version: str) -> None:
    # RunPostFilterPlugins returns DefaultPreemption's Success at once, dropping DynamicResources' text.
    v = _preemptable(version)
    assert v.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_the_named_node_is_the_one_pick_one_node_for_preemption_chooses() -> None:
    # Criterion 2 (minHighestPriorityScoreFunc) decides: b's highest victim has priority 5, a's 10.
    objs = [
        node("a", cpu="2"),
        node("b", cpu="2"),
        pod("on-a", node_name="a", requests={"cpu": "2"}, priority=10),
        pod("on-b", node_name="b", requests={"cpu": "2"}, priority=5),
        pod("p", requests={"cpu": "1"}, priority=1000),
    ]
    v = run(objs, "1.37.2")
    assert v.message.endswith(
        "preemption: found a potential placement for pod on node b, preempting 1 victims"
    )
    # Criterion 3 (minSumPrioritiesScoreFunc): the same highest priority, but a needs two victims.
    objs = [
        node("a", cpu="2"),
        node("b", cpu="2"),
        pod("a1", node_name="a", requests={"cpu": "1"}, priority=5),
        pod("a2", node_name="a", requests={"cpu": "1"}, priority=5),
        pod("b1", node_name="b", requests={"cpu": "2"}, priority=5),
        pod("p", requests={"cpu": "2"}, priority=1000),
    ]
    v = run(objs, "1.37.2")
    assert v.message.endswith(
        "preemption: found a potential placement for pod on node b, preempting 1 victims"
    )


def test_1_37_filters_node_name_before_node_unschedulable() -> None:
    objs = [
        node("a", unschedulable=True),
        node("b", unschedulable=True),
        pod("p", node_name="b", requests={"cpu": "1"}),
    ]
    assert run(objs, "1.36.5").message.startswith("0/2 nodes are available: 2 node(s) were unschedulable.")
    assert run(objs, "1.37.2").message.startswith(
        "0/2 nodes are available: 1 node(s) didn't match the requested node name, 1 node(s) were unschedulable."
    )


def test_the_1_37_success_note_parses_as_a_complete_preempting_verdict() -> None:
    parsed = parse_message(_preemptable("1.37.2").message)
    assert parsed.preemption is not None
    assert parsed.preemption.verdict == PREEMPTING
    assert parsed.preemption.note_info is not None and parsed.preemption.note_info.object_name == "a"
    assert not parsed.truncated
    assert [(r.count, r.code) for r in parsed.reasons] == [(1, "insufficient-resource")]


@pytest.mark.parametrize(
    ("version", "note"),
    [("1.35.4", "still not schedulable, "), ("1.36.5", "still not schedulable, "), ("1.37.2", "")],
)
def test_a_pod_with_claims_none_deallocatable_reads_still_not_schedulable_until_1_36(
    version: str, note: str
) -> None:
    # v1.36.5 PostFilter: claims present, none unavailable-and-deallocatable -> the last return,
    # ``fwk.NewStatus(fwk.Unschedulable, "still not schedulable")``; v1.37.2 returns no reason.
    from analyzers.snapshot import ClusterSnapshot
    from tests.dra.test_dra_allocation import claim, device, device_class, exactly, slice_
    from tests.dra.test_dra_allocation import node as dra_node
    from tests.dra.test_dra_allocation import pod as dra_pod

    snap = ClusterSnapshot.from_objects(
        [
            dra_node("a"),
            slice_("a", [device("gpu-0")]),
            device_class(),
            claim("c", [exactly(count=2)]),
            dra_pod("p", "c"),
        ]
    )
    v = simulate(snap, snap.pods[("default", "p")], kube_version=version)
    assert v.message == (
        f"0/1 nodes are available: 1 cannot allocate all claims. {note}"
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


@pytest.mark.parametrize(
    "text",
    [
        # nodedeclaredfeatures.go v1.36.5/v1.37.2: errReasonUnsatisfiedRequirements
        "node(s) didn't match Pod's required features",
        # v1.35.4 (alpha): fmt.Sprintf("node declared features check failed - unsatisfied requirements: %s", ...)
        "node declared features check failed - unsatisfied requirements: RestartAllContainers",
    ],
)
def test_node_declared_features_rejections_are_read(text: str) -> None:
    parsed = parse_message(
        f"0/2 nodes are available: 2 {text}. {PNH.replace('0/1', '0/2').replace(' 1 ', ' 2 ')}"
    )
    assert [(r.count, r.code, r.plugin) for r in parsed.reasons] == [
        (2, "node-features-missing", "NodeDeclaredFeatures")
    ]


@pytest.mark.parametrize(
    ("version", "note"),
    [
        ("1.35.4", "no new claims to deallocate, "),
        ("1.36.5", "no new claims to deallocate, "),
        ("1.37.2", ""),
    ],
)
def test_dynamic_resources_own_prefilter_rejection_still_runs_preemption(version: str, note: str) -> None:
    # Found by the DRA differential on v1.37.2 (seed 708245, probe-1-3): DynamicResources'
    # PreFilter writes its state first (dynamicresources.go v1.37.2 line 591, v1.36.5 line 470)
    # and records the claims last (s.claims = claims), so after its own "device class ... does
    # not exist" its PostFilter finds no claims, and DefaultPreemption runs.
    from analyzers.snapshot import ClusterSnapshot
    from tests.dra.test_dra_allocation import claim, device, device_class, exactly, slice_
    from tests.dra.test_dra_allocation import node as dra_node
    from tests.dra.test_dra_allocation import pod as dra_pod

    snap = ClusterSnapshot.from_objects(
        [
            dra_node("a"),
            slice_("a", [device("gpu-0")]),
            device_class(),
            claim("c", [exactly(cls="unstick-none")]),
            dra_pod("p", "c"),
        ]
    )
    v = simulate(snap, snap.pods[("default", "p")], kube_version=version)
    assert v.message == (
        f"0/1 nodes are available: request gpu: device class unstick-none does not exist. {note}"
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
