"""Consumable capacity (DRAConsumableCapacity, beta and on since 1.36; DRAFractionalCapacityRange,
beta and on in 1.37), ported from
``staging/src/k8s.io/dynamic-resource-allocation/structured/internal/incubating/consumable_capacity.go``
at v0.37.2 (Kubernetes v1.37.2).

A request for a device's capacity is rounded *up* to what the device's ``requestPolicy``
allows (``validRange``: at least ``min``, then to the next ``min + n*step``; ``validValues``:
the smallest valid value not below the request); a capacity the request does not name
consumes the policy's ``default``, else the whole capacity. The rounded value must then
satisfy the policy (not above ``max``, on a step, one of the valid values -- a request above
every valid value stays unrounded and fails) and, added to what other shares already
consume, fit the capacity. Quantities are exact decimals; ``Value()`` and ``MilliValue()``
round up as ``resource.Quantity`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from analyzers.quantity import parse_quantity
from analyzers.records import CapacityPolicy

MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
ZERO = Decimal(0)
# DRAFractionalCapacityRange's default in 1.37 (pkg/features/kube_features.go v1.37.2).
FRACTIONAL_CAPACITY_RANGE = True


class CapacityError(Exception):
    """A fatal allocation error (the Filter's Error status), not a non-fit."""


class NotRepresentable(CapacityError):
    """errCapacityRequestNotRepresentable."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"capacity request cannot be represented in the device's range arithmetic: {detail}")


def _q(text: str | None) -> Decimal | None:
    return None if text is None else parse_quantity(text)


def _ceil(d: Decimal) -> int:
    i = int(d)  # towards zero
    return i + 1 if d > i else i


def value(q: Decimal) -> int:
    """resource.Quantity.Value(): rounded up to an integer."""
    return _ceil(q)


def milli_value(q: Decimal) -> int:
    """resource.Quantity.MilliValue(): rounded up to thousandths."""
    return _ceil(q * 1000)


def safe_milli_value(q: Decimal) -> int | None:
    """safeMilliValue: the milli value when ``q`` is exactly that many thousandths and fits
    int64; None otherwise (upstream's error)."""
    milli = milli_value(q)
    if not MIN_INT64 <= milli <= MAX_INT64 or Decimal(milli) / 1000 != q:
        return None
    return milli


def use_milli(
    minimum: Decimal | None, maximum: Decimal | None, step: Decimal | None, fractional: bool
) -> bool:
    """useMilli: range arithmetic in thousandths when every bound is milli-representable
    and the step is at least 1m."""
    if not fractional:
        return False
    for i, q in enumerate((minimum, maximum, step)):
        if q is None:
            continue
        milli = safe_milli_value(q)
        if milli is None:
            return False
        if i == 2 and milli < 1:
            return False
    return True


def _text(q: Decimal) -> str:
    return format(q.normalize(), "f") if q == q.to_integral_value() else str(q)


def round_up_range(requested: Decimal, policy: CapacityPolicy, fractional: bool) -> Decimal:
    """roundUpRange."""
    minimum = _q(policy.min)
    assert minimum is not None
    if requested < minimum:
        return minimum
    step = _q(policy.step)
    if step is None:
        return requested
    if use_milli(minimum, _q(policy.max), step, fractional):
        requested_milli = safe_milli_value(requested)
        if requested_milli is None:
            raise NotRepresentable(f"request {_text(requested)} is not a representable milli value")
        step_milli, min_milli = milli_value(step), milli_value(minimum)
        added = requested_milli - min_milli
        n = _go_div(added, step_milli)
        if added - n * step_milli != 0:
            n += 1
        if n > _go_div(MAX_INT64 - min_milli, step_milli):
            raise NotRepresentable(
                f"rounding request {_text(requested)} up to the next step passes the milli-value range"
            )
        return Decimal(min_milli + step_milli * n) / 1000
    if requested > MAX_INT64:
        raise NotRepresentable(f"request {_text(requested)} exceeds MaxInt64")
    requested_int, step_int, min_int = value(requested), value(step), value(minimum)
    added = requested_int - min_int
    n = _go_div(added, step_int)
    if added - n * step_int != 0:
        n += 1
    if min_int >= 0 and n > _go_div(MAX_INT64 - min_int, step_int):
        raise NotRepresentable(f"rounding request {_text(requested)} up to the next step passes MaxInt64")
    return Decimal(min_int + step_int * n)


def _go_div(a: int, b: int) -> int:
    """Go's integer division (truncates towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def round_up_valid_values(requested: Decimal, valid: Iterable[Decimal]) -> Decimal:
    """roundUpValidValues: the first valid value not below the request (the API server
    keeps validValues sorted ascending); the request itself when it is above them all."""
    for v in valid:
        if requested <= v:
            return v
    return requested


def consumed(
    requested: Decimal | None, capacity: Decimal, policy: CapacityPolicy | None, fractional: bool
) -> Decimal:
    """calculateConsumedCapacity."""
    if requested is None:
        default = _q(policy.default) if policy is not None else None
        return capacity if default is None else default
    if policy is None:
        return requested
    if policy.has_range and policy.min is not None:
        return round_up_range(requested, policy, fractional)
    if policy.valid_values:
        return round_up_valid_values(requested, (parse_quantity(v) for v in policy.valid_values))
    return requested


def violates_policy(amount: Decimal, policy: CapacityPolicy | None, fractional: bool) -> bool:
    """violatesPolicy. (Upstream compares with the default by Go struct equality; a value
    equal to the default is taken as equal here.)"""
    if policy is None:
        return False
    default = _q(policy.default)
    if default is not None and amount == default:
        return False
    if policy.has_range:
        maximum = _q(policy.max)
        if maximum is not None and amount > maximum:
            return True
        step = _q(policy.step)
        if step is not None:
            minimum = _q(policy.min) or ZERO
            if use_milli(_q(policy.min), maximum, step, fractional):
                requested = safe_milli_value(amount)
                if requested is None:
                    return True
                return (requested - milli_value(minimum)) % milli_value(step) != 0
            return (value(amount) - value(minimum)) % value(step) != 0
        return False
    if policy.valid_values:
        return all(amount != parse_quantity(v) for v in policy.valid_values)
    return False


def consumed_by_request(
    requests: Mapping[str, str],
    capacity: Mapping[str, str],
    policies: Mapping[str, CapacityPolicy],
    fractional: bool = FRACTIONAL_CAPACITY_RANGE,
) -> dict[str, Decimal]:
    """GetConsumedCapacityFromRequest: what one allocation consumes of each capacity of the
    device (the named ones rounded up, the others their default or the whole)."""
    out: dict[str, Decimal] = {}
    for name, cap in capacity.items():
        req = requests.get(name)
        try:
            out[name] = consumed(
                None if req is None else parse_quantity(req),
                parse_quantity(cap),
                policies.get(name),
                fractional,
            )
        except NotRepresentable as exc:
            raise NotRepresentable(f'capacity "{name}": {exc}') from None
    return out


def request_fits(
    requests: Mapping[str, str],
    capacity: Mapping[str, str],
    policies: Mapping[str, CapacityPolicy],
    already: Iterable[Mapping[str, Decimal]] = (),
    fractional: bool = FRACTIONAL_CAPACITY_RANGE,
) -> bool:
    """CmpRequestOverCapacity: False when the request names a capacity the device lacks,
    when a rounded amount violates the policy, or when it does not fit beside what
    ``already`` (allocated and allocating shares) consumes. Raises
    :class:`NotRepresentable` (before any soft check, whatever the order) for arithmetic
    that overflows."""
    if any(name not in capacity for name in requests):
        return False
    amounts = consumed_by_request(requests, capacity, policies, fractional)
    used = list(already)
    for name, cap in capacity.items():
        amount = amounts[name]
        if amount < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
        if violates_policy(amount, policies.get(name), fractional):
            return False
        total = amount + sum((u.get(name, ZERO) for u in used), ZERO)
        if total > parse_quantity(cap):
            return False
    return True
