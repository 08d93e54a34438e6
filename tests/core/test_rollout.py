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
        (None, None, 3, (0, 1)),  # a Recreate Deployment has no rollingUpdate
        (None, 1, 3, (0, 1)),
        (1, None, 3, (1, 0)),
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


def strategy(surge, unavailable):
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}


@pytest.mark.parametrize(
    ("replicas", "surge", "unavailable", "words"),
    [
        (1, "25%", "25%", "25% of 1 replica rounds up to a surge of 1 and down to 0 unavailable"),
        (3, "50%", "50%", "50% of 3 replicas rounds up to a surge of 2 and down to 1 unavailable"),
        (3, 1, 0, "maxSurge is 1, maxUnavailable is 0"),
        (4, "30%", 2, "maxSurge 30% of 4 replicas rounds up to 2, maxUnavailable is 2"),
        (4, 1, "30%", "maxSurge is 1, maxUnavailable 30% rounds down to 1"),
        (
            3,
            0,
            0,
            "maxSurge is 0, maxUnavailable is 0 (both resolved to 0, so the controller uses maxUnavailable 1)",
        ),
        (3, "10%", "10%", "10% of 3 replicas rounds up to a surge of 1 and down to 0 unavailable"),
        (
            3,
            0,
            "10%",
            "maxSurge is 0, maxUnavailable 10% rounds down to 0 (both resolved to 0, so the controller uses "
            "maxUnavailable 1)",
        ),
        (
            3,
            "0%",
            "0%",
            "0% of 3 replicas rounds up to a surge of 0 and down to 0 unavailable (both resolved to 0, so the "
            "controller uses maxUnavailable 1)",
        ),
    ],
)
def test_describe_fenceposts_in_plain_words(replicas, surge, unavailable, words):
    dep = Decoder().deployment(deployment("d", replicas=replicas, strategy=strategy(surge, unavailable)))
    assert describe_fenceposts(dep) == words


def test_describe_fenceposts_of_recreate():
    dep = Decoder().deployment(deployment("d", replicas=3, strategy={"type": "Recreate"}))
    assert describe_fenceposts(dep) == "strategy Recreate replaces all pods at once (no surge)"


def test_unavailable_is_capped_at_replicas_exactly():
    at = Decoder().deployment(deployment("d", replicas=2, strategy=strategy(0, 2)))
    over = Decoder().deployment(deployment("d", replicas=2, strategy=strategy(0, 3)))
    under = Decoder().deployment(deployment("d", replicas=2, strategy=strategy(0, 1)))
    assert [effective_max_unavailable(d) for d in (under, at, over)] == [1, 2, 2]
    one = Decoder().deployment(deployment("d", replicas=1, strategy=strategy(0, 1)))
    assert effective_max_unavailable(one) == 1


def test_intstr_percent_with_spaces_and_bad_numbers():
    assert scaled_value(" 50% ", 4, False) == 2
    assert scaled_value(None, 4, True) == 0
    with pytest.raises(IntOrPercentError, match="invalid value"):
        scaled_value("x%", 4, True)


def test_new_replicaset_by_revision_then_by_template():
    from dataclasses import replace

    from analyzers.rollout import is_new_replicaset
    from tests.core.helpers import replicaset

    d = Decoder()
    dep = d.deployment(deployment("web", replicas=1))
    rs = d.replicaset(replicaset("web-1", "web"))
    assert not is_new_replicaset(replace(dep, revision="2"), replace(rs, revision="1"))
    assert is_new_replicaset(replace(dep, revision="2"), replace(rs, revision="2"))
    # Without revisions: the same template (shared PodSpec) and labels without pod-template-hash.
    same = replace(rs, template=dep.template, template_labels=dep.template_labels)
    assert is_new_replicaset(dep, same)
    hashed = replace(
        same, template_labels=type(dep.template_labels)({**dep.template_labels, "pod-template-hash": "abc"})
    )
    assert is_new_replicaset(dep, hashed)
    other_labels = replace(same, template_labels=type(dep.template_labels)({"app": "other"}))
    assert not is_new_replicaset(dep, other_labels)
    assert not is_new_replicaset(replace(dep, revision="2"), replace(same, revision="1"))
    assert is_new_replicaset(replace(dep, revision="2"), same)  # the RS has no revision: by template
