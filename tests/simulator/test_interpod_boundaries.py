"""InterPodAffinity at its boundaries (kubernetes v1.35.4,
pkg/scheduler/framework/plugins/interpodaffinity): matchLabelKeys / mismatchLabelKeys add
``key In/NotIn (the pod's value)`` to a term's selector; a term's namespaces default to the pod's
own only when it names neither namespaces nor a namespaceSelector (AffinityTerm, framework/types.go);
an existing pod's anti-affinity term repels only pods its selector matches; satisfyPodAffinity
(filtering.go) needs every topology key on the node, even for the first pod of a self-affine group;
and preemption's dry run (SelectVictimsOnNode, RemovePod → updateWithPod) takes each removed pod off
exactly the counts it was in. Until 1.21 every failure also printed the generic reason."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.simulator import simulate
from analyzers.simulator.results import PodVerdict
from tests.simulator.builders import namespace, node, pod, pod_of, snapshot
from tests.simulator.test_filters_pods import pod_affinity as affinity
from tests.simulator.test_filters_pods import pod_anti_affinity as anti
from tests.simulator.test_filters_pods import term

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
GENERIC = "node(s) didn't match pod affinity/anti-affinity"
HOST = "kubernetes.io/hostname"


def run(*objs: dict[str, Any], version: str = "1.35") -> PodVerdict:
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, "p"), kube_version=version)


def fitting(v: PodVerdict) -> set[str]:
    return {n.node for n in v.nodes if n.fits}


def zone(name: str, z: str, **kw: Any) -> dict[str, Any]:
    return node(name, labels={"zone": z}, **kw)


def test_match_label_keys_repel_only_pods_with_the_same_value() -> None:
    objs = [
        node("a"),
        node("b"),
        pod("old", node_name="a", labels={"app": "web", "rev": "1"}),
        pod("same", node_name="b", labels={"app": "web", "rev": "2"}),
    ]
    p = pod(
        "p",
        labels={"app": "web", "rev": "2"},
        affinity=anti(term({"app": "web"}, key=HOST, matchLabelKeys=["rev"])),
    )
    assert fitting(run(*objs, p)) == {"a"}


def test_mismatch_label_keys_need_a_pod_with_another_value() -> None:
    objs = [
        zone("a", "z1"),
        zone("b", "z2"),
        pod("mine", node_name="a", labels={"app": "cache", "team": "x"}),
        pod("theirs", node_name="b", labels={"app": "cache", "team": "y"}),
    ]
    p = pod(
        "p",
        labels={"team": "x"},
        affinity=affinity(term({"app": "cache"}, key="zone", mismatchLabelKeys=["team"])),
    )
    assert fitting(run(*objs, p)) == {"b"}


def test_a_namespace_selector_alone_does_not_add_the_pods_own_namespace() -> None:
    objs = [
        namespace("default"),
        namespace("ml", {"team": "ml"}),
        zone("a", "z1"),
        zone("b", "z2"),
        pod("db-here", node_name="a", labels={"app": "db"}),
        pod("db-ml", node_name="b", namespace="ml", labels={"app": "db"}),
    ]
    sel = term({"app": "db"}, key="zone", namespaceSelector={"matchLabels": {"team": "ml"}})
    assert fitting(run(*objs, pod("p", affinity=affinity(sel)))) == {"b"}


def test_an_existing_pods_term_repels_only_pods_it_selects() -> None:
    objs = [
        node("a"),
        pod("db", node_name="a", labels={"app": "db"}, affinity=anti(term({"app": "db"}, key=HOST))),
    ]
    assert fitting(run(*objs, pod("p", labels={"app": "web"}))) == {"a"}
    assert fitting(run(*objs, pod("p", labels={"app": "db"}))) == set()


def test_the_first_pod_of_a_self_affine_group_still_needs_the_topology_key() -> None:
    objs = [node("a", labels={"rack": "r1"}), node("b")]
    p = pod("p", labels={"app": "web"}, affinity=affinity(term({"app": "web"}, key="rack")))
    assert fitting(run(*objs, p)) == {"a"}
    nowhere = pod("p", labels={"app": "web"}, affinity=affinity(term({"app": "web"}, key="row")))
    v = run(*objs, nowhere)
    assert v.message.startswith(f"0/2 nodes are available: 2 {AFFINITY}.")


def test_until_1_21_an_affinity_failure_also_prints_the_generic_reason() -> None:
    v = run(node("a"), node("b"), pod("p", affinity=affinity(term({"app": "db"}, key=HOST))), version="1.21")
    assert v.message.startswith(f"0/2 nodes are available: 2 {AFFINITY}, 2 {GENERIC}.")


def test_preemption_takes_a_victim_off_the_affinity_count_only_when_it_matches() -> None:
    # a (z1): a db pod that stays and one that may go, the latter holding the cpu; c (z3): no db pod.
    objs = [
        zone("a", "z1", cpu="1"),
        zone("c", "z3", cpu="1"),
        pod("db-keep", node_name="a", labels={"app": "db"}, priority=1000),
        pod("db-low", node_name="a", labels={"app": "db"}, requests={"cpu": "1"}, priority=0),
        pod("low-c", node_name="c", labels={"app": "batch"}, requests={"cpu": "1"}, priority=0),
        pod("p", requests={"cpu": "1"}, priority=100, affinity=affinity(term({"app": "db"}, key="zone"))),
    ]
    v = run(*objs)
    # On a, one db pod is left once db-low goes; on c, evicting cannot bring a db pod.
    assert dict(v.preemption.victims) == {"a": (("default", "db-low"),)}
    # With a non-db victim instead, the count is untouched.
    objs[3] = pod("batch-low", node_name="a", labels={"app": "batch"}, requests={"cpu": "1"}, priority=0)
    v = run(*objs)
    assert dict(v.preemption.victims) == {"a": (("default", "batch-low"),)}


@pytest.mark.parametrize(
    ("victim_fields", "incoming_fields", "reason"),
    [
        # The pod's anti-affinity is against the pods on a ...
        ({"labels": {"app": "cache"}}, {"affinity": anti(term({"app": "cache"}, key=HOST))}, ANTI),
        # ... or their anti-affinity is against the pod.
        (
            {"labels": {"app": "x"}, "affinity": anti(term({"app": "web"}, key=HOST))},
            {"labels": {"app": "web"}},
            "node(s) didn't satisfy existing pods anti-affinity rules",
        ),
    ],
)
def test_preemption_evicts_every_pod_an_anti_affinity_counts(
    victim_fields: dict[str, Any], incoming_fields: dict[str, Any], reason: str
) -> None:
    v = run(
        node("a"),
        pod("v1", node_name="a", priority=0, **victim_fields),
        pod("v2", node_name="a", priority=0, **victim_fields),
        pod("p", priority=100, **incoming_fields),
    )
    assert v.message.startswith(f"0/1 nodes are available: 1 {reason}.")
    assert dict(v.preemption.victims) == {"a": (("default", "v1"), ("default", "v2"))}


def test_a_self_affine_pod_with_peers_elsewhere_must_join_them() -> None:
    # The first-pod exception holds only while no pod matches (satisfyPodAffinity).
    v = run(
        zone("a", "z1"),
        zone("b", "z2"),
        pod("peer", node_name="a", labels={"app": "web"}),
        pod("p", labels={"app": "web"}, affinity=affinity(term({"app": "web"}, key="zone"))),
    )
    assert fitting(v) == {"a"}
    [failed] = v.node_at(1).filters
    assert failed.reasons == (AFFINITY,) and dict(failed.detail) == {"topology_key": "zone", "domain": "z2"}


def test_a_repelling_pod_elsewhere_does_not_block_preemption_here() -> None:
    repels = {"labels": {"app": "x"}, "affinity": anti(term({"app": "web"}, key=HOST))}
    v = run(
        node("a"),
        node("b"),
        pod("low", node_name="a", priority=0, **repels),
        pod("high", node_name="b", priority=1000, **repels),
        pod("p", labels={"app": "web"}, priority=100),
    )
    assert dict(v.preemption.victims) == {"a": (("default", "low"),)}
    [failed] = v.node_at(1).filters
    assert dict(failed.detail) == {"topology_key": HOST, "domain": "b"}


@pytest.mark.parametrize("kind", ["affinity", "anti"])
def test_counts_are_kept_per_topology_key(kind: str) -> None:
    # Node b's zone value equals node a's rack value: a count under "rack" says nothing of "zone".
    terms = (term({"app": "db"}, key="zone"), term({"app": "db"}, key="rack"))
    objs = [
        node("a", labels={"zone": "1", "rack": "2"}),
        node("b", labels={"zone": "2", "rack": "2"}),
        pod("db", node_name="a", labels={"app": "db"}),
    ]
    if kind == "affinity":  # b shares a's rack but not its zone
        assert fitting(run(*objs, pod("p", affinity=affinity(*terms)))) == {"a"}
    else:  # c is in zone "2" and rack "9": neither holds a db pod
        c = node("c", labels={"zone": "2", "rack": "9"})
        assert fitting(run(*objs, c, pod("p", affinity=anti(*terms)))) == {"c"}
