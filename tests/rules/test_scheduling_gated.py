"""scheduling-gated: edge cases beyond the golden scenarios (tests/scenarios/scheduling-gated/)."""

from __future__ import annotations

from typing import Any

from analyzers.ingest import parse_time
from analyzers.rules import scheduling_gated
from analyzers.rules.context import RuleContext, Thresholds
from analyzers.snapshot import ClusterSnapshot
from tests.core.helpers import node, pod

CREATED = parse_time("2026-11-20T10:00:00Z") or 0.0  # the helpers' creationTimestamp


def gated(
    name: str,
    gates: list[str],
    *,
    labels: dict[str, str] | None = None,
    cpu: str = "1",
    owner: tuple[str, str] | None = None,
) -> dict[str, Any]:
    return pod(
        name,
        labels=labels,
        owner=owner,
        requests={"cpu": cpu},
        spec_extra={"schedulingGates": [{"name": g} for g in gates]},
    )


def run(objs: list[dict[str, Any]], *, after: float, thresholds: Thresholds | None = None) -> list[Any]:
    snap = ClusterSnapshot.from_objects(objs)
    ctx = RuleContext(snapshot=snap, now=CREATED + after, thresholds=thresholds or Thresholds())
    return scheduling_gated.analyze(ctx)


def test_below_the_threshold_is_quiet() -> None:
    assert run([node("n1"), gated("p", ["example.com/approval"])], after=120) == []
    # …and the threshold is configurable.
    [finding] = run(
        [node("n1"), gated("p", ["example.com/approval"])],
        after=120,
        thresholds=Thresholds(gated_after_seconds=60),
    )
    assert finding.subject.kind == "Pod"


def test_unknown_gate_names_the_domain_and_the_verified_removal() -> None:
    [finding] = run([node("n1"), gated("report-7", ["example.com/approval"])], after=3 * 3600)
    assert finding.subject.as_dict() == {"kind": "Pod", "namespace": "default", "name": "report-7"}
    assert "the controller of example.com that added it" in finding.explanation
    assert "has waited 3h00m" in finding.explanation
    assert finding.cause == "gates:example.com/approval"
    [removal] = finding.remedies  # nothing specific to inspect for an unknown owner
    assert removal.verified
    assert removal.command == (
        'kubectl patch pod report-7 -n default --type json -p \'[{"op":"remove","path":"/spec/schedulingGates"}]\''
    )
    assert "re-simulated without gates, report-7 fits on n1." in removal.verification


def test_removal_is_not_verified_when_the_pod_would_still_not_fit() -> None:
    [finding] = run([node("n1", cpu="2"), gated("big", ["example.com/approval"], cpu="8")], after=3600)
    [removal] = finding.remedies
    assert not removal.verified
    assert "would still not be scheduled" in finding.explanation
    assert "Insufficient cpu" in finding.explanation


def test_kueue_gate_without_a_queue_label_and_several_gates() -> None:
    pods = [gated("w", ["kueue.x-k8s.io/admission", "example.com/quota"])]
    [finding] = run([node("n1"), *pods], after=900)
    assert "the pod carries no kueue.x-k8s.io/queue-name label" in finding.explanation
    assert finding.evidence["owners"] == {
        "example.com/quota": "the controller of example.com that added it",
        "kueue.x-k8s.io/admission": "Kueue",
    }
    titles = [r.title for r in finding.remedies]
    assert titles[0] == "Find out why Kueue has not released the pod"
    assert not finding.remedies[0].verified  # an inspection


def test_pods_that_do_not_fit_together_are_not_verified() -> None:
    pods = [
        gated(f"w-{i}", ["example.com/approval"], cpu="3", owner=("ReplicaSet", "w-5c")) for i in range(2)
    ]
    [finding] = run([node("n1", cpu="4"), *pods], after=900)
    assert (finding.subject.kind, finding.subject.name) == ("ReplicaSet", "w-5c")
    # Each fits n1 (4 cpu) alone; n1 holds one 3-cpu pod, not two.
    assert not finding.evidence["fits_once_ungated"]
    assert "hold only 1 of the 2 gated pods" in finding.explanation
    assert not finding.remedies[-1].verified
