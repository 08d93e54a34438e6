from __future__ import annotations

import yaml

from analyzers.rules import anti_affinity_infeasible as rule
from tests.rules.placement_fixtures import (
    analyze_one,
    anti_affinity,
    deployment,
    findings,
    node,
    snapshot,
    template,
)

Z = "topology.kubernetes.io/zone"


def four_on_three():
    return snapshot(
        *[node(f"w-{i}") for i in range(3)],
        deployment("web", template(affinity=anti_affinity("web")), replicas=4, bound=["w-0", "w-1", "w-2"]),
    )


def test_more_replicas_than_nodes():
    [f] = analyze_one(rule, four_on_three())
    assert f.cause == "anti-affinity:kubernetes.io/hostname"
    assert "4 replicas > 3 nodes: 1 of them can never be placed" in f.explanation
    assert f.title.endswith("(4 replicas, 3 domains)")
    preferred = next(r for r in f.remedies if r.title.startswith("Make the anti-affinity preferred"))
    assert preferred.verified
    assert "delete one old pod" in preferred.verification  # old pods still repel the new ones mid-rollout
    anti = yaml.safe_load(preferred.yaml)["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"] is None
    assert anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 100
    spread = next(r for r in f.remedies if r.title.startswith("Replace it with topologySpreadConstraints"))
    assert spread.verified
    assert "whenUnsatisfiable: ScheduleAnyway" in spread.yaml
    scale = next(r for r in f.remedies if r.title.startswith("Run as many replicas"))
    assert scale.verified and scale.command == "kubectl scale deployment/web -n default --replicas=3"


def test_after_the_patch_the_old_pods_are_the_obstacle():
    """Template fixed, old pods still carry the required term: delete one old pod."""
    objs = deployment("web", template(affinity=anti_affinity("web")), replicas=4, bound=["w-0", "w-1", "w-2"])
    objs[0]["spec"]["template"]["spec"].pop("affinity")
    snap = snapshot(*[node(f"w-{i}") for i in range(3)], objs)
    [f] = analyze_one(rule, snap)
    assert f.cause == "existing-anti-affinity:kubernetes.io/hostname"
    [delete] = f.remedies
    assert delete.verified and delete.command.startswith("kubectl delete pod web-5d8f7c9b6-p00")


def test_zone_domains_are_counted_not_nodes():
    nodes = [node("a-0", labels={Z: "a"}), node("a-1", labels={Z: "a"}), node("b-0", labels={Z: "b"})]
    snap = snapshot(
        *nodes,
        deployment(
            "db", template(app="db", affinity=anti_affinity("db", Z)), replicas=3, bound=["a-0", "b-0"]
        ),
    )
    [f] = analyze_one(rule, snap)
    assert "span 2 zones" in f.explanation and "3 replicas > 2 zones" in f.explanation
    more = next(r for r in f.remedies if r.title.startswith("Add a node in a new"))
    assert more.verified and f"{Z}=a-new" in more.verification


def test_required_affinity_to_pods_that_do_not_run():
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    snap = snapshot(node("w-0"), node("w-1"), deployment("web", template(affinity=affinity)))
    [f] = analyze_one(rule, snap)
    assert f.cause == "affinity:kubernetes.io/hostname"
    assert "no pod matching it runs anywhere in its namespaces" in f.explanation
    [patch] = f.remedies
    assert patch.verified and "podAffinity" in patch.yaml


def test_another_workloads_anti_affinity():
    snap = snapshot(
        node("w-0", labels={Z: "a"}),
        node("w-1", labels={Z: "a"}),
        deployment("db", template(app="db", affinity=anti_affinity("web", Z)), bound=["w-0"], pending=0),
        deployment("web", template(app="web")),
    )
    [f] = analyze_one(rule, snap)
    assert f.cause == "existing-anti-affinity:topology.kubernetes.io/zone"
    assert "Deployment/default/db" in f.explanation
    [relax] = f.remedies
    assert relax.target is not None and relax.target.name == "db"
    assert relax.verified and "once db's pods have rolled" in relax.verification


def test_quiet_with_one_replica_per_node():
    snap = snapshot(
        *[node(f"w-{i}") for i in range(3)],
        deployment("web", template(affinity=anti_affinity("web")), replicas=3, bound=["w-0", "w-1"]),
    )
    assert findings(snap) == []
