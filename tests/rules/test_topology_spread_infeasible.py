from __future__ import annotations

import yaml

from analyzers.rules import topology_spread_infeasible as rule
from analyzers.rules.context import RuleContext
from tests.rules.placement_fixtures import (
    NOW,
    analyze_one,
    deployment,
    findings,
    node,
    snapshot,
    taint,
    template,
    zone_spread,
)

Z = "topology.kubernetes.io/zone"


def zones(c_kwargs: dict) -> list:
    return [
        node("a-0", labels={Z: "a"}),
        node("b-0", labels={Z: "b"}),
        node("c-0", labels={Z: "c"}, **c_kwargs),
    ]


def web(**spread_kw) -> list:
    return deployment(
        "web", template(spread=zone_spread("web", **spread_kw)), replicas=3, bound=["a-0", "b-0"]
    )


def test_cordoned_zone_still_counts():
    snap = snapshot(
        *zones({"unschedulable": True, "taints": [taint("node.kubernetes.io/unschedulable")]}), web()
    )
    [f] = analyze_one(rule, snap)
    assert f.cause == "spread:topology.kubernetes.io/zone"
    assert "a 1, b 1, c 0" in f.explanation
    assert "count + 1 - 0 <= 1: c" in f.explanation
    assert "cordon does not remove c" in f.explanation
    anyway = next(r for r in f.remedies if "ScheduleAnyway" in r.title)
    assert anyway.verified
    [c] = yaml.safe_load(anyway.yaml)["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert c["whenUnsatisfiable"] == "ScheduleAnyway" and c["labelSelector"] == {
        "matchLabels": {"app": "web"}
    }
    skew = next(r for r in f.remedies if r.title.startswith("Allow more skew"))
    assert skew.title == "Allow more skew: maxSkew 2" and skew.verified
    uncordon = next(r for r in f.remedies if r.command == "kubectl uncordon c-0")
    assert uncordon.verified


def test_tainted_zone_offers_node_taints_policy_honor():
    snap = snapshot(*zones({"taints": [taint("dedicated", "infra")]}), web())
    [f] = analyze_one(rule, snap)
    assert "nodeTaintsPolicy Ignore (the default)" in f.explanation
    honor = next(r for r in f.remedies if "nodeTaintsPolicy Honor" in r.title)
    assert honor.verified and "nodeTaintsPolicy: Honor" in honor.yaml
    capacity = next(r for r in f.remedies if r.title.startswith("Add a schedulable node in"))
    assert capacity.verified and "synthetic" in capacity.verification


def test_no_taints_policy_before_1_26():
    snap = snapshot(*zones({"taints": [taint("dedicated", "infra")]}), web(), kube_version="1.25")
    found = rule.analyze(RuleContext(snapshot=snap, now=NOW))
    assert not any("nodeTaintsPolicy" in r.title for f in found for r in f.remedies)


def test_min_domains_shortfall():
    nodes = [node("a-0", labels={Z: "a"}), node("b-0", labels={Z: "b"})]
    objs = deployment(
        "web", template(spread=zone_spread("web", minDomains=3)), replicas=3, bound=["a-0", "b-0"]
    )
    [f] = analyze_one(rule, snapshot(*nodes, objs))
    assert "fewer than minDomains 3" in f.explanation
    lower = next(r for r in f.remedies if r.title.startswith("Lower minDomains"))
    assert lower.verified and "minDomains: 2" in lower.yaml


def test_nodes_without_the_key_are_named():
    snap = snapshot(*zones({"unschedulable": True}), node("edge-0"), web())
    [f] = analyze_one(rule, snap)
    assert "(edge-0) lack the label topology.kubernetes.io/zone" in f.explanation


def test_schedule_anyway_and_balanced_spreads_are_quiet():
    assert findings(snapshot(*zones({}), web())) == []
    snap = snapshot(
        *zones({"unschedulable": True}),
        deployment(
            "web",
            template(spread=zone_spread("web", whenUnsatisfiable="ScheduleAnyway")),
            replicas=3,
            bound=["a-0", "b-0"],
        ),
    )
    assert findings(snap) == []
