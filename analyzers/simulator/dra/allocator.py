"""The structured allocator, ported from Kubernetes.

Source: staging/src/k8s.io/dynamic-resource-allocation/structured/ at v0.37.2
(Kubernetes v1.37.2). ``structured.NewAllocator`` picks the first of stable,
incubating, experimental whose supported features cover the enabled ones. The
default gates of 1.37 enable DRAConsumableCapacity, DRAFractionalCapacityRange
and DRADeviceBindingConditions+DRAResourceClaimDeviceStatus (all beta, on),
which ``stable`` does not support, so 1.37's kube-scheduler runs
**incubating** (internal/incubating/allocator_incubating.go,
pools_incubating.go); this module ports that one. (1.34-1.35 defaults select
``stable``, whose search is the same minus consumable capacity.)

What is ported exactly:

- GatherPools: slices for the node (nodeName, allNodes, nodeSelector,
  per-device node selection), the highest generation per pool, complete pools
  only (``resourceSliceCount``; an incomplete pool is not used, an "All"
  request on it is an error), invalid pools (duplicate device names, unknown
  counter sets/counters), pools sorted by driver then pool name, slices by
  name, pools with binding conditions last;
- allocateOne: claims in order, requests in order, firstAvailable subrequests
  in order (the first that works wins), devices in pool/slice/device order,
  combinations not permutations (the start location), backtracking;
- a device is skipped when in use (allocated to any claim unless the request
  has adminAccess; allowMultipleAllocations devices are shared), when a class
  or request selector does not match (CEL, :mod:`.cel`), when per-device node
  selection excludes the node, when a NoSchedule/NoExecute device taint is not
  tolerated, when its shared counters are spent, when a matchAttribute /
  distinctAttribute constraint would break, when requested capacity exceeds
  what is left;
- errors worded as upstream (``claim NS/NAME, request R: asks for all devices,
  but resource pool D/P is currently being updated``, ``class C: selector #0:
  CEL compile error: ...``, ``claim NS/NAME: selector #0 on device D/P/X: CEL
  runtime error: ...``).

Consumable capacity: :mod:`.capacity` (requestPolicy rounding, policy checks).
The result's node selector: :func:`allocation_node_selector` (createNodeSelector).
Simplified (docs/dra.md): the result's device configuration is not built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from analyzers.quantity import parse_quantity
from analyzers.records import (
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    Node,
    NodeSelector,
    NodeSelectorTerm,
    Requirement,
    ResourceSlice,
)
from analyzers.simulator.dra import capacity, cel
from analyzers.simulator.selectors import node_selector_matches

DeviceID = tuple[str, str, str]  # (driver, pool, device)
# resourceapi.AllocationResultsMaxSize (staging/src/k8s.io/api/resource/v1/types.go).
ALLOCATION_RESULTS_MAX_SIZE = 32


class AllocationError(Exception):
    """A fatal error (kube-scheduler's Filter returns Error: the attempt is aborted)."""


class _Stop(Exception):
    pass


class _MaxSizeExceeded(Exception):
    pass


@dataclass(frozen=True, slots=True)
class ClaimToAllocate:
    namespace: str
    name: str
    spec: ClaimSpec
    extended: bool = False  # the special claim kube-scheduler makes for DRA-backed extended resources

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Result:
    """One allocated device, as AllocationResult.Devices.Results holds it."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"request": self.request, "driver": self.driver, "pool": self.pool, "device": self.device}


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices: list[ResourceSlice] = field(default_factory=list)  # DeviceSlicesTargetingNode
    others: list[ResourceSlice] = field(default_factory=list)  # DeviceSlicesNotTargetingNode
    counter_sets: dict[str, Mapping[str, str]] = field(default_factory=dict)
    # No device with taints, counters, sharing, binding conditions or per-device node
    # selection (the allocator's fast path applies).
    simple: bool = False

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """Devices already allocated (GatherAllocatedState): exclusively, or shared
    (allowMultipleAllocations) with the capacity each share consumes."""

    devices: frozenset[DeviceID] = frozenset()
    shared: frozenset[DeviceID] = frozenset()
    consumed: Mapping[DeviceID, Mapping[str, Decimal]] = field(default_factory=dict)


def node_matches(node: Node, node_name: str, all_nodes: bool, selector: Any) -> bool:
    """NodeMatches (pools_incubating.go)."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return node_selector_matches(selector, node.labels, node.name)
    return False


def gather_pools(
    node: Node, slices: Sequence[ResourceSlice], all_slices: Sequence[ResourceSlice]
) -> list[Pool]:
    """GatherPools (pools_incubating.go, v0.37.2) with 1.37's default features."""
    if len(slices) == 1:
        # The common node: one plain slice naming it, alone in its pool -- what the loop
        # below and _build_pool conclude for it, without the dictionaries.
        s = slices[0]
        if (
            s.node_name == node.name
            and s.slice_count == 1
            and s.plain
            and not s.shared_counters
            and not s.problem
        ):
            return [Pool(s.driver, s.pool, slices=[s], simple=True)]
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        if s.problem:
            continue  # the API server refuses such a slice: it is not in the cluster
        if s.node_name or s.all_nodes or s.node_selector is not None:
            relevant = node_matches(node, s.node_name, s.all_nodes, s.node_selector)
        elif s.per_device_node_selection:
            relevant = any(node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices)
        else:
            continue
        if not relevant:
            continue
        key = (s.driver, s.pool)
        held = pools.get(key)
        if held is None or s.generation > held[0].generation:
            pools[key] = [s]
        elif s.generation == held[0].generation:
            held.append(s)
    result: list[Pool] = []
    binding: list[Pool] = []
    for (driver, pool_name), for_pool in pools.items():
        count = for_pool[0].slice_count
        all_for_pool: list[ResourceSlice] | None = None
        if len(for_pool) != count:
            generation = for_pool[0].generation
            same = [s for s in all_slices if s.driver == driver and s.pool == pool_name and not s.problem]
            if any(s.generation > generation for s in same):
                continue  # obsolete
            all_for_pool = [s for s in same if s.generation == generation]
            if len(all_for_pool) != count:
                result.append(Pool(driver, pool_name, incomplete=True))
                continue
        pool = _build_pool(driver, pool_name, for_pool, all_for_pool)
        if not pool.simple and any(d.binding_conditions for s in pool.slices for d in s.devices):
            binding.append(pool)
        else:
            result.append(pool)
    result.sort(key=lambda p: (p.driver, p.name))
    binding.sort(key=lambda p: (p.driver, p.name))
    return result + binding


def _build_pool(
    driver: str, name: str, slices: list[ResourceSlice], all_for_pool: list[ResourceSlice] | None
) -> Pool:
    if len(slices) == 1 and all_for_pool is None and slices[0].plain and not slices[0].shared_counters:
        # one slice, nothing to validate across slices (ingest_dra.is_plain): the common pool
        return Pool(driver, name, slices=slices, simple=True)
    slices = sorted(slices, key=lambda s: s.name)
    device_slices = [s for s in slices if not s.shared_counters]
    counter_slices = [s for s in slices if s.shared_counters]
    others: list[ResourceSlice] = []
    if all_for_pool is not None and len(slices) < len(all_for_pool):
        names = {s.name for s in slices}
        for s in all_for_pool:
            if s.name in names:
                continue
            (counter_slices if s.shared_counters else others).append(s)
    seen: set[str] = set()
    for s in device_slices:
        for d in s.devices:
            if d.name in seen:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate device name {d.name}")
            seen.add(d.name)
    counter_sets: dict[str, Mapping[str, str]] = {}
    for s in counter_slices:
        for cs_name, counters in s.shared_counters:
            if cs_name in counter_sets:
                return Pool(
                    driver, name, invalid=True, invalid_reason=f"duplicate counter set name {cs_name}"
                )
            counter_sets[cs_name] = counters
    for group in (device_slices, others):
        for s in group:
            for d in s.devices:
                for cs_name, counters in d.consumes_counters:
                    cs = counter_sets.get(cs_name)
                    if cs is None:
                        return Pool(
                            driver, name, invalid=True, invalid_reason=f"counter set {cs_name} not found"
                        )
                    for c in counters:
                        if c not in cs:
                            return Pool(
                                driver,
                                name,
                                invalid=True,
                                invalid_reason=f"counter {c} not found in counter set {cs_name}",
                            )
    simple = not any(
        s.per_device_node_selection
        or any(
            d.taints or d.consumes_counters or d.allow_multiple or d.binding_conditions or d.request_policies
            for d in s.devices
        )
        for s in device_slices
    )
    return Pool(driver, name, slices=device_slices, others=others, counter_sets=counter_sets, simple=simple)


NAME_FIELD = "metadata.name"


def allocation_node_selector(
    pools: Sequence[Pool], results: Sequence[Result], node_name: str
) -> NodeSelector | None:
    """createNodeSelector (allocator_incubating.go, v0.37.2): the ``status.allocation.nodeSelector``
    of an allocation made on ``node_name`` -- the node itself (``metadata.name`` In) as soon
    as one device is local to a node (its slice's ``nodeName``, or the device's under
    per-device node selection) or binds to it; otherwise the requirements of the slices'
    (or devices') one-term node selectors, each added once; None (available everywhere)
    for devices of ``allNodes`` slices only."""
    where: dict[DeviceID, tuple[ResourceSlice, Device]] = {}
    for pool in pools:
        for sl in pool.slices:
            for d in sl.devices:
                where[(pool.driver, pool.name, d.name)] = (sl, d)
    fields: list[Requirement] = []
    expressions: list[Requirement] = []
    for r in results:
        found = where.get((r.driver, r.pool, r.device))
        if found is None:
            continue
        sl, d = found
        name, selector = (
            (d.node_name, d.node_selector)
            if sl.per_device_node_selection
            else (sl.node_name, sl.node_selector)
        )
        if name or d.binds_to_node:
            return NodeSelector(
                (NodeSelectorTerm(match_fields=(Requirement(NAME_FIELD, "In", (node_name,)),)),)
            )
        if selector is not None and len(selector.terms) == 1:
            term = selector.terms[0]
            _add_new(term.match_fields, fields)
            _add_new(term.match_expressions, expressions)
        elif selector is not None and len(selector.terms) > 1:
            raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(selector.terms)} terms")
    if fields or expressions:
        return NodeSelector(
            (NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields)),)
        )
    return None


def _add_new(found: Sequence[Requirement], into: list[Requirement]) -> None:
    """addNewNodeSelectorRequirements: a requirement is added unless one with the same key,
    operator and set of values is there."""
    for req in found:
        if not any(
            have.key == req.key and have.operator == req.operator and set(have.values) == set(req.values)
            for have in into
        ):
            into.append(req)


def tolerates(t: DeviceToleration, taint: DeviceTaint) -> bool:
    """resourceclaim.ToleratesTaint (staging/.../dynamic-resource-allocation/resourceclaim/devicetoleration.go)."""
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    if t.operator == "Exists":
        return True
    if t.operator in ("", "Equal"):
        return t.value == taint.value
    return False


def taint_prevents(device: Device, request: DeviceSubRequest) -> bool:
    for taint in device.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(
            tolerates(t, taint) for t in request.tolerations
        ):
            return True
    return False


def lookup_attribute(device: Device, driver: str, name: str) -> tuple[str, Any] | None:
    """lookupAttribute: the fully qualified name, or the bare id when the domain is the driver's."""
    found = device.attributes.get(name)
    if found is not None:
        return found
    domain, sep, ident = name.partition("/")
    if not sep or domain != driver:
        return None
    return device.attributes.get(ident)


class _MatchAttribute:
    def __init__(self, requests: tuple[str, ...], attribute: str, distinct: bool) -> None:
        self.requests = set(requests)
        self.attribute = attribute
        self.distinct = distinct
        self.value: tuple[str, Any] | None = None
        self.values: list[tuple[str, Any]] = []
        self.count = 0

    def applies(self, request: str, sub: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (bool(sub) and f"{request}/{sub}" in self.requests)

    def add(self, request: str, sub: str, device: Device, did: DeviceID) -> bool:
        if not self.applies(request, sub):
            return True
        attr = lookup_attribute(device, did[0], self.attribute)
        if attr is None:
            return False
        if self.distinct:
            if attr in self.values:
                return False
            self.values.append(attr)
            return True
        if self.count == 0:
            self.value = attr
            self.count = 1
            return True
        if attr != self.value:
            return False
        self.count += 1
        return True

    def remove(self, request: str, sub: str, device: Device, did: DeviceID) -> None:
        if not self.applies(request, sub):
            return
        if self.distinct:
            attr = lookup_attribute(device, did[0], self.attribute)
            if attr in self.values:
                self.values.remove(attr)
            return
        self.count -= 1


@dataclass(slots=True)
class _RequestData:
    request: DeviceSubRequest
    parent: str  # the parent request's name for a subrequest, else ""
    cls: DeviceClass | None
    num_devices: int = 0
    all_devices: list[tuple[DeviceID, Device, ResourceSlice, Pool]] = field(default_factory=list)
    selected_sub: int = 0

    @property
    def name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


class _MatchCache:
    """CEL results per (expression, device content): selectors are pure, and identical
    devices (same driver, attributes, capacity) answer alike (the allocator's own
    deviceMatchesRequest cache, kept across nodes)."""

    def __init__(self) -> None:
        self.results: dict[tuple[Any, ...], bool] = {}
        self.by_device: dict[tuple[Any, str, int], bool] = {}
        # (class selectors, request selectors) -> the device entries they read (cel.reads),
        # spelled (cel.lookups), or None when they may read anything
        self.reads: dict[
            tuple[tuple[str, ...], tuple[str, ...]], tuple[tuple[bool, str, str, str], ...] | None
        ] = {}
        self.variables: dict[tuple[str, Any, Any, bool], dict[str, Any]] = {}


class Allocator:
    """``structured.Allocator`` for one pod's claims; ``allocate(node)`` per node."""

    def __init__(
        self,
        allocated: AllocatedState,
        classes: Mapping[str, DeviceClass],
        slices: Sequence[ResourceSlice],
        cache: _MatchCache | None = None,
    ) -> None:
        self.allocated = allocated
        self.classes = classes
        self.slices_on_node: dict[str, list[ResourceSlice]] = {}
        self.slices_shared: list[ResourceSlice] = []
        for s in slices:
            if s.node_name:
                self.slices_on_node.setdefault(s.node_name, []).append(s)
            else:
                self.slices_shared.append(s)
        self.all_slices = list(slices)
        self.cache = cache or _MatchCache()
        # node name -> GatherPools' result; set by the caller when the slices are those
        # of one immutable snapshot (the plugin keeps it per snapshot).
        self.pools_cache: dict[str, list[Pool]] | None = None
        self.use_fast_path = True  # tests compare it with the general search
        self._available_counters: dict[str, dict[str, dict[str, Decimal]]] = {}
        self.steps = 0
        self._plan_for: Sequence[ClaimToAllocate] | None = None
        self._plan: _FastPlan | None = None

    def allocate(
        self, node: Node, claims: Sequence[ClaimToAllocate], budget: int = 0
    ) -> list[list[Result]] | None:
        """One list of results per claim, or None when the claims cannot be allocated
        on ``node``. Raises AllocationError for a fatal error, or
        ``InvalidPools`` (ErrFailedAllocationOnNode) when only invalid pools stood in
        the way. ``budget`` > 0 bounds the search steps (allocateOne calls): past it
        :class:`Timeout` is raised (the DRASchedulerFilterTimeout outcome)."""
        if self.use_fast_path:
            lone = self._lone_slice(node)
            plan = self.fast_plan(claims) if lone is not None else None
            if lone is not None and plan is not None:
                picked: list[Result] = []
                done = _scan_slice(plan, lone, lone.driver, lone.pool, self.allocated.devices, picked, None)
                if done is not _EVALUATE:
                    return [picked] if done else None
                # a device whose selectors were never evaluated: the general set-up evaluates
        return _Run(self, node, claims, budget).run()

    def _lone_slice(self, node: Node) -> ResourceSlice | None:
        """The node's only slice when it is plain and alone in its pool and no slice for
        several nodes exists: GatherPools then makes one simple pool of it
        (:func:`gather_pools`' first case), so the fast path needs no Pool."""
        if self.slices_shared:
            return None
        on_node = self.slices_on_node.get(node.name)
        if on_node is None or len(on_node) != 1:
            return None
        s = on_node[0]
        if s.slice_count == 1 and s.plain and not s.shared_counters and not s.problem:
            return s
        return None

    def fast_plan(self, claims: Sequence[ClaimToAllocate]) -> _FastPlan | None:
        """What the fast path needs of ``claims`` when they take it (one claim with one
        ExactCount request, no constraints, admin access or capacity request, its class
        known), else None; kept for the claims object last asked about (the plugin passes
        the same list for every node)."""
        if self._plan_for is claims:
            return self._plan
        self._plan_for, self._plan = claims, _fast_plan(self, claims)
        return self._plan

    def reads_of(
        self, both: tuple[tuple[str, ...], tuple[str, ...]]
    ) -> tuple[tuple[bool, str, str, str], ...] | None:
        """What a class's and a request's selectors read of a device (cel.reads, spelled by
        cel.lookups), or None when they may read anything."""
        found = self.cache.reads.get(both, _UNREAD)
        if found is _UNREAD:
            read = [cel.reads(e) for e in (*both[0], *both[1])]
            found = (
                None
                if any(r is None for r in read)
                else cel.lookups(tuple(sorted({x for r in read for x in r or ()})))
            )
            self.cache.reads[both] = found
        return found  # type: ignore[return-value]

    def node_selector(self, node: Node, results: Sequence[Result]) -> NodeSelector | None:
        """The node selector of ``results`` allocated on ``node`` (:func:`allocation_node_selector`)."""
        pools = self.pools_cache.get(node.name) if self.pools_cache is not None else None
        if pools is None:
            pools = gather_pools(
                node, self.slices_on_node.get(node.name, []) + self.slices_shared, self.all_slices
            )
        return allocation_node_selector(pools, results, node.name)


_NO_FAST_PATH = object()
_UNREAD = object()
_EVALUATE = object()  # _scan_slice: a device's selectors must be evaluated first


@dataclass(slots=True)
class _FastPlan:
    """The fast path's request (:meth:`Allocator.fast_plan`): its data, the selectors of
    its class and its own (``both``), the per-device result cache when there are
    selectors, what they read of a device (``spelled``, None: anything), and per
    (slice.varying, driver) whether a slice's devices all answer alike."""

    request_data: _RequestData
    both: tuple[tuple[str, ...], tuple[str, ...]]
    by_device: dict[tuple[Any, str, int], bool] | None
    results: dict[tuple[Any, ...], bool]
    spelled: tuple[tuple[bool, str, str, str], ...] | None
    alike: dict[tuple[frozenset[tuple[bool, str]], str], bool] = field(default_factory=dict)


def _fast_plan(a: Allocator, claims: Sequence[ClaimToAllocate]) -> _FastPlan | None:
    if len(claims) != 1:
        return None
    claim = claims[0]
    if len(claim.spec.requests) != 1 or claim.spec.constraints:
        return None
    req = claim.spec.requests[0].exactly
    if req is None or req.mode != "ExactCount" or req.admin_access or req.capacity:
        return None
    if req.count > ALLOCATION_RESULTS_MAX_SIZE:
        return None
    cls = a.classes.get(req.class_name)
    if cls is None:
        return None  # the error path of _validate
    both = (cls.selectors, req.selectors)
    cache = a.cache
    by_device = cache.by_device if (cls.selectors or req.selectors) else None
    spelled = a.reads_of(both) if by_device is not None else None
    return _FastPlan(_RequestData(req, "", cls, req.count), both, by_device, cache.results, spelled)


def _scan_slice(
    plan: _FastPlan,
    s: ResourceSlice,
    driver: str,
    pool_name: str,
    in_use: frozenset[DeviceID],
    picked: list[Result],
    evaluate: Callable[[Device, DeviceID], bool] | None,
) -> bool | object:
    """The fast path through one plain slice: appends the free devices the selectors
    admit to ``picked`` until it holds the request's count (True). A device no cache
    answers for is given to ``evaluate`` (which fills the caches); without one the scan
    stops with :data:`_EVALUATE`."""
    req = plan.request_data.request
    by_device, spelled = plan.by_device, plan.spelled
    # The selectors read only entries equal on all the slice's devices (decided at
    # decoding: ResourceSlice.varying): the first free device's answer is theirs.
    varying = s.varying
    same = False
    if spelled is not None and varying is not None:
        found = plan.alike.get((varying, driver))
        if found is None:
            found = plan.alike[(varying, driver)] = not any(
                (is_attribute, qualified) in varying
                or (domain == driver and (is_attribute, ident) in varying)
                for is_attribute, qualified, domain, ident in spelled
            )
        same = found
    answer: bool | None = None
    both, results, project = plan.both, plan.results, cel.project
    for d in s.devices:
        did = (driver, pool_name, d.name)
        if did in in_use:
            continue
        if answer is not None:
            if not answer:
                break
        elif by_device is not None:
            ok = by_device.get((both, driver, id(d)))
            if ok is None and spelled is not None:
                # another device with the same values where the selectors read
                ok = results.get(
                    (both, driver, project(spelled, driver, d.attributes, d.capacity), d.allow_multiple)
                )
                if ok is not None:
                    by_device[(both, driver, id(d))] = ok
            if ok is None:
                if evaluate is None:
                    return _EVALUATE
                ok = evaluate(d, did)
            if same:
                answer = ok
            if not ok:
                continue
        picked.append(Result(req.name, driver, pool_name, d.name))
        if len(picked) == req.count:
            return True
    return False


class InvalidPools(Exception):
    """``invalid resource pools were encountered`` (ErrFailedAllocationOnNode)."""


class Timeout(Exception):
    pass


class _Run:
    def __init__(self, a: Allocator, node: Node, claims: Sequence[ClaimToAllocate], budget: int) -> None:
        self.a = a
        self.node = node
        self.claims = claims
        self.budget = budget
        self.steps = 0
        self.request_data: dict[tuple[int, int, int], _RequestData] = {}
        self.constraints: list[list[_MatchAttribute]] = []
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, list[Mapping[str, Decimal]]] = {}
        self.consumed_counters: dict[str, dict[str, dict[str, Decimal]]] = {}
        self.result: list[list[Result]] = [[] for _ in claims]
        self.matches: dict[tuple[DeviceID, tuple[int, int, int]], bool] = {}
        self.pools: list[Pool] = []

    # -- set-up (Allocate) --------------------------------------------------
    def run(self) -> list[list[Result]] | None:
        a = self.a
        pools = a.pools_cache.get(self.node.name) if a.pools_cache is not None else None
        if pools is None:
            for_node = a.slices_on_node.get(self.node.name, []) + a.slices_shared
            pools = gather_pools(self.node, for_node, a.all_slices)
            if a.pools_cache is not None:
                a.pools_cache[self.node.name] = pools
        self.pools = pools
        fast = self._fast_path() if a.use_fast_path else _NO_FAST_PATH
        if fast is not _NO_FAST_PATH:
            return fast  # type: ignore[return-value]
        for ci, claim in enumerate(self.claims):
            min_devices = 0
            for ri, request in enumerate(claim.spec.requests):
                if request.first_available:
                    per = None
                    for si, sub in enumerate(request.first_available):
                        rd = self._validate(claim, sub, request.name, (ci, ri, si))
                        self.request_data[(ci, ri, si)] = rd
                        per = rd.num_devices if per is None else min(per, rd.num_devices)
                    min_request = per or 0
                else:
                    assert request.exactly is not None
                    rd = self._validate(claim, request.exactly, "", (ci, ri, 0))
                    self.request_data[(ci, ri, 0)] = rd
                    min_request = rd.num_devices
                if min_request > ALLOCATION_RESULTS_MAX_SIZE - min_devices:
                    raise AllocationError(
                        f"claim {claim.ref}, request {request.name}: adding {min_request} devices exceeds the "
                        f"claim limit of {ALLOCATION_RESULTS_MAX_SIZE}, with {min_devices} already accounted for"
                    )
                min_devices += min_request
            self.constraints.append(
                [
                    _MatchAttribute(
                        c.requests, c.match_attribute or c.distinct_attribute, not c.match_attribute
                    )
                    for c in claim.spec.constraints
                ]
            )
        try:
            done = self._allocate_one((0, 0, 0, 0), False, (0, 0, 0))
        except _Stop:
            return None
        except _MaxSizeExceeded:
            done = False
        if not done:
            if any(p.invalid for p in self.pools):
                raise InvalidPools("invalid resource pools were encountered")
            return None
        return [list(r) for r in self.result]

    def _fast_path(self) -> list[list[Result]] | object | None:
        """One claim with one ExactCount request, no constraints, no admin access, no
        capacity request, on pools whose devices have no taints, counters, sharing or
        per-device node selection: allocateOne's search then takes the first ``count``
        free selectable devices in pool/slice/device order and never backtracks, so
        that is what this loop does, without the recursion. Anything else:
        :data:`_NO_FAST_PATH`."""
        plan = self.a.fast_plan(self.claims)
        if plan is None:
            return _NO_FAST_PATH
        for pool in self.pools:
            if pool.invalid or pool.counter_sets or not (pool.simple or pool.incomplete):
                return _NO_FAST_PATH
        in_use = self.a.allocated.devices
        picked: list[Result] = []
        self.steps += 1
        rd = plan.request_data

        def evaluate(d: Device, did: DeviceID) -> bool:
            return self._class_and_request_match(0, rd, d, did)

        for pool in self.pools:
            if pool.incomplete:
                continue
            for s in pool.slices:
                if _scan_slice(plan, s, pool.driver, pool.name, in_use, picked, evaluate):
                    return [picked]
        return None

    def _validate(
        self, claim: ClaimToAllocate, req: DeviceSubRequest, parent: str, key: tuple[int, int, int]
    ) -> _RequestData:
        cls = self.a.classes.get(req.class_name)
        if cls is None:
            raise AllocationError(
                f"claim {claim.ref}, request {req.name}: could not retrieve device class {req.class_name}: "
                f'deviceclass.resource.k8s.io "{req.class_name}" not found'
            )
        rd = _RequestData(req, parent, cls)
        if req.mode == "ExactCount":
            rd.num_devices = req.count
            return rd
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"claim {claim.ref}, request {req.name}: asks for all devices, but resource pool {pool.id} "
                    "is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"claim {claim.ref}, request {req.name}: asks for all devices, but resource pool {pool.id} "
                    "is currently invalid"
                )
            for s in pool.slices:
                for d in s.devices:
                    did = (s.driver, s.pool, d.name)
                    if self._selectable(key, rd, s, d, did) and self._capacity_fits(
                        req, d, did, static=True, ci=key[0]
                    ):
                        rd.all_devices.append((did, d, s, pool))
        rd.num_devices = len(rd.all_devices)
        return rd

    # -- the search (allocateOne) --------------------------------------------
    def _allocate_one(
        self, r: tuple[int, int, int, int], allocate_sub: bool, start: tuple[int, int, int]
    ) -> bool:
        self.steps += 1
        self.a.steps += 1
        if self.budget and self.steps > self.budget:
            raise Timeout()
        ci, ri, si, di = r
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.spec.requests):
            try:
                return self._allocate_one((ci + 1, 0, 0, 0), False, (0, 0, 0))
            except _MaxSizeExceeded:
                return False
        rd = self.request_data[(ci, ri, si)]
        if not allocate_sub and rd.parent:
            all_exceeded = True
            sub = 0
            while (ci, ri, sub) in self.request_data:
                try:
                    ok = self._allocate_one((ci, ri, sub, di), True, (0, 0, 0))
                except _MaxSizeExceeded:
                    sub += 1
                    continue
                all_exceeded = False
                if ok:
                    self.request_data[(ci, ri, 0)].selected_sub = sub
                    return True
                sub += 1
            if all_exceeded:
                raise _MaxSizeExceeded()
            return False
        req = rd.request
        do_all = req.mode == "All"
        if do_all and not rd.all_devices:
            return False
        if di >= rd.num_devices:
            return self._allocate_one((ci, ri + 1, 0, 0), False, (0, 0, 0))
        if rd.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE - len(self.result[ci]):
            raise _MaxSizeExceeded()
        admin = bool(req.admin_access)
        if do_all:
            did, device, s, pool = rd.all_devices[di]
            undo = self._allocate_device(r, rd, did, device, s, pool, must=True)
            if undo is None:
                return False
            try:
                done = self._allocate_one((ci, ri, si, di + 1), allocate_sub, (0, 0, 0))
            except BaseException:
                undo()
                raise
            if not done:
                undo()
            return done
        key = (ci, ri, si)
        for pi in range(start[0], len(self.pools)):
            pool = self.pools[pi]
            if pool.incomplete or pool.invalid:
                continue
            s_start = start[1] if pi == start[0] else 0
            for sli in range(s_start, len(pool.slices)):
                s = pool.slices[sli]
                d_start = start[2] if (pi == start[0] and sli == start[1]) else 0
                for dvi in range(d_start, len(s.devices)):
                    d = s.devices[dvi]
                    did = (pool.driver, pool.name, d.name)
                    if admin and ci in self.allocating.get(did, ()):
                        continue
                    if not admin and self._in_use(did):
                        continue
                    if not self._selectable(key, rd, s, d, did):
                        continue
                    if not self._capacity_fits(req, d, did, static=False, ci=ci):
                        continue
                    undo = self._allocate_device(r, rd, did, d, s, pool, must=False)
                    if undo is None:
                        continue
                    try:
                        done = self._allocate_one((ci, ri, si, di + 1), allocate_sub, (pi, sli, dvi + 1))
                    except BaseException:
                        undo()
                        raise
                    if done:
                        return True
                    undo()
        return False

    def _in_use(self, did: DeviceID) -> bool:
        return did in self.a.allocated.devices or bool(self.allocating.get(did))

    def _selectable(
        self, key: tuple[int, int, int], rd: _RequestData, s: ResourceSlice, d: Device, did: DeviceID
    ) -> bool:
        mk = (did, key)
        found = self.matches.get(mk)
        if found is not None:
            return found
        ok = self._class_and_request_match(key[0], rd, d, did)
        if ok and s.per_device_node_selection:
            ok = node_matches(self.node, d.node_name, d.all_nodes, d.node_selector)
        self.matches[mk] = ok
        return ok

    def _class_and_request_match(self, ci: int, rd: _RequestData, d: Device, did: DeviceID) -> bool:
        """The class's selectors, then the request's (selectorsMatch twice, in that order),
        answered from one cache entry per (selectors, device record) -- and, on a miss, per
        what the selectors read of the device -- so identical devices on other nodes cost
        one lookup."""
        cls_selectors = rd.cls.selectors if rd.cls is not None else ()
        selectors = rd.request.selectors
        if not cls_selectors and not selectors:
            return True
        cache = self.a.cache
        both = (cls_selectors, selectors)
        dkey = (both, did[0], id(d))  # the record lives as long as the snapshot holding this cache
        hit = cache.by_device.get(dkey)
        if hit is not None:
            return hit
        spelled = self.a.reads_of(both)
        if spelled is not None:
            ckey: tuple[Any, ...] = (
                both,
                did[0],
                cel.project(spelled, did[0], d.attributes, d.capacity),
                d.allow_multiple,
            )
            hit = cache.results.get(ckey)
            if hit is not None:
                cache.by_device[dkey] = hit
                return hit
        ok = (
            rd.cls is None or self._selectors_match(ci, d, did, rd.cls.name, cls_selectors)
        ) and self._selectors_match(ci, d, did, None, selectors)
        if spelled is not None:
            cache.results[ckey] = ok
        cache.by_device[dkey] = ok
        return ok

    def _selectors_match(
        self, ci: int, d: Device, did: DeviceID, cls: str | None, selectors: tuple[str, ...]
    ) -> bool:
        cache = self.a.cache
        for i, expr in enumerate(selectors):
            # Per device record first (records are interned values, hashed once), then
            # per what the selector reads of the device (cel.reads).
            dkey = (expr, did[0], id(d))  # the record lives as long as the snapshot holding this cache
            hit = cache.by_device.get(dkey)
            if hit is not None:
                if not hit:
                    return False
                continue
            entries = cel.reads(expr)
            ckey: tuple[Any, ...] = (
                (expr, did[0], d.attributes, d.capacity, d.allow_multiple)
                if entries is None
                else (
                    expr,
                    did[0],
                    cel.projection(entries, did[0], d.attributes, d.capacity),
                    d.allow_multiple,
                )
            )
            hit = cache.results.get(ckey)
            if hit is not None:
                cache.by_device[dkey] = hit
                if not hit:
                    return False
                continue
            compiled = cel.compile_selector(expr)
            if compiled.error:
                where = f"class {cls}" if cls is not None else f"claim {self.claims[ci].ref}"
                raise AllocationError(f"{where}: selector #{i}: CEL compile error: {compiled.error}")
            vkey = (did[0], d.attributes, d.capacity, d.allow_multiple)
            var = cache.variables.get(vkey)
            if var is None:
                var = cache.variables[vkey] = cel.device_variable(
                    did[0], d.attributes, d.capacity, d.allow_multiple
                )
            try:
                ok = cel.evaluate(compiled, var)
            except cel.CelError as exc:
                where = f"class {cls}" if cls is not None else f"claim {self.claims[ci].ref}"
                raise AllocationError(
                    f"{where}: selector #{i} on device {'/'.join(did)}: CEL runtime error: {cel.enhance(str(exc))}"
                ) from exc
            cache.results[ckey] = cache.by_device[dkey] = ok
            if not ok:
                return False
        return True

    def _capacity_fits(self, req: DeviceSubRequest, d: Device, did: DeviceID, static: bool, ci: int) -> bool:
        """CmpRequestOverCapacity (:mod:`.capacity`): the request rounded up by the device's
        requestPolicy, every capacity checked against the policy and against what is left
        (its capacity less what allocated and allocating shares consume; ``static``: none).
        Applies to every device (DRAConsumableCapacity is on in 1.37)."""
        if not req.capacity and not d.request_policies and (static or not d.allow_multiple):
            return True  # each capacity consumes its whole value, which fits an unshared device
        already: list[Mapping[str, Decimal]] = []
        if not static:
            held = self.a.allocated.consumed.get(did)
            if held:
                already.append(held)
            already.extend(self.allocating_capacity.get(did, ()))
        try:
            return capacity.request_fits(req.capacity, d.capacity, d.request_policies, already)
        except capacity.CapacityError as exc:
            what = "checking" if static else "rechecking"
            raise AllocationError(
                f"claim {self.claims[ci].ref}, request {req.name}: {what} capacity for device "
                f"{'/'.join(did) if not static else d.name}: {exc}"
            ) from None

    def _allocate_device(
        self,
        r: tuple[int, int, int, int],
        rd: _RequestData,
        did: DeviceID,
        d: Device,
        s: ResourceSlice,
        pool: Pool,
        must: bool,
    ) -> Any:
        ci = r[0]
        req = rd.request
        admin = bool(req.admin_access)
        multi = d.allow_multiple
        if not multi and admin and ci in self.allocating.get(did, ()):
            return None
        if not admin and self._in_use(did):
            return None
        skip_counters = multi and (
            did in self.a.allocated.consumed
            or did in self.a.allocated.shared
            or did in self.allocating_capacity
        )
        reserved = False
        if not skip_counters and d.consumes_counters:
            if not self._reserve_counters(pool, d):
                return None
            reserved = True
        base, sub = (rd.parent, req.name) if rd.parent else (req.name, "")

        def rollback(added: int, marked: bool, cap: Mapping[str, Decimal] | None, result: bool) -> None:
            if result:
                self.result[ci].pop()
            if cap is not None:
                self.allocating_capacity[did].remove(cap)
            if marked:
                self.allocating[did].discard(ci)
            for c in reversed(self.constraints[ci][:added]):
                c.remove(base, sub, d, did)
            if reserved:
                self._release_counters(pool, d)

        if taint_prevents(d, req):
            rollback(0, False, None, False)
            return None
        added = 0
        for c in self.constraints[ci]:
            if not c.add(base, sub, d, did):
                rollback(added, False, None, False)
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].ref}, request {req.name}: cannot add device {'/'.join(did)} "
                        "because a claim constraint would not be satisfied"
                    )
                return None
            added += 1
        marked = False
        if not multi:
            self.allocating.setdefault(did, set()).add(ci)
            marked = True
        cap: Mapping[str, Decimal] | None = None
        if not self._capacity_fits(req, d, did, static=False, ci=ci):
            rollback(added, marked, None, False)
            return None
        if multi:
            cap = capacity.consumed_by_request(req.capacity, d.capacity, d.request_policies)
            self.allocating_capacity.setdefault(did, []).append(cap)
        self.result[ci].append(Result(rd.name, did[0], did[1], did[2], admin))
        return lambda: rollback(added, marked, cap, True)

    def _reserve_counters(self, pool: Pool, d: Device) -> bool:
        available = self._available_counters_for(pool)
        consumed = self.consumed_counters.setdefault(pool.id, {})
        for cs, counters in d.consumes_counters:
            into = consumed.setdefault(cs, {})
            for name, q in counters.items():
                into[name] = into.get(name, Decimal(0)) + parse_quantity(q)
        for cs, left in available.items():
            used = consumed.get(cs, {})
            for name, value in left.items():
                if value < used.get(name, Decimal(0)):
                    self._release_counters(pool, d)
                    return False
        return True

    def _release_counters(self, pool: Pool, d: Device) -> None:
        consumed = self.consumed_counters[pool.id]
        for cs, counters in d.consumes_counters:
            for name, q in counters.items():
                consumed[cs][name] -= parse_quantity(q)

    def _available_counters_for(self, pool: Pool) -> dict[str, dict[str, Decimal]]:
        found = self.a._available_counters.get(pool.id)
        if found is not None:
            return found
        out = {
            cs: {n: parse_quantity(q) for n, q in counters.items()}
            for cs, counters in pool.counter_sets.items()
        }
        for group in (pool.slices, pool.others):
            for s in group:
                for d in s.devices:
                    did = (s.driver, s.pool, d.name)
                    if did not in self.a.allocated.devices and did not in self.a.allocated.shared:
                        continue
                    for cs, counters in d.consumes_counters:
                        for name, q in counters.items():
                            if name in out.get(cs, {}):
                                out[cs][name] -= parse_quantity(q)
        self.a._available_counters[pool.id] = out
        return out
