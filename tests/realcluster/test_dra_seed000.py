"""Seed 000 on DRA, end to end on the real control plane (issue 23's "Done when").

A single-replica Deployment pinned to the one node with a GPU, default strategy
(RollingUpdate 25%/25%: maxSurge 1, maxUnavailable 0), whose pod gets that node's
only device through Dynamic Resource Allocation -- (a) a ResourceClaimTemplate
(kube-controller-manager's resourceclaim-controller creates the pod's claim) or
(b) a plain ``nvidia.com/gpu: 1`` request served through DRA because a DeviceClass
names it in ``extendedResourceName`` (DRAExtendedResource, GA in 1.37; the node does
not advertise the resource, the scheduler allocates a special claim for the pod).
The slice is published as a DRA driver would; no kubelet plugin is needed to
schedule and allocate.

A new image deadlocks the rollout: the surge pod's claim cannot be allocated while
the old pod's holds the device, and the old pod may not go first. Per case:

- the real kube-scheduler's ``PodScheduled=False`` message is the one expected, and
  unstick's simulation of the same objects (DRA kinds included) gives the same filter
  part and preemption verdict;
- the old pod's claim is allocated the node's device (``status.allocation``) with the
  scheduler's ``resource.kubernetes.io/delete-protection`` finalizer;
- ``unstick watch``'s agent, watching the real API server, opens
  ``rollout-surge-deadlock`` with a verified remedy (re-simulated, and accepted by a
  server dry-run); the remedy applied with kubectl completes the rollout (the old pod
  goes, the resourceclaim controller releases its claim, the new pod is allocated the
  device and bound) and the incident resolves.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.conftest import Cluster, scheduled_condition
from tests.realcluster.harness import ApiError, node
from tests.realcluster.replay import delete_claim, set_up, watch_remedy_resolve
from tests.realcluster.seeds import Seed, container, deployment
from tests.realcluster.verdicts import (
    DRA_LISTS,
    LISTS,
    cluster_objects,
    preemption_histogram,
    simulate_objects,
    split_message,
)

pytestmark = pytest.mark.realcluster

API = "resource.k8s.io/v1"
DRIVER = "gpu.unstick.test"
GPU_NODE = "gpu-node"
# kube-scheduler v1.37.2: DynamicResources' Filter rejects the GPU node with
# "cannot allocate all claims" (statusUnschedulable: UnschedulableAndUnresolvable,
# pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go), so preemption
# finds every node "not helpful"; NodeAffinity rejects the other two. v1.37 DynamicResources'
# PostFilter adds no text for a claim it cannot deallocate (the old pod's claim is in use).
MESSAGE = (
    "0/3 nodes are available: 1 cannot allocate all claims, 2 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)


def device_class(extended_resource: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": "{ns}-gpu"}, "spec": spec}


def one_gpu_slice() -> dict[str, Any]:
    """The GPU node's pool as a driver publishes it: one slice, one device."""
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": "{ns}-gpu-node"},
        "spec": {
            "driver": DRIVER,
            "nodeName": GPU_NODE,
            "pool": {"name": "{ns}-gpu-node", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "A10G"}}}],
        },
    }


def nodes() -> list[dict[str, Any]]:
    # The GPU node advertises no nvidia.com/gpu: its GPU exists only as a DRA device.
    return [node("cpu-0"), node("cpu-1"), node(GPU_NODE, cpu="8", memory="32Gi", labels={"gpu": "a10g"})]


def seed(case: str, pod_spec: dict[str, Any], objects: list[dict[str, Any]], extended: str | None) -> Seed:
    return Seed(
        id=case,
        nodes=nodes(),
        cluster_scoped=[device_class(extended), one_gpu_slice()],
        objects=[
            *objects,
            deployment("tracker", 1, {"nodeSelector": {"kubernetes.io/hostname": GPU_NODE}, **pod_spec}),
        ],
        stuck_label={"app": "tracker"},
        ready_first=True,
        stick=["set", "image", "deployment/tracker", "app=registry.example/tracker:2"],
        message=MESSAGE,
        severity="critical",
        rule_id="rollout-surge-deadlock",
        subject="tracker",
        remedy_contains="maxSurge: 0",
    )


CLAIM_TEMPLATE = {
    "apiVersion": API,
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu"},
    "spec": {
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "{ns}-gpu"}}]}}
    },
}

SEEDS = [
    seed(
        "claim-template",
        {
            "containers": [
                {**container("registry.example/tracker:1"), "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        },
        [CLAIM_TEMPLATE],
        None,
    ),
    seed(
        "dra-extended-resource",
        {"containers": [container("registry.example/tracker:1", nvidia_com_gpu="1")]},
        [],
        "nvidia.com/gpu",
    ),
]


def claims(cluster: Cluster) -> list[dict[str, Any]]:
    return list(cluster.api.get(f"/apis/{API}/namespaces/{cluster.ns}/resourceclaims")["items"])


def check_stuck(cluster: Cluster, seed: Seed, pod: dict[str, Any]) -> None:
    """The real verdict and unstick's simulation of it; the device held by the old pod's claim."""
    real = (scheduled_condition(pod) or {}).get("message", "")
    assert real == seed.message, f"kube-scheduler said:\n{real}"
    verdict = simulate_objects(
        cluster_objects(cluster.api, LISTS + DRA_LISTS), cluster.ns, pod["metadata"]["name"]
    )
    assert split_message(verdict.message)[0] == split_message(real)[0], verdict.message
    assert preemption_histogram(verdict.message) == preemption_histogram(real)
    allocated = [c for c in claims(cluster) if (c.get("status") or {}).get("allocation")]
    assert len(allocated) == 1, [c["metadata"]["name"] for c in claims(cluster)]
    (held,) = allocated
    results = held["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [
        (DRIVER, f"{cluster.ns}-gpu-node", "gpu-0")
    ]
    assert "resource.kubernetes.io/delete-protection" in held["metadata"].get("finalizers", [])
    owner = held["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "Pod" and owner["name"] != pod["metadata"]["name"]  # the old pod's claim


@pytest.mark.parametrize("seed", SEEDS, ids=[s.id for s in SEEDS])
async def test_dra_surge_deadlock_is_opened_remedied_and_resolved(
    cluster: Cluster, seed: Seed, tmp_path: Path
) -> None:
    cleanup = await asyncio.to_thread(set_up, cluster, seed)
    try:
        incident = await watch_remedy_resolve(
            cluster, seed, tmp_path, cleanup, on_stuck=lambda pod: check_stuck(cluster, seed, pod)
        )
        assert incident.severity == seed.severity
        assert "cannot allocate all claims" in incident.explanation
        # the rollout completed on the device: the new pod's claim holds gpu-0, the old one is gone
        live = [c for c in claims(cluster) if not c["metadata"].get("deletionTimestamp")]
        devices = [
            r["device"]
            for c in live
            for r in c.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
        ]
        assert devices == ["gpu-0"], live
    finally:
        for pod in cluster.api.get(f"/api/v1/namespaces/{cluster.ns}/pods")["items"]:
            with contextlib.suppress(ApiError):
                cluster.api.delete(f"/api/v1/namespaces/{cluster.ns}/pods/{pod['metadata']['name']}", grace=0)
        cluster.api.delete(f"/apis/apps/v1/namespaces/{cluster.ns}/deployments/tracker")
        for claim in claims(cluster):
            delete_claim(cluster, claim["metadata"]["name"])
        for path in cleanup:
            with contextlib.suppress(ApiError):
                cluster.api.delete(path)
