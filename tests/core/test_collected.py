"""Whether a snapshot holds every object of a kind (``ClusterState.mark_collected``): what
tells a ResourceClaim that does not exist from one that was not read, per namespace, kept
through what-if snapshots, and a cluster-wide change when it becomes known."""

from __future__ import annotations

import copy

from analyzers.scope import affected_workloads
from analyzers.simulator import dra
from analyzers.snapshot import ClusterState
from tests.agent.test_live_resource_claims import claim, claimed_web
from tests.rules.placement_fixtures import node


def _pending_in(namespace: str) -> list[dict]:
    objs = copy.deepcopy(claimed_web())
    for obj in objs:
        obj["metadata"]["namespace"] = namespace
    return objs


def _state(*namespaces: str) -> ClusterState:
    state = ClusterState()
    for obj in [node("w-0"), *(o for ns in namespaces for o in _pending_in(ns))]:
        state.apply_object(obj)
    return state


def _holds(state: ClusterState) -> dict[str, str | None]:
    snap = state.snapshot()
    out: dict[str, str | None] = {}
    for pod in snap.unscheduled_pods():
        hold = dra.claim_hold(snap, pod)
        out[pod.namespace] = hold.cause if hold is not None else None
    return out


def test_a_listed_namespace_judges_its_claims_and_only_its_own() -> None:
    state = _state("a", "b")
    assert _holds(state) == {"a": None, "b": None}
    assert {(p.namespace, c) for p, c in dra.unjudged_claims(state.snapshot())} == {
        ("a", "shared-gpu"),
        ("b", "shared-gpu"),
    }
    state.mark_collected("ResourceClaim", "a")
    assert _holds(state) == {"a": dra.MISSING, "b": None}
    assert [(p.namespace, c) for p, c in dra.unjudged_claims(state.snapshot())] == [("b", "shared-gpu")]
    state.mark_collected("ResourceClaim")  # every namespace
    assert _holds(state) == {"a": dra.MISSING, "b": dra.MISSING}
    assert dra.unjudged_claims(state.snapshot()) == []


def test_marking_is_a_change_once_and_a_cluster_wide_one() -> None:
    state = _state("a")
    before = state.snapshot()
    state.mark_collected("ResourceClaim")
    after = state.snapshot()
    assert after.generation == before.generation + 1
    assert affected_workloads(before, after) is None  # every pending pod's verdict may move
    state.mark_collected("ResourceClaim")
    assert state.snapshot() is after  # already known: no new snapshot, no new pass


def test_what_if_snapshots_keep_what_was_collected() -> None:
    state = _state("a")
    state.mark_collected("ResourceClaim", "a")
    snap = state.snapshot()
    record = state.decoder.decode(node("w-1"), "test", None)
    assert record is not None
    what_if = snap.replace(record)
    assert what_if.collected == snap.collected and what_if.holds_every("ResourceClaim", "a")


def test_a_dump_that_carries_a_claim_carries_them_all() -> None:
    state = ClusterState()
    state.load([node("w-0"), *_pending_in("a")])
    assert not state.snapshot().holds_every("ResourceClaim", "a")
    state.load([claim("another", deleting=False)])
    assert state.snapshot().holds_every("ResourceClaim", "a")
    assert _holds(state) == {"a": dra.MISSING}
