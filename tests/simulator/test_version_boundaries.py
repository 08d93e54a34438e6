"""Each wording change of kube-scheduler at its boundary: the last release that printed the old
words and the first that printed the new ones (analyzers/simulator/versions.py names each change).
Checked against the upstream sources where the module cache has them:
tainttoleration/taint_toleration.go (v1.33.7 ``untolerated taint {k: v}``, v1.34.2 and v1.35.4
``untolerated taint(s)``), volumebinding/binder.go ErrReasonNodeConflict (v1.32.13 / v1.33.7),
dynamicresources/dynamicresources.go PostFilter ``no new claims to deallocate``."""

from __future__ import annotations

import pytest

from analyzers.simulator import simulate, wording_for
from tests.simulator.builders import node, pod, pod_of, snapshot, taint

KEYED = "node(s) had untolerated taint {dedicated: gpu}"
GENERIC = "node(s) had untolerated taint(s)"
LEGACY = "node(s) had taint {dedicated: gpu}, that the pod didn't tolerate"


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("1.23", LEGACY),
        ("1.24", KEYED),
        ("1.34.1", KEYED),
        ("1.34.2", GENERIC),  # kubernetes#135023, the cherry-pick of #134740
        ("1.35.0", GENERIC),
        ("1.36", GENERIC),
    ],
)
def test_the_taint_reason_by_release(version: str, reason: str) -> None:
    snap = snapshot(node("n", taints=[taint("dedicated", "gpu")]), pod("p"))
    v = simulate(snap, pod_of(snap, "p"), kube_version=version)
    assert v.message.startswith(f"0/1 nodes are available: 1 {reason}.")


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("1.19", "node(s) didn't match node selector"),
        ("1.20", "node(s) didn't match Pod's node affinity"),
        ("1.21", "node(s) didn't match Pod's node affinity/selector"),
    ],
)
def test_the_node_affinity_reason_by_release(version: str, reason: str) -> None:
    assert wording_for(version).node_affinity_reason == reason


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("1.25", None),
        ("1.26", "node is filtered out by the prefilter result"),
        ("1.30", "node is filtered out by the prefilter result"),
        ("1.31", "node(s) didn't satisfy plugin(s) [NodeAffinity]"),
    ],
)
def test_nodes_left_out_by_a_prefilter_result_by_release(version: str, reason: str | None) -> None:
    assert wording_for(version).prefilter_result_reason == reason


@pytest.mark.parametrize(
    ("version", "generic", "pv_reason"),
    [
        ("1.21", True, "node(s) had volume node affinity conflict"),
        ("1.22", False, "node(s) had volume node affinity conflict"),
        ("1.32", False, "node(s) had volume node affinity conflict"),
        ("1.33", False, "node(s) didn't match PersistentVolume's node affinity"),
    ],
)
def test_interpod_and_volume_reasons_by_release(version: str, generic: bool, pv_reason: str) -> None:
    w = wording_for(version)
    assert (w.interpod_generic_reason, w.pv_node_conflict_reason) == (generic, pv_reason)


# (version, preemption clause, PreFilter message counted, "..", no-victims after PreFilter,
#  VolumeRestrictions reads claims, PreFilter runs past Unschedulable, too-big request
#  unresolvable, DRA PostFilter clause)
LAYOUT = [
    ("1.23", False, True, False, False, False, False, False, False),
    ("1.24", True, True, False, False, False, False, False, False),
    ("1.25", True, True, False, False, False, False, False, False),
    ("1.26", True, False, True, True, False, False, False, False),
    ("1.27", True, False, True, True, True, False, False, False),
    ("1.28", True, False, True, True, True, False, False, False),
    ("1.29", True, False, False, False, True, False, False, False),
    ("1.30", True, False, False, False, True, True, False, False),
    ("1.33", True, False, False, False, True, True, False, False),
    ("1.34", True, False, False, False, True, True, True, True),
]


@pytest.mark.parametrize("row", LAYOUT, ids=[r[0] for r in LAYOUT])
def test_message_layout_and_prefilter_behaviour_by_release(row: tuple[object, ...]) -> None:
    w = wording_for(str(row[0]))
    assert (
        w.preemption_clause,
        w.prefilter_counted,
        w.double_dot,
        w.prefilter_preemption_no_victims,
        w.volume_restrictions_reads_claims,
        w.prefilter_runs_past_unschedulable,
        w.resource_unresolvable,
        w.dra_postfilter,
    ) == row[1:]


def test_releases_before_the_framework_scheduler_read_as_its_first() -> None:
    assert wording_for("1.17.9").version == (1, 18, 0)
    assert wording_for("1.18.3").version == (1, 18, 3)
