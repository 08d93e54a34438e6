"""The placement rules' shared machinery: one root cause per pod, and the pod judged
as its Deployment would create it now."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from analyzers.rules import _placement as P
from analyzers.rules.context import RuleContext
from analyzers.simulator import node_table, simulate
from tests.rules.placement_fixtures import (
    NOW,
    anti_affinity,
    deployment,
    findings,
    node,
    snapshot,
    taint,
    template,
    zone_spread,
)
from tests.simulator.builders import pod as raw_pod

Z = "topology.kubernetes.io/zone"
CP = "node-role.kubernetes.io/control-plane"


def _root(snap, name_prefix: str) -> str | None:
    pod = next(p for p in snap.pods.values() if p.name.startswith(name_prefix) and not p.node_name)
    return P.root_cause(simulate(snap, pod, kube_version="1.30"), None, node_table(snap), pod)


def test_no_matching_node_is_a_selector_problem():
    snap = snapshot(node("w-0"), deployment("web", template(node_selector={"pool": "nope"})))
    assert _root(snap, "web") == P.SELECTOR


def test_full_workers_beat_a_control_plane_with_room():
    """Workers could hold the pod once pods leave; the control plane's taint is not the story."""
    snap = snapshot(
        node("w-0", cpu="2"),
        node("cp-0", cpu="8", labels={CP: ""}, taints=[taint(CP)]),
        deployment("busy", template(app="busy", requests={"cpu": "1500m"}), bound=["w-0"], pending=0),
        deployment("web", template(requests={"cpu": "1"})),
    )
    assert _root(snap, "web-") == P.RESOURCES


def test_only_tainted_nodes_could_ever_hold_it():
    snap = snapshot(
        node("w-0", cpu="2"),
        node("gpu-0", extra={"nvidia.com/gpu": "1"}, taints=[taint("nvidia.com/gpu", "present")]),
        deployment("train", template(app="train", requests={"nvidia.com/gpu": "1"})),
    )
    assert _root(snap, "train") == P.TAINT


def test_spread_into_a_tainted_zone_is_a_spread_problem():
    snap = snapshot(
        node("a-0", labels={Z: "a"}),
        node("b-0", labels={Z: "b"}),
        node("c-0", labels={Z: "c"}, taints=[taint("dedicated", "infra")]),
        deployment("web", template(spread=zone_spread("web")), replicas=3, bound=["a-0", "b-0"]),
    )
    assert _root(snap, "web") == P.SPREAD


def test_anti_affinity_with_a_tainted_spare_node_is_an_interpod_problem():
    snap = snapshot(
        node("w-0"),
        node("w-1"),
        node("cp-0", labels={CP: ""}, taints=[taint(CP)]),
        deployment("web", template(affinity=anti_affinity("web")), replicas=3, bound=["w-0", "w-1"]),
    )
    assert _root(snap, "web") == P.INTERPOD


def test_fitting_gated_and_volume_prefilter_pods_have_no_root_cause():
    snap = snapshot(
        node("w-0"),
        raw_pod("fits"),
        raw_pod("gated", gates=["example.com/quota"]),
        raw_pod("claims", pvcs=["missing-claim"]),
    )
    for name in ("fits", "gated", "claims"):
        assert P.root_cause(simulate(snap, snap.pods[("default", name)])) is None


def test_a_pod_gets_one_finding_even_when_several_filters_fail():
    """Tainted nodes and full nodes: the pod is explained once, by insufficient-resources."""
    snap = snapshot(
        node("w-0", cpu="2"),
        node("w-1", cpu="2"),
        node("cp-0", cpu="8", labels={CP: ""}, taints=[taint(CP)]),
        deployment(
            "busy",
            template(app="busy", requests={"cpu": "1500m"}),
            replicas=2,
            bound=["w-0", "w-1"],
            pending=0,
        ),
        deployment("web", template(requests={"cpu": "1"}), pending=2),
    )
    found = findings(snap)
    assert [(f.rule_id, f.subject.name) for f in found] == [("insufficient-resources", "web")]
    assert len(found[0].pods) == 2


def _drifted(new_template: dict, old_template: dict, **kwargs):
    objs = deployment("web", old_template, **kwargs)
    objs[0]["spec"]["template"] = copy.deepcopy(new_template)
    return objs


def test_a_fixed_deployment_template_is_what_counts():
    """The template was fixed after the ReplicaSet made the pending pod: the next pod fits."""
    snap = snapshot(
        node("w-0", labels={"pool": "general"}),
        _drifted(template(node_selector={"pool": "general"}), template(node_selector={"pool": "genral"})),
    )
    ctx = RuleContext(snapshot=snap, now=NOW)
    assert P.blocked(ctx, P.SELECTOR) == []
    assert findings(snap) == []


def test_drift_keeps_admission_tolerations_and_sidecar_requests():
    old = template(requests={"cpu": "4"})
    new = template(
        requests={"cpu": "1"},
        tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    )
    objs = _drifted(new, old)
    pending = objs[-1]
    # A mutating webhook added a sidecar asking for 200m more.
    pending["spec"]["containers"].append(
        {"name": "istio-proxy", "image": "istio/proxyv2:1.22.1", "resources": {"requests": {"cpu": "200m"}}}
    )
    snap = snapshot(node("w-0"), objs)
    pod = next(p for p in snap.pods.values() if not p.node_name)
    dep = snap.deployments[("default", "web")]
    now, drifted = P.as_created_now(snap, pod, snap.workload_of(pod))
    assert drifted
    assert now.spec.requests["cpu"] == 1200  # 4200m - (4000m - 1000m)
    keys = {t.key for t in now.spec.tolerations}
    assert {"dedicated", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} <= keys
    assert dep.template.tolerations[0] in now.spec.tolerations


def test_no_drift_without_the_replicaset():
    objs = deployment("web", template(node_selector={"pool": "x"}))
    objs = [o for o in objs if o["kind"] != "ReplicaSet"]
    snap = snapshot(node("w-0"), objs)
    pod = next(p for p in snap.pods.values() if not p.node_name)
    assert P.as_created_now(snap, pod, snap.workload_of(pod)) == (pod, False)


def test_single_node_what_if_agrees_with_a_full_resimulation():
    """For a pod whose filters look only at the node itself, simulating the changed node
    alone gives the answer a whole changed cluster would."""
    snap = snapshot(
        node("w-0", cpu="2"),
        node("w-1", cpu="4", taints=[taint("dedicated", "infra")]),
        deployment("busy", template(app="busy", requests={"cpu": "1500m"}), bound=["w-0"], pending=0),
        deployment("web", template(requests={"cpu": "3"})),
    )
    ctx = RuleContext(snapshot=snap, now=NOW)
    pod = next(p for p in snap.pods.values() if p.name.startswith("web") and not p.node_name)
    for changed in (
        replace(snap.nodes["w-1"], taints=()),  # fits once untainted
        replace(snap.nodes["w-0"], unschedulable=True),  # still too small
    ):
        quick = P.what_if_nodes(ctx, pod, changed)
        full = simulate(snap.replace(changed), pod, kube_version="1.30")
        assert quick is not None and quick.fits == full.fits


def test_full_resimulations_are_budgeted(monkeypatch):
    monkeypatch.setattr(P, "FULL_RESIMULATION_POD_BUDGET", 0)
    snap = snapshot(
        *[node(f"w-{i}") for i in range(3)],
        deployment("web", template(affinity=anti_affinity("web")), replicas=4, bound=["w-0", "w-1", "w-2"]),
    )
    [f] = findings(snap, "anti-affinity-infeasible")
    preferred = next(r for r in f.remedies if r.title.startswith("Make the anti-affinity preferred"))
    assert not preferred.verified and "not re-simulated" in preferred.verification


def _zones_with_a_full_zone():
    """web spreads over zones (maxSkew 1): a 2, b 2, c 1 -- only zone c may take the next
    pod, and c-0 is full; a-0 and b-0 have room the spread constraint refuses."""
    tpl = template(app="web", requests={"cpu": "500m"}, spread=zone_spread("web"))
    return snapshot(
        node("a-0", cpu="2", labels={Z: "a"}),
        node("b-0", cpu="2", labels={Z: "b"}),
        node("c-0", cpu="2", labels={Z: "c"}),
        deployment("web", tpl, replicas=6, bound=["a-0", "a-0", "b-0", "b-0", "c-0"], pending=1),
        deployment("batch", template(app="batch", requests={"cpu": "1500m"}), bound=["c-0"], pending=0),
    )


def test_a_spread_constraint_confining_the_pod_to_a_full_zone_is_the_root_cause():
    snap = _zones_with_a_full_zone()
    assert _root(snap, "web-") == P.SPREAD
    found = findings(snap)
    assert [f.rule_id for f in found] == ["topology-spread-infeasible"]
    [f] = found
    assert "No node in c can take it (c-0: Insufficient cpu)" in f.explanation
    relax = next(r for r in f.remedies if "ScheduleAnyway" in r.title)
    assert relax.verified


def test_insufficient_resources_counts_the_nodes_it_names_once():
    """2 nodes pass affinity and taints: one is refused by another filter (and is full
    too, so the filter confines the pod nowhere with room), the other is full. The
    explanation's counts add up (no "1 node passes ... 1 more also passes")."""
    aff = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}
            ]
        }
    }
    snap = snapshot(
        node("n1", cpu="2"),
        node("n2", cpu="2"),
        deployment("db", template(app="db", requests={"cpu": "1500m"}), bound=["n1"], pending=0),
        deployment("busy", template(app="busy", requests={"cpu": "1500m"}), bound=["n2"], pending=0),
        deployment("web", template(app="web", requests={"cpu": "1"}, affinity=aff)),
    )
    [f] = findings(snap, "insufficient-resources")
    assert (
        "2 nodes pass its node affinity and taints; n2 is refused by InterPodAffinity whatever its room; "
        in (f.explanation)
    )
    assert "on the other 1 node the pod fits on none" in f.explanation
    assert "also pass" not in f.explanation
    assert (f.evidence["nodes_passing_affinity_and_taints"], f.evidence["eligible_node_count"]) == (2, 1)


# --- Confinement: a required constraint keeps the pod off the nodes with room ----------------

HOST = "kubernetes.io/hostname"


def _busy(*nodes: str) -> list[dict]:
    """A deployment taking 1500m of cpu on each of ``nodes``."""
    return deployment(
        "busy",
        template(app="busy", requests={"cpu": "1500m"}),
        replicas=len(nodes),
        bound=list(nodes),
        pending=0,
    )


def _pod_affinity(app: str, key: str = HOST) -> dict:
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}
            ]
        }
    }


def _numbers_are_evidence(f) -> None:
    from tests.scenarios.test_evidence_numbers import NUMBER, evidence_numbers

    have = evidence_numbers(f.evidence, set())
    missing = [n for n in NUMBER.findall(f.explanation) if n not in have]
    assert not missing, (missing, f.explanation)


def _confinement_cases():
    """(snapshot, rule, root, what the explanation must say) for each confining constraint."""
    full_db_node = snapshot(
        node("n1", cpu="2"),
        node("n2", cpu="2"),
        deployment("db", template(app="db", requests={"cpu": "1500m"}), bound=["n1"], pending=0),
        deployment("web", template(app="web", requests={"cpu": "1"}, affinity=_pod_affinity("db"))),
    )
    full_db_zone = snapshot(
        node("a-0", cpu="2", labels={Z: "a"}),
        node("a-1", cpu="2", labels={Z: "a"}),
        node("b-0", cpu="2", labels={Z: "b"}),
        deployment(
            "db", template(app="db", requests={"cpu": "1500m"}), replicas=2, bound=["a-0", "a-1"], pending=0
        ),
        deployment("web", template(app="web", requests={"cpu": "1"}, affinity=_pod_affinity("db", Z))),
    )
    full_free_node = snapshot(
        node("w-0", cpu="2"),
        node("w-1", cpu="2"),
        node("w-2", cpu="2"),
        _busy(*["w-2"]),
        deployment(
            "web",
            template(requests={"cpu": "1"}, affinity=anti_affinity("web")),
            replicas=3,
            bound=["w-0", "w-1"],
        ),
    )
    full_pool = snapshot(
        node("a-0", cpu="2", labels={"pool": "a"}),
        node("b-0", cpu="2", labels={"pool": "b"}),
        _busy(*["a-0"]),
        deployment("web", template(app="web", requests={"cpu": "1"}, node_selector={"pool": "a"})),
    )
    repelled_from_free_node = snapshot(
        node("w-0", cpu="2"),
        node("w-1", cpu="2"),
        deployment(
            "loner",
            template(app="loner", requests={"cpu": "100m"}, affinity=anti_affinity("web")),
            bound=["w-0"],
            pending=0,
        ),
        _busy(*["w-1"]),
        deployment("web", template(app="web", requests={"cpu": "1"})),
    )
    return [
        (
            repelled_from_free_node,
            "anti-affinity-infeasible",
            P.INTERPOD,
            "so it may not join them in kubernetes.io/hostname w-0. Their anti-affinity confines the pod to w-1, "
            "which cannot take it (w-1: Insufficient cpu); w-0 has room for it, but their anti-affinity keeps the "
            "pod off it.",
        ),
        (
            full_db_node,
            "anti-affinity-infeasible",
            P.INTERPOD,
            "The podAffinity term confines the pod to n1, which cannot take it (n1: Insufficient cpu); n2 has room "
            "for it, but the podAffinity term keeps the pod off it.",
        ),
        (
            full_db_zone,
            "anti-affinity-infeasible",
            P.INTERPOD,
            "confines the pod to topology.kubernetes.io/zone a, where no node can take it (a-0: Insufficient cpu; "
            "a-1: Insufficient cpu); b-0 has room for it",
        ),
        (
            full_free_node,
            "anti-affinity-infeasible",
            P.INTERPOD,
            "The podAntiAffinity term confines the pod to w-2, which cannot take it (w-2: Insufficient cpu); w-0 "
            "and w-1 have room for it",
        ),
        (
            full_pool,
            "node-selector-mismatch",
            P.SELECTOR,
            "Its nodeSelector pool=a confines the pod to 1 node (a-0), which cannot take it (a-0: Insufficient "
            "cpu); b-0 has room for it, but its nodeSelector pool=a keeps the pod off it.",
        ),
    ]


@pytest.mark.parametrize("case", range(5))
def test_a_required_constraint_confining_the_pod_to_full_nodes_is_the_root_cause(case: int) -> None:
    """Nodes with room refused only by one of the pod's required constraints: that
    constraint is the root cause, never "the cluster is full"; the explanation's counts
    are in the evidence, and a remedy that relaxes the constraint is verified."""
    snap, rule, root, words = _confinement_cases()[case]
    assert _root(snap, "web-") == root
    found = findings(snap)
    assert [f.rule_id for f in found] == [rule]
    [f] = found
    assert words in f.explanation
    assert "full" not in f.explanation
    _numbers_are_evidence(f)
    assert f.remedies and f.remedies[0].verified


def test_a_confining_pod_affinity_over_zones_offers_a_node_in_the_zone_it_points_at() -> None:
    snap, *_ = _confinement_cases()[2]
    [f] = findings(snap)
    room = next(r for r in f.remedies if r.title == f"Add a schedulable node in {Z}=a")
    assert room.verified and "it fits on a-0-copy" in room.verification


def test_a_confining_node_selector_offers_to_drop_it_or_add_a_node_it_admits() -> None:
    snap, *_ = _confinement_cases()[4]
    [f] = findings(snap)
    assert f.title == "web: nodeSelector pool=a confines it to 1 node that cannot take it"
    drop, room = f.remedies
    assert drop.title == "Let it use the nodes with room: drop nodeSelector pool=a" and drop.verified
    assert "it fits on b-0" in drop.verification
    assert room.title == "Add a schedulable node in pool=a" and room.verified
    assert (f.evidence["admitted_node_count"], f.evidence["nodes_with_room_refused_only_by_it"]) == (
        1,
        ["b-0"],
    )


def test_a_node_of_another_platform_with_room_does_not_make_the_selector_the_cause() -> None:
    """Linux workers full, a Windows node with room: the cluster is full for this pod."""
    os_key = "kubernetes.io/os"
    snap = snapshot(
        node("lin-0", cpu="2", labels={os_key: "linux"}),
        node("win-0", cpu="8", labels={os_key: "windows"}),
        _busy(*["lin-0"]),
        deployment("web", template(app="web", requests={"cpu": "1"}, node_selector={os_key: "linux"})),
    )
    assert _root(snap, "web-") == P.RESOURCES
    assert [f.rule_id for f in findings(snap)] == ["insufficient-resources"]


def test_no_confinement_when_the_nodes_the_constraint_refuses_are_full_too() -> None:
    snap = snapshot(
        node("a-0", cpu="2", labels={"pool": "a"}),
        node("b-0", cpu="2", labels={"pool": "b"}),
        _busy(*["a-0", "b-0"]),
        deployment("web", template(app="web", requests={"cpu": "1"}, node_selector={"pool": "a"})),
    )
    assert _root(snap, "web-") == P.RESOURCES
