"""volume-binding's "Re-create claim with StorageClass" against the real API server.

A Deployment's pod waits on an Immediate claim no provisioner serves; a bare pod bound to
the node (created with nodeName) uses the same claim, so its ``kubernetes.io/pvc-protection``
finalizer holds a delete. The claim's storageClassName is immutable: ``kubectl apply`` of
the changed claim is refused. The remedy's command (pods holding the claim deleted, the
claim deleted, then applied) runs as a user pastes it and exits 0; the test then plays
the class's external provisioner (it creates the PV for the node kube-scheduler selected),
and the Deployment's pod schedules with the new claim bound.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from analyzers.report import build_report
from analyzers.snapshot import ClusterState
from tests.realcluster.conftest import Cluster
from tests.realcluster.harness import KUBE_VERSION, ApiError, node
from tests.realcluster.replay import all_scheduled, pending, run_remedy
from tests.realcluster.seeds import container, deployment
from tests.realcluster.verdicts import cluster_objects_with_workloads

pytestmark = pytest.mark.realcluster

SELECTED_NODE = "volume.kubernetes.io/selected-node"  # pkg/controller/volume/persistentvolume/util


def test_the_claim_is_re_created_in_a_class_that_provisions_it(cluster: Cluster) -> None:
    ns, api = cluster.ns, cluster.api
    manual, fast = f"{ns}-manual", f"{ns}-fast"
    cleanup = [
        f"/apis/storage.k8s.io/v1/storageclasses/{manual}",
        f"/apis/storage.k8s.io/v1/storageclasses/{fast}",
        f"/api/v1/persistentvolumes/{ns}-data",
    ]
    cluster.nodes([node("node-0")])
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    try:
        for name, provisioner, mode in (
            (manual, "kubernetes.io/no-provisioner", "Immediate"),
            (fast, "unstick.test/fake-csi", "WaitForFirstConsumer"),
        ):
            api.create(
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {"name": name},
                    "provisioner": provisioner,
                    "volumeBindingMode": mode,
                }
            )
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": ns},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": manual,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        api.create(claim)
        holder = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "backup", "namespace": ns, "labels": {"app": "backup"}},
            "spec": {
                "nodeName": "node-0",
                "terminationGracePeriodSeconds": 0,
                "containers": [container(cpu="100m")],
                "volumes": [volume],
            },
        }
        api.create(holder)
        db = deployment("db", 1, {"containers": [container(cpu="100m")], "volumes": [volume]})
        db["metadata"]["namespace"] = ns
        api.create(db)
        stuck = api.wait_for(
            f"/api/v1/namespaces/{ns}/pods", lambda p: pending(p, {"app": "db"}), timeout=60, what="db's pod"
        )
        said = next(c["message"] for c in stuck["status"]["conditions"] if c["type"] == "PodScheduled")
        assert "pod has unbound immediate PersistentVolumeClaims" in said, said

        state = ClusterState(KUBE_VERSION)
        state.load(cluster_objects_with_workloads(cluster))
        report = build_report(state.snapshot(), now=time.time())
        remedies = [
            r
            for f in report.findings
            if f.rule_id == "volume-binding" and f.subject.namespace == ns
            for r in f.remedies
            if r.title.startswith(f"Re-create claim data with StorageClass {fast}")
        ]
        assert remedies, [(f.rule_id, [r.title for r in f.remedies]) for f in report.findings]
        remedy = remedies[0]
        assert remedy.verified, remedy.verification
        assert remedy.command == (
            f"kubectl delete pod backup -n {ns} && kubectl delete pvc data -n {ns} && kubectl apply -f -"
        )

        # Why the claim must go first: the API server refuses the changed class in place.
        refused = run_remedy(cluster.plane, "kubectl apply -f -", remedy.yaml)
        assert refused.returncode != 0 and "immutable" in refused.stderr, refused.stderr

        applied = run_remedy(cluster.plane, remedy.command, remedy.yaml)
        assert applied.returncode == 0, applied.stderr
        new = api.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data")
        assert new["spec"]["storageClassName"] == fast

        # The class's provisioner: a volume on the node kube-scheduler picked for the pod.
        picked = api.wait_for(
            f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
            lambda c: (
                c["metadata"]["name"] == "data" and SELECTED_NODE in c["metadata"].get("annotations", {})
            ),
            timeout=60,
            what="kube-scheduler to select a node for the new claim",
        )
        on = picked["metadata"]["annotations"][SELECTED_NODE]
        api.create(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {
                    "name": f"{ns}-data",
                    "annotations": {"pv.kubernetes.io/provisioned-by": "unstick.test/fake-csi"},
                },
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": fast,
                    "persistentVolumeReclaimPolicy": "Delete",
                    "claimRef": {"namespace": ns, "name": "data", "uid": picked["metadata"]["uid"]},
                    "local": {"path": "/mnt/data"},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [on]}
                                    ]
                                }
                            ]
                        }
                    },
                },
            }
        )
        all_scheduled(cluster, {"app": "db"}, 90)
        bound = api.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data")
        assert bound["status"]["phase"] == "Bound" and bound["spec"]["volumeName"] == f"{ns}-data"
    finally:
        for path in cleanup:
            with contextlib.suppress(ApiError):
                api.delete(path)
