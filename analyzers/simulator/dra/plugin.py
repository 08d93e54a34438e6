"""DynamicResources' PreFilter and Filter (pkg/scheduler/framework/plugins/
dynamicresources/dynamicresources.go, v1.37.2).

PreFilter (every rejection UnschedulableAndUnresolvable, ``statusUnschedulable``):
- an allocated claim that cannot be reserved for one more consumer
  (``reservedFor`` full, 256) and is not reserved for the pod:
  ``resourceclaim in use``;
- a request whose DeviceClass does not exist:
  ``request R: device class C does not exist`` (``R/S`` for a subrequest).

Filter, per node:
- an allocated claim whose allocation's node selector excludes the node:
  ``resourceclaim not available on the node``;
- the structured allocator (:mod:`.allocator`) finds no devices for the claims
  still to allocate: ``cannot allocate all claims``; only invalid pools stood in
  the way: ``invalid resource pools were encountered``;
- a fatal allocator error (a CEL runtime error, "All" on an incomplete pool,
  a missing class): Filter returns Error and the attempt is aborted; the
  simulator reports the error text on every node.

DRASchedulerFilterTimeout (beta, on since 1.34): Filter gives the allocator
``DynamicResourcesArgs.filterTimeout`` per node (default 10 s, 0: no limit;
pkg/scheduler/apis/config/v1/defaults.go, dynamicresources.go v1.37.2) and past it
returns the Error ``node N: timed out trying to allocate devices``. The simulator
cannot measure the scheduler's wall time: it counts allocateOne steps instead
(:func:`search_bound`: :data:`STEPS_PER_SECOND` per second of the profile's
filterTimeout) and past that count reports the scheduler's text with the note that
the real outcome depends on its wall clock. Without a timeout (``filterTimeout:
0``, or a release before 1.34) the scheduler searches on; the simulator stops at
:data:`SAFETY_STEPS` and says so in its own words, not the scheduler's
(docs/dra.md).

Unjudged (never guessed): without ResourceSlices in the input (the "were they
collected" rule) or when a claim, its template or a class did not validate,
the plugin says nothing about the pod; :func:`unjudged_reason` names why.
PostFilter: a pod whose claims are allocated but unavailable on every node has
them deallocated by PostFilter (``deallocation of ResourceClaim completed``);
that is reported in the failure's detail.

Not modelled: the DRA-backed extended resource (DeviceClass
``extendedResourceName``), binding conditions, the node-allocatable mapping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from analyzers.quantity import parse_quantity
from analyzers.records import (
    AllocatedDevice,
    ClaimSpec,
    DeviceClass,
    DeviceRequest,
    DeviceSubRequest,
    Node,
    Pod,
    ReservedFor,
    ResourceClaim,
)
from analyzers.simulator import codes as C
from analyzers.simulator.dra.allocator import (
    AllocatedState,
    AllocationError,
    Allocator,
    ClaimToAllocate,
    InvalidPools,
    Result,
    Timeout,
    _MatchCache,
)
from analyzers.simulator.dra.preenqueue import claim_names
from analyzers.simulator.framework import Cycle, Outcome, Plugin, detail, failure
from analyzers.simulator.results import FilterFailure
from analyzers.simulator.selectors import node_selector_matches
from analyzers.snapshot import ClusterSnapshot

REASON_CANNOT_ALLOCATE = "cannot allocate all claims"
REASON_NOT_AVAILABLE = "resourceclaim not available on the node"
REASON_IN_USE = "resourceclaim in use"
REASON_INVALID_POOLS = "invalid resource pools were encountered"
TIMED_OUT = "timed out trying to allocate devices"  # statusError's text after "node N: "
STOPPED = "unstick stopped searching"  # the simulator's own limit, worded as its own
RESERVED_FOR_MAX_SIZE = 256  # resourceapi.ResourceClaimReservedForMaxSize
# configv1.DynamicResourcesFilterTimeoutDefault (k8s.io/kube-scheduler config/v1 types.go v0.37.2).
FILTER_TIMEOUT_DEFAULT = 10.0
# The allocateOne steps per second of filterTimeout the simulator allows before it says the
# scheduler may time out: a stated assumption about kube-scheduler's pace, not a measurement
# (10 s -> 200,000 steps).
STEPS_PER_SECOND = 20_000
# unstick's own limit on one node's search when kube-scheduler has no timeout.
SAFETY_STEPS = 1_000_000

ERROR = "Error"  # a Filter status of code Error (statusError)
FILTER_ERROR = "filter_error"  # Cycle.state key: the error that aborts the attempt
ALLOCATIONS = "dra_allocations"  # Cycle.state key: node index -> tuple of Result
# Cycle.state key: node index -> ((claim to allocate, its results), ...) for the claims allocated there
CLAIM_RESULTS = "dra_claim_results"


def filter_timeout(configured: float | None, version: tuple[int, ...]) -> float:
    """The filterTimeout kube-scheduler applies, in seconds (0: none): the profile's, else
    the default where DRASchedulerFilterTimeout is on (1.34 on), else none."""
    if version[:2] < (1, 34):
        return 0.0
    return FILTER_TIMEOUT_DEFAULT if configured is None else configured


def search_bound(timeout: float) -> int:
    """The allocateOne steps the simulator searches one node for before it stops: the
    scheduler's ``timeout`` at :data:`STEPS_PER_SECOND` (at least 1 step), or
    :data:`SAFETY_STEPS` when the scheduler has no timeout (``timeout`` 0)."""
    if timeout <= 0:
        return SAFETY_STEPS
    return min(SAFETY_STEPS, max(1, round(timeout * STEPS_PER_SECOND)))


def format_seconds(seconds: float) -> str:
    """A timeout as the scheduler configuration writes it: ``10s``, ``300ms``."""
    if seconds >= 1:
        return f"{seconds:g}s"
    return f"{seconds * 1000:g}ms" if seconds >= 0.001 else f"{seconds * 1e6:g}µs"


def pod_claims(snapshot: ClusterSnapshot, pod: Pod) -> list[ResourceClaim] | None:
    """The pod's claims in spec order; None when one is not in the snapshot."""
    out = []
    for name in claim_names(pod):
        claim = snapshot.resource_claims.get((pod.namespace, name))
        if claim is None:
            return None
        out.append(claim)
    return out


def unjudged_reason(snapshot: ClusterSnapshot, pod: Pod) -> str | None:
    """Why DynamicResources' verdict on ``pod`` is not judged, or None."""
    if not pod.spec.resource_claims:
        return None
    claims = pod_claims(snapshot, pod)
    if claims is None:
        return "its ResourceClaims were not all collected"
    if not snapshot.holds_every("ResourceSlice", ""):
        return "ResourceSlices were not collected (kubectl get resourceslices -o json)"
    for claim in claims:
        if claim.problem:
            return f"ResourceClaim {claim.name} does not validate: {claim.problem}"
        if not claim.allocated:
            for request in claim.spec.requests:
                for sub in (request.exactly,) if request.exactly else request.first_available:
                    if sub is None:
                        continue
                    cls = snapshot.device_classes.get(sub.class_name)
                    if cls is not None and cls.problem:
                        return f"DeviceClass {cls.name} does not validate: {cls.problem}"
                    if cls is None and not snapshot.holds_every("DeviceClass", ""):
                        return "DeviceClasses were not collected (kubectl get deviceclasses -o json)"
    return None


def _held(allocated: Sequence[ResourceClaim]) -> tuple[Result, ...]:
    """The devices the pod's already-allocated claims hold, as allocation results."""
    return tuple(
        Result(r.request, r.driver, r.pool, r.device, r.admin_access) for c in allocated for r in c.allocation
    )


def allocated_state(snapshot: ClusterSnapshot) -> AllocatedState:
    """GatherAllocatedState: every device some claim's allocation holds (admin-access
    results excepted: they do not take the device); shared devices apart."""
    return snapshot.derived("dra_allocated", lambda: _allocated_state(snapshot))  # type: ignore[no-any-return]


def _allocated_state(snapshot: ClusterSnapshot) -> AllocatedState:
    """With the capacity shares of shared devices consume, summed per device
    (AggregatedCapacity: allocateddevices.go foreachAllocatedDevice, v1.37.2)."""
    claims = snapshot.resource_claims.values()
    devices = frozenset().union(*[c.exclusive_devices for c in claims if c.exclusive_devices])
    shared: set[tuple[str, str, str]] = set()
    consumed: dict[tuple[str, str, str], dict[str, Decimal]] = {}
    for claim in claims:
        if not claim.holds_shares:
            continue
        for r in claim.allocation:
            if r.admin_access or not r.share_id:
                continue
            did = (r.driver, r.pool, r.device)
            shared.add(did)
            if r.consumed:
                into = consumed.setdefault(did, {})
                for name, q in r.consumed.items():
                    into[name] = into.get(name, Decimal(0)) + parse_quantity(q)
    return AllocatedState(devices, frozenset(shared), consumed)


class DynamicResources(Plugin):
    name = C.DYNAMIC_RESOURCES

    def prefilter(self, cycle: Cycle) -> FilterFailure | None:
        pod = cycle.pod
        if not pod.spec.resource_claims:
            if delegated_resources(cycle):
                cycle.state["dra_claims"] = []
            return None
        snap = cycle.snapshot
        if unjudged_reason(snap, pod) is not None:
            cycle.state["dra_unjudged"] = True
            return None
        claims = pod_claims(snap, pod) or []
        for claim in claims:
            if (
                claim.allocated
                and len(claim.reserved_for) >= RESERVED_FOR_MAX_SIZE
                and not any(r.uid == pod.uid for r in claim.reserved_for)
            ):
                return failure(
                    self.name,
                    C.UNRESOLVABLE,
                    (REASON_IN_USE,),
                    (C.DRA_CLAIM_UNAVAILABLE,),
                    detail(claim=claim.name),
                )
        for claim in claims:
            if claim.allocated:
                continue
            for request in claim.spec.requests:
                subs = (
                    [(request.name, request.exactly)]
                    if request.exactly
                    else [(f"{request.name}/{s.name}", s) for s in request.first_available]
                )
                for rname, sub in subs:
                    if sub is not None and sub.class_name not in snap.device_classes:
                        return failure(
                            self.name,
                            C.UNRESOLVABLE,
                            (f"request {rname}: device class {sub.class_name} does not exist",),
                            (C.DRA_CANNOT_ALLOCATE,),
                            detail(claim=claim.name, request=rname, device_class=sub.class_name),
                        )
        cycle.state["dra_claims"] = claims
        return None

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        claims: list[ResourceClaim] | None = cycle.state.get("dra_claims")
        delegated = delegated_resources(cycle) if claims is not None else {}
        if not claims and not delegated:
            return None
        assert claims is not None
        snap = cycle.snapshot
        table = cycle.table
        out = Outcome(self.name)
        to_allocate = [ClaimToAllocate(c.namespace, c.name, c.spec) for c in claims if not c.allocated]
        allocated = [c for c in claims if c.allocated]
        allocator = None
        if to_allocate or delegated:
            cache = snap.derived("dra_match_cache", _MatchCache)
            allocator = Allocator(
                allocated_state(snap), snap.device_classes, list(snap.resource_slices.values()), cache
            )
            allocator.pools_cache = snap.derived("dra_pools", dict)
        timeout = filter_timeout(cycle.dra_filter_timeout, cycle.wording.version)
        bound = search_bound(timeout)
        allocations: dict[int, tuple[Result, ...]] = {}
        cycle.state[ALLOCATIONS] = allocations
        claim_results: dict[int, tuple[tuple[ClaimToAllocate, tuple[Result, ...]], ...]] = {}
        cycle.state[CLAIM_RESULTS] = claim_results
        # Only nodes the earlier filters pass need the allocator (the framework stops at a
        # node's first failing filter); the others are judged cheaply for the breakdown.
        earlier = 0
        for o in cycle.outcomes.values():
            earlier |= o.mask
        held = _held(allocated)
        for i, name in enumerate(table.names):
            node = snap.nodes[name]
            if allocated and any(not _available_on(c, node) for c in allocated):
                deallocate = [c.name for c in allocated if not _available_on(c, node)]
                out.add_node(i, C.UNRESOLVABLE, (REASON_NOT_AVAILABLE,), (C.DRA_CLAIM_UNAVAILABLE,))
                cycle.state.setdefault("dra_deallocate", set()).update(deallocate)
                continue
            if allocator is None:  # every claim allocated, nothing delegated
                allocations[i] = held
                continue
            if earlier >> i & 1:
                continue  # decided by an earlier filter; the allocator is not asked there
            per_node = self._with_extended(cycle, i, to_allocate, delegated) if delegated else to_allocate
            if not per_node:
                allocations[i] = held
                continue
            reason, code = self._allocate(
                timeout, bound, allocator, node, per_node, allocations, i, held, claim_results
            )
            if code == ERROR and reason is not None:
                # Filter's Error status aborts the scheduling attempt, whatever the other nodes
                # say (schedule_one.go findNodesThatPassFilters): the condition is the error.
                # unstick's own stop is not the scheduler's error and is not worded as one.
                said = (
                    reason if reason.startswith(STOPPED) else f'running "{self.name}" filter plugin: {reason}'
                )
                cycle.state.setdefault(FILTER_ERROR, said)
                code = C.UNRESOLVABLE
            if reason is not None and reason.endswith(TIMED_OUT):
                out.add_group(1 << i, self._node_failure(code, reason, timeout))
            elif reason is not None:
                out.add_node(i, code, (reason,), (C.DRA_CANNOT_ALLOCATE,))
        cycle.state["dra_pending"] = (allocator, to_allocate, allocated, earlier, out)
        return out

    def _node_failure(self, code: str, reason: str, timeout: float) -> FilterFailure:
        """One node's failure; the scheduler's timeout carries what the simulator counted in
        its detail: a count of steps, not the scheduler's wall time."""
        if not reason.endswith(TIMED_OUT):
            return failure(self.name, code, (reason,), (C.DRA_CANNOT_ALLOCATE,))
        note = (
            f"unstick stopped after {search_bound(timeout):,} allocation steps, its stand-in for the "
            f"{format_seconds(timeout)} filterTimeout at an assumed {STEPS_PER_SECOND:,} steps a second; "
            "whether kube-scheduler times out on this node depends on its wall clock"
        )
        return failure(self.name, code, (reason,), (C.DRA_CANNOT_ALLOCATE,), detail(filter_timeout=note))

    @staticmethod
    def _with_extended(
        cycle: Cycle, i: int, to_allocate: list[ClaimToAllocate], delegated: dict[str, DeviceClass]
    ) -> list[ClaimToAllocate]:
        """The claims to allocate on node ``i``: the user's, then the special claim for the
        delegated extended resources the node does not advertise (filterExtendedResources)."""
        if not delegated:
            return to_allocate
        table = cycle.table
        wanted = {}
        for r, cls in delegated.items():
            alloc = table.allocatable.get(r)
            if alloc is None or alloc[i] == 0:
                wanted[r] = (cls, cycle.pod.spec.requests[r])
        if not wanted:
            return to_allocate
        return [*to_allocate, extended_claim(cycle.pod, wanted)]

    def filter_node(self, cycle: Cycle, i: int, removed: Sequence[Pod]) -> FilterFailure | None:
        """Preemption's dry run: removing pods from a node frees none of their devices
        (their claims stay allocated), so the verdict is Filter's -- computed now for a
        node an earlier filter had rejected, where the allocator was not asked."""
        pending = cycle.state.get("dra_pending")
        if pending is None:
            return None
        allocator, to_allocate, allocated, earlier, out = pending
        timeout = filter_timeout(cycle.dra_filter_timeout, cycle.wording.version)
        bound = search_bound(timeout)
        if allocator is None or not earlier >> i & 1:
            found: FilterFailure | None = out.failure(i)
            return found
        late: dict[int, FilterFailure | None] = cycle.state.setdefault("dra_late", {})
        if i not in late:
            node = cycle.snapshot.nodes[cycle.table.names[i]]
            per_node = self._with_extended(cycle, i, to_allocate, delegated_resources(cycle))
            reason, code = (
                self._allocate(timeout, bound, allocator, node, per_node, {}, i, _held(allocated))
                if per_node
                else (None, "")
            )
            code = C.UNRESOLVABLE if code == ERROR else code
            late[i] = None if reason is None else self._node_failure(code, reason, timeout)
        return late[i]

    def _allocate(
        self,
        timeout: float,
        bound: int,
        allocator: Allocator,
        node: Node,
        claims: Sequence[ClaimToAllocate],
        allocations: dict[int, tuple[Result, ...]],
        i: int,
        held: tuple[Result, ...],
        claim_results: dict[int, tuple[tuple[ClaimToAllocate, tuple[Result, ...]], ...]] | None = None,
    ) -> tuple[str | None, str]:
        """Allocates ``claims`` on ``node``: (None, "") with the devices recorded in
        ``allocations`` (after them, ``held``: what the pod's allocated claims hold), else
        (the node's reason, its code)."""
        try:
            found = allocator.allocate(node, claims, bound)
        except InvalidPools:
            return REASON_INVALID_POOLS, C.UNRESOLVABLE
        except Timeout:
            if timeout > 0:
                return f"node {node.name}: {TIMED_OUT}", ERROR
            return (
                f"{STOPPED} for devices on node {node.name} after {bound:,} allocation steps "
                "(kube-scheduler has no filterTimeout here and searches on)",
                ERROR,
            )
        except AllocationError as exc:
            return str(exc), ERROR
        if found is None:
            return REASON_CANNOT_ALLOCATE, C.UNRESOLVABLE
        if len(found) == 1:
            allocations[i] = (*found[0], *held)
            if claim_results is not None:
                claim_results[i] = ((claims[0], tuple(found[0])),)
            return None, ""
        allocations[i] = tuple(r for per_claim in found for r in per_claim) + held
        if claim_results is not None:
            claim_results[i] = tuple((c, tuple(rs)) for c, rs in zip(claims, found, strict=True))
        return None, ""


def commit_allocation(
    snapshot: ClusterSnapshot,
    pod: Pod,
    owner: Pod,
    claims: Sequence[tuple[ClaimToAllocate, tuple[Result, ...]]],
) -> ClusterSnapshot:
    """``snapshot`` once ``pod`` (bound to its node) holds the devices the allocator gave it
    there, as kube-scheduler's PreBind writes them: a claim shared by name is allocated and
    reserved for the pod, with the allocation's node selector (createNodeSelector) that
    later pods using the claim must satisfy; a claim made for ``owner`` (from a template,
    or kube-scheduler's extended-resource claim) gets a copy of its own for ``pod``, so the
    next replica's claim is allocated afresh beside it."""
    node = snapshot.nodes[pod.node_name]
    allocator = Allocator(
        allocated_state(snapshot), snapshot.device_classes, list(snapshot.resource_slices.values())
    )
    allocator.pools_cache = snapshot.derived("dra_pools", dict)
    me = ReservedFor("pods", pod.name, pod.uid)
    changed: list[ResourceClaim] = []
    for claim, results in claims:
        devices = tuple(
            AllocatedDevice(r.request, r.driver, r.pool, r.device, r.admin_access) for r in results
        )
        selector = allocator.node_selector(node, results)
        existing = snapshot.resource_claims.get((claim.namespace, claim.name))
        if existing is not None and not claim.extended and existing.owner_uid != owner.uid:
            changed.append(
                replace(
                    existing,
                    allocated=True,
                    allocation=devices,
                    allocation_node_selector=selector,
                    reserved_for=(*existing.reserved_for, me),
                )
            )
        else:
            changed.append(
                ResourceClaim(
                    namespace=claim.namespace,
                    name=f"{pod.name}-{claim.name}",
                    uid=f"{pod.uid}-{claim.name}",
                    owner_uid=pod.uid,
                    spec=claim.spec,
                    allocated=True,
                    allocation=devices,
                    allocation_node_selector=selector,
                    reserved_for=(me,),
                )
            )
    return snapshot.replace(*changed)


def _available_on(claim: ResourceClaim, node: Node) -> bool:
    sel = claim.allocation_node_selector
    return sel is None or node_selector_matches(sel, node.labels, node.name)


def allocation_dicts(results: Sequence[Result]) -> list[dict[str, Any]]:
    return [r.as_dict() for r in results]


def without_pods(snapshot: ClusterSnapshot, pods: Sequence[Pod]) -> ClusterSnapshot:
    """``snapshot`` once ``pods`` are gone, with what happens to their ResourceClaims
    (the resourceclaim controller, pkg/controller/resourceclaim/controller.go,
    v1.37.2): a claim generated for one of them (owned by the pod) is deleted, and a
    claim left reserved for none of the remaining pods is deallocated -- its devices
    are free again. Pods without ``resourceClaims`` count too: a pod served a DRA-backed
    extended resource owns the claim kube-scheduler created for it
    (extendeddynamicresources.go), which the controller deletes the same way."""
    gone = {p.uid for p in pods if p.uid}
    removals: list[tuple[str, Any]] = [("pods", p.key) for p in pods]
    changed: list[ResourceClaim] = []
    namespaces = {p.namespace for p in pods}
    for claim in snapshot.resource_claims.values():
        if claim.namespace not in namespaces:
            continue
        if claim.owner_uid and claim.owner_uid in gone:
            removals.append(("resource_claims", claim.key))
            continue
        if not claim.reserved_for or not any(r.uid in gone for r in claim.reserved_for):
            continue
        left = tuple(r for r in claim.reserved_for if r.uid not in gone)
        if left:
            changed.append(replace(claim, reserved_for=left))
        else:
            changed.append(
                replace(claim, reserved_for=(), allocated=False, allocation=(), allocation_node_selector=None)
            )
    return snapshot.replace(*changed, remove=removals)


IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"  # resourceapi.ResourceDeviceClassPrefix


def extended_resource_classes(snapshot: ClusterSnapshot) -> dict[str, DeviceClass]:
    """Extended resource name -> the DeviceClass that backs it through DRA
    (k8s.io/dynamic-resource-allocation deviceclass/extendedresourcecache, v0.37.2):
    ``spec.extendedResourceName`` (the newest class wins a name two classes share; at
    the same time, the smaller name) and the implicit
    ``deviceclass.resource.kubernetes.io/<class>`` of every class. Empty unless the
    classes and slices were collected (otherwise nothing is delegated, never guessed)."""

    def build() -> dict[str, DeviceClass]:
        if not (snapshot.holds_every("DeviceClass", "") and snapshot.holds_every("ResourceSlice", "")):
            return {}
        out: dict[str, DeviceClass] = {}
        for cls in snapshot.device_classes.values():
            if cls.problem:
                continue
            out[IMPLICIT_PREFIX + cls.name] = cls
        explicit: dict[str, DeviceClass] = {}
        for cls in snapshot.device_classes.values():
            name = cls.extended_resource_name
            if not name or cls.problem:
                continue
            held = explicit.get(name)
            if held is None or (cls.created or 0.0, _neg(cls.name)) > (held.created or 0.0, _neg(held.name)):
                explicit[name] = cls
        out.update(explicit)
        return out

    found: dict[str, DeviceClass] = snapshot.derived("dra_extended_resource_classes", build)
    return found


def _neg(name: str) -> tuple[int, ...]:
    return (*(-ord(c) for c in name), 0)


def delegated_resources(cycle: Cycle) -> dict[str, DeviceClass]:
    """The pod's extended resources NodeResourcesFit leaves to DynamicResources on nodes
    that do not advertise them (shouldDelegateResourceToDRA, noderesources/fit.go)."""
    if not cycle.wording.dra_extended_resource:
        return {}
    cached: dict[str, DeviceClass] | None = cycle.state.get("dra_delegated")
    if cached is None:
        classes = extended_resource_classes(cycle.snapshot)
        cached = {
            r: classes[r] for r, q in cycle.pod.spec.requests.items() if q > 0 and "/" in r and r in classes
        }
        cycle.state["dra_delegated"] = cached
    return cached


def extended_claim(pod: Pod, resources: dict[str, tuple[DeviceClass, int]]) -> ClaimToAllocate:
    """The special claim for the extended resources DRA serves on one node
    (createRequestsAndMappings, extendeddynamicresources.go): one request per resource,
    ``container-<i>-request-<j>`` (``j`` the resource's index among the container's
    sorted request names), sorted by name. Container requests are not kept per
    container here: the pod's requests stand for container 0's."""
    keys = sorted(pod.spec.requests)
    requests = sorted(
        (
            DeviceRequest(
                f"container-0-request-{keys.index(r)}",
                DeviceSubRequest(f"container-0-request-{keys.index(r)}", cls.name, count=count),
            )
            for r, (cls, count) in sorted(resources.items())
        ),
        key=lambda req: req.name,
    )
    return ClaimToAllocate(
        pod.namespace, f"{pod.name}-extended-resources", ClaimSpec(tuple(requests)), extended=True
    )
