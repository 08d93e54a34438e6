"""pdb-blocks-eviction: edge cases beyond the golden scenarios (seed 004 and the
one-replica minAvailable 1 case live in tests/scenarios/pdb-blocks-eviction/)."""

from __future__ import annotations

from typing import Any

import yaml

from analyzers.findings import Severity
from analyzers.ingest import parse_time
from analyzers.messages import parse_message
from analyzers.rules import pdb_blocks_eviction
from analyzers.rules.context import RuleContext
from analyzers.snapshot import ClusterSnapshot
from tests.core.helpers import deployment, node, pdb, pod, replicaset

NOW = parse_time("2026-11-20T11:00:00Z") or 0.0
SEL = {"matchLabels": {"app": "web"}}


def web(
    *,
    replicas: int = 3,
    ready: tuple[bool, ...] = (True, True, True),
    nodes: tuple[str, ...] = ("n1", "n2", "n3"),
    cordoned: tuple[str, ...] = ("n2",),
    extra: tuple[dict[str, Any], ...] = (),
    names: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [node(n, unschedulable=n in cordoned) for n in ("n1", "n2", "n3")]
    objs += [
        deployment("web", replicas=replicas, labels={"app": "web"}),
        replicaset("web-6d4", "web", replicas=replicas, labels={"app": "web"}),
    ]
    for i, (r, n) in enumerate(zip(ready, nodes, strict=True)):
        name = names[i] if i < len(names) else f"web-6d4-{i}"
        objs.append(
            pod(
                name,
                node_name=n,
                labels={"app": "web"},
                owner=("ReplicaSet", "web-6d4"),
                ready=r,
                requests={"cpu": "500m"},
            )
        )
    return [*objs, *extra]


def run(objs: list[dict[str, Any]], **ctx_args: Any) -> list[Any]:
    snap = ClusterSnapshot.from_objects(objs, kube_version="1.30")
    return pdb_blocks_eviction.analyze(RuleContext(snapshot=snap, now=NOW, **ctx_args))


def remedy(finding: Any, text: str) -> Any:
    found = [r for r in finding.remedies if text in r.title or text in r.yaml]
    assert found, [(r.title, r.verified, r.verification) for r in finding.remedies]
    return found[0]


def test_budget_with_room_is_quiet_even_on_a_cordoned_node() -> None:
    assert run(web(extra=(pdb("web", selector=SEL, min_available=2),))) == []


def test_unready_pods_with_if_healthy_budget_and_always_allow_remedy() -> None:
    # web-6d4-1 on the draining n2 and web-6d4-2 are not Ready: 1 healthy < 2 desired.
    objs = web(ready=(True, False, False), extra=(pdb("web", selector=SEL, min_available=2),))
    [finding] = run(objs)
    assert finding.evidence["cause"] == "unhealthy-pods"
    assert finding.severity is Severity.CRITICAL
    assert "not Ready" in finding.explanation and "IfHealthyBudget" in finding.explanation
    always = remedy(finding, "AlwaysAllow")
    assert always.verified, always.verification
    assert yaml.safe_load(always.yaml) == {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}


def test_always_allow_already_set_is_not_offered_again() -> None:
    objs = web(
        ready=(True, False, False), extra=(pdb("web", selector=SEL, min_available=2, policy="AlwaysAllow"),)
    )
    # The unready pod on n2 is evictable under AlwaysAllow: nothing blocks the drain.
    assert run(objs) == []


def test_multiple_pdbs_refused_whatever_the_budgets() -> None:
    objs = web(
        extra=(
            pdb("web", selector=SEL, min_available=1),
            pdb("web-legacy", selector={"matchLabels": {"app": "web"}}, max_unavailable=1),
        )
    )
    [finding] = run(objs)
    assert finding.evidence["cause"] == "multiple-pdbs"
    assert "more than one PodDisruptionBudget" in finding.explanation
    assert finding.cause == "multiple-pdbs:web,web-legacy"
    deletes = [r for r in finding.remedies if r.command.startswith("kubectl delete pdb")]
    assert deletes and all(r.verified for r in deletes)


def test_selector_narrower_than_the_workload() -> None:
    objs = web(extra=(pdb("web", selector={"matchLabels": {"app": "web", "tier": "edge"}}, min_available=1),))
    # Give only the pod on the cordoned node the extra label.
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "web-6d4-1":
            o["metadata"]["labels"]["tier"] = "edge"
    [finding] = run(objs)
    assert finding.evidence["cause"] == "selector-too-narrow"
    assert "matches only 1 pod" in finding.explanation


def test_budget_the_controller_cannot_compute_for_bare_pods() -> None:
    objs: list[dict[str, Any]] = [node("n1"), node("n2", unschedulable=True)]
    objs += [pod(f"job-{i}", node_name=f"n{i + 1}", labels={"app": "batch"}, ready=True) for i in range(2)]
    objs.append(pdb("batch", selector={"matchLabels": {"app": "batch"}}, max_unavailable=1))
    [finding] = run(objs)
    assert finding.evidence["cause"] == "unmanaged-pods"
    assert "UnmanagedPods" in finding.explanation
    # No controller: the subject is the PDB, not the pod.
    assert (finding.subject.kind, finding.subject.name) == ("PodDisruptionBudget", "batch")
    fixed = remedy(finding, "integer minAvailable")
    assert fixed.verified, fixed.verification


def test_drain_output_given_by_the_caller_without_a_cordon() -> None:
    text = (
        'error when evicting pods/"web-6d4-1" -n "default" (will retry after 5s): Cannot evict pod as it would '
        "violate the pod's disruption budget."
    )
    parsed = parse_message(text)
    objs = web(cordoned=(), extra=(pdb("web", selector=SEL, min_available=3),))
    [finding] = run(objs, eviction_messages=(parsed.as_dict(),))
    assert finding.severity is Severity.WARNING  # nothing is cordoned: an eviction, not a drain
    assert finding.evidence["blocked_pods"][0]["pod"] == "web-6d4-1"
    assert "Cannot evict pod" in finding.explanation
    # Raw text works too.
    [again] = run(objs, eviction_messages=({"message": text},))
    assert again.fingerprint == finding.fingerprint


def test_stale_report_is_ignored() -> None:
    text = 'error when evicting pods/"web-6d4-1" -n "default" (will retry after 5s): Cannot evict pod as it would violate the pod\'s disruption budget.'
    objs = web(cordoned=(), extra=(pdb("web", selector=SEL, min_available=2),))  # allows 1 now
    assert run(objs, eviction_messages=({"message": text},)) == []


def test_karpenter_event_on_a_node() -> None:
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "n3.18a0", "namespace": "default", "uid": "e1"},
        "involvedObject": {"kind": "Node", "name": "n3", "uid": "uid-n3"},
        "reason": "DisruptionBlocked",
        "message": 'Cannot disrupt Node: pdb "default/web" prevents pod evictions',
        "type": "Normal",
        "lastTimestamp": "2026-11-20T10:58:00Z",
        "source": {"component": "karpenter"},
    }
    objs = web(cordoned=(), extra=(pdb("web", selector=SEL, min_available=3), event))
    findings = run(objs)
    assert [f.evidence["blocked_pods"][0]["node"] for f in findings] == ["n3"]


def test_pdb_never_blocks_a_rolling_update() -> None:
    # minAvailable 3 of 3 would refuse every eviction, but nobody evicts: no cordon, no report.
    objs = web(cordoned=(), extra=(pdb("web", selector=SEL, min_available=3),))
    assert run(objs) == []


def test_daemonset_and_terminating_pods_are_not_drain_blockers() -> None:
    ds_pod = pod("agent-x", node_name="n2", labels={"app": "web"}, owner=("DaemonSet", "agent"))
    leaving = pod(
        "web-old", node_name="n2", labels={"app": "web"}, owner=("ReplicaSet", "web-6d4"), deleting=True
    )
    objs = web(nodes=("n1", "n1", "n3"), extra=(pdb("web", selector=SEL, min_available=3), ds_pod, leaving))
    assert run(objs) == []


def test_fingerprint_survives_pod_recreation_and_the_explanation_names_the_rolling_update_rule() -> None:
    budget = pdb("web", selector=SEL, min_available=3)
    [a] = run(web(extra=(budget,)))
    [b] = run(web(extra=(budget,), names=("web-6d4-aaaaa", "web-6d4-bbbbb", "web-6d4-ccccc")))
    assert a.fingerprint == b.fingerprint
    assert a.evidence["cause"] == "min-available-equals-replicas"
    assert "never blocks a rolling update" in a.explanation


def test_relaxed_budget_is_the_smallest_that_works() -> None:
    # One replica already Pending (no room: every other node is cordoned); minAvailable 2 of 3.
    objs = [node("n1", unschedulable=True), node("n2", unschedulable=True), node("n3", cpu="600m")]
    objs += [
        deployment("web", replicas=3, labels={"app": "web"}),
        replicaset("web-6d4", "web", replicas=3, labels={"app": "web"}),
        pod(
            "web-6d4-0",
            node_name="n2",
            labels={"app": "web"},
            owner=("ReplicaSet", "web-6d4"),
            requests={"cpu": "500m"},
        ),
        pod(
            "web-6d4-1",
            node_name="n3",
            labels={"app": "web"},
            owner=("ReplicaSet", "web-6d4"),
            requests={"cpu": "500m"},
        ),
        pod("web-6d4-2", labels={"app": "web"}, owner=("ReplicaSet", "web-6d4"), requests={"cpu": "500m"}),
        pdb("web", selector=SEL, min_available=2),
    ]
    [finding] = run(objs)
    assert finding.evidence["cause"] == "replacement-unschedulable"
    relaxed = remedy(finding, "maxUnavailable")
    assert yaml.safe_load(relaxed.yaml) == {"spec": {"minAvailable": None, "maxUnavailable": 2}}
    assert relaxed.verified
    # n1 is cordoned and empty: uncordoning it makes room (n2 is the node being drained).
    uncordon = remedy(finding, "uncordon n1")
    assert uncordon.verified and uncordon.command == "kubectl uncordon n1"
    assert not any("uncordon n2" in r.title for r in finding.remedies)


def test_the_cached_eviction_decision_agrees_with_the_eviction_subresource_model() -> None:
    from analyzers.disruption import eviction_verdict

    cases = [
        web(extra=(pdb("web", selector=SEL, min_available=2),)),
        web(ready=(True, False, False), extra=(pdb("web", selector=SEL, min_available=2),)),
        web(ready=(True, False, True), extra=(pdb("web", selector=SEL, max_unavailable="34%"),)),
        web(
            ready=(False, False, True),
            extra=(pdb("web", selector=SEL, min_available=1, policy="AlwaysAllow"),),
        ),
        web(extra=(pdb("a", selector=SEL, min_available=1), pdb("b", selector=SEL, max_unavailable=1))),
        web(extra=(pdb("empty", selector={}, min_available=1),)),
        web(
            extra=(
                pdb("web", selector=SEL, min_available="50%"),
                pod("pending", labels={"app": "web"}, owner=("ReplicaSet", "web-6d4")),
                pod(
                    "leaving",
                    node_name="n1",
                    labels={"app": "web"},
                    owner=("ReplicaSet", "web-6d4"),
                    deleting=True,
                ),
            )
        ),
    ]
    for objs in cases:
        snap = ClusterSnapshot.from_objects(objs)
        for p in snap.pods.values():
            ours, theirs = pdb_blocks_eviction._eviction(snap, p), eviction_verdict(snap, p)
            assert (ours.allowed, ours.kind, ours.message) == (theirs.allowed, theirs.kind, theirs.message), (
                p.name
            )
            assert [x.name for x in ours.pdbs] == [x.name for x in theirs.pdbs]
