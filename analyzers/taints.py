"""Taints that Kubernetes components and autoscalers put on nodes themselves, and what
each says about the node. A pod should tolerate none of them to get scheduled: they
say the node is unhealthy, being removed, or not ready yet.

Sources: the node lifecycle controller's TaintNodesByCondition and NoExecute
taints (``pkg/controller/nodelifecycle/node_lifecycle_controller.go``, keys in
``staging/src/k8s.io/api/core/v1/well_known_taints.go``), the cloud node controller
(``node.cloudprovider.kubernetes.io/uninitialized``), cluster-autoscaler's
``ToBeDeletedByClusterAutoscaler``/``DeletionCandidateOfClusterAutoscaler``,
Karpenter's ``karpenter.sh/*`` and Cilium's agent taint.
"""

from __future__ import annotations

from typing import Final

CONTROL_PLANE: Final = frozenset({"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"})
UNHEALTHY: Final[dict[str, str]] = {
    "node.kubernetes.io/not-ready": "the node is NotReady",
    "node.kubernetes.io/unreachable": "the node controller cannot reach the kubelet",
    "node.kubernetes.io/memory-pressure": "the node is under memory pressure",
    "node.kubernetes.io/disk-pressure": "the node is under disk pressure",
    "node.kubernetes.io/pid-pressure": "the node is running out of PIDs",
    "node.kubernetes.io/network-unavailable": "the node's network is not configured",
    "node.kubernetes.io/out-of-service": "the node was marked out of service",
}
REMOVAL: Final[dict[str, str]] = {
    "node.kubernetes.io/unschedulable": "cordoned: someone is draining or maintaining it",
    "ToBeDeletedByClusterAutoscaler": "being removed by cluster-autoscaler",
    "DeletionCandidateOfClusterAutoscaler": "a scale-down candidate of cluster-autoscaler",
    "karpenter.sh/disrupted": "being disrupted by Karpenter",
    "karpenter.sh/disruption": "being disrupted by Karpenter",
}
STARTING: Final[dict[str, str]] = {
    "node.cloudprovider.kubernetes.io/uninitialized": "the cloud controller has not initialised the node yet",
    "karpenter.sh/unregistered": "Karpenter has not registered the node yet",
    "node.cilium.io/agent-not-ready": "the Cilium agent is not ready on the node",
}


def describe_well_known(key: str) -> str | None:
    """One clause on what a taint with ``key`` says about its node and what to do, when a
    component sets it; None for any other taint."""
    if key in CONTROL_PLANE:
        return "this is a control-plane node: application pods are kept off it on purpose"
    if key in UNHEALTHY:
        return f"Kubernetes set it because {UNHEALTHY[key]}: repair the node, do not tolerate the taint"
    if key in REMOVAL:
        return f"the node is {REMOVAL[key]}: it is going away, do not tolerate the taint"
    if key in STARTING:
        return f"{STARTING[key]}: the taint goes away once the node is ready"
    return None
