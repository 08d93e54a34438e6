"""The Score-phase findings (preference-outweighed, spread-not-honoured,
packing-profile): they fire only where a preference cannot win (numbers from the
Score phase), only for pending or recently placed pods, and their weight remedy
is verified by re-scoring."""

from __future__ import annotations

from typing import Any

from analyzers.rules import packing_profile, preference_outweighed, spread_not_honoured
from analyzers.rules.context import RuleContext, Thresholds
from analyzers.simulator.schedconfig import parse_config
from tests.rules.placement_fixtures import NOW, deployment, template
from tests.simulator.builders import node, snapshot, taint

SSD = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
            }
        ]
    }
}


def _nodes(ssd_taint: bool) -> list[dict[str, Any]]:
    return [
        node(
            "ssd-1",
            cpu="8",
            memory="32Gi",
            labels={"disk": "ssd"},
            taints=[taint("spot", "true", "PreferNoSchedule")] if ssd_taint else None,
        ),
        node("plain-1", cpu="8", memory="32Gi"),
    ]


def _ctx(*objects: Any, **kw: Any) -> RuleContext:
    flat: list[Any] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    return RuleContext(snapshot=snapshot(*flat, kube_version="1.30"), now=NOW, **kw)


def test_a_preferred_term_outweighed_by_more_than_its_ceiling_is_reported_with_the_numbers() -> None:
    web = deployment("web", template(affinity=SSD), pending=1, bound=[])
    [f] = preference_outweighed.analyze(_ctx(_nodes(True), web))
    e = f.evidence
    assert (e["plugin"], e["weight"], e["ceiling"]) == ("NodeAffinity", 2, 200)
    assert (e["winner"], e["best_wanted_node"], e["deciding_plugin"]) == (
        "plain-1",
        "ssd-1",
        "TaintToleration",
    )
    assert e["margin_of_other_plugins"] > e["ceiling"] and e["deciding_plugin_gap"] == 300
    assert e["total_winner"] - e["total_best_wanted"] == e["margin_of_other_plugins"] - 200
    [remedy] = f.remedies
    assert remedy.verified and "name: NodeAffinity" in remedy.yaml
    # Without the taint the preference decides: nothing to say.
    assert preference_outweighed.analyze(_ctx(_nodes(False), web)) == []


def test_a_preference_that_loses_by_less_than_its_ceiling_is_not_reported() -> None:
    """NodeAffinity weight 5 (ceiling 500) against TaintToleration's 300: the preference wins
    (the taint is then the one outweighed); with a weight of 1 (ceiling 100) it is reported."""
    web = deployment("web", template(affinity=SSD), pending=1, bound=[])

    def config(weight: int) -> Any:
        return parse_config(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": "default-scheduler",
                        "plugins": {"score": {"enabled": [{"name": "NodeAffinity", "weight": weight}]}},
                    }
                ],
            }
        )

    # Weight 5: the preference wins (by 500 - 300), so now the taint is the one outweighed.
    [won] = preference_outweighed.analyze(_ctx(_nodes(True), web, profiles=config(5)))
    assert won.cause == "TaintToleration" and won.evidence["winner"] == "ssd-1"
    [f] = preference_outweighed.analyze(_ctx(_nodes(True), web, profiles=config(1)))
    assert f.cause == "NodeAffinity" and f.evidence["ceiling"] == 100


def test_only_pending_or_recently_placed_pods_are_judged() -> None:
    """A pod placed 10 minutes ago is judged as if scheduled now (taken off its node); with a
    5-minute horizon it is history, not a question."""
    web = deployment("web", template(affinity=SSD), pending=0, bound=["plain-1"])
    [f] = preference_outweighed.analyze(_ctx(_nodes(True), web))
    assert f.evidence["state"] == "placed on plain-1" and "(placed on plain-1)" in f.explanation
    short = Thresholds(recent_placement_seconds=300)
    assert preference_outweighed.analyze(_ctx(_nodes(True), web, thresholds=short)) == []


def test_schedule_anyway_spread_past_max_skew_is_reported() -> None:
    zone = "topology.kubernetes.io/zone"
    spread = [
        {"maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "web"}}}
    ]  # fmt: skip
    nodes = [
        node("a-1", labels={zone: "a"}),
        node("b-1", labels={zone: "b"}, taints=[taint("spot", "true", "PreferNoSchedule")]),
    ]
    web = deployment("web", template(spread=spread), bound=["a-1", "a-1"], pending=1)
    [f] = spread_not_honoured.analyze(_ctx(nodes, web))
    [c] = f.evidence["constraints"]
    assert (c["winner_domain"], c["matching_pods_there"], c["matching_pods_in_fewest"], c["skew_after"]) == (
        "a",
        2,
        0,
        3,
    )
    assert f.evidence["deciding_plugin"] == "TaintToleration" and "skew 3 > maxSkew 1" in f.explanation
    # DoNotSchedule is a filter, not a score: not this rule's.
    hard = [{**spread[0], "whenUnsatisfiable": "DoNotSchedule"}]
    assert (
        spread_not_honoured.analyze(
            _ctx(nodes, deployment("web", template(spread=hard), bound=["a-1", "a-1"]))
        )
        == []
    )
    # The first replica keeps the skew within maxSkew wherever it goes: nothing to say.
    assert (
        spread_not_honoured.analyze(_ctx(nodes, deployment("web", template(spread=spread), bound=[]))) == []
    )


def _packing(strategy: str) -> Any:
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
                    "pluginConfig": [
                        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": strategy}}}
                    ],
                }
            ],
        }
    )


def test_a_packing_profile_piles_replicas_on_one_node() -> None:
    nodes = [node(f"n-{i}", cpu="8", memory="32Gi") for i in range(3)]
    web = deployment("web", template(requests={"cpu": "2", "memory": "8Gi"}), replicas=3, pending=3, bound=[])
    [f] = packing_profile.analyze(_ctx(nodes, web, profiles=_packing("MostAllocated")))
    assert f.evidence["replicas_predicted"] == 3 and f.evidence["on_pile_node"] == 3
    assert f.evidence["most_on_one_node_least_allocated"] == 1
    assert "3 of the next 3 pods would land on n-0" in f.title
    # LeastAllocated spreads; the default configuration is never judged.
    assert packing_profile.analyze(_ctx(nodes, web, profiles=_packing("LeastAllocated"))) == []
    assert packing_profile.analyze(_ctx(nodes, web)) == []


def test_a_preferred_pod_affinity_outweighed_is_reported() -> None:
    near_cache = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "cache"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }
    cache = deployment("cache", template(app="cache"), bound=["ssd-1"], pending=0)
    web = deployment("web", template(affinity=near_cache), pending=1, bound=[])
    found = preference_outweighed.analyze(_ctx(_nodes(True), cache, web))
    [f] = [f for f in found if f.subject.name == "web"]
    assert f.cause == "InterPodAffinity" and f.evidence["winner"] == "plain-1"
    assert (
        f.evidence["preference"][0]["kind"] == "affinity"
        and "has preferred pod affinity weight 100" in f.explanation
    )
