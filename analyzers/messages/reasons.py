"""The reason catalogue: every per-node reason kube-scheduler prints, mapped to
a stable code and the plugin that produced it.

The texts are kube-scheduler's own, copied from upstream (kubernetes/kubernetes):

- ``pkg/scheduler/framework/plugins/noderesources/fit.go``: ``Insufficient <resource>``, ``Too many pods``
- ``.../nodeaffinity/node_affinity.go``: ``node(s) didn't match Pod's node affinity/selector``
  (1.20: ``...node affinity``; 1.17-1.19 predicates: ``node(s) didn't match node selector``),
  ``node(s) didn't match scheduler-enforced node affinity``, PreFilter ``pod affinity terms conflict``
- ``.../tainttoleration/taint_toleration.go``: 1.18-1.23 ``node(s) had taint {k: v}, that the pod
  didn't tolerate``; 1.24+ ``node(s) had untolerated taint {k: v}``; newest ``node(s) had untolerated
  taint(s)``; 1.10-1.17 predicates ``node(s) had taints that the pod didn't tolerate``
- ``.../nodeunschedulable/node_unschedulable.go``: ``node(s) were unschedulable``,
  ``node(s) had unknown conditions``
- ``.../nodename/node_name.go``: ``node(s) didn't match the requested node name``
  (predicates: ``node(s) didn't match the requested hostname``)
- ``.../nodeports/node_ports.go``: ``node(s) didn't have free ports for the requested pod ports``
- ``.../interpodaffinity/filtering.go``: ``node(s) didn't match pod affinity rules``,
  ``node(s) didn't match pod anti-affinity rules``, ``node(s) didn't satisfy existing pods
  anti-affinity rules``; until 1.21 also ``node(s) didn't match pod affinity/anti-affinity``
  (briefly ``... rules``), printed beside one of the specific reasons
- ``.../podtopologyspread/filtering.go``: ``node(s) didn't match pod topology spread constraints``
  (`` (missing required label)``)
- ``.../volumebinding/binder.go`` and ``volume_binding.go``: ``node(s) didn't find available persistent
  volumes to bind``, ``node(s) had volume node affinity conflict`` (1.33+: ``node(s) didn't match
  PersistentVolume's node affinity``), ``node(s) did not have enough free storage``, ``node(s)
  unavailable due to one or more pvc(s) bound to non-existent pv(s)``, PreFilter ``pod has unbound
  immediate PersistentVolumeClaims`` and ``persistentvolumeclaim "x" not found`` / ``is being
  deleted`` / ``bound to non-existent persistentvolume "y"``
- ``.../volumezone/volume_zone.go``: ``node(s) had no available volume zone``
- ``.../volumerestrictions/volume_restrictions.go``: ``node(s) had no available disk``, ``node has
  pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode``, and from
  1.27 the PreFilter ``persistentvolumeclaim "x" not found`` (``Reason.plugin`` says which)
- ``.../nodevolumelimits/csi.go``: ``node(s) exceed max volume count``
- ``.../schedulinggates/scheduling_gates.go``: ``waiting for scheduling gates: [a b]``
- ``.../dynamicresources/dynamicresources.go``: ``cannot allocate all claims``, ``resourceclaim not
  available on the node``, ``resourceclaim in use``
- ``.../defaultpreemption/default_preemption.go`` and ``framework/preemption/preemption.go``:
  ``No preemption victims found for incoming pod``, ``Preemption is not helpful for scheduling``,
  ``not eligible due to preemptionPolicy=Never.``, ``not eligible due to a terminating pod on the
  nominated node.``
- cluster-autoscaler ``core/scaleup/orchestrator/skippedreasons.go``: ``max node group size reached``,
  ``not ready for scale-up``, ``in backoff after failed scale-up``, ``max cluster <resources> limit
  reached``, ``exceeded quota: "<id>", resources: <resources>``; ``processors/status/
  eventing_scale_up_processor.go``: ``max total nodes in cluster reached``
- ``pkg/scheduler/algorithm/predicates/error.go`` (1.7-1.17): the predicate names printed instead
  of reasons by 1.7-1.9 (``MatchNodeSelector``, ``PodToleratesNodeTaints``, ...) and the
  descriptions of 1.10-1.17 (``node(s) had memory pressure``, ``node(s) were not ready``, ...).

Codes are shared with the filter simulator: use the constants, never the literals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from analyzers.taints import describe_well_known

# --- codes -------------------------------------------------------------------

INSUFFICIENT_RESOURCE: Final = "insufficient-resource"
TOO_MANY_PODS: Final = "too-many-pods"
NODE_AFFINITY_MISMATCH: Final = "node-affinity-mismatch"
UNTOLERATED_TAINT: Final = "untolerated-taint"
NODE_UNSCHEDULABLE: Final = "node-unschedulable"
NODE_NAME_MISMATCH: Final = "node-name-mismatch"
# NodeDeclaredFeatures (beta, on by default 1.36; GA 1.37): the pod needs a node feature the
# node's status.declaredFeatures does not list.
NODE_FEATURES_MISSING: Final = "node-features-missing"
NODE_PORTS: Final = "node-ports"
POD_AFFINITY_MISMATCH: Final = "pod-affinity-mismatch"
POD_ANTI_AFFINITY_MISMATCH: Final = "pod-anti-affinity-mismatch"
EXISTING_POD_ANTI_AFFINITY: Final = "existing-pod-anti-affinity"
TOPOLOGY_SPREAD_MISMATCH: Final = "topology-spread-mismatch"
VOLUME_UNBOUND_PVC: Final = "volume-unbound-pvc"
VOLUME_NO_PV: Final = "volume-no-pv"
VOLUME_NODE_AFFINITY_CONFLICT: Final = "volume-node-affinity-conflict"
VOLUME_INSUFFICIENT_STORAGE: Final = "volume-insufficient-storage"
VOLUME_ZONE_CONFLICT: Final = "volume-zone-conflict"
VOLUME_RESTRICTIONS: Final = "volume-restrictions"
VOLUME_LIMITS: Final = "volume-limits"
PVC_NOT_FOUND: Final = "pvc-not-found"
PVC_BEING_DELETED: Final = "pvc-being-deleted"
PVC_LOST: Final = "pvc-lost"
NODE_NOT_READY: Final = "node-not-ready"
NODE_PRESSURE: Final = "node-pressure"
SCHEDULING_GATED: Final = "scheduling-gated"
DRA_CANNOT_ALLOCATE: Final = "dra-cannot-allocate"
DRA_INVALID_POOLS: Final = "dra-invalid-pools"
DRA_CLAIM_UNAVAILABLE: Final = "dra-claim-unavailable"
DRA_CLAIM_MISSING: Final = "dra-claim-missing"
SERVICE_AFFINITY_MISMATCH: Final = "service-affinity-mismatch"
NO_NODES: Final = "no-nodes"
PREEMPTION_NO_VICTIMS: Final = "preemption-no-victims"
PREEMPTION_NOT_HELPFUL: Final = "preemption-not-helpful"
PREEMPTION_NOT_ELIGIBLE: Final = "preemption-not-eligible"
# 1.37+ (preemption.go Evaluator.Preempt, kubernetes#140180): a candidate was found, victims go.
PREEMPTION_PLACEMENT_FOUND: Final = "preemption-placement-found"
# Autoscalers (cluster-autoscaler node groups, Karpenter NodePools).
AUTOSCALER_LIMIT: Final = "autoscaler-limit"
AUTOSCALER_NOT_READY: Final = "autoscaler-not-ready"
AUTOSCALER_BACKOFF: Final = "autoscaler-backoff"
AUTOSCALER_NO_INSTANCE_TYPE: Final = "autoscaler-no-instance-type"
# Kueue (analyzers/messages/kueue.py): why a Workload is not admitted to its ClusterQueue.
QUEUE_QUOTA_UNUSED: Final = "queue-quota-in-use"
QUEUE_QUOTA_EXCEEDED: Final = "queue-quota-exceeded"
QUEUE_FLAVOR_MISMATCH: Final = "queue-flavor-mismatch"
QUEUE_MISSING: Final = "queue-missing"
QUEUE_INACTIVE: Final = "queue-inactive"
QUEUE_ADMISSION: Final = "queue-admission"
# kube-scheduler errors (analyzers/messages/scheduler_errors.py), not a node's verdict.
PLUGIN_ERROR: Final = "plugin-error"
POD_DELETING: Final = "pod-deleting"
OTHER: Final = "other"

ALL_CODES: Final[tuple[str, ...]] = (
    INSUFFICIENT_RESOURCE,
    TOO_MANY_PODS,
    NODE_AFFINITY_MISMATCH,
    UNTOLERATED_TAINT,
    NODE_UNSCHEDULABLE,
    NODE_NAME_MISMATCH,
    NODE_FEATURES_MISSING,
    NODE_PORTS,
    POD_AFFINITY_MISMATCH,
    POD_ANTI_AFFINITY_MISMATCH,
    EXISTING_POD_ANTI_AFFINITY,
    TOPOLOGY_SPREAD_MISMATCH,
    VOLUME_UNBOUND_PVC,
    VOLUME_NO_PV,
    VOLUME_NODE_AFFINITY_CONFLICT,
    VOLUME_INSUFFICIENT_STORAGE,
    VOLUME_ZONE_CONFLICT,
    VOLUME_RESTRICTIONS,
    VOLUME_LIMITS,
    PVC_NOT_FOUND,
    PVC_BEING_DELETED,
    PVC_LOST,
    NODE_NOT_READY,
    NODE_PRESSURE,
    SCHEDULING_GATED,
    DRA_CANNOT_ALLOCATE,
    DRA_INVALID_POOLS,
    DRA_CLAIM_UNAVAILABLE,
    DRA_CLAIM_MISSING,
    SERVICE_AFFINITY_MISMATCH,
    NO_NODES,
    PREEMPTION_NO_VICTIMS,
    PREEMPTION_NOT_HELPFUL,
    PREEMPTION_NOT_ELIGIBLE,
    PREEMPTION_PLACEMENT_FOUND,
    AUTOSCALER_LIMIT,
    AUTOSCALER_NOT_READY,
    AUTOSCALER_BACKOFF,
    AUTOSCALER_NO_INSTANCE_TYPE,
    QUEUE_QUOTA_UNUSED,
    QUEUE_QUOTA_EXCEEDED,
    QUEUE_FLAVOR_MISMATCH,
    QUEUE_MISSING,
    QUEUE_INACTIVE,
    QUEUE_ADMISSION,
    PLUGIN_ERROR,
    POD_DELETING,
    OTHER,
)

# --- plugins (kube-scheduler's in-tree plugin names) ---------------------------

NODE_RESOURCES_FIT: Final = "NodeResourcesFit"
NODE_AFFINITY: Final = "NodeAffinity"
TAINT_TOLERATION: Final = "TaintToleration"
NODE_UNSCHEDULABLE_PLUGIN: Final = "NodeUnschedulable"
NODE_NAME: Final = "NodeName"
NODE_DECLARED_FEATURES: Final = "NodeDeclaredFeatures"
NODE_PORTS_PLUGIN: Final = "NodePorts"
INTER_POD_AFFINITY: Final = "InterPodAffinity"
POD_TOPOLOGY_SPREAD: Final = "PodTopologySpread"
VOLUME_BINDING: Final = "VolumeBinding"
VOLUME_ZONE: Final = "VolumeZone"
VOLUME_RESTRICTIONS_PLUGIN: Final = "VolumeRestrictions"
NODE_VOLUME_LIMITS: Final = "NodeVolumeLimits"
SCHEDULING_GATES: Final = "SchedulingGates"
DYNAMIC_RESOURCES: Final = "DynamicResources"
DEFAULT_PREEMPTION: Final = "DefaultPreemption"
# Predicates that were removed with the policy API (1.23) and never became
# default plugins; named as their last plugin form.
NODE_LABEL: Final = "NodeLabel"
SERVICE_AFFINITY: Final = "ServiceAffinity"
NODE_CONDITION: Final = "CheckNodeCondition"


@dataclass(frozen=True, slots=True)
class Taint:
    """A taint as the scheduler prints it: key and value (the effect is not printed)."""

    key: str
    value: str

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value}


@dataclass(frozen=True, slots=True)
class ReasonInfo:
    """What one reason text means: its code, the plugin that printed it, and the
    object it names when it names one (resource, taint, PVC or claim name)."""

    code: str
    plugin: str | None
    resource: str | None = None
    taint: Taint | None = None
    object_name: str | None = None

    @property
    def meaning(self) -> str:
        """One sentence in plain words: what this reason says about the nodes it counts."""
        return describe(self)


# --- the exact texts ---------------------------------------------------------------

# (text as printed, code, plugin). Order is irrelevant; texts are unique.
CATALOGUE: Final[tuple[tuple[str, str, str | None], ...]] = (
    ("Too many pods", TOO_MANY_PODS, NODE_RESOURCES_FIT),
    ("node(s) didn't match Pod's node affinity/selector", NODE_AFFINITY_MISMATCH, NODE_AFFINITY),
    ("node(s) didn't match Pod's node affinity", NODE_AFFINITY_MISMATCH, NODE_AFFINITY),
    ("node(s) didn't match Pod's node selector", NODE_AFFINITY_MISMATCH, NODE_AFFINITY),
    ("node(s) didn't match node selector", NODE_AFFINITY_MISMATCH, NODE_AFFINITY),
    ("node(s) didn't match scheduler-enforced node affinity", NODE_AFFINITY_MISMATCH, NODE_AFFINITY),
    ("pod affinity terms conflict", NODE_AFFINITY_MISMATCH, NODE_AFFINITY),
    # pkg/scheduler/schedule_one.go: nodes a PreFilter result (NodeAffinity's
    # matchFields/nodeSelector narrowing, 1.30+) excluded before Filter ran.
    ("node is filtered out by the prefilter result", NODE_AFFINITY_MISMATCH, NODE_AFFINITY),
    ("node(s) didn't have the requested labels", NODE_AFFINITY_MISMATCH, NODE_LABEL),
    ("node(s) had untolerated taint(s)", UNTOLERATED_TAINT, TAINT_TOLERATION),
    ("node(s) had untolerated taint", UNTOLERATED_TAINT, TAINT_TOLERATION),
    ("node(s) had taints that the pod didn't tolerate", UNTOLERATED_TAINT, TAINT_TOLERATION),
    ("node(s) were unschedulable", NODE_UNSCHEDULABLE, NODE_UNSCHEDULABLE_PLUGIN),
    ("node(s) didn't match the requested node name", NODE_NAME_MISMATCH, NODE_NAME),
    ("node(s) didn't match the requested hostname", NODE_NAME_MISMATCH, NODE_NAME),
    # nodedeclaredfeatures.go errReasonUnsatisfiedRequirements, v1.36.0+ (UnschedulableAndUnresolvable).
    ("node(s) didn't match Pod's required features", NODE_FEATURES_MISSING, NODE_DECLARED_FEATURES),
    ("node(s) didn't have free ports for the requested pod ports", NODE_PORTS, NODE_PORTS_PLUGIN),
    ("node(s) didn't match pod affinity rules", POD_AFFINITY_MISMATCH, INTER_POD_AFFINITY),
    ("node(s) didn't match pod anti-affinity rules", POD_ANTI_AFFINITY_MISMATCH, INTER_POD_AFFINITY),
    (
        "node(s) didn't satisfy existing pods anti-affinity rules",
        EXISTING_POD_ANTI_AFFINITY,
        INTER_POD_AFFINITY,
    ),
    # Until 1.21 InterPodAffinity added this generic reason next to the specific one.
    ("node(s) didn't match pod affinity/anti-affinity", POD_AFFINITY_MISMATCH, INTER_POD_AFFINITY),
    ("node(s) didn't match pod affinity/anti-affinity rules", POD_AFFINITY_MISMATCH, INTER_POD_AFFINITY),
    ("node(s) didn't match pod topology spread constraints", TOPOLOGY_SPREAD_MISMATCH, POD_TOPOLOGY_SPREAD),
    (
        "node(s) didn't match pod topology spread constraints (missing required label)",
        TOPOLOGY_SPREAD_MISMATCH,
        POD_TOPOLOGY_SPREAD,
    ),
    ("pod has unbound immediate PersistentVolumeClaims", VOLUME_UNBOUND_PVC, VOLUME_BINDING),
    ("pod has unbound PersistentVolumeClaims", VOLUME_UNBOUND_PVC, VOLUME_BINDING),
    ("node(s) didn't find available persistent volumes to bind", VOLUME_NO_PV, VOLUME_BINDING),
    ("node(s) had volume node affinity conflict", VOLUME_NODE_AFFINITY_CONFLICT, VOLUME_BINDING),
    ("node(s) didn't match PersistentVolume's node affinity", VOLUME_NODE_AFFINITY_CONFLICT, VOLUME_BINDING),
    ("node(s) did not have enough free storage", VOLUME_INSUFFICIENT_STORAGE, VOLUME_BINDING),
    ("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)", PVC_LOST, VOLUME_BINDING),
    ("node(s) had no available volume zone", VOLUME_ZONE_CONFLICT, VOLUME_ZONE),
    ("node(s) had no available disk", VOLUME_RESTRICTIONS, VOLUME_RESTRICTIONS_PLUGIN),
    (
        "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode",
        VOLUME_RESTRICTIONS,
        VOLUME_RESTRICTIONS_PLUGIN,
    ),
    ("node(s) exceed max volume count", VOLUME_LIMITS, NODE_VOLUME_LIMITS),
    ("node(s) were not ready", NODE_NOT_READY, NODE_CONDITION),
    ("node(s) had unknown conditions", NODE_NOT_READY, NODE_UNSCHEDULABLE_PLUGIN),
    ("node(s) had unavailable network", NODE_NOT_READY, NODE_CONDITION),
    ("node(s) had memory pressure", NODE_PRESSURE, NODE_CONDITION),
    ("node(s) had disk pressure", NODE_PRESSURE, NODE_CONDITION),
    ("node(s) had pid pressure", NODE_PRESSURE, NODE_CONDITION),
    ("node(s) were out of disk space", NODE_PRESSURE, NODE_CONDITION),
    ("node(s) didn't match service affinity", SERVICE_AFFINITY_MISMATCH, SERVICE_AFFINITY),
    # PodScheduled=False, reason SchedulingGated (pkg/scheduler/schedule_one.go).
    ("Scheduling is blocked due to non-empty scheduling gates", SCHEDULING_GATED, SCHEDULING_GATES),
    ("cannot allocate all claims", DRA_CANNOT_ALLOCATE, DYNAMIC_RESOURCES),
    # k8s.io/dynamic-resource-allocation structured allocator (v0.35.4): a pool whose
    # ResourceSlices are incomplete or inconsistent is refused on that node.
    ("invalid resource pools were encountered", DRA_INVALID_POOLS, DYNAMIC_RESOURCES),
    ("resourceclaim not available on the node", DRA_CLAIM_UNAVAILABLE, DYNAMIC_RESOURCES),
    ("resourceclaim in use", DRA_CLAIM_UNAVAILABLE, DYNAMIC_RESOURCES),
    ("timed out trying to allocate devices", DRA_CANNOT_ALLOCATE, DYNAMIC_RESOURCES),
    ("waiting for resource driver to allocate resource", DRA_CLAIM_UNAVAILABLE, DYNAMIC_RESOURCES),
    ("waiting for resource driver to provide information", DRA_CLAIM_UNAVAILABLE, DYNAMIC_RESOURCES),
    ("no nodes available to schedule pods", NO_NODES, None),
    ("No preemption victims found for incoming pod", PREEMPTION_NO_VICTIMS, DEFAULT_PREEMPTION),
    ("Preemption is not helpful for scheduling", PREEMPTION_NOT_HELPFUL, DEFAULT_PREEMPTION),
    ("no candidate node for preemption", PREEMPTION_NOT_HELPFUL, DEFAULT_PREEMPTION),
    ("not eligible due to preemptionPolicy=Never", PREEMPTION_NOT_ELIGIBLE, DEFAULT_PREEMPTION),
    (
        "not eligible due to a terminating pod on the nominated node",
        PREEMPTION_NOT_ELIGIBLE,
        DEFAULT_PREEMPTION,
    ),
    # Seen in the wild (tutorials quoting 1.2x output): same meaning.
    ("Preemption is not eligible due to preemptionPolicy=Never", PREEMPTION_NOT_ELIGIBLE, DEFAULT_PREEMPTION),
)

# Predicate names printed as reasons by kube-scheduler 1.7-1.9 ("0/3 nodes are
# available: 2 Insufficient cpu, 1 MatchNodeSelector.") and by the 1.5-1.6
# "No nodes are available that match all of the following predicates" form.
LEGACY_PREDICATES: Final[tuple[tuple[str, str, str | None], ...]] = (
    ("MatchNodeSelector", NODE_AFFINITY_MISMATCH, NODE_AFFINITY),
    ("PodToleratesNodeTaints", UNTOLERATED_TAINT, TAINT_TOLERATION),
    ("PodToleratesNodeNoExecuteTaints", UNTOLERATED_TAINT, TAINT_TOLERATION),
    ("CheckNodeUnschedulable", NODE_UNSCHEDULABLE, NODE_UNSCHEDULABLE_PLUGIN),
    ("NodeUnschedulable", NODE_UNSCHEDULABLE, NODE_UNSCHEDULABLE_PLUGIN),
    ("NoVolumeZoneConflict", VOLUME_ZONE_CONFLICT, VOLUME_ZONE),
    ("MatchInterPodAffinity", POD_AFFINITY_MISMATCH, INTER_POD_AFFINITY),
    ("PodAffinityRulesNotMatch", POD_AFFINITY_MISMATCH, INTER_POD_AFFINITY),
    ("PodAntiAffinityRulesNotMatch", POD_ANTI_AFFINITY_MISMATCH, INTER_POD_AFFINITY),
    ("ExistingPodsAntiAffinityRulesNotMatch", EXISTING_POD_ANTI_AFFINITY, INTER_POD_AFFINITY),
    ("PodFitsHostPorts", NODE_PORTS, NODE_PORTS_PLUGIN),
    ("PodFitsPorts", NODE_PORTS, NODE_PORTS_PLUGIN),
    ("PodFitsResources", INSUFFICIENT_RESOURCE, NODE_RESOURCES_FIT),
    ("HostName", NODE_NAME_MISMATCH, NODE_NAME),
    ("PodFitsHost", NODE_NAME_MISMATCH, NODE_NAME),
    ("CheckNodeCondition", NODE_NOT_READY, NODE_CONDITION),
    ("NodeNotReady", NODE_NOT_READY, NODE_CONDITION),
    ("NodeNetworkUnavailable", NODE_NOT_READY, NODE_CONDITION),
    ("NodeUnknownCondition", NODE_NOT_READY, NODE_CONDITION),
    ("CheckNodeMemoryPressure", NODE_PRESSURE, NODE_CONDITION),
    ("NodeUnderMemoryPressure", NODE_PRESSURE, NODE_CONDITION),
    ("CheckNodeDiskPressure", NODE_PRESSURE, NODE_CONDITION),
    ("NodeUnderDiskPressure", NODE_PRESSURE, NODE_CONDITION),
    ("CheckNodePIDPressure", NODE_PRESSURE, NODE_CONDITION),
    ("NodeUnderPIDPressure", NODE_PRESSURE, NODE_CONDITION),
    ("NodeOutOfDisk", NODE_PRESSURE, NODE_CONDITION),
    ("NoDiskConflict", VOLUME_RESTRICTIONS, VOLUME_RESTRICTIONS_PLUGIN),
    ("MaxVolumeCount", VOLUME_LIMITS, NODE_VOLUME_LIMITS),
    ("MaxEBSVolumeCount", VOLUME_LIMITS, NODE_VOLUME_LIMITS),
    ("MaxGCEPDVolumeCount", VOLUME_LIMITS, NODE_VOLUME_LIMITS),
    ("MaxAzureDiskVolumeCount", VOLUME_LIMITS, NODE_VOLUME_LIMITS),
    ("MaxCinderVolumeCount", VOLUME_LIMITS, NODE_VOLUME_LIMITS),
    ("MaxCSIVolumeCountPred", VOLUME_LIMITS, NODE_VOLUME_LIMITS),
    ("CheckVolumeBinding", VOLUME_NO_PV, VOLUME_BINDING),
    ("VolumeBindingNoMatch", VOLUME_NO_PV, VOLUME_BINDING),
    ("VolumeNodeAffinityConflict", VOLUME_NODE_AFFINITY_CONFLICT, VOLUME_BINDING),
    ("NoVolumeNodeConflict", VOLUME_NODE_AFFINITY_CONFLICT, VOLUME_BINDING),
    ("CheckNodeLabelPresence", NODE_AFFINITY_MISMATCH, NODE_LABEL),
    ("CheckServiceAffinity", SERVICE_AFFINITY_MISMATCH, SERVICE_AFFINITY),
    ("EvenPodsSpread", TOPOLOGY_SPREAD_MISMATCH, POD_TOPOLOGY_SPREAD),
    ("EvenPodsSpreadNotMatch", TOPOLOGY_SPREAD_MISMATCH, POD_TOPOLOGY_SPREAD),
)

# cluster-autoscaler's reasons for skipping a node group (counted per node group).
AUTOSCALER_CATALOGUE: Final[tuple[tuple[str, str, str | None], ...]] = (
    ("max node group size reached", AUTOSCALER_LIMIT, None),
    ("max total nodes in cluster reached", AUTOSCALER_LIMIT, None),
    ("not ready for scale-up", AUTOSCALER_NOT_READY, None),
    ("in backoff after failed scale-up", AUTOSCALER_BACKOFF, None),
    ("at least one node can be vertically scaled", AUTOSCALER_NOT_READY, None),
    # Karpenter (pkg/controllers/provisioning/scheduling/scheduler.go), per NodePool.
    ("node limits have been exhausted for nodepool", AUTOSCALER_LIMIT, None),
    ("all available instance types exceed limits for nodepool", AUTOSCALER_LIMIT, None),
)

_EXACT: Final[dict[str, ReasonInfo]] = {
    text: ReasonInfo(code, plugin)
    for text, code, plugin in (*CATALOGUE, *LEGACY_PREDICATES, *AUTOSCALER_CATALOGUE)
}
_EXACT_LOWER: Final[dict[str, ReasonInfo]] = {text.lower(): info for text, info in _EXACT.items()}
# Longest first, for recognising a reason cut short by a truncated message.
_PREFIX_CANDIDATES: Final[tuple[str, ...]] = tuple(
    sorted((t for t, _, _ in CATALOGUE), key=len, reverse=True)
)

_OTHER: Final = ReasonInfo(OTHER, None)
# The beginnings of the patterned reasons (classify_reason's prefixes), with their
# meaning when the beginning alone gives it, else None.
_PATTERN_STEMS: Final[tuple[tuple[str, ReasonInfo | None], ...]] = (
    ("node(s) didn't satisfy plugin(s) [", None),
    ("node(s) had untolerated taint {", ReasonInfo(UNTOLERATED_TAINT, TAINT_TOLERATION)),
    ("node(s) had taint {", ReasonInfo(UNTOLERATED_TAINT, TAINT_TOLERATION)),
    ("node(s) had condition", ReasonInfo(NODE_NOT_READY, NODE_CONDITION)),
    ('persistentvolumeclaim "', None),
    ("waiting for ", None),
    ("resourceclaim", None),
    ("max cluster ", None),
)

# --- patterned texts -----------------------------------------------------------------

_TAINT_RE: Final = re.compile(r"\{\s*([^{}:]*?)\s*(?::\s*([^{}]*?)\s*)?\}")
_PVC_RE: Final = re.compile(
    r'^persistentvolumeclaim "([^"]*)" (not found|is being deleted|was not created for the pod'
    r'|bound to non-existent persistentvolume "[^"]*")$'
)
_EPHEMERAL_PVC_RE: Final = re.compile(
    r'^waiting for ephemeral volume controller to create the persistentvolumeclaim "([^"]*)"$'
)
_RESOURCECLAIM_MISSING_RE: Final = re.compile(
    r'^resourceclaims?(?:\.resource\.k8s\.io)? "([^"]*)" (?:not found|is being deleted)$'
)
_RESOURCECLAIM_ALLOCATING_RE: Final = re.compile(
    r"^resource claim (\S+) is in the process of being allocated$"
)
_DEVICE_CLASS_RE: Final = re.compile(r"^request (\S+): device class (\S+) does not exist$")
# nativedynamicresources.go: a native resource served through DRA, with its figures.
_INSUFFICIENT_NATIVE_RE: Final = re.compile(r"^Insufficient resources: (\S+) \(requested: [^()]*\)$")
# dynamicresources.go (1.36, PR 137607): the timeout as an Error naming the node.
_NODE_ALLOCATE_TIMEOUT_RE: Final = re.compile(r"^node \S+: timed out trying to allocate devices$")
# dynamicresources.go PreEnqueue (ErrClaimNotFound): the pod's claim does not exist yet.
_CLAIM_NOT_CREATED_RE: Final = re.compile(r'^pod "([^"/]+)/([^"]+)": ResourceClaim not created yet$')
# preemption.go Evaluator.Preempt (1.37+): "found a potential placement for pod on node %v,
# preempting %d victims" -- the node DefaultPreemption nominated.
PLACEMENT_FOUND_RE: Final = re.compile(
    r"^found a potential placement for pod on node (\S+), preempting (\d+) victims$"
)
_REPEATED_RE: Final = re.compile(r"\s*\(repeated \d+ times\)$")


def _taint_info(text: str) -> ReasonInfo:
    match = _TAINT_RE.search(text)
    if match is None or " " in match.group(1) or " " in (match.group(2) or ""):
        # Keys and values have no spaces: a taint text that does is not named.
        return ReasonInfo(UNTOLERATED_TAINT, TAINT_TOLERATION)
    return ReasonInfo(UNTOLERATED_TAINT, TAINT_TOLERATION, taint=Taint(match.group(1), match.group(2) or ""))


# Plugins whose PreFilter result can exclude nodes, and the code of that exclusion.
_PREFILTER_RESULT_CODES: Final[dict[str, str]] = {
    NODE_AFFINITY: NODE_AFFINITY_MISMATCH,
    INTER_POD_AFFINITY: POD_AFFINITY_MISMATCH,
    VOLUME_BINDING: VOLUME_NODE_AFFINITY_CONFLICT,
}


@lru_cache(maxsize=8192)
def classify_reason(text: str) -> ReasonInfo:
    """Map one reason text (as printed, without its count) to its code and plugin.

    Never raises: a text unstick does not know yields code ``other`` and plugin
    None. Leading/trailing spaces, a trailing full stop and the event recorder's
    ``(repeated N times)`` suffix are ignored.
    """
    text = text.strip()
    info = _EXACT.get(text)
    if info is not None:
        return info
    text = text.rstrip(".").rstrip()
    if text.endswith(" times)"):
        text = _REPEATED_RE.sub("", text)
    info = _EXACT.get(text)
    if info is not None:
        return info
    if text.startswith("Insufficient resources: "):
        match = _INSUFFICIENT_NATIVE_RE.match(text)
        if match is not None:
            return ReasonInfo(INSUFFICIENT_RESOURCE, DYNAMIC_RESOURCES, resource=match.group(1))
    if text.startswith("node ") and _NODE_ALLOCATE_TIMEOUT_RE.match(text) is not None:
        return ReasonInfo(DRA_CANNOT_ALLOCATE, DYNAMIC_RESOURCES)
    if text.startswith("pod ") and text.endswith("ResourceClaim not created yet"):
        match = _CLAIM_NOT_CREATED_RE.match(text)
        if match is not None:
            return ReasonInfo(DRA_CLAIM_MISSING, DYNAMIC_RESOURCES)
    if text.startswith("Insufficient "):
        resource = text[13:].strip()
        if " " in resource:
            return _OTHER  # resource names have no spaces: not one reason (a line wrapped inside a word?)
        return ReasonInfo(INSUFFICIENT_RESOURCE, NODE_RESOURCES_FIT, resource=resource or None)
    if text.startswith(("node(s) had untolerated taint", "node(s) had taint")):
        return _taint_info(text)
    if text.startswith("persistentvolumeclaim "):
        match = _PVC_RE.match(text)
        if match is not None:
            tail = match.group(2)
            code = (
                PVC_NOT_FOUND
                if tail == "not found"
                else PVC_BEING_DELETED
                if tail == "is being deleted"
                else PVC_LOST
                if tail.startswith("bound")
                else OTHER
            )
            return ReasonInfo(code, VOLUME_BINDING, object_name=match.group(1))
    if text.startswith("waiting for ephemeral volume controller"):
        match = _EPHEMERAL_PVC_RE.match(text)
        if match is not None:
            return ReasonInfo(PVC_NOT_FOUND, VOLUME_BINDING, object_name=match.group(1))
    if text.startswith("waiting for scheduling gates"):
        return ReasonInfo(SCHEDULING_GATED, SCHEDULING_GATES)
    if text.startswith("resource"):
        match = _RESOURCECLAIM_MISSING_RE.match(text)
        if match is not None:
            return ReasonInfo(DRA_CLAIM_MISSING, DYNAMIC_RESOURCES, object_name=match.group(1))
        match = _RESOURCECLAIM_ALLOCATING_RE.match(text)
        if match is not None:
            return ReasonInfo(DRA_CLAIM_UNAVAILABLE, DYNAMIC_RESOURCES, object_name=match.group(1))
    if text.startswith("request "):
        match = _DEVICE_CLASS_RE.match(text)
        if match is not None:
            return ReasonInfo(DRA_CLAIM_MISSING, DYNAMIC_RESOURCES, object_name=match.group(2))
    if text.startswith("node declared features check failed - unsatisfied requirements: "):
        # nodedeclaredfeatures.go v1.35 (alpha): the same verdict, naming the features.
        return ReasonInfo(NODE_FEATURES_MISSING, NODE_DECLARED_FEATURES)
    if text.startswith("found a potential placement "):
        match = PLACEMENT_FOUND_RE.match(text)
        if match is not None:
            return ReasonInfo(PREEMPTION_PLACEMENT_FOUND, DEFAULT_PREEMPTION, object_name=match.group(1))
    if text.startswith("node(s) had condition"):
        return ReasonInfo(NODE_NOT_READY, NODE_CONDITION)
    if text.startswith(("max cluster ", "exceeded quota: ")) and (
        text.endswith(" limit reached") or ", resources: " in text
    ):
        return ReasonInfo(AUTOSCALER_LIMIT, None)
    if text.startswith("node(s) didn't satisfy plugin(s) ["):
        # pkg/scheduler/schedule_one.go: nodes a PreFilter result excluded, naming the plugins.
        plugins = text[len("node(s) didn't satisfy plugin(s) [") :].rstrip("]").split()
        first = plugins[0] if plugins else None
        code = _PREFILTER_RESULT_CODES.get(first or "", OTHER)
        return ReasonInfo(code, first)
    info = _EXACT_LOWER.get(text.lower())
    if info is not None:
        return info
    return _OTHER


def classify_truncated(text: str, *, min_length: int = 8) -> ReasonInfo | None:
    """For the last reason of a message that was cut short: the known reason this
    text is the beginning of, or None when it begins none or reasons of different
    meanings. Texts shorter than ``min_length`` are too ambiguous to guess."""
    text = text.strip()
    if len(text) < min_length:
        return None
    if "Insufficient ".startswith(text):
        return None
    if text.startswith("Insufficient "):
        # The resource name may be cut: the code is sure, the resource is not.
        return ReasonInfo(INSUFFICIENT_RESOURCE, NODE_RESOURCES_FIT)
    if text.startswith(("node(s) had untolerated taint", "node(s) had taint")):
        return ReasonInfo(UNTOLERATED_TAINT, TAINT_TOLERATION)
    found: set[ReasonInfo | None] = {_EXACT[c] for c in _PREFIX_CANDIDATES if c.startswith(text)}
    # Patterned reasons begin the same way as catalogued ones ("node(s) didn't satisfy ").
    found.update(info for stem, info in _PATTERN_STEMS if stem.startswith(text))
    # "node(s) didn't match pod a" begins both pod affinity and anti-affinity
    # reasons: a beginning shared by reasons of different meanings says nothing.
    return found.pop() if len(found) == 1 else None  # None in the set: a stem of many meanings


def beginning_codes(text: str) -> frozenset[str | None]:
    """The codes of every known reason ``text`` is the beginning of, however short
    (None stands for a patterned stem of many meanings); empty when it begins none."""
    text = text.strip()
    if not text:
        return frozenset()
    found: set[str | None] = {_EXACT[c].code for c in _PREFIX_CANDIDATES if c.startswith(text)}
    found.update(
        info.code if info is not None else None for stem, info in _PATTERN_STEMS if stem.startswith(text)
    )
    return frozenset(found)


# --- plain words -----------------------------------------------------------------------

_MEANINGS: Final[dict[str, str]] = {
    INSUFFICIENT_RESOURCE: (
        "the node's allocatable {resource} minus the requests of the pods already on it is smaller "
        "than this pod's request (the scheduler counts requests, not real usage)"
    ),
    TOO_MANY_PODS: "the node already runs as many pods as its allocatable 'pods' (kubelet maxPods) allows",
    NODE_AFFINITY_MISMATCH: (
        "the node's labels do not satisfy the pod's nodeSelector or required node affinity"
    ),
    UNTOLERATED_TAINT: "the node has a NoSchedule or NoExecute taint{taint} that the pod does not tolerate",
    NODE_UNSCHEDULABLE: "the node is cordoned (spec.unschedulable: true), e.g. by kubectl cordon or drain",
    NODE_NAME_MISMATCH: "the pod's spec.nodeName names a different node",
    NODE_FEATURES_MISSING: (
        "the pod uses a feature the node does not declare in status.declaredFeatures (a kubelet "
        "too old or with the feature off)"
    ),
    NODE_PORTS: "a pod already on the node holds a hostPort this pod asks for",
    POD_AFFINITY_MISMATCH: (
        "the pod's required pod affinity needs a matching pod in the node's topology domain, and there is none"
    ),
    POD_ANTI_AFFINITY_MISMATCH: (
        "the pod's required pod anti-affinity forbids the node: a matching pod already runs in its topology domain"
    ),
    EXISTING_POD_ANTI_AFFINITY: (
        "a pod already running in the node's topology domain has required anti-affinity against this pod"
    ),
    TOPOLOGY_SPREAD_MISMATCH: (
        "placing the pod here would break a DoNotSchedule topology spread constraint (maxSkew), "
        "or the node lacks the topology key label"
    ),
    VOLUME_UNBOUND_PVC: (
        "a PersistentVolumeClaim with Immediate binding is not bound yet, so the scheduler tries no node at all"
    ),
    VOLUME_NO_PV: (
        "no available PersistentVolume matches the pod's unbound claim on this node "
        "(size, access mode, storage class or the volume's node affinity)"
    ),
    VOLUME_NODE_AFFINITY_CONFLICT: (
        "a PersistentVolume the pod uses is pinned by its node affinity (a zone or a local disk) to other nodes"
    ),
    VOLUME_INSUFFICIENT_STORAGE: "the CSI driver reports too little free capacity here to provision the claim",
    VOLUME_ZONE_CONFLICT: "a volume the pod uses lives in a zone this node is not in",
    VOLUME_RESTRICTIONS: (
        "a volume the pod needs is already in use on the node in a way that excludes sharing "
        "(same disk, or a ReadWriteOncePod claim)"
    ),
    VOLUME_LIMITS: "the node already has as many volumes of this driver attached as it allows",
    PVC_NOT_FOUND: "the pod references a PersistentVolumeClaim{name} that does not exist (yet)",
    PVC_BEING_DELETED: "the pod references a PersistentVolumeClaim{name} that is being deleted",
    PVC_LOST: "a PersistentVolumeClaim{name} of the pod is bound to a PersistentVolume that no longer exists",
    NODE_NOT_READY: "the node is not Ready or reports a condition that stops scheduling",
    NODE_PRESSURE: "the node reports memory, disk or PID pressure",
    SCHEDULING_GATED: "the pod still has schedulingGates; it is not tried until every gate is removed",
    DRA_CANNOT_ALLOCATE: "the node cannot provide devices for all of the pod's ResourceClaims (DRA)",
    DRA_INVALID_POOLS: (
        "a DRA driver's resource pool for this node is incomplete or inconsistent (its ResourceSlices disagree), "
        "so the allocator will not use it: check the driver and kubectl get resourceslices"
    ),
    DRA_CLAIM_UNAVAILABLE: "a ResourceClaim of the pod is allocated elsewhere, in use, or still being allocated",
    DRA_CLAIM_MISSING: "a ResourceClaim{name} or DeviceClass the pod needs does not exist (yet)",
    SERVICE_AFFINITY_MISMATCH: "the node does not match the scheduler policy's service affinity",
    NO_NODES: "the scheduler sees no nodes at all",
    PREEMPTION_NO_VICTIMS: "the node runs no lower-priority pod whose eviction would make room",
    PREEMPTION_NOT_HELPFUL: (
        "the node fails for a reason that evicting pods cannot change (selector, taint, volume, ...)"
    ),
    PREEMPTION_NOT_ELIGIBLE: (
        "the pod may not preempt others (preemptionPolicy: Never, or a victim of an earlier "
        "preemption is still terminating)"
    ),
    PREEMPTION_PLACEMENT_FOUND: (
        "preemption chose node{name} and is evicting lower-priority pods there; the pod "
        "schedules once they are gone"
    ),
    AUTOSCALER_LIMIT: (
        "the node group or NodePool is at a limit (its maximum size, the cluster's node or "
        "resource limits, or a quota), so the autoscaler may not add a node there"
    ),
    AUTOSCALER_NOT_READY: "the node group is not ready for a scale-up now (its last change is still in progress)",
    AUTOSCALER_BACKOFF: "the node group is in backoff after a failed scale-up; the autoscaler retries it later",
    AUTOSCALER_NO_INSTANCE_TYPE: (
        "no instance type the NodePool may launch satisfies the pod's requirements, resources and offerings together"
    ),
    QUEUE_QUOTA_UNUSED: (
        "the ClusterQueue's quota for {resource} in flavor {name} is in use by admitted workloads: this one "
        "waits until they finish, or preempts them if the queue's preemption policy allows"
    ),
    QUEUE_QUOTA_EXCEEDED: (
        "the pod set asks for more {resource} in flavor {name} than the ClusterQueue may ever give (nominal quota "
        "plus what it may borrow): it is never admitted as it is; lower the requests or raise the quota"
    ),
    QUEUE_FLAVOR_MISMATCH: (
        "the ResourceFlavor{name} cannot serve this pod set (a taint it does not tolerate, node affinity that "
        "excludes it, a resource the ClusterQueue does not cover, or a flavor that does not exist)"
    ),
    QUEUE_MISSING: "the{name} the workload is submitted to does not exist: create it or fix the queue-name label",
    QUEUE_INACTIVE: (
        "the{name} is inactive (stopped, or it names a flavor or admission check that does not exist): "
        "kubectl describe it for why"
    ),
    QUEUE_ADMISSION: "Kueue refuses the workload before looking at quota (admission checks or the queue's namespace selector)",
    PLUGIN_ERROR: (
        "a scheduler plugin failed with an error (not a verdict about nodes): kube-scheduler retries the pod "
        "with backoff until the error goes away"
    ),
    POD_DELETING: "the pod is being deleted, so kube-scheduler no longer tries to place it",
    OTHER: "a reason unstick does not know; read it as printed",
}


def describe(info: ReasonInfo) -> str:
    """One plain-words sentence (no trailing full stop) for a classified reason."""
    template = _MEANINGS.get(info.code, _MEANINGS[OTHER])
    if info.code == INSUFFICIENT_RESOURCE:
        return template.format(resource=info.resource or "resource")
    if info.code == UNTOLERATED_TAINT:
        if info.taint is None:
            return template.format(taint="")
        taint = f" ({info.taint.key}={info.taint.value})" if info.taint.value else f" ({info.taint.key})"
        component = describe_well_known(info.taint.key)
        return template.format(taint=taint) + (f"; {component}" if component else "")
    if info.code in (QUEUE_QUOTA_UNUSED, QUEUE_QUOTA_EXCEEDED):
        return template.format(resource=info.resource or "a resource", name=info.object_name or "?")
    if info.code in (QUEUE_MISSING, QUEUE_INACTIVE):
        return template.format(name=f" {info.object_name}" if info.object_name else " queue")
    if "{name}" in template:
        return template.format(name=f" {info.object_name!r}" if info.object_name else "")
    return template
