"""Canonical reason codes and plugin names, shared with ``analyzers.messages``
(the parser of real FailedScheduling messages), which defines them; and the
framework's status codes.

The code strings are the project-wide contract: the simulator tags every
reason it emits with one of them so a simulated verdict and a parsed message
can be compared by code and count, whatever the wording of the version.
"""

from __future__ import annotations

from typing import Final

from analyzers.messages.reasons import (
    DEFAULT_PREEMPTION,
    DRA_CANNOT_ALLOCATE,
    DRA_CLAIM_MISSING,
    DRA_CLAIM_UNAVAILABLE,
    DYNAMIC_RESOURCES,
    EXISTING_POD_ANTI_AFFINITY,
    INSUFFICIENT_RESOURCE,
    INTER_POD_AFFINITY,
    NODE_AFFINITY,
    NODE_AFFINITY_MISMATCH,
    NODE_NAME,
    NODE_NAME_MISMATCH,
    NODE_PORTS,
    NODE_PORTS_PLUGIN,
    NODE_RESOURCES_FIT,
    NODE_UNSCHEDULABLE,
    NODE_UNSCHEDULABLE_PLUGIN,
    OTHER,
    POD_AFFINITY_MISMATCH,
    POD_ANTI_AFFINITY_MISMATCH,
    POD_TOPOLOGY_SPREAD,
    PREEMPTION_NO_VICTIMS,
    PREEMPTION_NOT_ELIGIBLE,
    PREEMPTION_NOT_HELPFUL,
    PVC_LOST,
    PVC_NOT_FOUND,
    SCHEDULING_GATED,
    SCHEDULING_GATES,
    TAINT_TOLERATION,
    TOO_MANY_PODS,
    TOPOLOGY_SPREAD_MISMATCH,
    UNTOLERATED_TAINT,
    VOLUME_BINDING,
    VOLUME_NO_PV,
    VOLUME_NODE_AFFINITY_CONFLICT,
    VOLUME_RESTRICTIONS_PLUGIN,
    VOLUME_UNBOUND_PVC,
    VOLUME_ZONE_CONFLICT,
)

# --- framework status codes (pkg/scheduler/framework/interface.go) -------------
UNSCHEDULABLE: Final = "Unschedulable"
UNRESOLVABLE: Final = "UnschedulableAndUnresolvable"

__all__ = [
    "DEFAULT_PREEMPTION",
    "DRA_CANNOT_ALLOCATE",
    "DRA_CLAIM_MISSING",
    "DRA_CLAIM_UNAVAILABLE",
    "DYNAMIC_RESOURCES",
    "EXISTING_POD_ANTI_AFFINITY",
    "INSUFFICIENT_RESOURCE",
    "INTER_POD_AFFINITY",
    "NODE_AFFINITY",
    "NODE_AFFINITY_MISMATCH",
    "NODE_NAME",
    "NODE_NAME_MISMATCH",
    "NODE_PORTS",
    "NODE_PORTS_PLUGIN",
    "NODE_RESOURCES_FIT",
    "NODE_UNSCHEDULABLE",
    "NODE_UNSCHEDULABLE_PLUGIN",
    "OTHER",
    "POD_AFFINITY_MISMATCH",
    "POD_ANTI_AFFINITY_MISMATCH",
    "POD_TOPOLOGY_SPREAD",
    "PREEMPTION_NOT_ELIGIBLE",
    "PREEMPTION_NOT_HELPFUL",
    "PREEMPTION_NO_VICTIMS",
    "PVC_LOST",
    "PVC_NOT_FOUND",
    "SCHEDULING_GATED",
    "SCHEDULING_GATES",
    "TAINT_TOLERATION",
    "TOO_MANY_PODS",
    "TOPOLOGY_SPREAD_MISMATCH",
    "UNRESOLVABLE",
    "UNSCHEDULABLE",
    "UNTOLERATED_TAINT",
    "VOLUME_BINDING",
    "VOLUME_NODE_AFFINITY_CONFLICT",
    "VOLUME_NO_PV",
    "VOLUME_RESTRICTIONS_PLUGIN",
    "VOLUME_UNBOUND_PVC",
    "VOLUME_ZONE_CONFLICT",
]
