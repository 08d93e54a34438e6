"""Finding the Kueue Workload of a gated pod by its computed name (analyzers/kueue.py),
and the agent keeping Kueue's words on Workloads (agent/cache.py)."""

from __future__ import annotations

import pytest

from agent.cache import ClusterCache
from agent.kube.watcher import Delta
from analyzers.kueue import candidate_workloads, workload_name
from analyzers.records import OwnerRef
from analyzers.snapshot import ClusterState

LONG = (
    "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-social-media-"
    "engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-senior-architect-"
    "validation-checked-approved-by-legal-and-ops-dept"
)


# sigs.k8s.io/kueue v0.17.0 pkg/controller/jobframework/workload_names_test.go (extra ""; gvk batch/v1 Job).
@pytest.mark.parametrize(
    ("name", "max_length", "want"),
    [
        ("name", 253, "job-name-ef3a1"),
        (
            LONG,
            253,
            "job-marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-"
            "social-media-engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-"
            "senior-architect-validation-checked-approved-by-l-218b8",
        ),
        (LONG, 63, "job-marketing-campaign-autumn-2024-region-north-america-d-218b8"),
    ],
)
def test_workload_names_match_kueues_own_table(name: str, max_length: int, want: str) -> None:
    assert workload_name("Job", "batch", name, "uid", max_length) == want


def _pod(name: str, uid: str, owner: OwnerRef | None = None, labels: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    state = ClusterState()
    meta: dict = {"name": name, "namespace": "ml", "uid": uid, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": owner.api_version,
                "kind": owner.kind,
                "name": owner.name,
                "uid": owner.uid,
                "controller": True,
            }
        ]
    state.apply_object(
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c"}]}}, "test"
    )
    return state.snapshot().pods[("ml", name)]


def test_candidates_cover_the_pod_its_owner_chain_and_its_group() -> None:
    jobset = OwnerRef("JobSet", "train", "js-uid", "jobset.x-k8s.io/v1alpha2")
    job = OwnerRef("Job", "train-workers-0", "job-uid", "batch/v1")
    pod = _pod("train-workers-0-0-abcde", "pod-uid", job, {"kueue.x-k8s.io/pod-group-name": "group-a"})
    names = candidate_workloads(pod, {("Job", "train-workers-0"): jobset})
    assert names[0] == "group-a"
    for kind, group, name, uid in [
        ("Pod", "", pod.name, "pod-uid"),
        ("Job", "batch", "train-workers-0", "job-uid"),
        ("JobSet", "jobset.x-k8s.io", "train", "js-uid"),
    ]:
        assert workload_name(kind, group, name, uid) in names
        assert workload_name(kind, group, name, uid, 63) in names
    # Without the Job's own owner in view, the chain stops at the Job.
    assert workload_name("JobSet", "jobset.x-k8s.io", "train", "js-uid") not in candidate_workloads(pod, {})


def _event(kind: str, reason: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{kind}-{reason}", "namespace": "ml", "uid": f"{kind}-{reason}"},
        "involvedObject": {"kind": kind, "name": "w", "namespace": "ml"},
        "reason": reason,
        "message": "couldn't assign flavors to pod set main: flavor a100 not found",
        "lastTimestamp": "2026-11-21T09:00:00Z",
    }


@pytest.mark.parametrize(
    ("kind", "reason", "kept"),
    [
        ("Workload", "Pending", True),
        ("Workload", "SecondPassFailed", True),
        ("Pod", "Pending", False),
        ("Workload", "Created", False),
    ],
)
def test_the_cache_keeps_kueues_workload_events_and_no_other_pending(
    kind: str, reason: str, kept: bool
) -> None:
    cache = ClusterCache()
    assert cache.apply(Delta("Event", "ADDED", _event(kind, reason))) is kept
    assert cache.stats.events_dropped == (0 if kept else 1)
