"""Incremental placement (``Placer``: copies counted in place, only the nodes
holding copies re-filtered, tops memoised per multiset of nodes) gives exactly
the answers of the slow path that rebuilds a what-if snapshot and re-simulates
every node per replica and per tie branch (tests/simulator/placement_reference.py),
on random small clusters of the placement generator
(tests/realcluster/generator_scoring.py): mixed nodes, images, PreferNoSchedule
taints, requestless and affinity-carrying pods, preferred node and pod
affinities, ScheduleAnyway spread, the three profiles of the real-scheduler run
(default, MostAllocated, custom weights with RequestedToCapacityRatio) -- plus
ReplicaSet-owned pods (system default spread), host ports, small pod limits,
required anti-affinity and DoNotSchedule spread (the rebuilt path), and clusters
of identical nodes whose ties force the seeded estimate."""

from __future__ import annotations

import random
from typing import Any

import pytest

from analyzers.records import Pod
from analyzers.simulator.schedconfig import parse_config
from analyzers.simulator.scoring.placement import Placer, attempt, place, placement_json
from analyzers.simulator.scoring.profile import Profile
from analyzers.snapshot import ClusterSnapshot
from tests.realcluster.generator_scoring import existing_pods, incoming_pod, make_nodes, scheduler_config
from tests.simulator.placement_reference import reference_place

KUBE_VERSION = "1.37.2"
Obj = dict[str, Any]
REPLICASET: Obj = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "metadata": {"name": "web-rs", "namespace": "ns", "uid": "web-rs-uid"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}},
    },
}


def _identical(nodes: list[Obj]) -> list[Obj]:
    """The nodes made alike (the first one's size, zone spread kept): ties everywhere."""
    status = nodes[0]["status"]
    for n in nodes:
        n["status"] = {**n["status"], "allocatable": status["allocatable"], "capacity": status["capacity"]}
        n["status"].pop("images", None)
        n["spec"].pop("taints", None)
    return nodes


def _case(seed: int) -> tuple[ClusterSnapshot, Pod, Profile, int]:
    rng = random.Random(seed)
    nodes = make_nodes(rng, rng.randint(3, 12), "n")
    alike = rng.random() < 0.25
    if alike:
        nodes = _identical(nodes)
    if rng.random() < 0.3:
        for n in nodes:
            n["status"]["allocatable"]["pods"] = str(rng.randint(3, 8))
    pods = existing_pods(rng, nodes, "ns", 0 if alike else rng.randint(0, 30))
    profiles = parse_config(scheduler_config("kubeconfig", rng.choice((None, 100))))
    pod = incoming_pod(rng, "ns", rng.choice(("place-default", "place-most", "place-weights")), 0)
    spec = pod["spec"]
    if rng.random() < 0.5:
        pod["metadata"]["labels"]["app"] = "web"
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-rs",
                "uid": "web-rs-uid",
                "controller": True,
            }
        ]
    for kind in ("podAffinity", "podAntiAffinity"):
        for term in (
            spec.get("affinity", {}).get(kind, {}).get("preferredDuringSchedulingIgnoredDuringExecution", [])
        ):
            if rng.random() < 0.6:  # the pod's own app: its copies count for it, both ways
                term["podAffinityTerm"]["labelSelector"]["matchLabels"]["app"] = pod["metadata"]["labels"][
                    "app"
                ]
    if rng.random() < 0.15:
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    if rng.random() < 0.1:
        spec.setdefault("affinity", {})["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}
            ]
        }
    elif rng.random() < 0.1:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": pod["metadata"]["labels"]["app"]}},
            }
        ]
    snap = ClusterSnapshot.from_objects([*nodes, *pods, REPLICASET, pod], kube_version=KUBE_VERSION)
    replicas = rng.choice((1, 3, 6, 12, 12, 40 if alike else 12))
    return snap, snap.pods[("ns", pod["metadata"]["name"])], profiles[spec["schedulerName"]], replicas


def test_incremental_placement_equals_the_rebuild_per_replica_reference() -> None:
    seen = {"node-local": 0, "rebuilt": 0, "exact": 0, "estimate": 0, "a node filled up": 0}
    for seed in range(70):
        snap, pod, profile, replicas = _case(seed)
        fast = place(snap, pod, replicas, profile, kube_version=KUBE_VERSION)
        slow = reference_place(snap, pod, replicas, profile, KUBE_VERSION)
        assert placement_json(fast, pod, profile, replicas) == placement_json(slow, pod, profile, replicas), (
            seed
        )
        placer = Placer(snap, pod, profile, fast.first, kube_version=KUBE_VERSION)
        seen["node-local" if placer.local else "rebuilt"] += 1
        seen["exact" if fast.exact else "estimate"] += 1
        if fast.first.top and len(fast.steps) < replicas:
            seen["a node filled up"] += 1
    print(seen)
    # Every path the comparison is meant to cover was taken.
    assert all(seen.values()), seen


@pytest.mark.parametrize("replicas", [4, 9])
def test_the_fast_path_sees_a_node_fill_up(replicas: int) -> None:
    """Four pods fit on the one node (allocatable pods 5, one pod there): the fifth
    replica has nowhere to go, exactly where the rebuilt snapshot says so."""
    rng = random.Random(1)
    nodes = _identical(make_nodes(rng, 1, "n"))
    nodes[0]["status"]["allocatable"]["pods"] = "5"
    pods = existing_pods(rng, nodes, "ns", 1)
    pod = incoming_pod(rng, "ns", "place-default", 0)
    pod["spec"].pop("affinity", None)
    pod["spec"].pop("topologySpreadConstraints", None)
    snap = ClusterSnapshot.from_objects([*nodes, *pods, pod], kube_version=KUBE_VERSION)
    p = snap.pods[("ns", pod["metadata"]["name"])]
    profile = Profile(scheduler_name="place-default")
    fast = place(snap, p, replicas, profile, kube_version=KUBE_VERSION)
    assert Placer(snap, p, profile, attempt(snap, p, profile), kube_version=KUBE_VERSION).local
    assert len(fast.steps) == min(replicas, 4)
    assert fast.distribution == reference_place(snap, p, replicas, profile, KUBE_VERSION).distribution
