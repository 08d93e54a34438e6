"""Every scheduling message in Kubernetes' own test tables (k8s.io/kubernetes v1.35.4),
parsed into what it says: pkg/scheduler/framework/types_test.go (FitError.Error: the
PreFilter, Filter and PostFilter parts), test/integration/dra/dra_test.go (DRA's reasons
and PostFilter notes) and pkg/scheduler/framework/plugins/defaultpreemption/
default_preemption_test.go (preemption's own status message)."""

from __future__ import annotations

import pytest

from analyzers.messages import SCHEDULING, parse_message_uncached
from analyzers.messages import reasons as r

PNH = "preemption: 0/8 nodes are available: 8 Preemption is not helpful for scheduling."

# (message, total, [(count, code)], notes, preemption verdict or None)
TABLE = [
    # test/integration/dra/dra_test.go
    (f"0/8 nodes are available: 8 cannot allocate all claims. still not schedulable, {PNH}", 8,
     [(8, r.DRA_CANNOT_ALLOCATE)], ("still not schedulable",), "cannot-help"),
    (f"0/8 nodes are available: 8 Insufficient my-example.com/my-extended-resource. no new claims to deallocate, {PNH}", 8,
     [(8, r.INSUFFICIENT_RESOURCE)], ("no new claims to deallocate",), "cannot-help"),
    (f"0/8 nodes are available: 1 invalid resource pools were encountered, 7 cannot allocate all claims. still not schedulable, {PNH}", 8,
     [(1, r.DRA_INVALID_POOLS), (7, r.DRA_CANNOT_ALLOCATE)], ("still not schedulable",), "cannot-help"),
    (f"0/8 nodes are available: 8 invalid resource pools were encountered. still not schedulable, {PNH}", 8,
     [(8, r.DRA_INVALID_POOLS)], ("still not schedulable",), "cannot-help"),
    # pkg/scheduler/framework/types_test.go (TestFitError_Error; its plugins are test doubles)
    ("0/3 nodes are available: Node(s) failed PreFilter plugin FalsePreFilter.", 3, [(None, r.OTHER)], (), None),
    ("0/3 nodes are available: Node(s) failed PreFilter plugin FalsePreFilter. Error running PostFilter plugin FailedPostFilter", 3,
     [(None, r.OTHER)], ("Error running PostFilter plugin FailedPostFilter",), None),
    ("0/3 nodes are available: 3 Node(s) failed Filter plugin FalseFilter-1.", 3, [(3, r.OTHER)], (), None),
    ("0/3 nodes are available: 3 Node(s) failed Filter plugin FalseFilter-1. Error running PostFilter plugin FailedPostFilter", 3,
     [(3, r.OTHER)], ("Error running PostFilter plugin FailedPostFilter",), None),
    ("0/3 nodes are available: 1 Node(s) failed Filter plugin FalseFilter-2, 2 Node(s) failed Filter plugin FalseFilter-1.", 3,
     [(1, r.OTHER), (2, r.OTHER)], (), None),
    ("0/3 nodes are available: 1 Node(s) failed Filter plugin FalseFilter-2, 2 Node(s) failed Filter plugin FalseFilter-1. Error running PostFilter plugin FailedPostFilter", 3,
     [(1, r.OTHER), (2, r.OTHER)], ("Error running PostFilter plugin FailedPostFilter",), None),
    ("0/1 nodes are available: 1 Node failed Permit plugin Permit-1.", 1, [(1, r.OTHER)], (), None),
    ("0/1 nodes are available: 1 Node failed Reserve plugin Reserve-1.", 1, [(1, r.OTHER)], (), None),
]  # fmt: skip


@pytest.mark.parametrize(("message", "total", "reasons", "notes", "verdict"), TABLE)
def test_fit_errors_from_upstream_tables(
    message: str,
    total: int,
    reasons: list[tuple[int | None, str]],
    notes: tuple[str, ...],
    verdict: str | None,
) -> None:
    parsed = parse_message_uncached(message)
    assert (parsed.kind, parsed.total_nodes, parsed.truncated, parsed.head_missing) == (
        SCHEDULING,
        total,
        False,
        False,
    )
    assert [(x.count, x.code) for x in parsed.reasons] == reasons
    assert parsed.notes == notes
    assert (parsed.preemption.verdict if parsed.preemption is not None else None) == verdict


# default_preemption_test.go: PostFilter's own status message, as a FitError appends it.
PREEMPTION = [
    ("preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.", 1, "cannot-help"),
    ("preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.", 1, "cannot-help"),
    ("preemption: 0/2 nodes are available: 2 Insufficient cpu.", 2, "no-candidate"),
    ("preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.", 3, "no-candidate"),
    ("preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.", 4, "no-candidate"),
]  # fmt: skip


@pytest.mark.parametrize(("message", "total", "verdict"), PREEMPTION)
def test_preemption_statuses_from_upstream_tables_are_never_the_filter_verdict(
    message: str, total: int, verdict: str
) -> None:
    parsed = parse_message_uncached(message)
    assert (parsed.format, parsed.reasons) == ("preemption-only", ())
    assert parsed.preemption is not None
    assert (parsed.preemption.total_nodes, parsed.preemption.verdict) == (total, verdict)


def test_prose_after_a_fit_error_is_not_a_note() -> None:
    parsed = parse_message_uncached(
        "0/3 nodes are available: 3 Insufficient cpu. I have tried everything since Monday"
    )
    assert parsed.notes == ()
