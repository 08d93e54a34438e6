"""DefaultPreemption at its boundaries (kubernetes v1.35.4): filterPodsWithPDBViolation in
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go (a budget's
disruptionsAllowed is spent victim by victim and a victim violates it only once it goes below
zero; a budget of another namespace, or with an empty selector, covers nothing; a pod without
labels violates nothing), candidates that violate no budget listed first, and the pod's
preemptionPolicy, which the Priority admission plugin copies from its PriorityClass, the global
default one when it names none (plugin/pkg/admission/priority/admission.go)."""

from __future__ import annotations

from typing import Any

from analyzers.simulator import simulate
from analyzers.simulator.results import PodVerdict
from tests.simulator.builders import node, pod, pod_of, snapshot


def run(*objs: dict[str, Any]) -> PodVerdict:
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, "p"), kube_version="1.35")


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
        pod("on-b", node_name="b", requests={"cpu": "1"}, labels={"app": "cache"}, priority=0),
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
