"""Random small clusters and pending pods for the differential fidelity run.

A :class:`Case` is a cluster (Nodes with labels, taints of every effect,
capacity with extended resources, cordons; existing pods bound to nodes with
requests, host ports, labels, priorities and sometimes required anti-affinity)
and a list of probe pods, each scheduled alone against it (nodeSelector, node
affinity with every operator and matchFields, tolerations, pod (anti-)affinity
over several topology keys, topology spread in both modes with minDomains and
the node inclusion policies, host ports, requests, priority).

Everything comes from one ``random.Random(seed)``, so a seed reproduces a run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.realcluster.harness import node

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ZONES = ("za", "zb", "zc")
APPS = ("web", "db", "cache")
GPU = "nvidia.com/gpu"
TAINTS = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "effect": "PreferNoSchedule"},
    {"key": "maintenance", "value": "true", "effect": "NoExecute"},
    {"key": "team", "value": "ml", "effect": "NoSchedule"},
)
PRIORITY_CLASSES = {"unstick-low": 10, "unstick-high": 1000}


@dataclass
class Case:
    index: int
    nodes: list[dict[str, Any]]
    existing: list[dict[str, Any]]
    probes: list[dict[str, Any]] = field(default_factory=list)


def _maybe(rng: random.Random, p: float) -> bool:
    return rng.random() < p


def make_node(rng: random.Random, case: int, i: int) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if _maybe(rng, 0.9):
        labels[ZONE] = rng.choice(ZONES)
    if _maybe(rng, 0.6):
        labels["disk"] = rng.choice(("ssd", "hdd"))
    if _maybe(rng, 0.7):
        labels["tier"] = str(rng.randint(1, 9))
    extra: dict[str, str] = {}
    if _maybe(rng, 0.3):
        extra[GPU] = str(rng.randint(1, 2))
        labels["accelerator"] = "gpu"
    taints = [dict(t) for t in rng.sample(TAINTS, k=rng.choice((0, 0, 0, 1, 1, 2)))]
    return node(
        f"c{case}-n{i}",
        cpu=rng.choice(("2", "4", "8")),
        memory=rng.choice(("4Gi", "8Gi", "16Gi")),
        pods=rng.choice(("110", "110", "110", "3")),
        extra=extra,
        labels=labels,
        taints=taints,
        unschedulable=_maybe(rng, 0.12),
    )


def _requests(rng: random.Random, gpu_ok: bool) -> dict[str, str]:
    req: dict[str, str] = {}
    if _maybe(rng, 0.8):
        req["cpu"] = rng.choice(("100m", "500m", "1", "2", "3", "6"))
    if _maybe(rng, 0.6):
        req["memory"] = rng.choice(("256Mi", "1Gi", "2Gi", "6Gi", "12Gi"))
    if gpu_ok and _maybe(rng, 0.25):
        req[GPU] = rng.choice(("1", "1", "2"))
    return req


def _container(rng: random.Random, req: dict[str, str], host_port: bool) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "app", "image": "registry.example/app:1"}
    if req:
        c["resources"] = {"requests": req}
        if GPU in req:
            c["resources"]["limits"] = {GPU: req[GPU]}
    if host_port:
        c["ports"] = [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]
    return c


def _selector(rng: random.Random) -> dict[str, Any]:
    if _maybe(rng, 0.7):
        return {"matchLabels": {"app": rng.choice(APPS)}}
    return {
        "matchExpressions": [
            {
                "key": "app",
                "operator": rng.choice(("In", "NotIn")),
                "values": rng.sample(APPS, k=rng.randint(1, 2)),
            }
        ]
    }


def make_existing(rng: random.Random, case: int, i: int, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    target = rng.choice(nodes)
    spec: dict[str, Any] = {
        "nodeName": target["metadata"]["name"],
        "containers": [_container(rng, _requests(rng, False), _maybe(rng, 0.15))],
        "tolerations": [{"operator": "Exists"}],
        "terminationGracePeriodSeconds": 0,
    }
    pc = rng.choice((None, None, "unstick-low", "unstick-high"))
    if pc:
        spec["priorityClassName"] = pc
    if _maybe(rng, 0.12):
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": _selector(rng), "topologyKey": rng.choice((HOST, ZONE))}
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"c{case}-e{i}", "labels": {"app": rng.choice(APPS)}},
        "spec": spec,
    }


def _node_term(rng: random.Random, node_names: list[str]) -> dict[str, Any]:
    exprs: list[dict[str, Any]] = []
    for _ in range(rng.randint(1, 2)):
        op = rng.choice(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))
        if op in ("Gt", "Lt"):
            exprs.append({"key": "tier", "operator": op, "values": [str(rng.randint(1, 9))]})
        elif op in ("Exists", "DoesNotExist"):
            exprs.append({"key": rng.choice(("disk", "accelerator", ZONE)), "operator": op})
        else:
            key = rng.choice((ZONE, "disk"))
            pool = [*list(ZONES), "zx"] if key == ZONE else ["ssd", "hdd", "nvme"]
            exprs.append({"key": key, "operator": op, "values": rng.sample(pool, k=rng.randint(1, 2))})
    term: dict[str, Any] = {"matchExpressions": exprs}
    if _maybe(rng, 0.1):
        term = {
            "matchFields": [
                {
                    "key": "metadata.name",
                    "operator": rng.choice(("In", "NotIn")),
                    # the API allows one value in a metadata.name field selector (core validation)
                    "values": [rng.choice(node_names)],
                }
            ]
        }
    return term


def make_probe(rng: random.Random, case: int, i: int, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    names = [n["metadata"]["name"] for n in nodes]
    app = rng.choice(APPS)
    spec: dict[str, Any] = {
        "containers": [_container(rng, _requests(rng, True), _maybe(rng, 0.2))],
        "terminationGracePeriodSeconds": 0,
    }
    if _maybe(rng, 0.3):
        key = rng.choice(("disk", ZONE, "accelerator"))
        value = {"disk": ("ssd", "hdd", "nvme"), ZONE: (*ZONES, "zx"), "accelerator": ("gpu", "tpu")}[key]
        spec["nodeSelector"] = {key: rng.choice(value)}
    affinity: dict[str, Any] = {}
    if _maybe(rng, 0.35):
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [_node_term(rng, names) for _ in range(rng.randint(1, 2))]
            }
        }
    if _maybe(rng, 0.2):
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": _selector(rng), "topologyKey": rng.choice((HOST, ZONE))}
            ]
        }
    if _maybe(rng, 0.25):
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": _selector(rng), "topologyKey": rng.choice((HOST, ZONE))}
            ]
        }
    if affinity:
        spec["affinity"] = affinity
    tolerations: list[dict[str, Any]] = []
    for t in TAINTS:
        if _maybe(rng, 0.3):
            tol: dict[str, Any] = {"key": t["key"], "effect": t["effect"]}
            if "value" in t and _maybe(rng, 0.7):
                tol.update(operator="Equal", value=t["value"])
            else:
                tol["operator"] = "Exists"
            if _maybe(rng, 0.2):
                del tol["effect"]
            tolerations.append(tol)
    if tolerations:
        spec["tolerations"] = tolerations
    if _maybe(rng, 0.3):
        constraint: dict[str, Any] = {
            "maxSkew": rng.choice((1, 1, 2)),
            "topologyKey": rng.choice((ZONE, HOST)),
            "whenUnsatisfiable": rng.choice(("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway")),
            "labelSelector": {"matchLabels": {"app": app}},
        }
        if constraint["whenUnsatisfiable"] == "DoNotSchedule" and _maybe(rng, 0.3):
            constraint["minDomains"] = rng.randint(2, 4)
        if _maybe(rng, 0.3):
            constraint["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
        if _maybe(rng, 0.3):
            constraint["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
        spec["topologySpreadConstraints"] = [constraint]
    pc = rng.choice((None, None, None, "unstick-low", "unstick-high"))
    if pc:
        spec["priorityClassName"] = pc
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"c{case}-p{i}", "labels": {"app": app}},
        "spec": spec,
    }


def make_case(rng: random.Random, index: int, probes: int) -> Case:
    nodes = [make_node(rng, index, i) for i in range(rng.randint(2, 6))]
    existing = [make_existing(rng, index, i, nodes) for i in range(rng.randint(0, 6))]
    case = Case(index, nodes, existing)
    case.probes = [make_probe(rng, index, i, nodes) for i in range(probes)]
    return case
