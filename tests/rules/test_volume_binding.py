"""volume-binding: edge cases beyond the golden scenarios (tests/scenarios/volume-binding/)."""

from __future__ import annotations

from typing import Any

import yaml

from analyzers.ingest import parse_time
from analyzers.rules import volume_binding
from analyzers.rules.context import RuleContext
from analyzers.snapshot import ClusterSnapshot
from tests.core.helpers import deployment, node, pod, replicaset

NOW = parse_time("2026-11-20T11:00:00Z") or 0.0
ZONE = "topology.kubernetes.io/zone"


def zone_node(name: str, zone: str, *, cpu: str = "4") -> dict[str, Any]:
    return node(name, cpu=cpu, labels={ZONE: zone})


def storage_class(
    name: str, provisioner: str, mode: str = "WaitForFirstConsumer", zones: list[str] | None = None
) -> dict[str, Any]:
    sc: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": mode,
    }
    if zones:
        sc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return sc


def claim(name: str, sc: str, *, volume: str = "", size: str = "20Gi") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
        "storageClassName": sc,
        "volumeMode": "Filesystem",
    }
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": "Bound" if volume else "Pending"},
    }


def volume(name: str, sc: str, zone: str, claim_name: str, size: str = "20Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": size},
            "claimRef": {"kind": "PersistentVolumeClaim", "name": claim_name, "namespace": "default"},
            "storageClassName": sc,
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
                    ]
                }
            },
        },
        "status": {"phase": "Bound"},
    }


def app(
    claim_name: str,
    *,
    selector: dict[str, str] | None = None,
    cpu: str = "1",
    template_selector: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    extra: dict[str, Any] = {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    }
    if selector:
        extra["nodeSelector"] = selector
    tsel = selector if template_selector is None else template_selector
    tspec: dict[str, Any] = {"containers": [{"name": "main", "image": "example/app:1"}]}
    if tsel:
        tspec["nodeSelector"] = tsel
    return [
        deployment("app", labels={"app": "app"}, template_spec=tspec),
        replicaset("app-7d", "app", labels={"app": "app"}),
        pod(
            "app-7d-x",
            labels={"app": "app"},
            owner=("ReplicaSet", "app-7d"),
            requests={"cpu": cpu},
            spec_extra=extra,
        ),
    ]


def run(objs: list[dict[str, Any]]) -> list[Any]:
    snap = ClusterSnapshot.from_objects(objs, kube_version="1.30")
    return volume_binding.analyze(RuleContext(snapshot=snap, now=NOW))


def remedy(finding: Any, text: str) -> Any:
    found = [r for r in finding.remedies if text in r.title]
    assert found, [(r.title, r.verified, r.verification) for r in finding.remedies]
    return found[0]


def test_immediate_claim_without_provisioner_or_pv() -> None:
    objs = [
        zone_node("n1", "a"),
        storage_class("local-storage", "kubernetes.io/no-provisioner", mode="Immediate"),
        storage_class("gp3", "ebs.csi.aws.com"),
        claim("data", "local-storage"),
        *app("data"),
    ]
    [finding] = run(objs)
    assert finding.evidence["cause"] == "immediate-unbound"
    assert "pod has unbound immediate PersistentVolumeClaims" in finding.explanation
    assert "no dynamic provisioner (kubernetes.io/no-provisioner)" in finding.explanation
    pv = remedy(finding, "Create a PersistentVolume for data on n1")
    assert pv.verified, pv.verification
    manifest = yaml.safe_load(pv.yaml)
    assert manifest["spec"]["claimRef"] == {"namespace": "default", "name": "data"}
    assert manifest["spec"]["storageClassName"] == "local-storage"
    other = remedy(finding, "StorageClass gp3")
    assert other.verified, other.verification
    # storageClassName is immutable: delete, then create; the pending pod does not hold the claim
    assert other.command == "kubectl delete pvc data -n default && kubectl apply -f -"
    assert yaml.safe_load(other.yaml)["spec"]["storageClassName"] == "gp3"


def immediate_claim_cluster() -> list[dict[str, Any]]:
    return [
        zone_node("n1", "a"),
        storage_class("manual", "kubernetes.io/no-provisioner", mode="Immediate"),
        storage_class("gp3", "ebs.csi.aws.com"),
        claim("data", "manual"),
    ]


def test_a_pod_bound_to_a_node_with_the_claim_is_deleted_before_it() -> None:
    volumes = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
    # created with nodeName (no scheduler): it holds the claim's pvc-protection finalizer
    holder = pod("backup", node_name="n1", spec_extra=volumes)
    [finding] = run([*immediate_claim_cluster(), *app("data"), holder])
    other = remedy(finding, "StorageClass gp3")
    assert other.command == (
        "kubectl delete pod backup -n default && kubectl delete pvc data -n default && kubectl apply -f -"
    )
    assert "pvc-protection finalizer holds the delete while 1 pod bound to a node uses it (backup)" in (
        other.verification
    )


def test_a_statefulset_template_claim_is_not_re_created() -> None:
    # The StatefulSet controller re-creates a missing template claim from its (immutable) template.
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "default", "uid": "uid-db"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "x"}]},
            },
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"storageClassName": "manual"}}],
        },
    }
    volumes = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]}
    member = pod("db-0", labels={"app": "db"}, owner=("StatefulSet", "db"), spec_extra=volumes)
    objs = [*immediate_claim_cluster()[:-1], claim("data-db-0", "manual"), sts, member]
    [finding] = run(objs)
    assert not [r for r in finding.remedies if "Re-create claim" in r.title]


def test_missing_claim() -> None:
    [finding] = run([zone_node("n1", "a"), *app("gone")])
    assert finding.evidence["cause"] == "pvc-missing"
    assert "PersistentVolumeClaim default/gone does not exist" in finding.explanation


def test_volume_zone_full_while_other_zone_has_room() -> None:
    busy = pod("hog", node_name="a1", requests={"cpu": "3500m"})
    objs = [
        zone_node("a1", "a"),
        zone_node("b1", "b"),
        busy,
        storage_class("gp3", "ebs.csi.aws.com"),
        claim("data", "gp3", volume="pv-1"),
        volume("pv-1", "gp3", "a", "data"),
        *app("data"),
    ]
    [finding] = run(objs)
    assert finding.evidence["cause"] == "pv-zone-full"
    assert "a1 has 500m cpu free and the pod needs 1" in finding.explanation
    assert "would fit on b1" in finding.explanation
    node_remedy = remedy(finding, "Add a node in topology.kubernetes.io/zone=a")
    assert node_remedy.verified, node_remedy.verification


def test_volume_zone_without_nodes_left() -> None:
    objs = [
        zone_node("b1", "b"),
        storage_class("gp3", "ebs.csi.aws.com"),
        claim("data", "gp3", volume="pv-1"),
        volume("pv-1", "gp3", "a", "data"),
        *app("data"),
    ]
    [finding] = run(objs)
    assert finding.evidence["cause"] == "pv-node-affinity-conflict"
    assert "no node is there any more" in finding.explanation
    assert remedy(finding, "Add a node in topology.kubernetes.io/zone=a").verified


def test_wffc_without_provisioner_needs_a_pv() -> None:
    objs = [
        zone_node("n1", "a"),
        storage_class("local-storage", "kubernetes.io/no-provisioner"),
        claim("data", "local-storage", size="100Gi"),
        volume("small", "local-storage", "a", "other", size="50Gi"),
        *app("data"),
    ]
    [pv] = [o for o in objs if o["kind"] == "PersistentVolume"]
    pv["spec"].pop("claimRef")
    pv["status"]["phase"] = "Available"
    [finding] = run(objs)
    assert finding.evidence["cause"] == "wffc-no-pv"
    assert "small has 50Gi, the claim asks for 100Gi" in finding.explanation
    assert remedy(finding, "Create a PersistentVolume for data").verified


def test_quiet_when_the_volume_is_not_what_blocks() -> None:
    # The claim is bound in the pod's zone; the pod simply needs more cpu than any node has.
    objs = [
        zone_node("a1", "a", cpu="2"),
        storage_class("gp3", "ebs.csi.aws.com"),
        claim("data", "gp3", volume="pv-1"),
        volume("pv-1", "gp3", "a", "data"),
        *app("data", cpu="8"),
    ]
    assert run(objs) == []


def test_pod_of_an_old_revision_is_left_to_the_rollout() -> None:
    objs = [
        zone_node("a1", "a"),
        zone_node("b1", "b"),
        storage_class("gp3", "ebs.csi.aws.com"),
        claim("data", "gp3", volume="pv-1"),
        volume("pv-1", "gp3", "a", "data"),
        # The pod still says zone b; the Deployment's template already says zone a.
        *app("data", selector={ZONE: "b"}, template_selector={ZONE: "a"}),
    ]
    assert run(objs) == []
    # Same pod, template unchanged: the conflict is reported, with the verified selector fix.
    [finding] = run([*objs[:-3], *app("data", selector={ZONE: "b"})])
    fix = remedy(finding, "nodeSelector topology.kubernetes.io/zone=a")
    assert fix.verified and fix.kind == "patch"
