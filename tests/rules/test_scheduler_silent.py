"""scheduler-silent: Pending pods no scheduler has answered (no PodScheduled
condition, no FailedScheduling event) become findings after the threshold, with
the reason the snapshot can establish."""

from __future__ import annotations

import copy

from analyzers.rules import scheduler_silent
from tests.rules.placement_fixtures import (
    NOW,
    analyze_one,
    deployment,
    findings,
    node,
    pod_event,
    snapshot,
    template,
)


def with_scheduler(objs: list[dict], name: str) -> list[dict]:
    out = copy.deepcopy(objs)
    for o in out:
        spec = o["spec"]["template"]["spec"] if o["kind"] in ("Deployment", "ReplicaSet") else o["spec"]
        spec["schedulerName"] = name
    return out


def web(**kw) -> list[dict]:
    return deployment("web", template(), **kw)


def test_unknown_scheduler_that_never_bound_a_pod() -> None:
    snap = snapshot(node("w-0"), with_scheduler(web(), "volcano"))
    [f] = findings(snap, "scheduler-silent")
    assert f.evidence["cause"] == "unknown-scheduler" and f.evidence["scheduler_name"] == "volcano"
    assert f.evidence["bound_pods"] == 0
    assert "No pod of volcano is bound to any node" in f.explanation
    # Pod age 10m (fixture: created 23:50, analysed at 00:00) over the 60 s threshold.
    assert f.evidence["waited_seconds"] == 600 and f.evidence["threshold_seconds"] == 60


def test_unknown_scheduler_that_bound_pods_before_has_stopped() -> None:
    objs = with_scheduler(deployment("batch", template(app="batch"), bound=["w-0"], pending=0), "volcano")
    snap = snapshot(node("w-0"), objs, with_scheduler(web(), "volcano"))
    [f] = findings(snap, "scheduler-silent")
    assert f.evidence["bound_pods"] == 1
    assert "1 pod of volcano is bound to nodes" in f.explanation
    assert "has run in this cluster" in f.explanation


def test_quiet_before_the_threshold() -> None:
    snap = snapshot(node("w-0"), with_scheduler(web(), "volcano"))
    ctx_now = NOW - 600 + 59  # 59 s after the pods were created
    from analyzers.rules.context import RuleContext

    assert scheduler_silent.analyze(RuleContext(snapshot=snap, now=ctx_now)) == []
    assert len(scheduler_silent.analyze(RuleContext(snapshot=snap, now=ctx_now + 1))) == 1


def test_a_failed_scheduling_event_means_the_scheduler_spoke() -> None:
    objs = web()
    pending = next(o for o in objs if o["kind"] == "Pod")
    event = pod_event(
        pending["metadata"]["name"],
        "FailedScheduling",
        "0/1 nodes are available: ...",
        source="default-scheduler",
    )
    snap = snapshot(node("w-0", cpu="1"), objs, event)
    assert analyze_one(scheduler_silent, snap) == []


def test_a_fitting_pod_of_kube_scheduler_without_a_word_is_not_reported() -> None:
    """A dump can catch a pod before kube-scheduler's first attempt: no reason to name."""
    assert analyze_one(scheduler_silent, snapshot(node("w-0"), web())) == []


def test_missing_claim() -> None:
    tpl = template()
    tpl["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web"}}]
    snap = snapshot(node("w-0"), deployment("web", tpl))
    [f] = [f for f in analyze_one(scheduler_silent, snap)]
    assert (f.evidence["cause"], f.evidence["missing_pvc"]) == ("missing-pvc", "data-web")


def test_gated_pods_are_left_to_scheduling_gated() -> None:
    tpl = template()
    objs = deployment("web", tpl)
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    assert analyze_one(scheduler_silent, snapshot(node("w-0"), objs)) == []
