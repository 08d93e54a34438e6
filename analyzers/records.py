"""Slim, immutable records of the Kubernetes objects the analyzers read.

Records keep only what scheduling, rollout and disruption analysis needs, with
quantities already converted to the scheduler's integers and selectors already
parsed. Values that many objects share (label sets, selectors, whole pod specs
of one workload's pods) are interned, so a snapshot of 150,000 pods stays small.
Records are built one object at a time (``analyzers.ingest``), so the live
agent can update a cluster state from watch deltas without rebuilding it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Generic, NoReturn, TypeVar

V = TypeVar("V")


class FrozenMap(dict[str, V], Generic[V]):
    """A read-only, hashable dict: dict-speed lookups, safe to share and intern."""

    __slots__ = ("_hash",)

    def __hash__(self) -> int:  # type: ignore[override]
        try:
            return self._hash
        except AttributeError:
            self._hash: int = hash(frozenset(self.items()))
            return self._hash

    def _immutable(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("FrozenMap is immutable")

    __setitem__ = _immutable
    __delitem__ = _immutable
    clear = _immutable
    pop = _immutable
    popitem = _immutable
    setdefault = _immutable
    update = _immutable
    __ior__ = _immutable

    def __repr__(self) -> str:
        return f"FrozenMap({dict.__repr__(self)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (dict(self),))


EMPTY_MAP: FrozenMap[Any] = FrozenMap()

# ---------------------------------------------------------------------------
# Selectors, taints, tolerations


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): an optional sign, ASCII digits, int64 range
    (no spaces or underscores, which Python's int() would accept)."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` (or ``matchFields``) entry."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Label/node selector semantics of
        staging/src/k8s.io/apimachinery/pkg/labels/selector.go (Requirement.Matches)."""
        op = self.operator
        if op == "In":
            return self.key in labels and labels[self.key] in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            if self.key not in labels or len(self.values) != 1:
                return False
            have, want = parse_int64(labels[self.key]), parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector. An empty selector matches everything; callers
    model a *nil* selector as ``None`` (which matches nothing)."""

    match_labels: FrozenMap[str] = EMPTY_MAP
    match_expressions: tuple[Requirement, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        for req in self.match_expressions:
            if req.operator in ("Exists",):
                parts.append(req.key)
            elif req.operator == "DoesNotExist":
                parts.append(f"!{req.key}")
            else:
                parts.append(f"{req.key} {req.operator.lower()} ({','.join(req.values)})")
        return ",".join(parts) or "<everything>"


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """requiredDuringSchedulingIgnoredDuringExecution: the terms are ORed."""

    terms: tuple[NodeSelectorTerm, ...]
    # Matching lives in analyzers.simulator.selectors (node_selector_matches), which
    # refuses terms that labels.NewRequirement refuses, as kube-scheduler does.


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """core/v1 helper ToleratesTaint (staging/src/k8s.io/api/core/v1/toleration.go)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Equal", ""):
            return self.value == taint.value
        return False


# ---------------------------------------------------------------------------
# Pod spec pieces


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """One ``spec.resourceClaims[]`` entry: a ResourceClaim by name, or a
    ResourceClaimTemplate whose generated claim pod.status names."""

    name: str
    claim_name: str = ""  # resourceClaimName
    template_name: str = ""  # resourceClaimTemplateName


@dataclass(frozen=True, slots=True)
class PodSpec:
    """The scheduling-relevant part of a pod spec; shared by all pods of a template."""

    requests: FrozenMap[int] = EMPTY_MAP  # effective pod request, scheduler units
    limits: FrozenMap[int] = EMPTY_MAP  # summed container limits (for remedies)
    containers_without_requests: int = 0  # app containers requesting neither cpu nor memory
    container_count: int = 0
    node_selector: FrozenMap[str] = EMPTY_MAP
    required_node_affinity: NodeSelector | None = None
    tolerations: tuple[Toleration, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()  # required
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()  # required
    preferred_pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[PodAffinityTerm, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    pvc_names: tuple[str, ...] = ()
    resource_claims: tuple[PodResourceClaim, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    priority_class_name: str = ""
    priority: int | None = None
    preemption_policy: str = ""
    has_overhead: bool = False
    # Score phase (analyzers.simulator.scoring). cpu/memory summed with every container
    # missing one counted at schedutil.DefaultMilliCPURequest / DefaultMemoryRequest.
    nonzero_requests: FrozenMap[int] = EMPTY_MAP
    # preferredDuringScheduling node affinity: (weight, term), in spec order.
    preferred_node_affinity: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    # The weights of preferred_pod_affinity / preferred_pod_anti_affinity, index for index.
    preferred_pod_affinity_weights: tuple[int, ...] = ()
    preferred_pod_anti_affinity_weights: tuple[int, ...] = ()
    # Images of init containers then containers, normalised (":latest" added when untagged).
    images: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """An ownerReference: the one with ``controller: true`` when there is one
    (metav1.GetControllerOf), else the first (``controller`` False then)."""

    kind: str
    name: str
    uid: str = ""
    api_version: str = ""
    controller: bool = True

    @property
    def group(self) -> str:
        """The API group of ``api_version`` ("" for the core group's ``v1``)."""
        return self.api_version.rpartition("/")[0]


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition: float | None = None


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    labels: FrozenMap[str]
    spec: PodSpec
    node_name: str = ""
    phase: str = "Pending"
    owner: OwnerRef | None = None
    created: float | None = None
    deleted: float | None = None  # deletionTimestamp
    ready: bool = False
    scheduled: Condition | None = None  # the PodScheduled condition
    nominated_node: str = ""
    annotations: FrozenMap[str] = EMPTY_MAP
    # status.resourceClaimStatuses: spec.resourceClaims[].name -> the generated
    # claim's name ("" when none was generated, a valid case).
    resource_claim_statuses: FrozenMap[str] = EMPTY_MAP
    # Its first DisruptionTarget condition is True with reason PreemptionByScheduler:
    # kube-scheduler preempted it (what podTerminatingByPreemption looks for).
    preempted_by_scheduler: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def unscheduled(self) -> bool:
        """Waiting for the scheduler: no node, not finished, not being deleted."""
        return not self.node_name and not self.finished and self.deleted is None

    @property
    def priority(self) -> int:
        return self.spec.priority or 0


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    uid: str
    labels: FrozenMap[str]
    allocatable: FrozenMap[int]
    capacity: FrozenMap[int] = EMPTY_MAP
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool | None = None
    conditions: tuple[Condition, ...] = ()
    created: float | None = None
    # status.images: (names, sizeBytes) per image, as the kubelet reports them.
    images: tuple[tuple[tuple[str, ...], int], ...] = ()

    @property
    def key(self) -> str:
        return self.name


# ---------------------------------------------------------------------------
# Workloads


@dataclass(frozen=True, slots=True)
class WorkloadStatus:
    replicas: int = 0
    updated: int = 0
    ready: int = 0
    available: int = 0
    unavailable: int = 0
    observed_generation: int = 0


@dataclass(frozen=True, slots=True)
class Deployment:
    namespace: str
    name: str
    uid: str
    labels: FrozenMap[str]
    replicas: int
    selector: LabelSelector | None
    template: PodSpec
    template_labels: FrozenMap[str]
    strategy_type: str = "RollingUpdate"
    max_surge: int | str | None = "25%"
    max_unavailable: int | str | None = "25%"
    paused: bool = False
    progress_deadline_seconds: int = 600
    min_ready_seconds: int = 0
    generation: int = 0
    status: WorkloadStatus = field(default_factory=WorkloadStatus)
    conditions: tuple[Condition, ...] = ()
    revision: str = ""
    created: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class ReplicaSet:
    namespace: str
    name: str
    uid: str
    labels: FrozenMap[str]
    replicas: int
    selector: LabelSelector | None
    template: PodSpec
    template_labels: FrozenMap[str]
    owner: OwnerRef | None = None
    revision: str = ""
    status: WorkloadStatus = field(default_factory=WorkloadStatus)
    created: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class ReplicationController:
    """A core/v1 ReplicationController: only what the disruption controller reads of
    it (its spec.replicas, getPodReplicationController in disruption.go)."""

    namespace: str
    name: str
    uid: str
    replicas: int
    created: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class StatefulSet:
    namespace: str
    name: str
    uid: str
    labels: FrozenMap[str]
    replicas: int
    selector: LabelSelector | None
    template: PodSpec
    template_labels: FrozenMap[str]
    update_strategy: str = "RollingUpdate"
    pod_management_policy: str = "OrderedReady"
    status: WorkloadStatus = field(default_factory=WorkloadStatus)
    created: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class DaemonSet:
    namespace: str
    name: str
    uid: str
    labels: FrozenMap[str]
    selector: LabelSelector | None
    template: PodSpec
    template_labels: FrozenMap[str]
    desired: int = 0
    status: WorkloadStatus = field(default_factory=WorkloadStatus)
    created: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class Job:
    namespace: str
    name: str
    uid: str
    labels: FrozenMap[str]
    template: PodSpec
    template_labels: FrozenMap[str]
    parallelism: int = 1
    completions: int | None = None
    owner: OwnerRef | None = None
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    created: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    uid: str
    selector: LabelSelector | None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    unhealthy_pod_eviction_policy: str = "IfHealthyBudget"
    # What the disruption controller last wrote (status), for comparison.
    status_expected_pods: int | None = None
    status_desired_healthy: int | None = None
    status_current_healthy: int | None = None
    status_disruptions_allowed: int | None = None
    created: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    preemption_policy: str = "PreemptLowerPriority"
    global_default: bool = False

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: FrozenMap[str]
    phase: str = "Active"

    @property
    def key(self) -> str:
        return self.name


# ---------------------------------------------------------------------------
# Storage


# ---------------------------------------------------------------------------
# Dynamic Resource Allocation (resource.k8s.io v1; v1beta2 and v1beta1 shapes are
# normalised to it by analyzers.ingest). Only what the structured allocator reads.


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str  # NoSchedule, NoExecute, None


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A device capacity's ``requestPolicy`` (resource.k8s.io/v1 CapacityRequestPolicy):
    quantity strings as the slice spells them; ``has_range`` when ``validRange`` is set."""

    default: str | None = None
    valid_values: tuple[str, ...] = ()
    has_range: bool = False
    min: str | None = None  # validRange.min (required by validation when validRange is set)
    max: str | None = None
    step: str | None = None


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice. ``attributes`` maps the qualified name as the
    slice spells it to (type, value), type one of int, bool, string, version;
    ``capacity`` and the counters keep the quantity strings (exact)."""

    name: str
    attributes: FrozenMap[tuple[str, Any]] = EMPTY_MAP
    capacity: FrozenMap[str] = EMPTY_MAP
    consumes_counters: tuple[tuple[str, FrozenMap[str]], ...] = ()  # (counterSet, counter -> quantity)
    taints: tuple[DeviceTaint, ...] = ()
    node_name: str = ""  # perDeviceNodeSelection
    all_nodes: bool = False
    node_selector: NodeSelector | None = None
    allow_multiple: bool = False  # allowMultipleAllocations
    binding_conditions: bool = False
    request_policies: FrozenMap[CapacityPolicy] = EMPTY_MAP  # capacity name -> its requestPolicy
    binds_to_node: bool = False  # bindsToNode: an allocation of it is restricted to the node


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int = 0
    slice_count: int = 1  # pool.resourceSliceCount
    node_name: str = ""
    all_nodes: bool = False
    node_selector: NodeSelector | None = None
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[tuple[str, FrozenMap[str]], ...] = ()  # (counterSet, counter -> quantity)
    problem: str = ""  # why the slice does not validate: its devices are not used
    # No device with taints, counter consumption, sharing, binding conditions or capacity
    # request policies, no per-device node selection, device names unique: a one-slice pool
    # of such a slice is valid and takes the allocator's fast path (set at decoding).
    plain: bool = False
    # Of a plain slice: (is an attribute, name) of the attributes and capacities whose value
    # differs between its devices (absent counting as a value); a selector reading none of
    # them answers alike for every device of the slice. None: not computed.
    varying: frozenset[tuple[bool, str]] | None = None

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions
    extended_resource_name: str = ""
    problem: str = ""
    created: float | None = None  # creationTimestamp: the newest class wins a shared extendedResourceName

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    """``exactly`` of a request, or one ``firstAvailable`` entry."""

    name: str
    class_name: str
    selectors: tuple[str, ...] = ()
    mode: str = "ExactCount"  # ExactCount | All
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: FrozenMap[str] = EMPTY_MAP  # capacity.requests


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: DeviceSubRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    share_id: str = ""
    consumed: FrozenMap[str] = EMPTY_MAP  # consumedCapacity of a shared device's result


@dataclass(frozen=True, slots=True)
class ReservedFor:
    resource: str  # "pods" for a pod
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """A resource.k8s.io ResourceClaim (v1; v1beta1 and v1beta2 normalised)."""

    namespace: str
    name: str
    uid: str
    owner_uid: str = ""  # the controlling ownerReference's uid (a pod, for generated claims)
    deleted: float | None = None  # deletionTimestamp
    spec: ClaimSpec = ClaimSpec()
    allocated: bool = False  # status.allocation set
    allocation: tuple[AllocatedDevice, ...] = ()
    allocation_node_selector: NodeSelector | None = None
    reserved_for: tuple[ReservedFor, ...] = ()
    created: float | None = None
    problem: str = ""  # why the claim does not validate: its needs are not judged
    # Derived from ``allocation`` once per record (GatherAllocatedState's input): the
    # (driver, pool, device) it holds alone -- admin access and shares excepted -- and
    # whether it holds a share of a device.
    exclusive_devices: tuple[tuple[str, str, str], ...] = field(init=False, repr=False, compare=False)
    holds_shares: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "exclusive_devices",
            tuple(
                (r.driver, r.pool, r.device) for r in self.allocation if not r.admin_access and not r.share_id
            ),
        )
        object.__setattr__(
            self, "holds_shares", any(r.share_id and not r.admin_access for r in self.allocation)
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec = ClaimSpec()
    problem: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str
    storage_class: str | None
    volume_name: str = ""
    phase: str = "Pending"
    access_modes: tuple[str, ...] = ()
    request_bytes: int = 0
    selected_node: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    storage_class: str
    capacity_bytes: int = 0
    access_modes: tuple[str, ...] = ()
    claim: tuple[str, str] | None = None  # (namespace, name) of claimRef
    node_affinity: NodeSelector | None = None
    phase: str = "Available"
    # metadata.labels: VolumeZone reads the zone/region labels of a bound PV.
    labels: FrozenMap[str] = EMPTY_MAP

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    binding_mode: str = "Immediate"  # or WaitForFirstConsumer
    allowed_topologies: NodeSelector | None = None
    is_default: bool = False

    @property
    def key(self) -> str:
        return self.name


# ---------------------------------------------------------------------------
# Events and metrics


@dataclass(frozen=True, slots=True)
class InvolvedObject:
    kind: str
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Event:
    namespace: str
    name: str
    uid: str
    involved: InvolvedObject
    reason: str
    message: str
    type: str = "Normal"
    count: int = 1
    first_seen: float | None = None
    last_seen: float | None = None
    source: str = ""  # reportingController or source.component

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class NodeMetrics:
    name: str
    usage: FrozenMap[int]
    timestamp: float | None = None

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class PodMetrics:
    namespace: str
    name: str
    usage: FrozenMap[int]  # summed over containers
    timestamp: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class CustomResourceVersion:
    """One ``spec.versions[]`` entry of a CustomResourceDefinition: its scale
    subresource's JSON paths (None when the version has no scale subresource)."""

    name: str
    served: bool = True
    spec_replicas_path: str | None = None
    status_replicas_path: str | None = None


@dataclass(frozen=True, slots=True)
class CustomResourceDefinition:
    """An apiextensions.k8s.io/v1 CustomResourceDefinition: what maps a custom
    kind to its resource and scale subresource."""

    name: str  # PLURAL.GROUP
    group: str
    kind: str
    plural: str
    namespaced: bool
    versions: tuple[CustomResourceVersion, ...] = ()

    @property
    def key(self) -> str:
        return self.name

    def version(self, name: str) -> CustomResourceVersion | None:
        return next((v for v in self.versions if v.name == name), None)


@dataclass(frozen=True, slots=True)
class CustomObject:
    """A custom resource from a dump: its identity and its ``spec`` and ``status``
    (nested FrozenMaps; lists become tuples), read at a CRD's scale paths."""

    api_version: str
    kind: str
    namespace: str  # "" when cluster-scoped
    name: str
    uid: str
    content: FrozenMap[Any] = EMPTY_MAP  # {"spec": ..., "status": ...}

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.namespace, self.group, self.kind, self.name)


@dataclass(frozen=True, slots=True)
class ScaleReading:
    """What the live agent read from a controller's ``/scale`` subresource
    (autoscaling/v1 Scale): ``uid`` and ``replicas`` (its spec.replicas), or why
    it could not: ``problem`` is an error the disruption controller would hit too
    (it then fails safe), ``unknown`` one only unstick has (RBAC, discovery)."""

    namespace: str
    group: str
    kind: str
    name: str
    uid: str = ""
    replicas: int | None = None
    problem: str | None = None
    unknown: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.namespace, self.group, self.kind, self.name)


Record = (
    Pod
    | Node
    | Deployment
    | ReplicaSet
    | ReplicationController
    | StatefulSet
    | DaemonSet
    | Job
    | PodDisruptionBudget
    | PriorityClass
    | Namespace
    | PersistentVolumeClaim
    | ResourceClaim
    | ResourceClaimTemplate
    | ResourceSlice
    | DeviceClass
    | PersistentVolume
    | StorageClass
    | Event
    | NodeMetrics
    | PodMetrics
    | CustomResourceDefinition
    | CustomObject
    | ScaleReading
)


# ---------------------------------------------------------------------------
# Fast constructors
#
# A watch stream builds an Event record (and its InvolvedObject) for every
# event, and a Condition for every changed condition. A frozen dataclass's
# generated __init__ sets each field through object.__setattr__, looked up per
# field; setting the slots directly builds the same value in about half the
# time (as analyzers.messages.model does). Equality, hashing and repr are the
# dataclass's own (tests/core/test_ingest.py checks they match).

_new = object.__new__
_CONDITION_SLOTS = tuple(
    vars(Condition)[f].__set__ for f in ("type", "status", "reason", "message", "last_transition")
)
_INVOLVED_SLOTS = tuple(vars(InvolvedObject)[f].__set__ for f in ("kind", "namespace", "name", "uid"))
_EVENT_SLOTS = tuple(
    vars(Event)[f].__set__
    for f in (
        "namespace",
        "name",
        "uid",
        "involved",
        "reason",
        "message",
        "type",
        "count",
        "first_seen",
        "last_seen",
        "source",
    )
)


def make_condition(
    type: str, status: str, reason: str, message: str, last_transition: float | None
) -> Condition:
    """``Condition(type, status, reason, message, last_transition)``, built faster."""
    c: Condition = _new(Condition)
    s_type, s_status, s_reason, s_message, s_last = _CONDITION_SLOTS
    s_type(c, type)
    s_status(c, status)
    s_reason(c, reason)
    s_message(c, message)
    s_last(c, last_transition)
    return c


def make_involved(kind: str, namespace: str, name: str, uid: str) -> InvolvedObject:
    """``InvolvedObject(kind, namespace, name, uid)``, built faster."""
    o: InvolvedObject = _new(InvolvedObject)
    s_kind, s_namespace, s_name, s_uid = _INVOLVED_SLOTS
    s_kind(o, kind)
    s_namespace(o, namespace)
    s_name(o, name)
    s_uid(o, uid)
    return o


def make_event(
    namespace: str,
    name: str,
    uid: str,
    involved: InvolvedObject,
    reason: str,
    message: str,
    type: str,
    count: int,
    first_seen: float | None,
    last_seen: float | None,
    source: str,
) -> Event:
    """``Event(namespace, name, uid, …, source)`` with every field given, built faster."""
    e: Event = _new(Event)
    s_ns, s_name, s_uid, s_involved, s_reason, s_message, s_type, s_count, s_first, s_last, s_source = (
        _EVENT_SLOTS
    )
    s_ns(e, namespace)
    s_name(e, name)
    s_uid(e, uid)
    s_involved(e, involved)
    s_reason(e, reason)
    s_message(e, message)
    s_type(e, type)
    s_count(e, count)
    s_first(e, first_seen)
    s_last(e, last_seen)
    s_source(e, source)
    return e


_POD_SLOTS = tuple(vars(Pod)[f.name].__set__ for f in fields(Pod))
_NODE_SLOTS = tuple(vars(Node)[f.name].__set__ for f in fields(Node))


def make_pod(
    namespace: str,
    name: str,
    uid: str,
    labels: FrozenMap[str],
    spec: PodSpec,
    node_name: str,
    phase: str,
    owner: OwnerRef | None,
    created: float | None,
    deleted: float | None,
    ready: bool,
    scheduled: Condition | None,
    nominated_node: str,
    annotations: FrozenMap[str],
    resource_claim_statuses: FrozenMap[str],
    preempted_by_scheduler: bool,
) -> Pod:
    """``Pod(…)`` with every field given, in field order, built faster (the watch path
    decodes one per pod event)."""
    p: Pod = _new(Pod)
    (s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15) = _POD_SLOTS
    s0(p, namespace)
    s1(p, name)
    s2(p, uid)
    s3(p, labels)
    s4(p, spec)
    s5(p, node_name)
    s6(p, phase)
    s7(p, owner)
    s8(p, created)
    s9(p, deleted)
    s10(p, ready)
    s11(p, scheduled)
    s12(p, nominated_node)
    s13(p, annotations)
    s14(p, resource_claim_statuses)
    s15(p, preempted_by_scheduler)
    return p


def make_node(
    name: str,
    uid: str,
    labels: FrozenMap[str],
    allocatable: FrozenMap[int],
    capacity: FrozenMap[int],
    taints: tuple[Taint, ...],
    unschedulable: bool,
    ready: bool | None,
    conditions: tuple[Condition, ...],
    created: float | None,
    images: tuple[tuple[tuple[str, ...], int], ...],
) -> Node:
    """``Node(…)`` with every field given, in field order, built faster."""
    n: Node = _new(Node)
    (s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10) = _NODE_SLOTS
    s0(n, name)
    s1(n, uid)
    s2(n, labels)
    s3(n, allocatable)
    s4(n, capacity)
    s5(n, taints)
    s6(n, unschedulable)
    s7(n, ready)
    s8(n, conditions)
    s9(n, created)
    s10(n, images)
    return n


def frozen_map(items: Mapping[str, V] | Iterable[tuple[str, V]] | None) -> FrozenMap[V]:
    if not items:
        return EMPTY_MAP
    return FrozenMap(items)
