"""Builders for the placement-rule tests: a Deployment with its ReplicaSet and
pods, as ``kubectl get -o json`` prints them, and a one-call analysis."""

from __future__ import annotations

import copy
from typing import Any

from analyzers.findings import Finding
from analyzers.rules import RULES, run_rules
from analyzers.rules.context import RuleContext
from analyzers.snapshot import ClusterSnapshot
from tests.simulator.builders import node, taint  # noqa: F401  (re-exported for the tests)

Obj = dict[str, Any]
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def template(
    *,
    app: str = "web",
    requests: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: Obj | None = None,
    tolerations: list[Obj] | None = None,
    spread: list[Obj] | None = None,
    containers: int = 1,
) -> Obj:
    spec: Obj = {
        "containers": [
            {
                "name": app if i == 0 else f"{app}-sidecar-{i}",
                "image": f"registry.example/{app}:1.0",
                "resources": {"requests": dict(requests or {"cpu": "100m", "memory": "128Mi"})},
            }
            for i in range(containers)
        ],
        "schedulerName": "default-scheduler",
        "restartPolicy": "Always",
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if spread:
        spec["topologySpreadConstraints"] = spread
    return {"metadata": {"labels": {"app": app}}, "spec": spec}


def deployment(
    name: str,
    tpl: Obj,
    *,
    replicas: int = 1,
    namespace: str = "default",
    bound: list[str] | None = None,
    pending: int = 1,
    ready: int | None = None,
) -> list[Obj]:
    """A Deployment, its ReplicaSet, ``bound`` pods (one per node name) and ``pending`` pods."""
    rs_name = f"{name}-5d8f7c9b6"
    labels = dict(tpl["metadata"]["labels"])
    dep = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-dep-{name}",
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "generation": 1,
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
            "template": copy.deepcopy(tpl),
        },
        "status": {"replicas": replicas, "readyReplicas": ready if ready is not None else len(bound or [])},
    }
    rs_tpl = copy.deepcopy(tpl)
    rs_tpl["metadata"]["labels"]["pod-template-hash"] = "5d8f7c9b6"
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": rs_name,
            "namespace": namespace,
            "uid": f"uid-rs-{name}",
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": name,
                    "uid": f"uid-dep-{name}",
                    "controller": True,
                }
            ],
        },
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": rs_tpl},
    }
    out = [dep, rs]
    for i, node_name in enumerate([*(bound or []), *([""] * pending)]):
        out.append(pod_of_template(rs_tpl, f"{rs_name}-p{i:03d}", rs_name, namespace, node_name))
    return out


def pod_of_template(tpl: Obj, name: str, rs_name: str, namespace: str, node_name: str = "") -> Obj:
    spec = copy.deepcopy(tpl["spec"])
    spec.setdefault("tolerations", [])
    spec["tolerations"] = [
        *spec["tolerations"],
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]
    spec["priority"] = 0
    status: Obj = {"phase": "Pending"}
    if node_name:
        spec["nodeName"] = node_name
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": copy.deepcopy(tpl["metadata"]["labels"]),
            "creationTimestamp": "2025-12-31T23:50:00Z",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": rs_name,
                    "uid": f"uid-rs-{rs_name}",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def snapshot(*groups: Obj | list[Obj], kube_version: str | None = "1.30") -> ClusterSnapshot:
    objects: list[Obj] = []
    for g in groups:
        objects.extend(g if isinstance(g, list) else [g])
    return ClusterSnapshot.from_objects(objects, kube_version=kube_version)


def findings(snap: ClusterSnapshot, rule_id: str | None = None) -> list[Finding]:
    run = run_rules(RuleContext(snapshot=snap, now=NOW), RULES)
    assert not run.errors, run.errors
    return [f for f in run.findings if rule_id is None or f.rule_id == rule_id]


def analyze_one(module: Any, snap: ClusterSnapshot) -> list[Finding]:
    """Run one rule module alone (no competition for pods)."""
    result: list[Finding] = module.analyze(RuleContext(snapshot=snap, now=NOW))
    return result


def bare_pod(name: str, tpl: Obj, *, namespace: str = "default", node_name: str = "") -> Obj:
    """A pod without an owner, made from a template (admission defaults added)."""
    obj = pod_of_template(tpl, name, "unused", namespace, node_name)
    del obj["metadata"]["ownerReferences"]
    return obj


def statefulset(
    name: str, tpl: Obj, *, replicas: int, bound: list[str], pending: int = 1, namespace: str = "default"
) -> list[Obj]:
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-sts-{name}"},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": dict(tpl["metadata"]["labels"])},
            "template": copy.deepcopy(tpl),
        },
        "status": {"replicas": replicas, "readyReplicas": len(bound)},
    }
    out = [sts]
    for i, node_name in enumerate([*bound, *([""] * pending)]):
        p = pod_of_template(tpl, f"{name}-{i}", name, namespace, node_name)
        p["metadata"]["ownerReferences"][0].update(kind="StatefulSet", name=name, uid=f"uid-sts-{name}")
        out.append(p)
    return out


def pod_event(
    pod_name: str,
    reason: str,
    message: str,
    *,
    source: str,
    namespace: str = "default",
    last: str = "2025-12-31T23:58:00Z",
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod_name}.{reason.lower()}", "namespace": namespace},
        "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": namespace},
        "reason": reason,
        "message": message,
        "type": "Normal",
        "count": 3,
        "firstTimestamp": "2025-12-31T23:51:00Z",
        "lastTimestamp": last,
        "source": {"component": source},
    }


def anti_affinity(app: str, key: str = "kubernetes.io/hostname") -> Obj:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
            ]
        }
    }


def zone_spread(
    app: str, *, max_skew: int = 1, key: str = "topology.kubernetes.io/zone", **extra: Any
) -> list[Obj]:
    return [
        {
            "maxSkew": max_skew,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}},
            **extra,
        }
    ]
