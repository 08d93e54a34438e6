"""``--verify-with-dry-run``'s three request shapes (agent/dryrun.py) against the real API
server: what it accepts is accepted, what it refuses is refused, and nothing is stored."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from agent.dryrun import DryRunVerifier, dry_runs
from agent.kube.gateway import Gateway
from analyzers.findings import ObjectRef, Remedy
from analyzers.remedies import RemedyRenderer
from tests.realcluster.conftest import Cluster
from tests.realcluster.harness import node

pytestmark = pytest.mark.realcluster
R = RemedyRenderer()


def recreate(ns: str, name: str, patch: dict[str, Any]) -> Remedy:
    """A bare pod's placement fix as the rules write it (re-created with the change)."""
    remedy = R.patch("t", ObjectRef("Pod", ns, name), patch, verified=True, verification="v")
    return replace(
        remedy,
        command=f"kubectl get pod {name} -n {ns} -o json | kubectl patch --local -f - --type strategic -p '…'"
        " -o json | kubectl replace --force -f -",
    )


def manifest(obj: dict[str, Any], target: ObjectRef) -> Remedy:
    return R.manifest("t", target, "object.yaml.j2", verified=True, verification="v", obj=obj)


def local_pv(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "local": {"path": "/mnt/disks/x"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n-0"]}
                            ]
                        }
                    ]
                }
            },
            **spec,
        },
    }


async def test_each_dry_run_shape_is_refused_when_the_server_refuses_it(cluster: Cluster) -> None:
    ns = cluster.ns
    await asyncio.to_thread(cluster.nodes, [node("n-0")])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "namespace": ns},
        "spec": {"nodeSelector": {"gpu-typ": "a10g"}, "containers": [{"name": "app", "image": "x:1"}]},
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": ns},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "slow",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    cluster.api.create(pod)
    cluster.api.create(claim)
    pv_name = f"{ns}-pv"
    claim_ref = ObjectRef("PersistentVolumeClaim", ns, "data")
    fixed_selector = {"spec": {"nodeSelector": {"gpu-typ": None, "gpu-type": "a10g"}}}
    cases: list[tuple[str, Remedy, str | None]] = [
        ("re-created pod, valid selector", recreate(ns, "bare", fixed_selector), None),
        (
            "re-created pod, invalid label key",
            recreate(ns, "bare", {"spec": {"nodeSelector": {"bad key!": "x"}}}),
            "nodeSelector",
        ),
        (
            "the same selector fix as an in-place patch (a pod's nodeSelector is immutable)",
            R.patch("t", ObjectRef("Pod", ns, "bare"), fixed_selector, verified=True, verification="v"),
            "Forbidden: pod updates may not change fields",
        ),
        ("new PV", manifest(local_pv(pv_name), ObjectRef("PersistentVolume", "", pv_name)), None),
        (
            "new PV without a volume source's required path",
            manifest(local_pv(pv_name, local={}), ObjectRef("PersistentVolume", "", pv_name)),
            "spec.local.path",
        ),
        (
            "an existing claim applied with a new StorageClass (immutable)",
            manifest({**claim, "spec": {**claim["spec"], "storageClassName": "fast"}}, claim_ref),
            "spec is immutable",
        ),
        (
            "an existing claim applied with a new label",
            manifest({**claim, "metadata": {**claim["metadata"], "labels": {"tier": "db"}}}, claim_ref),
            None,
        ),
    ]
    async with Gateway(str(cluster.plane.kubeconfig)) as gateway:
        verifier = DryRunVerifier(gateway)
        for what, remedy, refusal in cases:
            assert dry_runs(remedy) is not None, what
            got = await verifier.outcome(remedy)
            if refusal is None:
                assert got is None, f"{what}: {got}"
            else:
                assert got is not None and refusal in got, f"{what}: {got}"
    # nothing was stored: no PV, the claim and the pod unchanged, no second pod
    assert not [
        p
        for p in cluster.plane.api.get("/api/v1/persistentvolumes")["items"]
        if p["metadata"]["name"] == pv_name
    ]
    stored = cluster.api.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data")
    assert stored["spec"]["storageClassName"] == "slow" and not stored["metadata"].get("labels")
    pods = cluster.api.get(f"/api/v1/namespaces/{ns}/pods")["items"]
    assert [(p["metadata"]["name"], p["spec"]["nodeSelector"]) for p in pods] == [
        ("bare", {"gpu-typ": "a10g"})
    ]
