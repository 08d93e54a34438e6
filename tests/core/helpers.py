"""Builders of realistic, defaulted API objects for core tests."""

from __future__ import annotations

from typing import Any


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
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi", **(extra or {})}
    spec: dict[str, Any] = {}
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
    labels: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    owner: tuple[str, str] | None = None,
    ready: bool | None = None,
    phase: str | None = None,
    spec_extra: dict[str, Any] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": labels or {},
        "creationTimestamp": "2026-11-20T10:00:00Z",
    }
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner[0],
                "name": owner[1],
                "uid": f"uid-{owner[1]}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-11-20T11:00:00Z"
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "example/app:1", "resources": resources}],
        "schedulerName": "default-scheduler",
        "priority": 0,
        **(spec_extra or {}),
    }
    if node_name:
        spec["nodeName"] = node_name
    running = bool(node_name)
    is_ready = running if ready is None else ready
    status: dict[str, Any] = {"phase": phase or ("Running" if running else "Pending")}
    if running:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True" if is_ready else "False"},
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def deployment(
    name: str,
    *,
    namespace: str = "default",
    replicas: int = 1,
    strategy: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    template_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    labels = labels or {"app": name}
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": template_spec or {"containers": [{"name": "main", "image": "example/app:1"}]},
        },
    }
    if strategy is not None:
        spec["strategy"] = strategy
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": 1},
        "spec": spec,
    }


def replicaset(
    name: str,
    deployment_name: str,
    *,
    namespace: str = "default",
    replicas: int = 1,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = labels or {"app": deployment_name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": deployment_name,
                    "uid": f"uid-{deployment_name}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "main"}]}},
        },
    }


def pdb(
    name: str,
    *,
    namespace: str = "default",
    selector: dict[str, Any] | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    policy: str | None = None,
    api_version: str = "policy/v1",
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["selector"] = selector
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    return {
        "apiVersion": api_version,
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": spec,
    }
