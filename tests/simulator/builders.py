"""Builders of API-shaped objects (what ``kubectl get -o json`` prints) for the
simulator tests, and a one-call snapshot."""

from __future__ import annotations

from typing import Any

from analyzers.records import Pod
from analyzers.snapshot import ClusterSnapshot

Obj = dict[str, Any]


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    extra: dict[str, str] | None = None,
) -> Obj:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi", **(extra or {})}
    spec: Obj = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": spec,
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    *,
    namespace: str = "default",
    node_name: str = "",
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: Obj | None = None,
    tolerations: list[Obj] | None = None,
    host_ports: list[Obj] | None = None,
    spread: list[Obj] | None = None,
    pvcs: list[str] | None = None,
    gates: list[str] | None = None,
    priority: int | None = None,
    priority_class: str = "",
    preemption_policy: str = "",
    phase: str = "",
    nominated: str = "",
    deleting: bool = False,
    created: str = "2024-01-01T00:00:00Z",
) -> Obj:
    resources: Obj = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    container: Obj = {"name": "app", "image": "registry.example/app:1", "resources": resources}
    if host_ports:
        container["ports"] = host_ports
    spec: Obj = {"containers": [container], "schedulerName": "default-scheduler"}
    if node_name:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if spread:
        spec["topologySpreadConstraints"] = spread
    if pvcs:
        spec["volumes"] = [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(pvcs)
        ]
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    if preemption_policy:
        spec["preemptionPolicy"] = preemption_policy
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "creationTimestamp": created,
    }
    if labels:
        meta["labels"] = labels
    if deleting:
        meta["deletionTimestamp"] = "2024-01-02T00:00:00Z"
    status: Obj = {"phase": phase or ("Running" if node_name else "Pending")}
    if nominated:
        status["nominatedNodeName"] = nominated
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def snapshot(*objects: Obj, kube_version: str | None = None) -> ClusterSnapshot:
    return ClusterSnapshot.from_objects(list(objects), kube_version=kube_version)


def pod_of(snap: ClusterSnapshot, name: str, namespace: str = "default") -> Pod:
    return snap.pods[(namespace, name)]


def nodes(count: int, prefix: str = "node", **kwargs: Any) -> list[Obj]:
    return [node(f"{prefix}-{i}", **kwargs) for i in range(count)]
