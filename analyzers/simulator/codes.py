"""Canonical reason codes, plugin names and status codes shared with
``analyzers.messages`` (the parser of real FailedScheduling messages).

The code strings are the project-wide contract: the simulator tags every
reason it emits with one of them so a simulated verdict and a parsed message
can be compared by code and count, whatever the wording of the version.
"""

from __future__ import annotations

from typing import Final

# --- framework status codes (pkg/scheduler/framework/interface.go) -------------
UNSCHEDULABLE: Final = "Unschedulable"
UNRESOLVABLE: Final = "UnschedulableAndUnresolvable"

# --- canonical reason codes ------------------------------------------------------
INSUFFICIENT_RESOURCE: Final = "insufficient-resource"
TOO_MANY_PODS: Final = "too-many-pods"
NODE_AFFINITY_MISMATCH: Final = "node-affinity-mismatch"
UNTOLERATED_TAINT: Final = "untolerated-taint"
NODE_UNSCHEDULABLE: Final = "node-unschedulable"
NODE_NAME_MISMATCH: Final = "node-name-mismatch"
NODE_PORTS: Final = "node-ports"
POD_AFFINITY_MISMATCH: Final = "pod-affinity-mismatch"
POD_ANTI_AFFINITY_MISMATCH: Final = "pod-anti-affinity-mismatch"
EXISTING_POD_ANTI_AFFINITY: Final = "existing-pod-anti-affinity"
TOPOLOGY_SPREAD_MISMATCH: Final = "topology-spread-mismatch"
VOLUME_UNBOUND_PVC: Final = "volume-unbound-pvc"
VOLUME_NO_PV: Final = "volume-no-pv"
VOLUME_NODE_AFFINITY_CONFLICT: Final = "volume-node-affinity-conflict"
VOLUME_ZONE_CONFLICT: Final = "volume-zone-conflict"
PVC_NOT_FOUND: Final = "pvc-not-found"
SCHEDULING_GATED: Final = "scheduling-gated"
PREEMPTION_NO_VICTIMS: Final = "preemption-no-victims"
PREEMPTION_NOT_HELPFUL: Final = "preemption-not-helpful"
PREEMPTION_NOT_ELIGIBLE: Final = "preemption-not-eligible"
OTHER: Final = "other"
# Codes of ``analyzers.messages.reasons`` the simulator also emits (same strings).
PVC_LOST: Final = "pvc-lost"

# --- in-tree plugin names (pkg/scheduler/framework/plugins/names/names.go) -------
SCHEDULING_GATES: Final = "SchedulingGates"
NODE_UNSCHEDULABLE_PLUGIN: Final = "NodeUnschedulable"
NODE_NAME: Final = "NodeName"
TAINT_TOLERATION: Final = "TaintToleration"
NODE_AFFINITY: Final = "NodeAffinity"
NODE_PORTS_PLUGIN: Final = "NodePorts"
NODE_RESOURCES_FIT: Final = "NodeResourcesFit"
VOLUME_BINDING: Final = "VolumeBinding"
POD_TOPOLOGY_SPREAD: Final = "PodTopologySpread"
INTER_POD_AFFINITY: Final = "InterPodAffinity"
DEFAULT_PREEMPTION: Final = "DefaultPreemption"
