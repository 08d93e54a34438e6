"""resource.k8s.io objects → DRA records (analyzers.records), one shape for all
served versions.

- v1 (1.34+) and v1beta2 (1.33+): a request is ``{name, exactly: {...}}`` or
  ``{name, firstAvailable: [...]}``; a device carries its fields directly.
- v1beta1 (1.32+): a request carries ``deviceClassName``, ``selectors``,
  ``allocationMode``, ``count``, ``adminAccess`` itself (besides
  ``firstAvailable``); a device's fields sit under ``basic``.
- Capacity values are ``{value: <quantity>}`` (v1beta1 since 1.32 too); a bare
  quantity is accepted.

An object that does not validate as the API server would refuse it keeps a
``problem`` naming the field ("spec.devices[2].name: Required value"): the
record is kept so what refers to it is *unjudged* (never called missing), and
ClusterState turns the problem into one warning. A selector that does not
compile is such a problem (the API server compiles stored selectors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from analyzers.quantity import QuantityError, parse_quantity
from analyzers.records import (
    EMPTY_MAP,
    AllocatedDevice,
    CapacityPolicy,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    FrozenMap,
    ReservedFor,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)

if TYPE_CHECKING:
    from analyzers.ingest import Decoder

Obj = Mapping[str, Any]
_ATTR_KINDS = (("int", "int"), ("bool", "bool"), ("string", "string"), ("version", "version"))


class _Problem(Exception):
    pass


def _m(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _seq(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()


def _quantity(value: Any, where: str) -> str:
    if isinstance(value, Mapping):
        value = value.get("value")
    if value is None:
        raise _Problem(f"{where}: Required value")
    try:
        parse_quantity(value)
    except QuantityError as exc:
        raise _Problem(f"{where}: Invalid value: {str(value)[:40]!r}: quantities must be valid") from exc
    return str(value)


def _quantities(dec: Decoder, value: Any, where: str) -> FrozenMap[str]:
    items = _m(value)
    if not items:
        return EMPTY_MAP
    return FrozenMap((dec.s(k), dec.s(_quantity(v, f"{where}[{k}]"))) for k, v in items.items())


def _request_policies(dec: Decoder, value: Any, where: str) -> FrozenMap[CapacityPolicy]:
    """Each capacity's ``requestPolicy`` (consumable capacity), by capacity name."""
    out: dict[str, CapacityPolicy] = {}
    for name, entry in _m(value).items():
        policy = _m(entry).get("requestPolicy") if isinstance(entry, Mapping) else None
        if not isinstance(policy, Mapping):
            continue
        at = f"{where}[{name}].requestPolicy"

        def q(v: Any, field: str, at: str = at) -> str | None:
            return None if v is None else dec.s(_quantity(v, f"{at}.{field}"))

        valid_range = policy.get("validRange")
        rng = _m(valid_range)
        if isinstance(valid_range, Mapping) and rng.get("min") is None:
            raise _Problem(f"{at}.validRange.min: Required value")
        out[dec.s(name)] = CapacityPolicy(
            default=q(policy.get("default"), "default"),
            valid_values=tuple(
                dec.s(_quantity(v, f"{at}.validValues[{i}]"))
                for i, v in enumerate(_seq(policy.get("validValues")))
            ),
            has_range=isinstance(valid_range, Mapping),
            min=q(rng.get("min"), "validRange.min"),
            max=q(rng.get("max"), "validRange.max"),
            step=q(rng.get("step"), "validRange.step"),
        )
    return FrozenMap(out) if out else EMPTY_MAP


def _selectors(dec: Decoder, value: Any, where: str) -> tuple[str, ...]:
    from analyzers.simulator.dra.cel import compile_selector

    out = []
    for i, sel in enumerate(_seq(value)):
        expr = _m(_m(sel).get("cel")).get("expression")
        if not isinstance(expr, str) or not expr:
            raise _Problem(f"{where}[{i}].cel.expression: Required value")
        compiled = compile_selector(expr)
        if compiled.error:
            # convertCELErrorToValidationError (pkg/apis/resource/validation/validation.go v1.37.2).
            kind = "Internal error" if compiled.internal else "Invalid value"
            raise _Problem(f"{where}[{i}].cel.expression: {kind}: {compiled.error.splitlines()[0]}")
        out.append(dec.s(expr))
    return tuple(out)


def _tolerations(dec: Decoder, value: Any) -> tuple[DeviceToleration, ...]:
    return tuple(
        DeviceToleration(
            dec.s(t.get("key")),
            dec.s(t.get("operator") or "Equal"),
            dec.s(t.get("value")),
            dec.s(t.get("effect")),
        )
        for t in (_m(x) for x in _seq(value))
    )


def _sub_request(dec: Decoder, r: Mapping[str, Any], name: str, where: str, exact: bool) -> DeviceSubRequest:
    cls = r.get("deviceClassName")
    if not cls:
        raise _Problem(f"{where}.deviceClassName: Required value")
    mode = dec.s(r.get("allocationMode") or "ExactCount")
    if mode not in ("ExactCount", "All"):
        raise _Problem(f"{where}.allocationMode: Unsupported value: {mode!r}")
    count = r.get("count")
    count = 1 if count is None or mode == "All" else count
    if not isinstance(count, int) or count < 1:
        raise _Problem(f"{where}.count: Invalid value: {count!r}: must be greater than zero")
    admin = r.get("adminAccess") if exact else None
    return DeviceSubRequest(
        name=dec.s(name),
        class_name=dec.s(cls),
        selectors=_selectors(dec, r.get("selectors"), f"{where}.selectors"),
        mode=mode,
        count=count,
        admin_access=bool(admin) if admin is not None else None,
        tolerations=_tolerations(dec, r.get("tolerations")),
        capacity=_quantities(dec, _m(r.get("capacity")).get("requests"), f"{where}.capacity.requests"),
    )


def claim_spec(dec: Decoder, spec: Mapping[str, Any], where: str) -> ClaimSpec:
    """spec.devices of a ResourceClaim (or spec.spec of a template), any served version."""
    devices = _m(spec.get("devices"))
    requests = []
    for i, r in enumerate(_m(x) for x in _seq(devices.get("requests"))):
        at = f"{where}.devices.requests[{i}]"
        name = r.get("name")
        if not name:
            raise _Problem(f"{at}.name: Required value")
        first = _seq(r.get("firstAvailable"))
        if first:
            subs = []
            for j, sub in enumerate(_m(x) for x in first):
                if not sub.get("name"):
                    raise _Problem(f"{at}.firstAvailable[{j}].name: Required value")
                subs.append(_sub_request(dec, sub, sub["name"], f"{at}.firstAvailable[{j}]", exact=False))
            requests.append(DeviceRequest(dec.s(name), None, tuple(subs)))
        elif "exactly" in r:
            requests.append(
                DeviceRequest(dec.s(name), _sub_request(dec, _m(r["exactly"]), name, f"{at}.exactly", True))
            )
        else:  # v1beta1: the request is the exact request
            requests.append(DeviceRequest(dec.s(name), _sub_request(dec, r, name, at, True)))
    constraints = []
    for i, c in enumerate(_m(x) for x in _seq(devices.get("constraints"))):
        match, distinct = c.get("matchAttribute"), c.get("distinctAttribute")
        if not match and not distinct:
            raise _Problem(f"{where}.devices.constraints[{i}]: Required value: exactly one of matchAttribute")
        constraints.append(
            DeviceConstraint(tuple(dec.s(x) for x in _seq(c.get("requests"))), dec.s(match), dec.s(distinct))
        )
    return ClaimSpec(tuple(requests), tuple(constraints))


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise ValueError("metadata.name is missing")
    return meta


def resource_claim(dec: Decoder, obj: Obj) -> ResourceClaim:
    from analyzers.ingest import parse_time

    meta = _meta(obj)
    owner = next(
        (r for r in meta.get("ownerReferences") or () if isinstance(r, Mapping) and r.get("controller")),
        None,
    )
    problem = ""
    try:
        spec = claim_spec(dec, _m(obj.get("spec")), "spec")
    except _Problem as exc:
        spec, problem = ClaimSpec(), str(exc)
    status = _m(obj.get("status"))
    allocation = status.get("allocation")
    results: tuple[AllocatedDevice, ...] = ()
    if isinstance(allocation, Mapping):
        results = tuple(
            AllocatedDevice(
                dec.s(r.get("request")),
                dec.s(r.get("driver")),
                dec.s(r.get("pool")),
                dec.s(r.get("device")),
                bool(r.get("adminAccess")),
                dec.s(r.get("shareID")),
                _quantities(
                    dec, r.get("consumedCapacity"), "status.allocation.devices.results.consumedCapacity"
                ),
            )
            for r in (_m(x) for x in _seq(_m(allocation.get("devices")).get("results")))
        )
    return ResourceClaim(
        namespace=dec.s(meta.get("namespace") or "default"),
        name=dec.s(meta["name"]),
        uid=dec.s(meta.get("uid")),
        owner_uid=dec.s(owner.get("uid")) if owner is not None else "",
        deleted=parse_time(meta.get("deletionTimestamp")),
        spec=spec,
        allocated=isinstance(allocation, Mapping),
        allocation=results,
        allocation_node_selector=dec.node_selector(_m(allocation).get("nodeSelector")),
        reserved_for=tuple(
            ReservedFor(dec.s(r.get("resource")), dec.s(r.get("name")), dec.s(r.get("uid")))
            for r in (_m(x) for x in _seq(status.get("reservedFor")))
        ),
        created=parse_time(meta.get("creationTimestamp")),
        problem=problem,
    )


def resource_claim_template(dec: Decoder, obj: Obj) -> ResourceClaimTemplate:
    meta = _meta(obj)
    problem = ""
    try:
        spec = claim_spec(dec, _m(_m(obj.get("spec")).get("spec")), "spec.spec")
    except _Problem as exc:
        spec, problem = ClaimSpec(), str(exc)
    return ResourceClaimTemplate(
        dec.s(meta.get("namespace") or "default"), dec.s(meta["name"]), spec, problem
    )


def device_class(dec: Decoder, obj: Obj) -> DeviceClass:
    meta = _meta(obj)
    spec = _m(obj.get("spec"))
    try:
        selectors, problem = _selectors(dec, spec.get("selectors"), "spec.selectors"), ""
    except _Problem as exc:
        selectors, problem = (), str(exc)
    from analyzers.ingest import parse_time

    return DeviceClass(
        dec.s(meta["name"]),
        selectors,
        dec.s(spec.get("extendedResourceName")),
        problem,
        parse_time(meta.get("creationTimestamp")),
    )


def _attributes(dec: Decoder, value: Any, where: str) -> FrozenMap[tuple[str, Any]]:
    items = _m(value)
    if not items:
        return EMPTY_MAP
    out: dict[str, tuple[str, Any]] = {}
    for name, attr in items.items():
        a = _m(attr)
        for key, kind in _ATTR_KINDS:
            if key in a:
                v = a[key]
                ok = (
                    isinstance(v, bool)
                    if kind == "bool"
                    else isinstance(v, int) and not isinstance(v, bool)
                    if kind == "int"
                    else isinstance(v, str)
                )
                if not ok:
                    raise _Problem(f"{where}[{name}].{key}: Invalid value: {v!r}")
                out[dec.s(name)] = (kind, dec.s(v) if isinstance(v, str) else v)
                break
        else:
            raise _Problem(f"{where}[{name}]: Required value: exactly one value must be specified")
    return FrozenMap(out)


def _device(dec: Decoder, d: Mapping[str, Any], where: str) -> Device:
    name = d.get("name")
    if not name:
        raise _Problem(f"{where}.name: Required value")
    body = _m(d.get("basic")) if "basic" in d else d  # v1beta1 keeps the fields under "basic"
    consumes = []
    for i, c in enumerate(_m(x) for x in _seq(body.get("consumesCounters"))):
        if not c.get("counterSet"):
            raise _Problem(f"{where}.consumesCounters[{i}].counterSet: Required value")
        consumes.append(
            (
                dec.s(c["counterSet"]),
                _quantities(dec, c.get("counters"), f"{where}.consumesCounters[{i}].counters"),
            )
        )
    taints = tuple(
        DeviceTaint(dec.s(t.get("key")), dec.s(t.get("value")), dec.s(t.get("effect")))
        for t in (_m(x) for x in _seq(body.get("taints")))
    )
    return Device(
        name=dec.s(name),
        attributes=_attributes(dec, body.get("attributes"), f"{where}.attributes"),
        capacity=_quantities(dec, body.get("capacity"), f"{where}.capacity"),
        consumes_counters=tuple(consumes),
        taints=taints,
        node_name=dec.s(body.get("nodeName")),
        all_nodes=bool(body.get("allNodes")),
        node_selector=dec.node_selector(body.get("nodeSelector")),
        allow_multiple=bool(body.get("allowMultipleAllocations")),
        binding_conditions=bool(body.get("bindingConditions")),
        binds_to_node=bool(body.get("bindsToNode")),
        request_policies=_request_policies(dec, body.get("capacity"), f"{where}.capacity"),
    )


def resource_slice(dec: Decoder, obj: Obj) -> ResourceSlice:
    meta = _meta(obj)
    spec = _m(obj.get("spec"))
    pool = _m(spec.get("pool"))
    name, driver, pool_name = dec.s(meta["name"]), dec.s(spec.get("driver")), dec.s(pool.get("name"))
    generation = pool.get("generation")
    count = pool.get("resourceSliceCount")

    def make(
        devices: tuple[Device, ...] = (),
        counters: tuple[tuple[str, FrozenMap[str]], ...] = (),
        problem: str = "",
    ) -> ResourceSlice:
        plain = not problem and is_plain(devices, bool(spec.get("perDeviceNodeSelection")))
        return ResourceSlice(
            name=name,
            driver=driver,
            pool=pool_name,
            generation=generation if isinstance(generation, int) else 0,
            slice_count=count if isinstance(count, int) else 1,
            node_name=dec.s(spec.get("nodeName")),
            all_nodes=bool(spec.get("allNodes")),
            node_selector=dec.node_selector(spec.get("nodeSelector")),
            per_device_node_selection=bool(spec.get("perDeviceNodeSelection")),
            devices=devices,
            shared_counters=counters,
            problem=problem,
            plain=plain,
            varying=dec.value(varying_entries(devices)) if plain else None,  # shared by like slices
        )

    try:
        if not driver:
            raise _Problem("spec.driver: Required value")
        if not pool_name:
            raise _Problem("spec.pool.name: Required value")
        devices = tuple(
            _device(dec, _m(d), f"spec.devices[{i}]") for i, d in enumerate(_seq(spec.get("devices")))
        )
        counters = []
        for i, cs in enumerate(_m(x) for x in _seq(spec.get("sharedCounters"))):
            if not cs.get("name"):
                raise _Problem(f"spec.sharedCounters[{i}].name: Required value")
            counters.append(
                (
                    dec.s(cs["name"]),
                    _quantities(dec, cs.get("counters"), f"spec.sharedCounters[{i}].counters"),
                )
            )
        _check_counters(devices, counters)
    except _Problem as exc:
        return make(problem=str(exc))
    return make(devices, tuple(counters))


def is_plain(devices: tuple[Device, ...], per_device_node_selection: bool) -> bool:
    """ResourceSlice.plain: nothing on the devices that the allocator's general search or
    the pool's validation (duplicate names) has to look at."""
    if per_device_node_selection or len({d.name for d in devices}) != len(devices):
        return False
    return not any(
        d.taints or d.consumes_counters or d.allow_multiple or d.binding_conditions or d.request_policies
        for d in devices
    )


def varying_entries(devices: tuple[Device, ...]) -> frozenset[tuple[bool, str]]:
    """ResourceSlice.varying: the (is an attribute, name) entries whose value is not the same
    on every device (present on some and absent on others included)."""
    out: set[tuple[bool, str]] = set()
    for is_attribute in (True, False):
        maps = [d.attributes if is_attribute else d.capacity for d in devices]
        for name in {n for m in maps for n in m}:
            first = maps[0].get(name)
            if any(m.get(name) != first for m in maps[1:]):
                out.add((is_attribute, name))
    return frozenset(out)


def _check_counters(devices: tuple[Device, ...], counters: list[tuple[str, FrozenMap[str]]]) -> None:
    """A device consuming a counter its slice declares in no counter set (when the slice
    declares counter sets: otherwise they live in another slice of the pool, which
    the allocator checks, validateDeviceCounterConsumption)."""
    if not counters:
        return
    sets = dict(counters)
    for i, d in enumerate(devices):
        for j, (cs, used) in enumerate(d.consumes_counters):
            if cs not in sets:
                raise _Problem(
                    f"spec.devices[{i}].consumesCounters[{j}].counterSet: Invalid value: {cs!r}: not found"
                )
            for name in used:
                if name not in sets[cs]:
                    raise _Problem(
                        f"spec.devices[{i}].consumesCounters[{j}].counters[{name}]: Invalid value: "
                        f"counter not found in counter set {cs}"
                    )
