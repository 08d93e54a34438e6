"""Rollout arithmetic against pkg/controller/deployment/util/deployment_util.go
(ResolveFenceposts, MaxSurge, MaxUnavailable) and apimachinery intstr.go
(GetScaledValueFromIntOrPercent)."""

import pytest

from analyzers.ingest import Decoder
from analyzers.rollout import (
    IntOrPercentError,
    describe_fenceposts,
    effective_max_surge,
    effective_max_unavailable,
    resolve_fenceposts,
    scaled_value,
)
from tests.core.helpers import deployment


@pytest.mark.parametrize(
    ("value", "total", "up", "expected"),
    [
        (1, 10, True, 1),
        ("25%", 1, True, 1),
        ("25%", 1, False, 0),
        ("25%", 10, True, 3),
        ("25%", 10, False, 2),
        ("50%", 3, True, 2),
        ("50%", 3, False, 1),
        ("100%", 7, False, 7),
        ("0%", 5, True, 0),
        ("33%", 100, False, 33),
    ],
)
def test_intstr_GetScaledValueFromIntOrPercent(value, total, up, expected):
    assert scaled_value(value, total, up) == expected


def test_intstr_rejects_strings_that_are_not_percentages():
    with pytest.raises(IntOrPercentError, match="not a percentage"):
        scaled_value("two", 3, True)


@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "expected"),
    [
        ("25%", "25%", 1, (1, 0)),
        ("25%", "25%", 4, (1, 1)),
        ("25%", "25%", 10, (3, 2)),
        (0, "10%", 5, (0, 1)),  # both resolve to zero -> unavailable 1
        ("0%", "0%", 3, (0, 1)),
        (0, 1, 1, (0, 1)),
        (2, 0, 1, (2, 0)),
    ],
)
def test_deployment_util_ResolveFenceposts(surge, unavailable, desired, expected):
    assert resolve_fenceposts(surge, unavailable, desired) == expected


def test_default_strategy_of_the_gpu_seed_is_surge_1_unavailable_0():
    dep = Decoder().deployment(deployment("tracker", replicas=1))
    assert (dep.max_surge, dep.max_unavailable) == ("25%", "25%")  # pkg/apis/apps/v1/defaults.go
    assert effective_max_surge(dep) == 1
    assert effective_max_unavailable(dep) == 0
    assert describe_fenceposts(dep) == "25% of 1 replica rounds up to a surge of 1 and down to 0 unavailable"


def test_recreate_has_no_surge_and_unavailable_capped_at_replicas():
    recreate = Decoder().deployment(deployment("a", replicas=3, strategy={"type": "Recreate"}))
    assert effective_max_surge(recreate) == 0 and effective_max_unavailable(recreate) == 0
    capped = Decoder().deployment(
        deployment(
            "b",
            replicas=2,
            strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 5}},
        )
    )
    assert effective_max_unavailable(capped) == 2
    zero = Decoder().deployment(deployment("c", replicas=0))
    assert effective_max_unavailable(zero) == 0
