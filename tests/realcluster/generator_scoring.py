"""Random clusters for the placement run (tests/realcluster/test_placement.py):
nodes of mixed sizes with images in ``status.images``, zones, PreferNoSchedule
taints; existing pods with and without requests, some with preferred
(anti-)affinity; incoming pods without requests, with preferred node and pod
affinities, ScheduleAnyway spread, PreferNoSchedule tolerations and images
from the nodes' pool. Everything follows from the seed."""

from __future__ import annotations

import random
from typing import Any

from tests.realcluster.harness import node as api_node

Obj = dict[str, Any]
ZONES = ("zone-a", "zone-b", "zone-c")
APPS = ("web", "api", "db", "cache")
MB = 1024 * 1024
# The pool of images nodes report (names as a kubelet lists them; sizes in bytes).
IMAGES = (
    (("registry.example/web:1.0",), 120 * MB),
    (("registry.example/api:2.3", "registry.example/api@sha256:0a1b"), 480 * MB),
    (("registry.example/db:14",), 900 * MB),
    (("registry.example/cache:7",), 60 * MB),
    (("registry.example/ml:0.9",), 2400 * MB),
)


def make_nodes(rng: random.Random, count: int, prefix: str) -> list[Obj]:
    out = []
    for i in range(count):
        labels = {"topology.kubernetes.io/zone": ZONES[i % len(ZONES)]}
        if rng.random() < 0.4:
            labels["disk"] = rng.choice(("ssd", "hdd"))
        taints = []
        if rng.random() < 0.25:
            taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
        if rng.random() < 0.1:
            taints.append(
                {"key": "maintenance", "value": rng.choice(("soon", "later")), "effect": "PreferNoSchedule"}
            )
        n = api_node(
            f"{prefix}-{i:03d}",
            cpu=rng.choice(("2", "4", "8", "16")),
            memory=rng.choice(("4Gi", "8Gi", "16Gi", "32Gi")),
            labels=labels,
            taints=taints or None,
        )
        images = [img for img in IMAGES if rng.random() < 0.45]
        if images:
            n["status"]["images"] = [{"names": list(names), "sizeBytes": size} for names, size in images]
        out.append(n)
    return out


def _resources(rng: random.Random, requestless: float) -> Obj:
    if rng.random() < requestless:
        return {}
    req: dict[str, str] = {}
    if rng.random() < 0.9:
        req["cpu"] = rng.choice(("50m", "100m", "250m", "500m", "1"))
    if rng.random() < 0.8:
        req["memory"] = rng.choice(("64Mi", "128Mi", "512Mi", "1Gi"))
    return {"requests": req} if req else {}


def _pod(name: str, namespace: str, scheduler: str, app: str, image: str, resources: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": image, "resources": resources}],
            "terminationGracePeriodSeconds": 0,
        },
    }


def existing_pods(rng: random.Random, nodes: list[Obj], namespace: str, count: int) -> list[Obj]:
    """Pods bound directly (spec.nodeName), busy and requestless ones among them."""
    out = []
    for k in range(count):
        app = rng.choice(APPS)
        p = _pod(
            f"old-{k:03d}",
            namespace,
            "default-scheduler",
            app,
            f"registry.example/{app}:old",
            _resources(rng, 0.35),
        )
        p["spec"]["nodeName"] = rng.choice(nodes)["metadata"]["name"]
        if rng.random() < 0.2:
            p["spec"]["affinity"] = {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": rng.randint(1, 100),
                            "podAffinityTerm": {
                                "topologyKey": rng.choice(
                                    ("kubernetes.io/hostname", "topology.kubernetes.io/zone")
                                ),
                                "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
                            },
                        }
                    ]
                }
            }
        out.append(p)
    return out


def incoming_pod(rng: random.Random, namespace: str, scheduler: str, k: int) -> Obj:
    app = rng.choice(APPS)
    names, _ = rng.choice(IMAGES)
    image = names[0] if rng.random() < 0.6 else f"registry.example/unique-{k}:1"
    p = _pod(f"new-{k:03d}", namespace, scheduler, app, image, _resources(rng, 0.5))
    spec = p["spec"]
    affinity: Obj = {}
    if rng.random() < 0.35:
        terms = []
        for _ in range(rng.randint(1, 2)):
            if rng.random() < 0.5:
                expr = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [rng.choice(ZONES)]}
            else:
                expr = {
                    "key": "disk",
                    "operator": rng.choice(("In", "Exists", "DoesNotExist")),
                    "values": ["ssd"],
                }
                if expr["operator"] != "In":
                    expr.pop("values")
            terms.append({"weight": rng.randint(1, 100), "preference": {"matchExpressions": [expr]}})
        affinity["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": terms}
    if rng.random() < 0.3:
        kind = rng.choice(("podAffinity", "podAntiAffinity"))
        affinity[kind] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": rng.randint(1, 100),
                    "podAffinityTerm": {
                        "topologyKey": rng.choice(("kubernetes.io/hostname", "topology.kubernetes.io/zone")),
                        "labelSelector": {"matchLabels": {"app": rng.choice(APPS)}},
                    },
                }
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.35:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": rng.randint(1, 3),
                "topologyKey": rng.choice(("kubernetes.io/hostname", "topology.kubernetes.io/zone")),
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}]
    return p


def scheduler_config(kubeconfig: str, percentage: int | None) -> Obj:
    """Profiles the test's own kube-scheduler serves (the plane's default one serves
    ``default-scheduler``): the default plugins, MostAllocated bin-packing, and
    custom weights with RequestedToCapacityRatio and a hard pod-affinity weight."""
    doc: Obj = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": kubeconfig},
        "profiles": [
            {"schedulerName": "place-default"},
            {
                "schedulerName": "place-most",
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "scoringStrategy": {
                                "type": "MostAllocated",
                                "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}],
                            }
                        },
                    }
                ],
            },
            {
                "schedulerName": "place-weights",
                "plugins": {
                    "score": {
                        "disabled": [{"name": "ImageLocality"}],
                        "enabled": [
                            {"name": "NodeAffinity", "weight": 7},
                            {"name": "TaintToleration", "weight": 1},
                        ],
                    }
                },
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "scoringStrategy": {
                                "type": "RequestedToCapacityRatio",
                                "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 2}],
                                "requestedToCapacityRatio": {
                                    "shape": [
                                        {"utilization": 0, "score": 2},
                                        {"utilization": 60, "score": 10},
                                        {"utilization": 100, "score": 0},
                                    ]
                                },
                            }
                        },
                    },
                    {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5}},
                    {
                        "name": "PodTopologySpread",
                        "args": {
                            "defaultingType": "List",
                            "defaultConstraints": [
                                {
                                    "maxSkew": 2,
                                    "topologyKey": "topology.kubernetes.io/zone",
                                    "whenUnsatisfiable": "ScheduleAnyway",
                                }
                            ],
                        },
                    },
                ],
            },
        ],
    }
    if percentage is not None:
        doc["percentageOfNodesToScore"] = percentage
    return doc
