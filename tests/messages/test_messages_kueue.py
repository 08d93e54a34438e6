"""Kueue's admission messages, rendered with its own format strings (sigs.k8s.io/kueue
v0.17.0: pkg/scheduler/flavorassigner/flavorassigner.go ``Assignment.Message`` and
``Status.Message``, pkg/scheduler/scheduler.go, pkg/controller/core/workload_controller.go)."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given

from agent.commands.explain import render_text
from analyzers.messages import QUEUE, parse_message_uncached
from analyzers.messages import reasons as r

_NAME = st.from_regex(r"[a-z][a-z0-9-]{0,14}[a-z0-9]", fullmatch=True)
_RESOURCE = st.sampled_from(
    ["cpu", "memory", "nvidia.com/gpu", "pods", "example.com/foo", "ephemeral-storage"]
)
_QUANTITY = st.sampled_from(["1", "12", "500m", "2Gi", "1536Mi", "0"])
_EFFECT = st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])


@st.composite
def _reason(draw: st.DrawFn) -> tuple[str, str, str | None]:
    """(text as Kueue prints it, its code, the flavor it names)."""
    flavor = draw(_NAME)
    resource = draw(_RESOURCE)
    q = [draw(_QUANTITY) for _ in range(3)]
    kind = draw(st.sampled_from(["unused", "exceeded", "unavailable", "missing", "taint", "affinity", "tas"]))
    if kind == "unused":
        return (
            f"insufficient unused quota for {resource} in flavor {flavor}, {q[0]} more needed",
            r.QUEUE_QUOTA_UNUSED,
            flavor,
        )
    if kind == "exceeded":
        text = (
            f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests ({q[0]}) "
            f"+ current podset request ({q[1]}) > maximum capacity ({q[2]})"
        )
        return text, r.QUEUE_QUOTA_EXCEEDED, flavor
    if kind == "unavailable":
        return f"resource {resource} unavailable in ClusterQueue", r.QUEUE_FLAVOR_MISMATCH, None
    if kind == "missing":
        return f"flavor {flavor} not found", r.QUEUE_FLAVOR_MISMATCH, flavor
    if kind == "taint":
        value = draw(st.sampled_from(["", "present", "a-b"]))
        taint = f"{resource}={value}:{draw(_EFFECT)}" if value else f"{resource}:{draw(_EFFECT)}"
        return f"untolerated taint {taint} in flavor {flavor}", r.QUEUE_FLAVOR_MISMATCH, flavor
    if kind == "affinity":
        return f"flavor {flavor} doesn't match node affinity", r.QUEUE_FLAVOR_MISMATCH, flavor
    return f'Flavor "{flavor}" does not contain the requested level', r.QUEUE_FLAVOR_MISMATCH, flavor


_POD_SETS = st.lists(
    st.tuples(_NAME, st.lists(_reason(), min_size=1, max_size=4, unique_by=lambda t: t[0])),
    min_size=1,
    max_size=3,
    unique_by=lambda t: t[0],
)


def _assignment_message(pod_sets: list[tuple[str, list[tuple[str, str, str | None]]]]) -> str:
    """Assignment.Message(): each pod set's reasons sorted (slices.Sort) and joined with ", "."""
    return "; ".join(
        f"couldn't assign flavors to pod set {name}: " + ", ".join(sorted(text for text, _, _ in reasons))
        for name, reasons in pod_sets
    )


@given(
    pod_sets=_POD_SETS,
    suffix=st.sampled_from(
        ["", ". Pending the preemption of 2 workload(s)", ". Preempting 1 workload(s) failed, will retry."]
    ),
    framing=st.sampled_from(["{}", "  Warning  Pending  3m (x12 over 10m)  kueue-admission  {}", '"{}"']),
)
def test_every_pod_set_and_reason_is_read_back(pod_sets, suffix, framing) -> None:  # type: ignore[no-untyped-def]
    parsed = parse_message_uncached(framing.format(_assignment_message(pod_sets) + suffix))
    assert (parsed.kind, parsed.format) == (QUEUE, "kueue-flavors")
    assert parsed.groups == tuple((name, len(reasons)) for name, reasons in pod_sets)
    expected = [(text, code, flavor) for _, reasons in pod_sets for text, code, flavor in sorted(reasons)]
    got = [
        (x.text, x.code, x.info.object_name if flavor is not None else None)
        for x, (_, _, flavor) in zip(parsed.reasons, expected, strict=True)
    ]
    assert got == expected
    assert parsed.notes == ((suffix[2:].rstrip("."),) if suffix else ())
    assert "Traceback" not in render_text(parsed)


def test_a_taint_is_read_with_its_key_and_value() -> None:
    parsed = parse_message_uncached(
        "couldn't assign flavors to pod set main: untolerated taint nvidia.com/gpu=present:NoSchedule in flavor a100"
    )
    [reason] = parsed.reasons
    assert reason.info.taint is not None
    assert (reason.info.taint.key, reason.info.taint.value, reason.info.object_name) == (
        "nvidia.com/gpu",
        "present",
        "a100",
    )


@pytest.mark.parametrize(
    ("text", "code", "name"),
    [
        ("ClusterQueue cluster-queue is inactive", r.QUEUE_INACTIVE, "ClusterQueue cluster-queue"),
        ("ClusterQueue team-a not found", r.QUEUE_MISSING, "ClusterQueue team-a"),
        ("ClusterQueue team-a doesn't exist", r.QUEUE_MISSING, "ClusterQueue team-a"),
        ("LocalQueue user-queue doesn't exist", r.QUEUE_MISSING, "LocalQueue user-queue"),
        ("LocalQueue user-queue is inactive", r.QUEUE_INACTIVE, "LocalQueue user-queue"),
        ("The workload has failed admission checks", r.QUEUE_ADMISSION, None),
        ("Workload namespace doesn't match ClusterQueue selector", r.QUEUE_ADMISSION, None),
    ],
)
def test_queue_level_refusals(text: str, code: str, name: str | None) -> None:
    parsed = parse_message_uncached(f"Warning  Pending  10s  kueue-admission  {text}")
    assert (parsed.kind, parsed.format) == (QUEUE, "kueue-queue")
    [reason] = parsed.reasons
    assert (reason.code, reason.info.object_name) == (code, name)
    assert reason.count is None
    out = render_text(parsed)
    assert text in out and (name is None or name in out)


def test_a_failed_assignment_keeps_its_error_as_an_unknown_reason() -> None:
    parsed = parse_message_uncached("failed to assign flavors to pod set main: cache is stale")
    assert parsed.groups == (("main", 1),)
    assert [(x.text, x.code) for x in parsed.reasons] == [("cache is stale", r.OTHER)]


def test_scheduler_messages_are_never_read_as_kueue() -> None:
    text = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    assert parse_message_uncached(text).kind != QUEUE


def test_older_wordings_and_topology_reasons_from_public_reports() -> None:
    """Before kueue PR 7232 the capacity reason read ``request > maximum capacity (24 > 16)``
    (kueue issue 4134); topology-aware scheduling adds reasons of its own (issue 5039)."""
    parsed = parse_message_uncached(
        "couldn't assign flavors to pod set master: insufficient quota for nvidia.com/gpu in flavor "
        "single-node-h100, request > maximum capacity (24 > 16)"
    )
    [reason] = parsed.reasons
    assert (reason.code, reason.info.resource, reason.info.object_name) == (
        r.QUEUE_QUOTA_EXCEEDED,
        "nvidia.com/gpu",
        "single-node-h100",
    )
    parsed = parse_message_uncached(
        "couldn't assign flavors to pod set main: no topology domains at level: cloud.provider.com/topology-rack"
    )
    assert [(x.text, x.code) for x in parsed.reasons] == [
        ("no topology domains at level: cloud.provider.com/topology-rack", r.OTHER)
    ]
    assert parsed.groups == (("main", 1),)
