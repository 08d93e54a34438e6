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

One comparison is not by value: ``violatesPolicy`` lets an amount through when it is the
policy's ``default`` by Go's ``==`` on ``resource.Quantity`` -- the struct's fields (the
int64 value and scale, the cached string, the format, the inf.Dec pointer), not
``Quantity.Cmp``. So ``1Gi`` is not ``1073741824`` there (BinarySI against DecimalSI), and
an amount rounded up by ``NewQuantity`` is the default only when the default's struct has
no cached string (``8Gi`` has none, ``1Gi`` has). :class:`GoQuantity` models those fields
as kube-scheduler holds them: the API server serves every quantity as its canonical
string (``Quantity.String()``), which the scheduler parses again (``ParseQuantity``,
staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go v0.37.2).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_UP, Decimal
from functools import lru_cache

from analyzers.quantity import parse_quantity
from analyzers.records import CapacityPolicy

MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)
ZERO = Decimal(0)
# DRAFractionalCapacityRange's default in 1.37 (pkg/features/kube_features.go v1.37.2).
FRACTIONAL_CAPACITY_RANGE = True


BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_NANO = Decimal("1e-9")


@dataclass(frozen=True, slots=True)
class GoQuantity:
    """The fields of a ``resource.Quantity`` that Go's ``==`` compares: the int64 amount
    (``value`` x 10^``scale``), the cached canonical string ``cached`` ("" when none) and
    the ``format``; ``dec`` when the amount is an inf.Dec (a pointer: never ``==`` another
    quantity's)."""

    value: int
    scale: int
    format: str
    cached: str = ""
    dec: bool = False

    def go_equal(self, other: GoQuantity) -> bool:
        return not self.dec and not other.dec and self == other


def go_format(text: str) -> str:
    """The format ParseQuantity gives ``text`` (quantitySuffixer.interpret)."""
    body = text.strip()
    if body[-2:] in _BINARY_SUFFIXES[1:]:
        return BINARY_SI
    if re.search(r"[eE][+-]?\d+$", body):
        return DECIMAL_EXPONENT
    return DECIMAL_SI


def go_canonical(amount: Decimal, fmt: str) -> str:
    """``Quantity.String()``: CanonicalizeBytes of ``amount`` in ``fmt`` (a BinarySI amount
    under 1024 or not whole is written as DecimalSI; a decimal mantissa's exponent is a
    multiple of 3)."""
    if amount == 0:
        return "0"
    if fmt == BINARY_SI and (-1024 < amount < 1024 or amount != amount.to_integral_value()):
        fmt = DECIMAL_SI
    if fmt == BINARY_SI:
        mantissa, exponent = int(amount), 0  # AsCanonicalBase1024Bytes
        while exponent < len(_BINARY_SUFFIXES) - 1 and mantissa % 1024 == 0:
            mantissa, exponent = mantissa // 1024, exponent + 1
        return f"{mantissa}{_BINARY_SUFFIXES[exponent]}"
    sign, digits, exp = amount.normalize().as_tuple()
    assert isinstance(exp, int)
    shift = exp % 3  # AsCanonicalBytes: the exponent down to a multiple of 3
    mantissa = int("".join(map(str, digits))) * 10**shift * (-1 if sign else 1)
    exp -= shift
    if fmt == DECIMAL_EXPONENT:
        return f"{mantissa}e{exp}" if exp else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIXES.get(exp, '')}"  # no suffix past E, as upstream


def go_parse(text: str) -> GoQuantity:
    """ParseQuantity's struct for a canonical string (no fraction digits): the int64 fast
    path with its cached-string rule, else an inf.Dec."""
    if text == "0":
        return GoQuantity(0, 0, DECIMAL_SI, "0")
    fmt = go_format(text)
    negative = text.startswith("-")
    body = text.lstrip("+-")
    if fmt == BINARY_SI:
        num, exponent = body[:-2], 10 * _BINARY_SUFFIXES.index(body[-2:])
        if 15 - len(num) - exponent * 3 // 10 - 1 < 0:
            return GoQuantity(0, 0, fmt, dec=True)
        value = int(num) << exponent
        if value > MAX_INT64:
            return GoQuantity(0, 0, fmt, dec=True)
        return GoQuantity(-value if negative else value, 0, fmt, text if int(num) & 7 else "")
    m = re.match(r"(\d+)(.*)$", body)
    assert m is not None
    num, suffix = m.groups()
    scale = int(suffix[1:]) if fmt == DECIMAL_EXPONENT else _decimal_exponent(suffix)
    if 18 - len(num) < 0 or scale < -9:
        return GoQuantity(0, 0, fmt, dec=True)
    cached = text if scale % 3 == 0 and not num.endswith("000") and num[0] != "0" else ""
    return GoQuantity(-int(num) if negative else int(num), scale, fmt, cached)


def _decimal_exponent(suffix: str) -> int:
    return next(e for e, s in _DECIMAL_SUFFIXES.items() if s == suffix)


@lru_cache(maxsize=4096)
def served(text: str) -> GoQuantity:
    """``text`` as kube-scheduler holds it: parsed from the canonical string the API server
    serves (values below a nano rounded up, as ParseQuantity rounds)."""
    amount = parse_quantity(text)
    if amount.as_tuple().exponent < -9:  # type: ignore[operator]
        amount = amount.quantize(_NANO, rounding=ROUND_UP)
    return go_parse(go_canonical(amount, go_format(text)))


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


def round_up_range(requested: str, policy: CapacityPolicy, fractional: bool) -> tuple[Decimal, GoQuantity]:
    """roundUpRange: the rounded amount and the struct it is (``Min.DeepCopy()``, the request
    itself, or ``NewQuantity`` / ``NewMilliQuantity`` in the step's format)."""
    assert policy.min is not None
    minimum, amount = parse_quantity(policy.min), parse_quantity(requested)
    if amount < minimum:
        return minimum, served(policy.min)
    if policy.step is None:
        return amount, served(requested)
    step = parse_quantity(policy.step)
    step_format = served(policy.step).format
    if use_milli(minimum, _q(policy.max), step, fractional):
        requested_milli = safe_milli_value(amount)
        if requested_milli is None:
            raise NotRepresentable(f"request {_text(amount)} is not a representable milli value")
        step_milli, min_milli = milli_value(step), milli_value(minimum)
        added = requested_milli - min_milli
        n = _go_div(added, step_milli)
        if added - n * step_milli != 0:
            n += 1
        if n > _go_div(MAX_INT64 - min_milli, step_milli):
            raise NotRepresentable(
                f"rounding request {_text(amount)} up to the next step passes the milli-value range"
            )
        rounded_milli = min_milli + step_milli * n
        if rounded_milli % 1000 == 0:
            return Decimal(rounded_milli // 1000), GoQuantity(rounded_milli // 1000, 0, step_format)
        return Decimal(rounded_milli) / 1000, GoQuantity(rounded_milli, -3, step_format)
    if amount > MAX_INT64:
        raise NotRepresentable(f"request {_text(amount)} exceeds MaxInt64")
    requested_int, step_int, min_int = value(amount), value(step), value(minimum)
    added = requested_int - min_int
    n = _go_div(added, step_int)
    if added - n * step_int != 0:
        n += 1
    if min_int >= 0 and n > _go_div(MAX_INT64 - min_int, step_int):
        raise NotRepresentable(f"rounding request {_text(amount)} up to the next step passes MaxInt64")
    rounded = min_int + step_int * n
    return Decimal(rounded), GoQuantity(rounded, 0, step_format)


def _go_div(a: int, b: int) -> int:
    """Go's integer division (truncates towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def round_up_valid_values(requested: str, valid: Iterable[str]) -> tuple[Decimal, GoQuantity]:
    """roundUpValidValues: the first valid value not below the request (the API server
    keeps validValues sorted ascending); the request itself when it is above them all."""
    amount = parse_quantity(requested)
    for v in valid:
        if amount <= parse_quantity(v):
            return parse_quantity(v), served(v)
    return amount, served(requested)


def consumed(
    requested: str | None, capacity: str, policy: CapacityPolicy | None, fractional: bool
) -> tuple[Decimal, GoQuantity]:
    """calculateConsumedCapacity: the amount and the quantity struct it is."""
    if requested is None:
        whole = capacity if policy is None or policy.default is None else policy.default
        return parse_quantity(whole), served(whole)
    if policy is None:
        return parse_quantity(requested), served(requested)
    if policy.has_range and policy.min is not None:
        return round_up_range(requested, policy, fractional)
    if policy.valid_values:
        return round_up_valid_values(requested, policy.valid_values)
    return parse_quantity(requested), served(requested)


def violates_policy(
    amount: Decimal, struct: GoQuantity, policy: CapacityPolicy | None, fractional: bool
) -> bool:
    """violatesPolicy: ``struct`` is ``amount`` as a Go quantity, which passes when it is
    the policy's default by Go's ``==`` (see the module's docstring), whatever the range
    or the valid values say."""
    if policy is None:
        return False
    if policy.default is not None and struct.go_equal(served(policy.default)):
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
    return {
        name: amount for name, (amount, _) in _consumed_each(requests, capacity, policies, fractional).items()
    }


def _consumed_each(
    requests: Mapping[str, str],
    capacity: Mapping[str, str],
    policies: Mapping[str, CapacityPolicy],
    fractional: bool,
) -> dict[str, tuple[Decimal, GoQuantity]]:
    out: dict[str, tuple[Decimal, GoQuantity]] = {}
    for name, cap in capacity.items():
        try:
            out[name] = consumed(requests.get(name), cap, policies.get(name), fractional)
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
    amounts = _consumed_each(requests, capacity, policies, fractional)
    used = list(already)
    for name, (amount, _) in amounts.items():
        if amount < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
    for name, cap in capacity.items():
        amount, struct = amounts[name]
        if violates_policy(amount, struct, policies.get(name), fractional):
            return False
        total = amount + sum((u.get(name, ZERO) for u in used), ZERO)
        if total > parse_quantity(cap):
            return False
    return True
