"""DefaultPreemption at its boundaries (kubernetes v1.35.4): filterPodsWithPDBViolation in
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go (a budget's
disruptionsAllowed is spent victim by victim and a victim violates it only once it goes below
zero; a budget of another namespace, or with an empty selector, covers nothing; a pod without
labels violates nothing), candidates that violate no budget listed first, and the pod's
preemptionPolicy, which the Priority admission plugin copies from its PriorityClass, the global
default one when it names none (plugin/pkg/admission/priority/admission.go)."""

from __future__ import annotations

from typing import Any

from analyzers.simulator import codes as C
from analyzers.simulator import simulate
from analyzers.simulator.results import PodVerdict
from tests.simulator.builders import node, pod, pod_of, snapshot


def run(*objs: dict[str, Any], version: str = "1.35") -> PodVerdict:
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, "p"), kube_version=version)


def budget(allowed: int, selector: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"pdb-{allowed}-{namespace}", "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": selector},
        "status": {"disruptionsAllowed": allowed},
    }


def two_full_nodes(labels_a: dict[str, str] | None) -> list[dict[str, Any]]:
    """Nodes a and b, each full with one priority-0 pod; the pod fits either once it is gone."""
    return [
        node("a", cpu="1"),
        node("b", cpu="1"),
        pod("on-a", node_name="a", requests={"cpu": "1"}, labels=labels_a, priority=0),
        pod("on-b", node_name="b", requests={"cpu": "1"}, priority=0),  # no labels: never violates
        pod("p", requests={"cpu": "1"}, priority=100),
    ]


DB = {"app": "db"}


def test_one_allowed_disruption_covers_one_victim() -> None:
    v = run(*two_full_nodes(DB), budget(1, {"matchLabels": DB}))
    assert v.preemption.candidates == ("a", "b")  # neither violates: name order


def test_no_allowed_disruption_puts_the_node_last() -> None:
    v = run(*two_full_nodes(DB), budget(0, {"matchLabels": DB}))
    assert v.preemption.candidates == ("b", "a")


def test_budgets_that_cover_nothing() -> None:
    for pdb in (budget(0, {}), budget(0, {"matchLabels": DB}, namespace="other")):
        v = run(*two_full_nodes(DB), pdb)
        assert v.preemption.candidates == ("a", "b"), pdb["metadata"]
    # A pod without labels matches no budget, whatever it selects.
    v = run(
        *two_full_nodes(None), budget(0, {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]})
    )
    assert v.preemption.candidates == ("a", "b")


def test_victims_of_both_kinds_are_listed_most_important_first() -> None:
    v = run(
        node("a", cpu="2"),
        budget(0, {"matchLabels": DB}),
        pod("db", node_name="a", requests={"cpu": "1"}, labels=DB, priority=5),
        pod("cache", node_name="a", requests={"cpu": "1"}, labels={"app": "cache"}, priority=10),
        pod("p", requests={"cpu": "2"}, priority=100),
    )
    assert dict(v.preemption.victims) == {"a": (("default", "cache"), ("default", "db"))}


def test_the_global_default_priority_class_gives_the_preemption_policy() -> None:
    never = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "batch"},
        "value": 100,
        "globalDefault": True,
        "preemptionPolicy": "Never",
    }
    v = run(*two_full_nodes(None), never)
    assert (
        v.preemption.message
        == "no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never."
    )
    assert not v.preemption.eligible


def test_what_preemption_found_is_counted_by_code() -> None:
    # a: short of cpu, nothing to evict; b: tainted (not helpful); c: evicting its pod is not enough.
    v = run(
        node("a", cpu="1"),
        node("b", cpu="4", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
        node("c", cpu="2"),
        pod("keep", node_name="c", requests={"cpu": "1"}, priority=1000),
        pod("low", node_name="c", requests={"memory": "1Gi"}, priority=0),
        pod("p", requests={"cpu": "2"}, priority=100),
        version="1.33",
    )
    assert v.preemption.attempted and v.preemption.eligible and v.preemption.candidates == ()
    assert dict(v.preemption.reasons) == {
        "No preemption victims found for incoming pod": 1,
        "Preemption is not helpful for scheduling": 1,
        "Insufficient cpu": 1,
    }
    assert dict(v.preemption.reason_counts) == {
        C.PREEMPTION_NO_VICTIMS: 1,
        C.PREEMPTION_NOT_HELPFUL: 1,
        C.INSUFFICIENT_RESOURCE: 1,
    }


def test_a_candidate_verdict_is_eligible() -> None:
    v = run(*two_full_nodes(None))
    assert v.preemption.eligible and v.preemption.attempted and v.preemption.message == ""


def test_after_a_prefilter_rejection_1_26_to_1_28_report_no_victims_on_every_node() -> None:
    v = run(node("a"), node("b"), pod("p", pvcs=["gone"]), version="1.27")
    assert v.preemption.eligible
    assert dict(v.preemption.reason_counts) == {C.PREEMPTION_NO_VICTIMS: 2}


def test_only_a_terminating_lower_priority_pod_on_the_nominated_node_blocks_preemption() -> None:
    # 1.25: before PodDisruptionConditions was on by default, any terminating pod counts.
    def verdict(**leaving: Any) -> PodVerdict:
        return run(
            node("a", cpu="1"),
            pod("leaving", node_name="a", requests={"cpu": "1"}, **leaving),
            pod("p", requests={"cpu": "1"}, priority=100, nominated="a"),
            version="1.25",
        )

    blocked = verdict(priority=0, deleting=True)
    assert not blocked.preemption.eligible
    assert dict(blocked.preemption.reason_counts) == {C.PREEMPTION_NOT_ELIGIBLE: 1}
    assert verdict(priority=0).preemption.eligible  # running: it is a victim instead
    assert verdict(priority=100, deleting=True).preemption.eligible  # not of lower priority


def test_an_equal_priority_pod_the_anti_affinity_is_against_is_never_a_victim() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    v = run(
        node("a"),
        pod("cache", node_name="a", labels={"app": "cache"}, priority=100),
        pod("low", node_name="a", priority=0),
        pod("p", priority=100, affinity=anti),
    )
    assert v.preemption.candidates == ()
    assert dict(v.preemption.reasons) == {"node(s) didn't match pod anti-affinity rules": 1}


def test_a_pod_without_a_start_time_is_the_least_important_victim() -> None:
    # util.MoreImportantPod: equal priority, the earlier start wins; none reads as "now".
    v = run(
        node("a", pods="2"),
        pod("dated", node_name="a", priority=0),
        pod("undated", node_name="a", priority=0, created=""),
        pod("p", priority=100),
    )
    assert dict(v.preemption.victims) == {"a": (("default", "undated"),)}


def test_nodes_still_short_after_their_evictions_report_their_first_failing_filter() -> None:
    # A spread constraint makes every tried node go through the per-node dry run. c lacks cpu
    # even without its victim; d too, but its port stays held by a pod that cannot go, and
    # NodePorts comes before NodeResourcesFit: that is what d reports.
    port = [{"containerPort": 80, "hostPort": 80}]
    spread = [{"maxSkew": 5, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}]
    v = run(
        node("c", cpu="1"),
        pod("keep-c", node_name="c", requests={"cpu": "1"}, priority=1000),
        pod("low-c", node_name="c", requests={"memory": "1Gi"}, priority=0),
        node("d", cpu="1"),
        pod("keep-d", node_name="d", requests={"cpu": "1"}, priority=1000, host_ports=port),
        pod("low-d", node_name="d", requests={"memory": "1Gi"}, priority=0),
        pod("p", requests={"cpu": "1"}, priority=100, host_ports=port, spread=spread),
    )
    assert dict(v.preemption.reasons) == {
        "Insufficient cpu": 1,
        "node(s) didn't have free ports for the requested pod ports": 1,
    }
