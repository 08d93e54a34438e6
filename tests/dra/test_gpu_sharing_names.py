"""A pod asking ``nvidia.com/gpu`` on nodes whose device plugin advertises GPUs under
another name (MIG strategy mixed: ``nvidia.com/mig-1g.10gb``; time-slicing renamed:
``nvidia.com/gpu.shared``) is told the name the nodes use."""

from __future__ import annotations

import time
from typing import Any

from analyzers.report import build_report
from analyzers.snapshot import ClusterSnapshot
from tests.dra.test_dra_allocation import node


def gpu_pod(resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "infer",
            "namespace": "ml",
            "uid": "uid-infer",
            "creationTimestamp": "2026-11-20T09:00:00Z",
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {resource: "1"}, "limits": {resource: "1"}},
                }
            ]
        },
        "status": {"phase": "Pending"},
    }


def finding(*objects: dict[str, Any]) -> Any:
    snap = ClusterSnapshot.from_objects(list(objects), kube_version="v1.37.2")
    found = [f for f in build_report(snap, now=time.time()).findings if f.rule_id == "insufficient-resources"]
    assert len(found) == 1
    return found[0]


def test_mig_profiles_are_named_for_a_plain_gpu_request() -> None:
    mig = node("gpu-0")
    mig["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "7"
    f = finding(mig, gpu_pod())
    assert "nodes offer GPUs under another name: nvidia.com/mig-1g.10gb (7 on 1 node, MIG)" in f.explanation
    assert "request nvidia.com/mig-1g.10gb instead" in f.explanation
    assert f.evidence["offered_under_other_names"]["nvidia.com/gpu"][0]["kind"] == "mig"


def test_time_sliced_renamed_gpus_are_named_with_the_replicas_label() -> None:
    shared = node("gpu-0", **{"nvidia.com/gpu.replicas": "4"})
    shared["status"]["allocatable"]["nvidia.com/gpu.shared"] = "4"
    f = finding(shared, gpu_pod())
    assert "nvidia.com/gpu.shared (4 on 1 node, time-sliced)" in f.explanation
    assert "time-sliced (label nvidia.com/gpu.replicas)" in f.explanation


def test_no_other_name_when_the_nodes_offer_none() -> None:
    f = finding(node("cpu-0"), gpu_pod())
    assert "another name" not in f.explanation
    assert "offered_under_other_names" not in f.evidence
