"""Consumable capacity's requestPolicy: Kubernetes' own rows of
``structured/internal/incubating/consumable_capacity_test.go`` (k8s.io/dynamic-resource-allocation
v0.37.2) against :mod:`analyzers.simulator.dra.capacity`, then the allocator on dumps: a request
rounded up to the next valid step no longer fits where the unrounded one did, a request above
``max`` or above every valid value is a non-fit, and shares already allocated count with what
their results say they consume."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from analyzers.quantity import parse_quantity
from analyzers.records import CapacityPolicy
from analyzers.simulator.dra import capacity
from tests.dra.test_dra_allocation import DRIVER, claim, device_class, exactly, node, pod, slice_, verdict

MAX = "9223372036854775807"
MAX_P1 = "9223372036854775808"
MAX_M1 = "9223372036854775806"
TWO_POW64_P3 = "18446744073709551619"
TOO_BIG_FOR_MILLI = "9224372036854776E3"


def rng(
    minimum: str, maximum: str | None = None, step: str | None = None, default: str | None = None
) -> CapacityPolicy:
    return CapacityPolicy(default=default, has_range=True, min=minimum, max=maximum, step=step)


def values(*vs: str, default: str | None = None) -> CapacityPolicy:
    return CapacityPolicy(default=default, valid_values=vs)


# testCalculateConsumedCapacity: (name, requested, capacity, policy, fractional, expected or "error")
CALCULATE = [
    ("empty", None, "1", CapacityPolicy(), False, "1"),
    (
        "request-above-maxint64-is-rejected",
        TWO_POW64_P3,
        TWO_POW64_P3,
        rng("0", step="3", default="0"),
        False,
        "error",
    ),
    (
        "rounded-value-above-maxint64-is-rejected",
        MAX,
        MAX_P1,
        rng("0", step="2", default="0"),
        False,
        "error",
    ),
    ("max-safe-boundary-rounds-to-maxint64", MAX_M1, MAX, rng("1", step="2", default="1"), False, MAX),
    ("min in range", None, "2", rng("1", default="1"), False, "1"),
    ("default in set", None, "2", values("1", default="1"), False, "1"),
    ("more than min in range", "2", "2", rng("1", default="1"), False, "2"),
    ("less than min in range", "1", "2", rng("2", default="1"), False, "2"),
    ("with step (round up)", "2", "3", rng("1", step="2", default="1"), False, "3"),
    ("with step (no remaining)", "2", "2", rng("1", step="1", default="1"), False, "2"),
    ("fractional step round up (0.25 to 0.3)", "250m", "1", rng("200m", "1", "100m", "200m"), True, "300m"),
    (
        "fractional step already aligned (0.4 = min+2*step)",
        "400m",
        "1",
        rng("200m", "1", "100m", "200m"),
        True,
        "400m",
    ),
    ("valid value in set", "2", "3", values("1", "2", "3", default="1"), False, "2"),
    ("set (round up)", "2", "3", values("1", "3", default="1"), False, "3"),
    ("larger than set", "3", "3", values("1", "2", default="1"), False, "3"),
    (
        "fractional-step-request-not-milli-representable-is-rejected",
        TOO_BIG_FOR_MILLI,
        TOO_BIG_FOR_MILLI,
        rng("100m", step="100m", default="1"),
        True,
        "error",
    ),
    (
        "fractional-step-rounded-value-passes-milli-range-is-rejected",
        f"{2**63 - 2}m",
        f"{2**63 - 1}m",
        rng("100m", step="100m", default="100m"),
        True,
        "error",
    ),
]


@pytest.mark.parametrize(
    ("requested", "cap", "policy", "fractional", "want"),
    [r[1:] for r in CALCULATE],
    ids=[r[0] for r in CALCULATE],
)
def test_calculate_consumed_capacity(
    requested: str | None, cap: str, policy: CapacityPolicy, fractional: bool, want: str
) -> None:
    if want == "error":
        with pytest.raises(capacity.NotRepresentable):
            capacity.consumed(requested, cap, policy, fractional)
    else:
        assert capacity.consumed(requested, cap, policy, fractional)[0] == parse_quantity(want)


# testViolateCapacityRequestPolicy: (name, requested, policy, fractional, violates)
VIOLATES = [
    ("no constraint", "1", None, False, False),
    ("less than maximum", "1", rng("1", "2", default="1"), False, False),
    ("more than maximum", "2", rng("1", "1", default="1"), False, True),
    ("in set", "1", values("1", default="1"), False, False),
    ("not in set", "2", values("1", default="1"), False, True),
    ("fractional step aligned (0.3 = min+1*step)", "300m", rng("200m", "1", "100m", "200m"), True, False),
    (
        "fractional step not aligned (0.25 is not a multiple of 0.1 from 0.2)",
        "250m",
        rng("200m", "1", "100m", "200m"),
        True,
        True,
    ),
    (
        "requested value overflows milli representation",
        TOO_BIG_FOR_MILLI,
        rng("1", step="1", default="1"),
        True,
        True,
    ),
]


@pytest.mark.parametrize(
    ("requested", "policy", "fractional", "want"), [r[1:] for r in VIOLATES], ids=[r[0] for r in VIOLATES]
)
def test_violates_policy(requested: str, policy: CapacityPolicy | None, fractional: bool, want: bool) -> None:
    amount = parse_quantity(requested)
    assert capacity.violates_policy(amount, capacity.served(requested), policy, fractional) is want


# Quantity.String() of resource.MustParse(text), printed by apimachinery v0.37.2 itself.
GO_CANONICAL = [
    ("1Gi", "1Gi"),
    ("1073741824", "1073741824"),
    ("1.5Gi", "1536Mi"),
    ("1000", "1k"),
    ("0.5", "500m"),
    ("1e3", "1e3"),
    ("10e3", "10e3"),
    ("1500", "1500"),
    ("1024Ki", "1Mi"),
    ("1E", "1E"),
    ("1.5", "1500m"),
    ("0.000000001", "1n"),
    ("2e2", "200"),
    ("1023Ki", "1023Ki"),
    ("0.5Ki", "512"),
]


@pytest.mark.parametrize(("text", "want"), GO_CANONICAL)
def test_quantities_are_served_in_their_canonical_form(text: str, want: str) -> None:
    assert capacity.go_canonical(parse_quantity(text), capacity.go_format(text)) == want


# Go's == between MustParse(MustParse(a).String()) and the same of b (apimachinery v0.37.2):
# not Quantity.Cmp -- the format, the cached string and an inf.Dec pointer all count.
GO_EQUAL = [
    ("1Gi", "1073741824", False),
    ("1Gi", "1024Mi", True),
    ("1000", "1k", True),
    ("8Gi", "8589934592", False),
    ("1e3", "1k", False),
    ("500m", "0.5", True),
    ("0", "0", True),
    ("100Ti", "100Ti", False),  # past the int64 fast path's precision: an inf.Dec each
    ("5", "5", True),
]


@pytest.mark.parametrize(("a", "b", "want"), GO_EQUAL)
def test_served_quantities_compare_as_go_structs(a: str, b: str, want: bool) -> None:
    assert capacity.served(a).go_equal(capacity.served(b)) is want


# NewQuantity / NewMilliQuantity (what roundUpRange returns) == a served default, from Go.
GO_NEW_EQUAL = [
    (8589934592, 0, capacity.BINARY_SI, "8Gi", True),  # 8Gi caches no string (8 & 7 == 0)
    (1073741824, 0, capacity.BINARY_SI, "1Gi", False),  # 1Gi does
    (2048, 0, capacity.BINARY_SI, "2Ki", False),
    (5, 0, capacity.DECIMAL_SI, "5", False),
    (1000, 0, capacity.DECIMAL_SI, "1k", False),
    (1500, -3, capacity.DECIMAL_SI, "1500m", False),
    (0, 0, capacity.DECIMAL_SI, "0", False),
]


@pytest.mark.parametrize(("value", "scale", "fmt", "default", "want"), GO_NEW_EQUAL)
def test_rounded_amounts_compare_as_go_structs(
    value: int, scale: int, fmt: str, default: str, want: bool
) -> None:
    assert capacity.GoQuantity(value, scale, fmt).go_equal(capacity.served(default)) is want


# testUseMilli: (name, min, max, step, fractional, use milli)
USE_MILLI = [
    ("fractional disabled", "200m", "1", "100m", False, False),
    ("all fractional, fits in milli", "200m", "1", "100m", True, True),
    ("all integer, fits in milli (no hasFractional gate any more)", "1", "3", "1", True, True),
    ("min overflows milli, falls back to integer", TOO_BIG_FOR_MILLI, None, "1", True, False),
    ("step too small (sub-milli)", "1", None, "0", True, False),
]


@pytest.mark.parametrize(
    ("lo", "hi", "step", "fractional", "want"), [r[1:] for r in USE_MILLI], ids=[r[0] for r in USE_MILLI]
)
def test_use_milli(lo: str, hi: str | None, step: str, fractional: bool, want: bool) -> None:
    q = [None if v is None else parse_quantity(v) for v in (lo, hi, step)]
    assert capacity.use_milli(q[0], q[1], q[2], fractional) is want


@pytest.mark.parametrize(("q", "want"), [("1", 1000), ("100m", 100), (TOO_BIG_FOR_MILLI, None)])
def test_safe_milli_value(q: str, want: int | None) -> None:
    assert capacity.safe_milli_value(parse_quantity(q)) == want


def test_consumed_from_request_fills_unrequested_capacities() -> None:
    """get-consumed-capacity-from-request: requested -> rounded, unrequested -> default, else the whole."""
    got = capacity.consumed_by_request(
        {"capacity-0": "1", "dummy": "1"},
        {"capacity-0": "2", "capacity-1": "2", "dummy": "1"},
        {"capacity-0": rng("1", default="2"), "capacity-1": rng("1", default="1")},
        False,
    )
    assert got == {"capacity-0": Decimal(1), "capacity-1": Decimal(1), "dummy": Decimal(1)}


def test_an_unrepresentable_request_beats_a_soft_mismatch() -> None:
    """cmp-request-over-capacity-fatal-beats-soft."""
    with pytest.raises(capacity.NotRepresentable):
        capacity.request_fits(
            {"capacity-0": "2", "capacity-1": MAX},
            {"capacity-0": "1", "capacity-1": MAX_P1},
            {"capacity-1": rng("0", step="2")},
            fractional=False,
        )


# -- the allocator on dumps ------------------------------------------------------------------------


def shared_gpu(policy: dict[str, Any]) -> dict[str, Any]:
    """One GPU, shareable, 60Gi of memory with ``policy`` as its requestPolicy."""
    return {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "attributes": {"model": {"string": "H100"}},
        "capacity": {"memory": {"value": "60Gi", "requestPolicy": policy}},
    }


def share(name: str, memory: str | None = None) -> dict[str, Any]:
    fields: dict[str, Any] = {"capacity": {"requests": {"memory": memory}}} if memory else {}
    return claim(name, [exactly(**fields)])


def held_share(name: str, consumed: str) -> dict[str, Any]:
    obj = share(name, consumed)
    obj["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": DRIVER,
                        "pool": "a",
                        "device": "gpu-0",
                        "shareID": f"share-{name}",
                        "consumedCapacity": {"memory": consumed},
                    }
                ]
            }
        }
    }
    return obj


OFF_RANGE_DEFAULT = {"default": "2Gi", "validRange": {"min": "1Gi", "max": "1Gi"}}
STEP_10 = {"default": "10Gi", "validRange": {"min": "10Gi", "max": "40Gi", "step": "10Gi"}}


@pytest.mark.parametrize(
    ("policy", "asked", "holders", "fits"),
    [
        # 15Gi rounds up to 20Gi: beside 40Gi of shares that is 60Gi, which fits ...
        (STEP_10, "15Gi", ["20Gi", "20Gi"], True),
        # ... and beside 50Gi it does not, though 15Gi would (the old comparison said it fits)
        (STEP_10, "15Gi", ["20Gi", "30Gi"], False),
        # above validRange.max: not a valid amount, whatever is free
        (STEP_10, "50Gi", [], False),
        # validValues: 15Gi rounds up to 32Gi; beside 30Gi that passes 60Gi
        ({"validValues": ["16Gi", "32Gi"]}, "20Gi", ["30Gi"], False),
        ({"validValues": ["16Gi", "32Gi"]}, "16Gi", ["30Gi"], True),
        # above every valid value: stays unrounded and is not valid
        ({"validValues": ["16Gi", "32Gi"]}, "40Gi", [], False),
        # no capacity asked: the default (10Gi) is consumed, which fits beside 50Gi
        (STEP_10, None, ["20Gi", "30Gi"], True),
        # a default outside its own range (validation refuses it today; a stored or dumped
        # slice may carry it): the default passes by Go's ==, the same value spelled in
        # bytes is a DecimalSI quantity, not the default, and is above max
        (OFF_RANGE_DEFAULT, "2Gi", [], True),
        (OFF_RANGE_DEFAULT, "2147483648", [], False),
        (OFF_RANGE_DEFAULT, None, [], True),
    ],
    ids=[
        "rounded-fits",
        "rounded-overflows",
        "above-max",
        "values-rounded-overflows",
        "values-exact",
        "above-values",
        "default",
        "off-range-default-as-spelled",
        "off-range-default-in-bytes",
        "off-range-default-unasked",
    ],
)
def test_the_allocator_rounds_requests_by_the_devices_policy(
    policy: dict[str, Any], asked: str | None, holders: list[str], fits: bool
) -> None:
    objects = [
        node("a"),
        slice_("a", [shared_gpu(policy)]),
        device_class(),
        *[held_share(f"held-{i}", c) for i, c in enumerate(holders)],
        share("c", asked),
        pod("p", "c"),
    ]
    snap, v = verdict(*objects)
    assert not snap.warnings, snap.warnings
    assert v.fits is fits, v.message
    if not fits:
        assert "cannot allocate all claims" in v.message
