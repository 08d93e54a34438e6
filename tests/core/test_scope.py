"""analyzers.scope: which workloads a change touches, and the scoped analysis the
live agent runs for such changes. The scoped report must say about its workloads
exactly what the whole-cluster report says about them, on every golden scenario."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from analyzers.findings import ObjectRef
from analyzers.ingest import parse_time
from analyzers.report import build_report
from analyzers.scope import affected_workloads, changes
from analyzers.snapshot import ClusterSnapshot, ClusterState

from ..scenarios.test_golden import CASES, load_case
from ..simulator.builders import node, pod, snapshot

SCENARIOS = Path(__file__).parent.parent / "scenarios"


def _owned(name: str, rs: str, **kw: object) -> dict:
    obj = pod(name, **kw)  # type: ignore[arg-type]
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": rs, "controller": True}
    ]
    return obj


def _rs(name: str, deployment: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": name,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": deployment,
                    "uid": deployment,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": deployment}},
            "template": {
                "metadata": {"labels": {"app": deployment}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


@pytest.fixture
def base() -> ClusterSnapshot:
    return snapshot(
        node("n1"),
        _rs("web-5c8d", "web"),
        _rs("api-7f9b", "api"),
        _owned("web-5c8d-a", "web-5c8d", node_name="n1", requests={"cpu": "1"}),
        _owned("api-7f9b-a", "api-7f9b", requests={"cpu": "64"}),
    )


WEB = ObjectRef("Deployment", "default", "web")
API = ObjectRef("Deployment", "default", "api")


def test_changes_lists_added_changed_and_removed_records(base: ClusterSnapshot) -> None:
    pending = base.pods[("default", "api-7f9b-a")]
    other = replace(pending, name="api-7f9b-b")
    newer = base.replace(
        replace(pending, nominated_node="n1"), other, remove=[("pods", ("default", "web-5c8d-a"))]
    )
    found = {
        (name, getattr(old, "name", None), getattr(new, "name", None))
        for name, old, new in changes(base, newer)
    }
    assert found == {
        ("pods", "api-7f9b-a", "api-7f9b-a"),
        ("pods", None, "api-7f9b-b"),
        ("pods", "web-5c8d-a", None),
    }
    assert list(changes(base, base.replace())) == []


def test_a_new_pending_pod_touches_only_its_workload(base: ClusterSnapshot) -> None:
    pending = base.pods[("default", "api-7f9b-a")]
    newer = base.replace(replace(pending, name="api-7f9b-b"))
    assert affected_workloads(base, newer) == {API}


def test_an_event_about_a_pending_pod_touches_its_workload(base: ClusterSnapshot) -> None:
    state = ClusterState()
    for record in base:
        state.apply(record)
    older = state.snapshot()
    state.apply_object(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "api-7f9b-a.1", "namespace": "default", "uid": "e1"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "api-7f9b-a"},
            "reason": "FailedScheduling",
            "message": "0/1 nodes are available: 1 Insufficient cpu.",
            "type": "Warning",
        }
    )
    assert affected_workloads(older, state.snapshot()) == {API}


@pytest.mark.parametrize(
    "change",
    ["cordon a node", "a bound pod changes", "a pending pod is bound"],
)
def test_changes_to_what_placement_reads_are_cluster_wide(base: ClusterSnapshot, change: str) -> None:
    if change == "cordon a node":
        newer = base.replace(replace(base.nodes["n1"], unschedulable=True))
    elif change == "a bound pod changes":
        newer = base.replace(replace(base.pods[("default", "web-5c8d-a")], deleted=1.0))
    else:
        newer = base.replace(replace(base.pods[("default", "api-7f9b-a")], node_name="n1"))
    assert affected_workloads(base, newer) is None


def test_a_replicaset_change_touches_its_deployment(base: ClusterSnapshot) -> None:
    rs = base.replicasets[("default", "web-5c8d")]
    assert affected_workloads(base, base.replace(replace(rs, replicas=3))) == {WEB}


def _snapshot_of(case: Path) -> tuple[ClusterSnapshot, float, str | None, Any]:
    """The case's snapshot, time, release and scheduler profiles (its ``scheduler_config``)."""
    objects, expected = load_case(case)
    state = ClusterState(expected.get("kube_version"))
    state.load(objects)
    now = parse_time(expected["now"])
    assert now is not None
    profiles = None
    if expected.get("scheduler_config") is not None:
        from analyzers.simulator.schedconfig import parse_config

        profiles = parse_config(expected["scheduler_config"])
    return state.snapshot(), now, expected.get("kube_version"), profiles


def _has_findings(case: Path) -> bool:
    snap, now, version, profiles = _snapshot_of(case)
    return bool(build_report(snap, now=now, kube_version=version, profiles=profiles).findings)


WITH_FINDINGS = [c for c in CASES if _has_findings(c)]


def test_every_rule_has_a_scenario_with_findings_to_compare() -> None:
    assert {c.parent.name for c in WITH_FINDINGS} == {c.parent.name for c in CASES}


@pytest.mark.parametrize("case", WITH_FINDINGS, ids=[str(c.relative_to(SCENARIOS)) for c in WITH_FINDINGS])
def test_scoped_report_says_what_the_full_report_says_about_its_workloads(case: Path) -> None:
    snap, now, version, profiles = _snapshot_of(case)
    full = build_report(snap, now=now, kube_version=version, profiles=profiles)
    for subject in {f.subject for f in full.findings}:
        scoped = build_report(
            snap, now=now, kube_version=version, profiles=profiles, scope=frozenset({subject})
        )
        assert [f.as_dict() for f in scoped.findings] == [
            f.as_dict() for f in full.findings if f.subject == subject
        ], subject
    nothing = build_report(snap, now=now, kube_version=version, profiles=profiles, scope=frozenset())
    assert nothing.findings == () and nothing.pods == ()


def test_carry_over_hands_the_next_snapshot_an_updated_node_table() -> None:
    """Between two passes of the agent: a pod binds, another goes, a node is cordoned.
    The carried-over table equals the one built from scratch."""
    from analyzers.scope import carry_over
    from analyzers.simulator.nodeinfo import DERIVED_KEY, NodeTable, node_table

    from ..simulator.test_nodetable_derive import _plain

    state = ClusterState()
    state.load(
        [
            node("n1"),
            node("n2"),
            pod("a", node_name="n1", requests={"cpu": "1"}),
            pod("b", requests={"cpu": "2"}),
        ]
    )
    older = state.snapshot()
    node_table(older)
    state.load([pod("b", node_name="n2", requests={"cpu": "2"}), node("n1", unschedulable=True)])
    state.delete("Pod", "default", "a")
    newer = state.snapshot()
    assert carry_over(older, newer, list(changes(older, newer)))
    carried = newer.cached(DERIVED_KEY)
    assert carried is node_table(newer)
    assert _plain(carried) == _plain(NodeTable(ClusterSnapshot.from_records(list(newer))))
    assert not carry_over(older, newer, [])  # once is enough: the table is there
    unbuilt = ClusterSnapshot.from_records(list(older))  # no table built: nothing to carry from
    assert not carry_over(unbuilt, newer.replace(), [])


# -- a node's taints, readiness or cordon change: only the workloads whose verdict moves


def test_a_taint_touches_the_workloads_whose_verdict_it_moves() -> None:
    """Two pending workloads that fit nowhere: a taint that api's pods do not tolerate
    moves api's verdict (a second failing filter on n1); web tolerates it and stays as it
    was; a taint neither tolerates where web fits would move web's too."""
    from analyzers.records import Taint

    tolerate = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    older = snapshot(
        node("n1"),
        node("n2", cpu="64"),
        _rs("web-5c8d", "web"),
        _rs("api-7f9b", "api"),
        _owned(
            "web-5c8d-a",
            "web-5c8d",
            requests={"cpu": "8"},
            node_selector={"kubernetes.io/hostname": "n1"},
            tolerations=tolerate,
        ),
        _owned("api-7f9b-a", "api-7f9b", requests={"cpu": "128"}),
    )
    tainted = replace(older.nodes["n1"], taints=(Taint("dedicated", "gpu", "NoSchedule"),))
    assert affected_workloads(older, older.replace(tainted)) == {API}
    elsewhere = replace(older.nodes["n2"], taints=(Taint("dedicated", "gpu", "NoSchedule"),))
    assert affected_workloads(older, older.replace(elsewhere)) == {API}
    ready = replace(older.nodes["n2"], ready=False)
    assert affected_workloads(older, older.replace(ready)) == frozenset()
    relabelled = replace(older.nodes["n2"], labels=older.nodes["n1"].labels)
    assert affected_workloads(older, older.replace(relabelled)) is None  # labels: cluster-wide


def _node_changes(snap: ClusterSnapshot) -> list[tuple[str, ClusterSnapshot]]:
    """Each node of ``snap`` changed in the ways a narrowed pass follows."""
    from analyzers.records import Condition, Taint

    out = []
    for name, n in sorted(snap.nodes.items()):
        variants = {
            "untolerated taint": replace(
                n, taints=(*n.taints, Taint("unstick.test/dedicated", "x", "NoSchedule"))
            ),
            "taints removed": replace(n, taints=()),
            "not ready": replace(
                n,
                ready=False,
                conditions=(Condition("Ready", "False", "KubeletNotReady", "PLEG is not healthy"),),
            ),
            "cordoned": replace(n, unschedulable=True),
            "uncordoned": replace(n, unschedulable=False),
            "images": replace(n, images=((("registry.example/app:1",), 10_000_000),)),
        }
        out.extend(
            (f"{name}: {what}", snap.replace(changed)) for what, changed in variants.items() if changed != n
        )
    return out


@pytest.mark.parametrize("case", WITH_FINDINGS, ids=[str(c.relative_to(SCENARIOS)) for c in WITH_FINDINGS])
def test_a_narrowed_node_change_keeps_what_a_full_pass_finds(case: Path) -> None:
    """On every golden scenario, each node tainted, untainted, made not ready, cordoned,
    uncordoned or given images: the findings of the workloads ``affected_workloads``
    names, re-analysed, beside the others' findings from before, are the full report's."""
    snap, now, version, profiles = _snapshot_of(case)

    def by_subject(
        s: ClusterSnapshot, scope: frozenset[ObjectRef] | None = None
    ) -> dict[ObjectRef, list[dict]]:
        out: dict[ObjectRef, list[dict]] = {}
        for f in build_report(s, now=now, kube_version=version, profiles=profiles, scope=scope).findings:
            out.setdefault(f.subject, []).append(f.as_dict())
        return out

    before = by_subject(snap)
    for what, newer in _node_changes(snap):
        touched = affected_workloads(snap, newer, kube_version=version)
        if touched is None:
            continue
        kept = {s: f for s, f in before.items() if s not in touched} | by_subject(newer, touched)
        assert kept == by_subject(newer), (what, touched)
