"""The parsed values: frozen, slotted, built fast but equal to their dataclass form,
and the JSON contract of ``unstick explain``."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from analyzers.messages import ParsedMessage, Reason, classify_reason, parse_message_uncached
from analyzers.messages.model import KUBE_SCHEDULER, SCHEDULING, make_reason, make_scheduling

GPU = (
    "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/10 nodes are available: 1 No preemption victims found for "
    "incoming pod, 9 Preemption is not helpful for scheduling."
)


def test_fast_constructors_build_equal_values() -> None:
    info = classify_reason("Insufficient cpu")
    fast = make_reason(3, "Insufficient cpu", info)
    slow = Reason(3, "Insufficient cpu", info)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    parsed = make_scheduling("fit-error", "m", 3, (fast,), None, (), None, False)
    assert parsed == ParsedMessage(
        SCHEDULING, "fit-error", "m", 3, (slow,), None, None, (), None, False, scheduler=KUBE_SCHEDULER
    )
    assert repr(parsed).startswith("ParsedMessage(kind='scheduling', format='fit-error'")


def test_values_are_frozen_and_slotted() -> None:
    parsed = parse_message_uncached(GPU)
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.total_nodes = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.reasons[0].count = 2  # type: ignore[misc]
    assert not hasattr(parsed, "__dict__")
    assert not hasattr(parsed.reasons[0], "__dict__")


def test_json_contract_scheduling() -> None:
    doc = orjson.loads(orjson.dumps(parse_message_uncached(GPU).as_dict()))
    assert doc["kind"] == "scheduling"
    assert doc["total_nodes"] == 10
    assert doc["reasons"][0] == {
        "count": 1,
        "reason": "Insufficient nvidia.com/gpu",
        "code": "insufficient-resource",
        "plugin": "NodeResourcesFit",
        "resource": "nvidia.com/gpu",
        "taint": None,
        "object": None,
    }
    assert doc["preemption"]["total_nodes"] == 10
    assert doc["preemption"]["note"] is None
    assert [x["code"] for x in doc["preemption"]["reasons"]] == [
        "preemption-no-victims",
        "preemption-not-helpful",
    ]
    assert doc["preemption"]["verdict"] == "cannot-help"
    assert doc["eviction"] is None


def test_json_contract_prefilter_count_is_null() -> None:
    doc = parse_message_uncached(
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    ).as_dict()
    assert doc["reasons"][0]["count"] is None
    assert doc["preemption"] is None


def test_json_contract_taint_and_eviction() -> None:
    doc = parse_message_uncached(
        "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: true}."
    ).as_dict()
    assert doc["reasons"][0]["taint"] == {"key": "gpu", "value": "true"}
    ev = parse_message_uncached(
        'error when evicting pods/"web-0" -n "shop" (will retry after 5s): Cannot evict pod as it would '
        "violate the pod's disruption budget."
    ).as_dict()
    assert (ev["kind"], ev["total_nodes"], ev["reasons"], ev["preemption"]) == ("eviction", None, [], None)
    assert {k: ev["eviction"][k] for k in ("kind", "pod", "namespace")} == {
        "kind": "pdb-violation",
        "pod": "web-0",
        "namespace": "shop",
    }


def test_json_contract_unknown() -> None:
    doc = parse_message_uncached("hello").as_dict()
    assert (doc["kind"], doc["total_nodes"], doc["reasons"], doc["preemption"], doc["eviction"]) == (
        "unknown",
        None,
        [],
        None,
        None,
    )
