"""Message layout (FitError.Error(), pkg/scheduler/framework/types.go) and the
version table (analyzers/simulator/versions.py)."""

from __future__ import annotations

import pytest

from analyzers.simulator import VersionError, parse_version, simulate, wording_for
from analyzers.simulator.nodeinfo import bits, mask_of
from analyzers.simulator.render import fit_error, histogram
from tests.simulator.builders import node, pod, pod_of, snapshot


def test_histogram_sorts_count_reason_strings_bytewise() -> None:
    # Go's sort.Strings on "count reason": "10 ..." sorts before "9 ...".
    assert histogram({"node(s) were unschedulable": 9, "Insufficient cpu": 10, "Insufficient memory": 2}) == (
        "10 Insufficient cpu, 2 Insufficient memory, 9 node(s) were unschedulable"
    )


def test_histogram_leaves_out_reasons_no_node_gave() -> None:
    assert histogram({"Insufficient cpu": 2, "Too many pods": 0}) == "2 Insufficient cpu"


def test_rendered_counts_follow_go_sorting_in_a_real_cluster() -> None:
    objs = [node(f"small-{i}", cpu="1") for i in range(10)] + [
        node(f"cordoned-{i}", unschedulable=True) for i in range(9)
    ]
    objs.append(pod("p", requests={"cpu": "2"}))
    snap = snapshot(*objs)
    msg = simulate(snap, pod_of(snap, "p")).message
    assert msg.startswith(
        "0/19 nodes are available: 10 Insufficient cpu, 9 node(s) were unschedulable. preemption:"
    )


def test_fit_error_variants() -> None:
    w = wording_for("1.30")
    assert fit_error(0, w, reasons={}) == "no nodes available to schedule pods"
    assert (
        fit_error(3, w, reasons={"x": 3}, prefilter=("x",), postfilter="preemption: y.")
        == "0/3 nodes are available: x. preemption: y."
    )
    old = wording_for("1.25")
    assert fit_error(3, old, reasons={"x": 3}, prefilter=("x",)) == "0/3 nodes are available: 3 x."
    dots = wording_for("1.28")
    assert (
        fit_error(2, dots, reasons={"x": 2}, postfilter="preemption: y.")
        == "0/2 nodes are available: 2 x. preemption: y.."
    )


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("1.29", (1, 29, 0)),
        ("v1.29.3", (1, 29, 3)),
        ("1.30.2-eks-a1b2", (1, 30, 2)),
        ("v1.31.0+k3s1", (1, 31, 0)),
    ],
)
def test_parse_version(text: str, parsed: tuple[int, int, int]) -> None:
    assert parse_version(text) == parsed


def test_parse_version_rejects_garbage_and_clamps_old_versions() -> None:
    with pytest.raises(VersionError):
        parse_version("latest")
    assert wording_for("1.12").version == (1, 18, 0)
    assert wording_for(None).label == "1.33.0"


def test_bits_and_masks_round_trip() -> None:
    idx = [0, 3, 64, 65, 4999]
    assert bits(mask_of(idx, 5000)) == idx
    many = list(range(0, 5000, 7))
    assert bits(mask_of(many, 5000)) == many
    assert bits(0) == []
