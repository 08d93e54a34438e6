"""Seed incident 1 (shared/seeds/000_*): a replicas-1 Deployment pinned by
nodeSelector to the one GPU node, whose only GPU the old pod holds; the new
ReplicaSet's pod stays Pending. The message must match kube-scheduler's byte
for byte (FitError.Error() in pkg/scheduler/framework/types.go, preemption in
pkg/scheduler/framework/preemption/preemption.go)."""

import pytest

from analyzers.simulator import simulate
from tests.simulator.builders import node, pod, pod_of, snapshot

SEED_MESSAGE = (
    "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/10 nodes are available: 1 No preemption victims found for incoming "
    "pod, 9 Preemption is not helpful for scheduling."
)


def seed_cluster(kube_version: str | None = None):  # type: ignore[no-untyped-def]
    objs = [node(f"worker-{i}", labels={"node-role": "cpu"}) for i in range(9)]
    objs.append(node("tracker", extra={"nvidia.com/gpu": "1"}))
    template = {"limits": {"nvidia.com/gpu": "1"}, "node_selector": {"kubernetes.io/hostname": "tracker"}}
    labels = {"app": "ns-object-tracker"}
    objs.append(
        pod(
            "tracker-7d9c-old",
            node_name="tracker",
            labels={**labels, "pod-template-hash": "7d9c"},
            **template,
        )
    )
    objs.append(pod("tracker-5f6b-new", labels={**labels, "pod-template-hash": "5f6b"}, **template))
    return snapshot(*objs, kube_version=kube_version)


def test_seed_incident_renders_kube_schedulers_exact_message() -> None:
    snap = seed_cluster()
    verdict = simulate(snap, pod_of(snap, "tracker-5f6b-new"))
    assert verdict.message == SEED_MESSAGE
    assert not verdict.fits
    assert verdict.feasible_nodes == 0
    assert dict(verdict.reason_counts) == {"insufficient-resource": 1, "node-affinity-mismatch": 9}
    assert dict(verdict.reasons) == {
        "Insufficient nvidia.com/gpu": 1,
        "node(s) didn't match Pod's node affinity/selector": 9,
    }
    pre = verdict.preemption
    assert pre.attempted and pre.eligible and pre.candidates == ()
    assert dict(pre.reason_counts) == {"preemption-no-victims": 1, "preemption-not-helpful": 9}


def test_seed_incident_per_node_detail_gives_the_numbers() -> None:
    snap = seed_cluster()
    verdict = simulate(snap, pod_of(snap, "tracker-5f6b-new"))
    tracker = verdict.node("tracker")
    assert tracker is not None and not tracker.fits
    (fit,) = tracker.filters
    assert (fit.plugin, fit.code, fit.reasons) == (
        "NodeResourcesFit",
        "Unschedulable",
        ("Insufficient nvidia.com/gpu",),
    )
    assert dict(fit.detail["resources"][0]) == {
        "resource": "nvidia.com/gpu",
        "requested": 1,
        "used": 1,
        "free": 0,
        "allocatable": 1,
    }
    worker = verdict.node("worker-0")
    assert worker is not None
    # every failing filter, in order: the first is what kube-scheduler reports
    assert [f.plugin for f in worker.filters] == ["NodeAffinity", "NodeResourcesFit"]
    assert worker.filters[0].code == "UnschedulableAndUnresolvable"


def test_seed_incident_as_dict_has_the_contract_fields() -> None:
    snap = seed_cluster()
    data = simulate(snap, pod_of(snap, "tracker-5f6b-new")).as_dict()
    assert data["message"] == SEED_MESSAGE
    assert len(data["nodes"]) == 10
    first = data["nodes"][0]
    assert set(first) == {"node", "fits", "filters"}
    assert set(first["filters"][0]) >= {"plugin", "code", "reasons"}
    assert data["preemption"]["message"].startswith("preemption: 0/10 nodes are available:")


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (
            "1.23",
            "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node affinity/selector.",
        ),
        ("1.25", SEED_MESSAGE),
        ("v1.27.4", SEED_MESSAGE + "."),  # 1.26-1.28: SeparatorFormat " %v." around the PostFilter message
        ("1.29", SEED_MESSAGE),
        ("1.33", SEED_MESSAGE),
        (
            "1.34",
            SEED_MESSAGE.replace(" preemption:", " no new claims to deallocate, preemption:"),
        ),
    ],
)
def test_seed_incident_wording_follows_the_cluster_version(version: str, expected: str) -> None:
    snap = seed_cluster()
    assert simulate(snap, pod_of(snap, "tracker-5f6b-new"), kube_version=version).message == expected


def test_snapshot_version_is_used_when_no_version_is_given() -> None:
    snap = seed_cluster(kube_version="1.27.1")
    assert simulate(snap, pod_of(snap, "tracker-5f6b-new")).message.endswith("scheduling..")


def test_more_gpu_on_the_node_lets_the_new_pod_fit() -> None:
    snap = seed_cluster()
    bigger = node("tracker", extra={"nvidia.com/gpu": "2"})
    from analyzers.ingest import Decoder

    snap2 = snap.replace(Decoder().decode(bigger))  # type: ignore[arg-type]
    verdict = simulate(snap2, pod_of(snap2, "tracker-5f6b-new"))
    assert verdict.fits and verdict.feasible_nodes == 1 and verdict.message == ""
    assert not verdict.preemption.attempted
