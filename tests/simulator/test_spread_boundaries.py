"""PodTopologySpread at its boundaries (kubernetes v1.35.4,
pkg/scheduler/framework/plugins/podtopologyspread): Filter in filtering.go (``matchNum +
selfMatchNum - minMatchNum > maxSkew``; minMatchNum is 0 while fewer domains than minDomains),
countPodsMatchSelector in common.go (terminating pods and other namespaces are bypassed, and an
empty selector counts nothing), and RemovePod/updateWithPod in filtering.go, which preemption's
dry run (SelectVictimsOnNode, plugins/defaultpreemption/default_preemption.go) calls for every
victim: each removed pod of the namespace that matches the selector comes off its domain's
count -- a terminating one too."""

from __future__ import annotations

from typing import Any

from analyzers.simulator import codes as C
from analyzers.simulator import simulate
from analyzers.simulator.results import PodVerdict
from tests.simulator.builders import node, pod, pod_of, snapshot, taint

SKEW = "node(s) didn't match pod topology spread constraints"
MISSING = SKEW + " (missing required label)"
WEB = {"app": "web"}


def spread(max_skew: int = 1, selector: dict[str, Any] | None = None, **extra: Any) -> list[dict[str, Any]]:
    constraint = {"maxSkew": max_skew, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", **extra}
    if selector is not None:
        constraint["labelSelector"] = selector
    return [constraint]


def run(*objs: dict[str, Any]) -> PodVerdict:
    snap = snapshot(*objs)
    return simulate(snap, pod_of(snap, "p"), kube_version="1.33")


def fitting(v: PodVerdict) -> set[str]:
    return {n.node for n in v.nodes if n.fits}


def zone(name: str, z: str, **kw: Any) -> dict[str, Any]:
    return node(name, labels={"zone": z}, **kw)


def test_the_pods_own_match_counts_once_and_only_when_it_matches() -> None:
    objs = [zone("a", "z1"), zone("b", "z2"), pod("w", node_name="a", labels=WEB)]
    # z1 holds 1, z2 0: a pod the selector matches would make z1 2 (skew 2 > 1) ...
    assert fitting(run(*objs, pod("p", labels=WEB, spread=spread(selector={"matchLabels": WEB})))) == {"b"}
    # ... one it does not match leaves z1 at 1 (skew 1).
    other = pod("p", labels={"app": "db"}, spread=spread(selector={"matchLabels": WEB}))
    assert fitting(run(*objs, other)) == {"a", "b"}


def test_with_exactly_min_domains_domains_the_minimum_is_the_real_one() -> None:
    objs = [
        zone("a", "z1"),
        zone("b", "z2"),
        pod("w1", node_name="a", labels=WEB),
        pod("w2", node_name="a", labels=WEB),
        pod("w3", node_name="b", labels=WEB),
    ]
    # Two domains, minDomains 2: the global minimum is z2's 1, so z2 (1 + 1 - 1) fits.
    p = pod("p", labels=WEB, spread=spread(selector={"matchLabels": WEB}, minDomains=2))
    assert fitting(run(*objs, p)) == {"b"}
    # minDomains 3: fewer domains, the minimum is 0 and nothing fits.
    p = pod("p", labels=WEB, spread=spread(selector={"matchLabels": WEB}, minDomains=3))
    assert fitting(run(*objs, p)) == set()


def test_an_empty_selector_counts_no_existing_pod_but_matches_the_pod_itself() -> None:
    objs = [zone("a", "z1"), zone("b", "z2"), *(pod(f"x{i}", node_name="a") for i in range(3))]
    v = run(*objs, pod("p", spread=spread(selector={})))
    assert fitting(v) == {"a", "b"}  # 0 + 1 - 0 in both zones


def test_a_topology_key_no_node_has_fails_every_node() -> None:
    v = run(
        zone("a", "z1"),
        zone("b", "z2"),
        pod("p", labels=WEB, spread=[{**spread()[0], "topologyKey": "rack"}]),
    )
    assert v.message.startswith(f"0/2 nodes are available: 2 {MISSING}.")
    assert [n.filters[0].reasons for n in v.nodes] == [(MISSING,), (MISSING,)]


def crowded(*, terminating: bool = False) -> list[dict[str, Any]]:
    """Zone z1 (node a) holds the web pods w1 and w2 (w2 terminating when asked) and o1, a web pod
    of another namespace, all of priority 0; zone z2 (node b) is tainted, so only a can be tried."""
    return [
        zone("a", "z1"),
        zone("b", "z2", taints=[taint("dedicated", "db")]),
        pod("o1", namespace="other", node_name="a", labels=WEB, priority=0, created="2024-01-01T00:00:00Z"),
        pod("w1", node_name="a", labels=WEB, priority=0, created="2024-01-02T00:00:00Z"),
        pod(
            "w2", node_name="a", labels=WEB, priority=0, created="2024-01-03T00:00:00Z", deleting=terminating
        ),
        pod("p", labels=WEB, priority=100, spread=spread(selector={"matchLabels": WEB})),
    ]


def test_preemption_takes_each_removed_pod_of_the_namespace_off_the_count() -> None:
    # z1 counts 2 (o1 is of another namespace): 2 + 1 - 0 > 1. Without w1 and w2 it is 1: the pod
    # fits, and o1 (reprieved first, the oldest) is no victim; neither web pod can be spared.
    v = run(*crowded())
    assert v.preemption.candidates == ("a",)
    assert dict(v.preemption.victims) == {"a": (("default", "w1"), ("default", "w2"))}


def test_preemption_takes_a_terminating_victim_off_the_count_too() -> None:
    # z1 counts 1 (w2 is terminating): 1 + 1 - 0 > 1. Removing w2 still lowers the count
    # (updateWithPod has no terminating check), so w1 is reprieved and w2 is the victim.
    v = run(*crowded(terminating=True))
    assert dict(v.preemption.victims) == {"a": (("default", "w2"),)}


def test_preemption_that_removes_no_matching_pod_still_fails_on_the_skew() -> None:
    objs = [
        zone("a", "z1"),
        zone("b", "z2", taints=[taint("dedicated", "db")]),
        pod("w1", node_name="a", labels=WEB, priority=1000),
        pod("w2", node_name="a", labels=WEB, priority=1000),
        pod("cache", node_name="a", labels={"app": "cache"}, priority=0),
        pod("p", labels=WEB, priority=100, spread=spread(selector={"matchLabels": WEB})),
    ]
    v = run(*objs)
    assert v.preemption.candidates == ()
    assert v.preemption.reasons[SKEW] == 1
    assert dict(v.preemption.reason_counts) == {C.TOPOLOGY_SPREAD_MISMATCH: 1, C.PREEMPTION_NOT_HELPFUL: 1}


def test_a_constraint_without_a_selector_never_blocks_and_preemption_still_works() -> None:
    objs = [
        zone("a", "z1", cpu="1"),
        pod("low", node_name="a", labels=WEB, requests={"cpu": "1"}, priority=0),
        pod("p", labels=WEB, priority=100, requests={"cpu": "1"}, spread=spread()),
    ]
    v = run(*objs)
    assert v.message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    assert dict(v.preemption.victims) == {"a": (("default", "low"),)}


def test_a_domain_left_uncounted_reads_as_zero_in_the_dry_run() -> None:
    # c lacks the rack key: its zone z3 is no counted domain (nodes must carry every constraint's
    # key), so in the dry run its zone count is 0 and the rack constraint is what fails there.
    two_keys = [
        *spread(selector={"matchLabels": WEB}),
        {**spread(selector={"matchLabels": WEB})[0], "topologyKey": "rack"},
    ]
    objs = [
        node("a", labels={"zone": "z1", "rack": "r1"}, taints=[taint("dedicated", "db")]),
        node("b", labels={"zone": "z2", "rack": "r2"}, taints=[taint("dedicated", "db")]),
        node("c", labels={"zone": "z3"}, cpu="1"),
        pod("low", node_name="c", requests={"cpu": "1"}, priority=0),
        pod("p", labels=WEB, priority=100, requests={"cpu": "1"}, spread=two_keys),
    ]
    v = run(*objs)
    assert [f.plugin for f in v.node("c").filters] == ["NodeResourcesFit", "PodTopologySpread"]  # type: ignore[union-attr]
    assert dict(v.preemption.reasons) == {MISSING: 1, "Preemption is not helpful for scheduling": 2}
