"""PodTopologySpread (pkg/scheduler/framework/plugins/podtopologyspread/filtering.go)
and InterPodAffinity (.../interpodaffinity/filtering.go): filters that count pods."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.ingest import Decoder
from analyzers.simulator import simulate
from tests.simulator.builders import namespace, node, pod, pod_of, snapshot, taint

UNRES = "UnschedulableAndUnresolvable"
SKEW = "node(s) didn't match pod topology spread constraints"
MISSING = SKEW + " (missing required label)"


def run(objs: list[dict[str, Any]], name: str = "p", version: str | None = None, ns: str = "default"):  # type: ignore[no-untyped-def]
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, name, ns), kube_version=version)


def fitting(v) -> set[str]:  # type: ignore[no-untyped-def]
    return {n.node for n in v.nodes if n.fits}


def zone_spread(max_skew: int = 1, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": max_skew,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
            **extra,
        }
    ]


ZONES = [
    node("a1", labels={"zone": "z1"}),
    node("a2", labels={"zone": "z1"}),
    node("b1", labels={"zone": "z2"}),
    node("n", labels={}),
]


def web(name: str, node_name: str, **kw: Any) -> dict[str, Any]:
    return pod(name, node_name=node_name, labels={"app": "web"}, **kw)


# --- podtopologyspread/filtering.go --------------------------------------------------------


def test_spread_skew_and_missing_label() -> None:
    objs = [
        *ZONES,
        web("w1", "a1"),
        web("w2", "a2"),
        web("w3", "b1"),
        pod("p", labels={"app": "web"}, spread=zone_spread()),
    ]
    v = run(objs)
    # z1 has 2, z2 has 1: placing in z1 gives 3 - 1 = 2 > 1.
    assert fitting(v) == {"b1"}
    f = v.node("a1").filters[0]  # type: ignore[union-attr]
    assert (f.plugin, f.code, f.reasons, f.reason_codes) == (
        "PodTopologySpread",
        "Unschedulable",
        (SKEW,),
        ("topology-spread-mismatch",),
    )
    assert f.detail["matching_pods"] == 2 and f.detail["global_minimum"] == 1
    g = v.node("n").filters[0]  # type: ignore[union-attr]
    assert (g.code, g.reasons) == (UNRES, (MISSING,))


def test_spread_schedule_anyway_does_not_filter() -> None:
    spread = zone_spread(whenUnsatisfiable="ScheduleAnyway")
    spread[0]["whenUnsatisfiable"] = "ScheduleAnyway"
    objs = [*ZONES, web("w1", "a1"), web("w2", "a2"), pod("p", labels={"app": "web"}, spread=spread)]
    assert fitting(run(objs)) == {"a1", "a2", "b1", "n"}


def test_spread_min_domains_makes_the_global_minimum_zero() -> None:
    objs = [
        *ZONES,
        web("w1", "a1"),
        web("w3", "b1"),
        pod("p", labels={"app": "web"}, spread=zone_spread(minDomains=3)),
    ]
    v = run(objs)
    # Two eligible domains < minDomains 3: minimum is 0, so every domain with a pod is at skew 2.
    assert fitting(v) == set()
    assert v.node("a1").filters[0].detail["global_minimum"] == 0  # type: ignore[union-attr]


def test_spread_node_affinity_policy_honor_ignores_domains_the_pod_cannot_use() -> None:
    objs = [
        *ZONES,
        web("w1", "a1"),
        pod("p", labels={"app": "web"}, spread=zone_spread(), node_selector={"zone": "z1"}),
    ]
    # Only z1 is eligible, so the minimum is z1's own count: skew 1 <= 1.
    assert fitting(run(objs)) == {"a1", "a2"}
    objs[-1] = pod(
        "p",
        labels={"app": "web"},
        spread=zone_spread(nodeAffinityPolicy="Ignore"),
        node_selector={"zone": "z1"},
    )
    assert fitting(run(objs)) == set()


def test_spread_node_taints_policy_honor_excludes_tainted_domains() -> None:
    objs = [
        node("a1", labels={"zone": "z1"}),
        node("b1", labels={"zone": "z2"}, taints=[taint("dedicated", "x")]),
        web("w1", "a1"),
        pod("p", labels={"app": "web"}, spread=zone_spread(nodeTaintsPolicy="Honor")),
    ]
    assert fitting(run(objs)) == {"a1"}
    objs[-1] = pod("p", labels={"app": "web"}, spread=zone_spread())
    assert fitting(run(objs)) == set()  # z2 (tainted, count 0) is the minimum


def test_spread_match_label_keys_count_only_the_same_revision() -> None:
    old = [pod(f"old{i}", node_name=n, labels={"app": "web", "rev": "1"}) for i, n in enumerate(("a1", "a2"))]
    new = pod("p", labels={"app": "web", "rev": "2"}, spread=zone_spread(matchLabelKeys=["rev"]))
    # Only rev=2 pods count: none yet, so every zone is at skew 1.
    assert fitting(run([*ZONES, *old, new])) == {"a1", "a2", "b1"}
    plain = pod("p", labels={"app": "web", "rev": "2"}, spread=zone_spread())
    assert fitting(run([*ZONES, *old, plain])) == {"b1"}


def test_spread_terminating_pods_and_other_namespaces_do_not_count() -> None:
    objs = [
        *ZONES,
        web("w1", "a1", deleting=True),
        web("w2", "a2", namespace="other"),
        pod("p", labels={"app": "web"}, spread=zone_spread()),
    ]
    assert fitting(run(objs)) == {"a1", "a2", "b1"}


# --- interpodaffinity/filtering.go ---------------------------------------------------------------


def term(labels: dict[str, str], key: str = "zone", **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def pod_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def pod_anti_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def test_affinity_needs_a_matching_pod_in_the_domain() -> None:
    objs = [
        *ZONES,
        pod("db", node_name="a1", labels={"app": "db"}),
        pod("p", affinity=pod_affinity(term({"app": "db"}))),
    ]
    v = run(objs)
    assert fitting(v) == {"a1", "a2"}
    f = v.node("b1").filters[0]  # type: ignore[union-attr]
    assert (f.plugin, f.code, f.reasons, f.reason_codes) == (
        "InterPodAffinity",
        UNRES,
        ("node(s) didn't match pod affinity rules",),
        ("pod-affinity-mismatch",),
    )
    assert v.node("n").filters[0].reasons == ("node(s) didn't match pod affinity rules",)  # type: ignore[union-attr]


def test_affinity_first_pod_of_a_self_affine_group_may_go_anywhere_with_the_key() -> None:
    objs = [*ZONES, pod("p", labels={"app": "web"}, affinity=pod_affinity(term({"app": "web"})))]
    assert fitting(run(objs)) == {"a1", "a2", "b1"}  # not "n": it lacks the topology key
    objs = [*ZONES, pod("p", labels={"app": "api"}, affinity=pod_affinity(term({"app": "web"})))]
    assert fitting(run(objs)) == set()


def test_anti_affinity_is_unschedulable_so_preemption_may_help() -> None:
    objs = [
        *ZONES,
        web("w1", "a1"),
        pod(
            "p",
            labels={"app": "web"},
            affinity=pod_anti_affinity(term({"app": "web"}, "kubernetes.io/hostname")),
        ),
    ]
    v = run(objs)
    assert fitting(v) == {"a2", "b1", "n"}
    f = v.node("a1").filters[0]  # type: ignore[union-attr]
    assert (f.code, f.reasons, f.reason_codes) == (
        "Unschedulable",
        ("node(s) didn't match pod anti-affinity rules",),
        ("pod-anti-affinity-mismatch",),
    )


def test_existing_pods_anti_affinity_is_symmetric() -> None:
    guard = pod(
        "guard", node_name="a1", labels={"app": "guard"}, affinity=pod_anti_affinity(term({"app": "web"}))
    )
    v = run([*ZONES, guard, pod("p", labels={"app": "web"})])
    assert fitting(v) == {"b1", "n"}
    f = v.node("a2").filters[0]  # type: ignore[union-attr]
    assert (f.code, f.reasons, f.reason_codes) == (
        "Unschedulable",
        ("node(s) didn't satisfy existing pods anti-affinity rules",),
        ("existing-pod-anti-affinity",),
    )


def test_affinity_namespaces_and_namespace_selector() -> None:
    base = [
        *ZONES,
        namespace("default"),
        namespace("data", {"team": "data"}),
        pod("db", node_name="b1", namespace="data", labels={"app": "db"}),
    ]
    same_ns = pod("p", affinity=pod_affinity(term({"app": "db"})))
    assert fitting(run([*base, same_ns])) == set()
    by_name = pod("p", affinity=pod_affinity(term({"app": "db"}, namespaces=["data"])))
    assert fitting(run([*base, by_name])) == {"b1"}
    by_selector = pod(
        "p", affinity=pod_affinity(term({"app": "db"}, namespaceSelector={"matchLabels": {"team": "data"}}))
    )
    assert fitting(run([*base, by_selector])) == {"b1"}
    everywhere = pod("p", affinity=pod_affinity(term({"app": "db"}, namespaceSelector={})))
    assert fitting(run([*base, everywhere])) == {"b1"}


def test_existing_anti_affinity_namespace_selector_uses_the_incoming_pods_namespace_labels() -> None:
    guard = pod(
        "guard",
        node_name="a1",
        namespace="ops",
        labels={"app": "guard"},
        affinity=pod_anti_affinity(
            term({"app": "web"}, namespaceSelector={"matchLabels": {"tier": "front"}})
        ),
    )
    objs = [
        *ZONES,
        namespace("ops"),
        namespace("shop", {"tier": "front"}),
        guard,
        pod("p", namespace="shop", labels={"app": "web"}),
    ]
    assert fitting(run(objs, ns="shop")) == {"b1", "n"}
    objs[len(ZONES) + 1] = namespace("shop", {"tier": "back"})
    assert fitting(run(objs, ns="shop")) == {"a1", "a2", "b1", "n"}


def test_interpod_affinity_reasons_until_1_21() -> None:
    objs = [
        *ZONES,
        web("w1", "a1"),
        pod(
            "p",
            labels={"app": "web"},
            affinity=pod_anti_affinity(term({"app": "web"}, "kubernetes.io/hostname")),
        ),
    ]
    f = run(objs, version="1.21").node("a1").filters[0]  # type: ignore[union-attr]
    assert f.reasons == (
        "node(s) didn't match pod affinity/anti-affinity",
        "node(s) didn't match pod anti-affinity rules",
    )


def test_hypothetical_pod_from_a_template() -> None:
    snap = snapshot(*ZONES, web("w1", "a1"))
    template = pod(
        "web-new",
        labels={"app": "web"},
        affinity=pod_anti_affinity(term({"app": "web"}, "kubernetes.io/hostname")),
    )
    candidate = Decoder().decode(template)
    v = simulate(snap, candidate)  # type: ignore[arg-type]
    assert fitting(v) == {"a2", "b1", "n"}
    assert ("default", "web-new") not in snap.pods


@pytest.mark.parametrize("version", ["1.24", "1.33"])
def test_interpod_anti_affinity_message(version: str) -> None:
    objs = [
        node("a"),
        node("b"),
        web("w1", "a"),
        web("w2", "b"),
        pod(
            "p",
            labels={"app": "web"},
            affinity=pod_anti_affinity(term({"app": "web"}, "kubernetes.io/hostname")),
        ),
    ]
    v = run(objs, version=version)
    assert v.message == (
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes are "
        "available: 2 No preemption victims found for incoming pod."
    )
