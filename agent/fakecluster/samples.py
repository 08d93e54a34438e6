"""Builders of realistic Kubernetes objects (pods, nodes, events, workloads)
for tests, benchmarks and ad-hoc scenarios.

The shapes are what ``kubectl get -o json`` prints on a current cluster,
including ``managedFields``, conditions and container statuses, so payload
sizes (a pod is 3–5 kB of JSON, a node 4–6 kB, an event under 1 kB) match
what a watch carries in production.
"""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["deployment", "event", "node", "pod", "replicaset"]

Obj = dict[str, Any]
_TS = "2024-06-01T12:00:00Z"


def _uid(*parts: str) -> str:
    h = hashlib.sha1("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _managed(manager: str, fields: Obj, subresource: str | None = None) -> Obj:
    entry: Obj = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": _TS,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def node(
    name: str,
    *,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: str = "110",
    gpus: int = 0,
    labels: dict[str, str] | None = None,
    taints: list[Obj] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    managed_fields: bool = True,
) -> Obj:
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi", "hugepages-2Mi": "0"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    allocatable = dict(capacity)
    meta: Obj = {
        "name": name,
        "uid": _uid("node", name),
        "creationTimestamp": _TS,
        "labels": {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "m5.2xlarge",
            "topology.kubernetes.io/region": "eu-west-1",
            "topology.kubernetes.io/zone": "eu-west-1a",
            **(labels or {}),
        },
        "annotations": {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        },
    }
    if managed_fields:
        meta["managedFields"] = [
            _managed("kubelet", {"f:metadata": {"f:annotations": {".": {}}, "f:labels": {".": {}}}}),
            _managed(
                "kubelet",
                {"f:status": {"f:allocatable": {}, "f:capacity": {}, "f:conditions": {}, "f:images": {}}},
                "status",
            ),
        ]
    spec: Obj = {"podCIDR": "10.244.1.0/24", "providerID": f"aws:///eu-west-1a/i-{_uid(name)[:17]}"}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    conditions = [
        {
            "type": t,
            "status": "False",
            "lastHeartbeatTime": _TS,
            "lastTransitionTime": _TS,
            "reason": f"Kubelet{reason}",
            "message": f"kubelet has {msg}",
        }
        for t, reason, msg in (
            ("MemoryPressure", "HasSufficientMemory", "sufficient memory available"),
            ("DiskPressure", "HasNoDiskPressure", "no disk pressure"),
            ("PIDPressure", "HasSufficientPID", "sufficient PID available"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "lastHeartbeatTime": _TS,
            "lastTransitionTime": _TS,
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "kubelet is posting ready status" if ready else "container runtime network not ready",
        }
    )
    images = [
        {"names": [f"registry.k8s.io/{img}@sha256:{_uid(img).replace('-', '')}", f"registry.k8s.io/{img}"], "sizeBytes": 10_000_000 + i}
        for i, img in enumerate(("kube-proxy:v1.30.2", "pause:3.9", "coredns/coredns:v1.11.1", "metrics-server:v0.7.1"))
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": "10.0.1.10"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": _uid("machine", name).replace("-", ""),
                "systemUUID": _uid("system", name),
                "bootID": _uid("boot", name),
                "kernelVersion": "6.1.0-21-cloud-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.30.2",
                "kubeProxyVersion": "v1.30.2",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        },
    }


def pod(
    name: str,
    namespace: str = "default",
    *,
    node_name: str | None = None,
    phase: str | None = None,
    requests: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owner: Obj | None = None,
    node_selector: dict[str, str] | None = None,
    unschedulable_message: str | None = None,
    image: str = "registry.example.com/shop/web:1.4.2",
    managed_fields: bool = True,
) -> Obj:
    """A pod; scheduled when ``node_name`` is set (Running unless ``phase``
    says otherwise), else Pending with ``PodScheduled=False`` carrying
    ``unschedulable_message`` when given."""
    app = name.rsplit("-", min(name.count("-"), 2))[0]
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": _uid("pod", namespace, name),
        "creationTimestamp": _TS,
        "generateName": f"{app}-",
        "labels": {"app": app, "pod-template-hash": "5c8d7f9b6d", **(labels or {})},
    }
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": owner.get("apiVersion", "apps/v1"),
                "kind": owner.get("kind", "ReplicaSet"),
                "name": owner["metadata"]["name"] if "metadata" in owner else owner["name"],
                "uid": (owner.get("metadata") or {}).get("uid") or owner.get("uid") or _uid("owner", namespace, app),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    if managed_fields:
        meta["managedFields"] = [
            _managed("kube-controller-manager", {"f:metadata": {"f:generateName": {}, "f:labels": {}, "f:ownerReferences": {}}, "f:spec": {"f:containers": {}}}),
            _managed("kubelet", {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:phase": {}}}, "status"),
        ]
    container: Obj = {
        "name": "main",
        "image": image,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
        "resources": {"requests": requests or {"cpu": "250m", "memory": "256Mi"}},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
        "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    spec: Obj = {
        "containers": [container],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
        "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if node_name:
        spec["nodeName"] = node_name
        phase = phase or "Running"
        status: Obj = {
            "phase": phase,
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": _TS}
                for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": "10.0.1.10",
            "podIP": "10.244.1.17",
            "podIPs": [{"ip": "10.244.1.17"}],
            "startTime": _TS,
            "qosClass": "Burstable",
            "containerStatuses": [
                {
                    "name": "main",
                    "state": {"running": {"startedAt": _TS}},
                    "lastState": {},
                    "ready": True,
                    "restartCount": 0,
                    "image": image,
                    "imageID": f"{image.split(':')[0]}@sha256:{_uid(image).replace('-', '')}",
                    "containerID": f"containerd://{_uid('c', namespace, name).replace('-', '')}",
                    "started": True,
                }
            ],
        }
    else:
        condition: Obj = {"type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": _TS}
        if unschedulable_message:
            condition.update(reason="Unschedulable", message=unschedulable_message)
        status = {"phase": phase or "Pending", "conditions": [condition], "qosClass": "Burstable"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def event(
    involved: Obj,
    reason: str = "FailedScheduling",
    message: str = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
    *,
    type: str = "Warning",
    component: str = "default-scheduler",
    name: str | None = None,
    count: int = 1,
) -> Obj:
    """A core/v1 Event about ``involved`` (an object dict)."""
    meta = involved["metadata"]
    namespace = meta.get("namespace", "default")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": name or f"{meta['name']}.{hashlib.sha1((meta['name'] + reason).encode()).hexdigest()[:16]}",
            "namespace": namespace,
            "uid": _uid("event", namespace, meta["name"], reason),
            "creationTimestamp": _TS,
        },
        "involvedObject": {
            "kind": involved.get("kind", "Pod"),
            "namespace": namespace,
            "name": meta["name"],
            "uid": meta.get("uid", _uid("pod", namespace, meta["name"])),
            "apiVersion": involved.get("apiVersion", "v1"),
            "resourceVersion": meta.get("resourceVersion", "1"),
        },
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "firstTimestamp": _TS,
        "lastTimestamp": _TS,
        "count": count,
        "type": type,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": "",
    }


def deployment(
    name: str,
    namespace: str = "default",
    *,
    replicas: int = 1,
    requests: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    strategy: Obj | None = None,
) -> Obj:
    template_spec: Obj = {
        "containers": [{"name": "main", "image": "registry.example.com/app:1", "resources": {"requests": requests or {"cpu": "250m"}}}]
    }
    if node_selector:
        template_spec["nodeSelector"] = node_selector
    spec: Obj = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": template_spec},
    }
    if strategy is not None:
        spec["strategy"] = strategy
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "uid": _uid("deploy", namespace, name), "generation": 1},
        "spec": spec,
        "status": {"replicas": replicas, "observedGeneration": 1},
    }


def replicaset(owner: Obj, hash_: str = "5c8d7f9b6d", *, replicas: int = 1) -> Obj:
    meta = owner["metadata"]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{hash_}",
            "namespace": meta.get("namespace", "default"),
            "uid": _uid("rs", meta.get("namespace", "default"), meta["name"], hash_),
            "labels": {"app": meta["name"], "pod-template-hash": hash_},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"], "uid": meta.get("uid", ""), "controller": True, "blockOwnerDeletion": True}
            ],
        },
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": meta["name"], "pod-template-hash": hash_}}},
        "status": {"replicas": replicas},
    }
