"""Kubernetes resource quantities (``resource.Quantity``) as integers.

The scheduler compares CPU in millicores (``Quantity.MilliValue()``) and every
other resource in whole units (``Quantity.Value()``), both rounded *up*
(staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go). We do the same
with exact decimal arithmetic.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, DecimalException
from functools import lru_cache

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")

# The largest integer the scheduler compares (Go's int64, which Value() and
# MilliValue() return); a quantity beyond it is refused, not wrapped or capped.
MAX_UNITS = 2**63 - 1

# Resources the scheduler measures in milli-units.
MILLI_RESOURCES = frozenset({"cpu"})


class QuantityError(ValueError):
    pass


@lru_cache(maxsize=4096)
def parse_quantity(text: str | int | float) -> Decimal:
    """The exact decimal value of a quantity string such as ``500m`` or ``1Gi``."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise QuantityError(f"invalid quantity {text!r}")
    if isinstance(text, int | float):
        if isinstance(text, float) and not math.isfinite(text):
            raise QuantityError(f"invalid quantity {text!r}")
        return Decimal(str(text))
    match = _QUANTITY.match(text.strip())
    if not match:
        raise QuantityError(f"invalid quantity {text[:40]!r}")
    number, exponent, suffix = match.groups()
    try:
        value = Decimal(number)
        if exponent:
            power = int(exponent[1:])
            if abs(power) > 100:  # far past int64 either way: 0 or overflow, decided without the power
                return value.scaleb(100 if power > 0 else -100)
            return value * (Decimal(10) ** power)
    except (DecimalException, ValueError) as exc:
        raise QuantityError(f"invalid quantity {text[:40]!r}") from exc
    return value * _SUFFIXES[suffix or ""]


def to_units(resource: str, text: str | int | float) -> int:
    """The integer the scheduler compares: millicores for cpu, rounded-up units otherwise.
    A negative quantity, or one larger than int64 in those units, is a QuantityError
    (the API server refuses negative requests and capacities)."""
    if text.__class__ not in (str, int, float):  # before the memo: a list or map is not hashable
        raise QuantityError(f"{resource}: invalid quantity of type {type(text).__name__}")
    value = parse_quantity(text)
    if value < 0:
        raise QuantityError(f"{resource}: negative quantity {text!r}")
    if resource in MILLI_RESOURCES:
        value = value * 1000
    if value > MAX_UNITS:
        shown = text if not isinstance(text, str) or len(text) <= 40 else text[:40] + "…"
        raise QuantityError(f"{resource}: quantity {shown!r} is larger than 2^63-1 units")
    return math.ceil(value)


def format_units(resource: str, units: int) -> str:
    """Render a scheduler integer back as a readable quantity (``1500m``, ``2Gi``, ``3``)."""
    if resource in MILLI_RESOURCES:
        return f"{units // 1000}" if units % 1000 == 0 else f"{units}m"
    if resource == "memory" or resource == "ephemeral-storage" or resource.startswith("hugepages-"):
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if units and units % size == 0:
                return f"{units // size}{suffix}"
        if units >= 2**20:
            return f"{units / 2**30:.2f}Gi" if units >= 2**30 else f"{units / 2**20:.1f}Mi"
    return str(units)
