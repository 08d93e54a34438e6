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


# --- DynamicResources PreEnqueue: ResourceClaims that hold a pod out of the queue ------------
# dynamicresources.go (v1.35.4) PreEnqueue/foreachPodResourceClaim; resourceclaim.Name.


def _claim(
    name: str, *, api: str = "resource.k8s.io/v1", owner_uid: str = "", deleting: bool = False
) -> dict:
    meta: dict = {"name": name, "namespace": "default", "uid": f"uid-claim-{name}"}
    if owner_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid, "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2025-12-31T23:55:00Z"
        meta["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    return {
        "apiVersion": api,
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": []}},
    }


def _web_with_claims(entries: list[dict], statuses: list[dict] | None = None) -> list[dict]:
    tpl = template()
    tpl["spec"]["resourceClaims"] = entries
    tpl["spec"]["containers"][0]["resources"]["claims"] = [{"name": e["name"]} for e in entries]
    objs = deployment("web", tpl)
    for o in objs:
        if o["kind"] == "Pod" and statuses is not None:
            o.setdefault("status", {})["resourceClaimStatuses"] = statuses
    return objs


def _pending_uid(objs: list[dict]) -> str:
    return next(o["metadata"]["uid"] for o in objs if o["kind"] == "Pod")


def test_a_claim_from_a_template_not_created_yet_holds_the_pod() -> None:
    objs = _web_with_claims([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
    snap = snapshot(node("w-0"), objs)
    [f] = findings(snap)  # the placement rules leave a pod that was never tried alone
    assert f.rule_id == "scheduler-silent"
    pod = next(o["metadata"]["name"] for o in objs if o["kind"] == "Pod")
    assert f.evidence["cause"] == "resourceclaim-not-created"
    assert (f.evidence["resource_claim_template"], f.evidence["pod_resource_claim"]) == ("one-gpu", "gpu")
    assert f.evidence["preenqueue_status"] == f'pod "default/{pod}": ResourceClaim not created yet'
    assert "DynamicResources PreEnqueue keeps it out of the scheduling queue" in f.explanation
    assert "kubectl get resourceclaimtemplate one-gpu -n default" in (f.remedies[0].command or "")


def test_a_named_claim_that_does_not_exist_holds_the_pod() -> None:
    objs = _web_with_claims([{"name": "gpu", "resourceClaimName": "shared-gpu"}])
    snap = snapshot(node("w-0"), objs, _claim("another"))
    [f] = analyze_one(scheduler_silent, snap)
    assert (f.evidence["cause"], f.evidence["resource_claim"]) == ("missing-resourceclaim", "shared-gpu")
    assert f.evidence["preenqueue_status"] == 'could not find ResourceClaim "default/shared-gpu"'


def test_an_input_without_any_claim_cannot_tell_missing_from_not_collected() -> None:
    objs = _web_with_claims([{"name": "gpu", "resourceClaimName": "shared-gpu"}])
    assert analyze_one(scheduler_silent, snapshot(node("w-0"), objs)) == []


def test_the_generated_claim_named_in_status_is_looked_up_and_owned() -> None:
    entries = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    objs = _web_with_claims(entries, [{"name": "gpu", "resourceClaimName": "web-gpu-x7k2"}])
    uid = _pending_uid(objs)
    for api in ("resource.k8s.io/v1", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"):
        # Owned by the pod: nothing holds it (and a fitting pod is not reported).
        assert (
            analyze_one(
                scheduler_silent, snapshot(node("w-0"), objs, _claim("web-gpu-x7k2", api=api, owner_uid=uid))
            )
            == []
        )
    [f] = analyze_one(
        scheduler_silent, snapshot(node("w-0"), objs, _claim("web-gpu-x7k2", owner_uid="someone-else"))
    )
    assert f.evidence["cause"] == "resourceclaim-not-owned"
    [f] = analyze_one(
        scheduler_silent, snapshot(node("w-0"), objs, _claim("web-gpu-x7k2", owner_uid=uid, deleting=True))
    )
    assert (f.evidence["cause"], f.evidence["preenqueue_status"]) == (
        "resourceclaim-being-deleted",
        'resourceclaim "web-gpu-x7k2" is being deleted',
    )


def test_a_status_entry_without_a_claim_name_is_skipped_as_upstream_does() -> None:
    entries = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    objs = _web_with_claims(entries, [{"name": "gpu"}])
    assert analyze_one(scheduler_silent, snapshot(node("w-0"), objs, _claim("other"))) == []


def test_entries_are_checked_in_order_and_the_first_refusal_is_named() -> None:
    entries = [
        {"name": "a", "resourceClaimName": "missing-a"},
        {"name": "b", "resourceClaimTemplateName": "tpl-b"},
    ]
    [f] = analyze_one(scheduler_silent, snapshot(node("w-0"), _web_with_claims(entries), _claim("x")))
    assert (f.evidence["cause"], f.evidence["resource_claim"]) == ("missing-resourceclaim", "missing-a")


def test_with_a_scheduler_configuration_the_remedy_proposes_its_profiles() -> None:
    """A --scheduler-config without default-scheduler: proposing default-scheduler would
    leave the pod as silent as before; the configured profiles are proposed, each
    re-simulated with that profile's filters."""
    from analyzers.rules.context import RuleContext
    from analyzers.simulator.schedconfig import parse_config
    from tests.rules.placement_fixtures import NOW

    profiles = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {"schedulerName": "bin-packing"},
                {
                    "schedulerName": "taint-blind",
                    "plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}},
                },
            ],
        }
    )
    tainted = node("w-0")
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    snap = snapshot(tainted, with_scheduler(web(), "default-scheduler"))
    [f] = scheduler_silent.analyze(RuleContext(snapshot=snap, now=NOW, profiles=profiles))
    assert f.evidence["scheduler_name"] == "default-scheduler"
    assert "here bin-packing and taint-blind, by the --scheduler-config given" in f.explanation
    moves = [r for r in f.remedies if "schedulerName" in r.title]
    assert [r.title.split("schedulerName ")[1].split(" ")[0] for r in moves] == ["bin-packing", "taint-blind"]
    assert not any("default-scheduler" in r.command for r in moves)
    # Each profile's own filters decide: only the one without TaintToleration fits.
    assert [r.verified for r in moves] == [False, True]
    assert "profile taint-blind" in moves[1].verification
