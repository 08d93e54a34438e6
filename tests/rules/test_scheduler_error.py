"""scheduler-error: a pod kube-scheduler keeps failing with an error (not a FitError),
judged by the newest FailedScheduling event."""

from __future__ import annotations

from tests.rules.placement_fixtures import deployment, findings, node, pod_event, snapshot, template

POD = "web-5d8f7c9b6-p000"
PREBIND = 'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
FIT = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."


def _event(message: str, last: str, name: str) -> dict:
    ev = pod_event(POD, "FailedScheduling", message, source="default-scheduler", last=last)
    ev["metadata"]["name"] = name
    return ev


def test_an_error_that_persists_past_the_threshold_is_named_with_its_point_and_plugin() -> None:
    snap = snapshot(node("w-0"), deployment("web", template()), _event(PREBIND, "2025-12-31T23:58:00Z", "e1"))
    [f] = findings(snap, "scheduler-error")
    assert (f.evidence["extension_point"], f.evidence["plugin"]) == ("PreBind", "VolumeBinding")
    assert f.evidence["error"] == "binding volumes: context deadline exceeded"
    assert f.evidence["waited_seconds"] == 600 and f.evidence["threshold_seconds"] == 300
    assert "kube-scheduler" in f.remedies[-1].command


def test_only_the_newest_event_counts() -> None:
    """An error followed by a FitError is a placement problem now; a FitError followed by
    an error is an error now."""
    older, newer = "2025-12-31T23:55:00Z", "2025-12-31T23:58:00Z"
    snap = snapshot(
        node("w-0"), deployment("web", template()), _event(PREBIND, older, "e1"), _event(FIT, newer, "e2")
    )
    assert findings(snap, "scheduler-error") == []
    snap = snapshot(
        node("w-0"), deployment("web", template()), _event(FIT, older, "e1"), _event(PREBIND, newer, "e2")
    )
    assert [f.evidence["plugin"] for f in findings(snap, "scheduler-error")] == ["VolumeBinding"]


def test_a_pod_being_deleted_is_not_an_error_finding() -> None:
    snap = snapshot(
        node("w-0"),
        deployment("web", template()),
        _event(f"skip schedule deleting pod: default/{POD}", "2025-12-31T23:58:00Z", "e1"),
    )
    assert findings(snap, "scheduler-error") == []
