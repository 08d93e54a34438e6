"""Seed 000 on DRA: a single-replica Deployment whose pod asks the one GPU of its node
through a ResourceClaimTemplate or a DRA-backed ``nvidia.com/gpu`` (a DeviceClass's
``extendedResourceName``), default strategy (maxSurge 1, maxUnavailable 0): the new
pod's claim cannot be allocated while the old pod's claim holds the device. The same
deadlock, found by rollout-surge-deadlock, fixed by the same remedy -- re-simulated
with the old pod gone *and its claim deleted* (the resourceclaim controller deletes a
claim its pod owns: the template's claim, and the scheduler's extended-resource claim).
The real control plane plays both end to end in tests/realcluster/test_dra_seed000.py."""

from __future__ import annotations

import time
from typing import Any

import pytest

from analyzers.report import build_report
from analyzers.snapshot import ClusterSnapshot
from tests.dra.test_dra_allocation import DRIVER, device, device_class, node, slice_

NS = "ml"


GPU = "nvidia.com/gpu"


def template(image: str, extended: bool = False) -> dict[str, Any]:
    if extended:  # a plain extended-resource request, served through DRA
        gpu = {GPU: "1"}
        spec: dict[str, Any] = {
            "containers": [{"name": "c", "image": image, "resources": {"requests": gpu, "limits": gpu}}]
        }
    else:
        spec = {
            "containers": [{"name": "c", "image": image, "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        }
    return {
        "metadata": {"labels": {"app": "tracker"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-node"}, **spec},
    }


def replicaset(name: str, revision: str, image: str, replicas: int, extended: bool) -> dict[str, Any]:
    t = template(image, extended)
    t["metadata"]["labels"]["pod-template-hash"] = name.rsplit("-", 1)[1]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": t["metadata"]["labels"],
            "annotations": {"deployment.kubernetes.io/revision": revision},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "tracker",
                    "uid": "uid-dep",
                    "controller": True,
                }
            ],
        },
        "spec": {"replicas": replicas, "selector": {"matchLabels": t["metadata"]["labels"]}, "template": t},
        "status": {"replicas": replicas},
    }


def pod(name: str, rs: str, image: str, *, node_name: str = "", claim: str, extended: bool) -> dict[str, Any]:
    t = template(image, extended)
    if extended:  # the scheduler's claim for the extended resource, once allocated
        claims: dict[str, Any] = (
            {
                "extendedResourceClaimStatus": {
                    "resourceClaimName": claim,
                    "requestMappings": [
                        {"containerName": "c", "resourceName": GPU, "requestName": "container-0-request-0"}
                    ],
                }
            }
            if node_name
            else {}
        )
    else:
        claims = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-11-20T09:00:00Z",
            "labels": {**t["metadata"]["labels"], "pod-template-hash": rs.rsplit("-", 1)[1]},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": rs,
                    "uid": f"uid-{rs}",
                    "controller": True,
                }
            ],
        },
        "spec": {**t["spec"], **({"nodeName": node_name} if node_name else {})},
        "status": {
            "phase": "Running" if node_name else "Pending",
            **claims,
        },
    }


def generated_claim(
    name: str, owner: str, *, device_name: str = "", extended: bool = False
) -> dict[str, Any]:
    """The claim the resourceclaim controller creates from the template, or (``extended``)
    the one kube-scheduler creates for a DRA-backed extended resource
    (extendeddynamicresources.go v1.37.2: owned by the pod, annotated, one request per
    resource named ``container-<i>-request-<j>``)."""
    request = "container-0-request-0" if extended else "gpu"
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{owner}", "controller": True}
            ],
        },
        "spec": {"devices": {"requests": [{"name": request, "exactly": {"deviceClassName": "gpu"}}]}},
    }
    if extended:
        obj["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    if device_name:
        obj["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": request, "driver": DRIVER, "pool": "gpu-node", "device": device_name}
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": owner, "uid": f"uid-{owner}"}],
        }
    return obj


def cluster(extended: bool) -> list[dict[str, Any]]:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "tracker",
            "namespace": NS,
            "uid": "uid-dep",
            "annotations": {"deployment.kubernetes.io/revision": "2"},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "tracker"}},
            "template": template("tracker:2", extended),
        },
        "status": {"replicas": 2, "updatedReplicas": 1, "availableReplicas": 1},
    }
    claim_template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}},
    }
    gpu_class = device_class()
    if extended:
        gpu_class["spec"]["extendedResourceName"] = GPU
    objects = [
        node("gpu-node"),
        node("cpu-node"),
        slice_("gpu-node", [device("gpu-0")]),
        gpu_class,
        deployment,
        replicaset("tracker-old1", "1", "tracker:1", 1, extended),
        replicaset("tracker-new2", "2", "tracker:2", 1, extended),
        pod(
            "tracker-old1-a",
            "tracker-old1",
            "tracker:1",
            node_name="gpu-node",
            claim="tracker-old1-a-gpu-x",
            extended=extended,
        ),
        generated_claim("tracker-old1-a-gpu-x", "tracker-old1-a", device_name="gpu-0", extended=extended),
        pod("tracker-new2-b", "tracker-new2", "tracker:2", claim="tracker-new2-b-gpu-y", extended=extended),
    ]
    if not extended:  # the template's claim exists before scheduling; the scheduler makes the other
        objects += [claim_template, generated_claim("tracker-new2-b-gpu-y", "tracker-new2-b")]
    return objects


@pytest.mark.parametrize("extended", [False, True], ids=["claim-template", "dra-extended-resource"])
def test_the_surge_deadlock_on_dra_is_found_and_its_remedy_verified(extended: bool) -> None:
    snap = ClusterSnapshot.from_objects(cluster(extended), kube_version="v1.37.2")
    assert not snap.warnings, snap.warnings
    findings = build_report(snap, now=time.time()).findings
    (f,) = [f for f in findings if f.rule_id == "rollout-surge-deadlock"]
    assert f.subject.name == "tracker"
    assert "cannot allocate all claims" in f.explanation
    verified = [r for r in f.remedies if r.verified]
    assert any("maxUnavailable: 1" in r.yaml and "maxSurge: 0" in r.yaml for r in verified), [
        (r.title, r.verified, r.verification) for r in f.remedies
    ]
