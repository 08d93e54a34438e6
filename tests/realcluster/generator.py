"""Random clusters and pending pods for the differential fidelity run.

A :class:`Case` is a cluster (Nodes with labels, taints of every effect,
capacity with extended resources, cordons; existing pods bound to nodes with
requests, host ports, labels, priorities and sometimes required anti-affinity)
and a list of probe pods, each scheduled against it (nodeSelector, node
affinity with every operator and matchFields, tolerations, pod (anti-)affinity
over several topology keys, topology spread in both modes with minDomains and
the node inclusion policies, host ports, requests, priority, claims).

The ground a first generator missed (issue 22) is covered too: clusters of
20-120 nodes in pools spread over zones, DaemonSet pods on every node, PDBs over
likely victims, pods stuck terminating (a finalizer holds them), zonal and local
PersistentVolumes with WaitForFirstConsumer and Immediate claims (zone labels in
GA, legacy and ``__`` multi-zone forms), and "in flight" clusters whose pods all
carry a finalizer, so a preemption leaves its victims terminating and its
preemptor nominated while the next probes are judged.

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
PRIORITY_CLASSES = {"unstick-low": 10, "unstick-mid": 500, "unstick-high": 1000}
FINALIZER = "unstick.test/hold"  # nobody removes it but the run's cleanup: pods stay terminating
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
NAMESPACE = "<namespace>"  # set by the run when it creates the objects
SMALL_PROBES = 8
LARGE_PROBES = 16


@dataclass
class Case:
    index: int
    nodes: list[dict[str, Any]]
    existing: list[dict[str, Any]]
    probes: list[dict[str, Any]] = field(default_factory=list)
    # DaemonSets and one pod of each per node (as its controller makes them; bound here).
    daemon_sets: list[dict[str, Any]] = field(default_factory=list)
    daemon_pods: list[dict[str, Any]] = field(default_factory=list)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    # StorageClasses and PersistentVolumes (cluster-scoped), PersistentVolumeClaims.
    storage: list[dict[str, Any]] = field(default_factory=list)
    # Existing pods deleted before the probes: a finalizer holds them terminating.
    terminating: list[str] = field(default_factory=list)
    # Every pod carries the finalizer: a preemption's victims stay, its preemptor stays nominated.
    in_flight: bool = False
    pooled: bool = False


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


def _container(rng: random.Random, req: dict[str, str], host_port: bool, port: int = 8080) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "app", "image": "registry.example/app:1"}
    if req:
        c["resources"] = {"requests": req}
        if GPU in req:
            c["resources"]["limits"] = {GPU: req[GPU]}
    if host_port:
        c["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
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


def make_probe(
    rng: random.Random,
    case: int,
    i: int,
    nodes: list[dict[str, Any]],
    claims: list[str] | None = None,
    pools: list[str] | None = None,
) -> dict[str, Any]:
    names = [n["metadata"]["name"] for n in nodes]
    app = rng.choice(APPS)
    spec: dict[str, Any] = {
        "containers": [_container(rng, _requests(rng, True), _maybe(rng, 0.2), rng.choice((8080, 9100)))],
        "terminationGracePeriodSeconds": 0,
    }
    if claims and _maybe(rng, 0.5):
        chosen = rng.sample(claims, k=min(len(claims), rng.choice((1, 1, 2, 2, 3))))
        if _maybe(rng, 0.05):
            chosen.append(f"c{case}-missing")
        spec["volumes"] = [
            {"name": f"v{j}", "persistentVolumeClaim": {"claimName": c}} for j, c in enumerate(chosen)
        ]
    if pools and _maybe(rng, 0.3):
        spec["nodeSelector"] = {"pool": rng.choice(pools)}
    if _maybe(rng, 0.3):
        key = rng.choice(("disk", ZONE, "accelerator"))
        value = {"disk": ("ssd", "hdd", "nvme"), ZONE: (*ZONES, "zx"), "accelerator": ("gpu", "tpu")}[key]
        spec.setdefault("nodeSelector", {})[key] = rng.choice(value)
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
    pc = rng.choice((None, None, None, "unstick-low", "unstick-mid", "unstick-high"))
    if pc:
        spec["priorityClassName"] = pc
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"c{case}-p{i}", "labels": {"app": app}},
        "spec": spec,
    }


POOL_SHAPES = (
    # (pool, cpu, memory, pods, extended resources, taints)
    ("general", ("4", "8"), ("16Gi", "32Gi"), "110", {}, ()),
    ("compute", ("16", "32"), ("32Gi", "64Gi"), "110", {}, ()),
    ("small", ("2",), ("4Gi", "8Gi"), "20", {}, ()),
    ("gpu", ("8",), ("32Gi",), "110", {GPU: "2"}, (TAINTS[0],)),
    ("spot", ("4",), ("16Gi",), "110", {}, (TAINTS[1],)),
)


def make_pooled_nodes(rng: random.Random, case: int) -> tuple[list[dict[str, Any]], list[str]]:
    """20-120 nodes in 2-4 pools of one shape each, spread round-robin over the zones."""
    shapes = rng.sample(POOL_SHAPES, k=rng.randint(2, 4))
    total = rng.randint(20, 120)
    cuts = sorted(rng.sample(range(1, total), k=len(shapes) - 1))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
    nodes: list[dict[str, Any]] = []
    for (pool, cpus, mems, pods, extra, taints), size in zip(shapes, sizes, strict=True):
        cpu, mem = rng.choice(cpus), rng.choice(mems)
        for j in range(size):
            labels = {ZONE: ZONES[j % len(ZONES)], "pool": pool, "tier": str(rng.randint(1, 9))}
            if extra:
                labels["accelerator"] = "gpu"
            if _maybe(rng, 0.5):
                labels["disk"] = rng.choice(("ssd", "hdd"))
            nodes.append(
                node(
                    f"c{case}-{pool}-{j}",
                    cpu=cpu,
                    memory=mem,
                    pods=pods,
                    extra=dict(extra),
                    labels=labels,
                    taints=[dict(t) for t in taints],
                    unschedulable=_maybe(rng, 0.03),
                )
            )
    return nodes, [shape[0] for shape in shapes]


def make_daemon_sets(
    rng: random.Random, case: int, nodes: list[dict[str, Any]]
) -> tuple[list[Any], list[Any]]:
    """1-2 DaemonSets tolerating everything, and the pod its controller would make for
    each node (nodeAffinity matchFields on the node's name, as
    pkg/controller/daemon/util ReplaceDaemonSetPodNodeNameNodeAffinity writes it),
    created bound to that node."""
    sets: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    for d in range(rng.randint(1, 2)):
        name = f"c{case}-ds{d}"
        labels = {"app": f"agent{d}"}
        req = {"cpu": rng.choice(("50m", "100m", "200m")), "memory": rng.choice(("64Mi", "128Mi", "256Mi"))}
        template_spec: dict[str, Any] = {
            "containers": [_container(rng, req, _maybe(rng, 0.3), 9100)],
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 0,
        }
        pc = rng.choice((None, "unstick-high", "unstick-low"))
        if pc:
            template_spec["priorityClassName"] = pc
        sets.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": name},
                "spec": {
                    "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": template_spec},
                },
            }
        )
        for n in nodes:
            node_name = n["metadata"]["name"]
            spec = {
                **template_spec,
                "nodeName": node_name,
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": [node_name]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            }
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    # ownerReferences (with the DaemonSet's uid) are added once it exists:
                    # daemon_set_of() names it
                    "metadata": {"name": f"{name}-{node_name}", "labels": dict(labels)},
                    "spec": spec,
                }
            )
    return sets, pods


def daemon_set_of(pod: dict[str, Any]) -> str:
    """The DaemonSet a pod of ``make_daemon_sets`` belongs to (its name's prefix)."""
    name: str = pod["metadata"]["name"]
    return name[: name.index("-", name.index("-ds") + 1)]


def make_pdbs(rng: random.Random, case: int, existing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """PDBs over the apps of the existing pods (likely victims), integer minAvailable:
    the disruption controller computes that for bare pods (percentages need a scale)."""
    counts: dict[str, int] = {}
    for p in existing:
        app = p["metadata"]["labels"]["app"]
        counts[app] = counts.get(app, 0) + 1
    pdbs = []
    for app, count in sorted(counts.items()):
        if not _maybe(rng, 0.5):
            continue
        pdbs.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": f"c{case}-pdb-{app}"},
                "spec": {
                    "minAvailable": rng.randint(1, max(1, count)),
                    "selector": {"matchLabels": {"app": app}},
                },
            }
        )
    return pdbs


def make_storage(rng: random.Random, case: int, nodes: list[dict[str, Any]]) -> tuple[list[Any], list[str]]:
    """A WaitForFirstConsumer class with local (hostname) and zonal PVs of distinct sizes
    (upstream picks among equally small volumes in no fixed order), its claims; an
    Immediate class whose claims are pre-bound to PVs carrying zone labels (GA, legacy
    beta, ``__`` multi-zone) and no node affinity -- VolumeZone's ground -- and sometimes
    an Immediate claim no volume serves. Classes are per case, so volumes of earlier
    cases never match. Returns (objects, claim names a probe may mount)."""
    wffc, immediate = f"c{case}-local", f"c{case}-zonal"
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": cls},
            "provisioner": NO_PROVISIONER,
            "volumeBindingMode": mode,
        }
        for cls, mode in ((wffc, "WaitForFirstConsumer"), (immediate, "Immediate"))
    ]
    claims: list[str] = []
    sizes = rng.sample(range(1, 60), k=8)
    for j in range(rng.randint(1, 6)):
        if _maybe(rng, 0.5):
            where = {"key": HOST, "operator": "In", "values": [rng.choice(nodes)["metadata"]["name"]]}
        else:
            where = {"key": ZONE, "operator": "In", "values": rng.sample(ZONES, k=rng.randint(1, 2))}
        objs.append(_pv(f"c{case}-pv{j}", wffc, sizes[j], {}, node_affinity=[where]))
    for j in range(rng.randint(1, 4)):
        name = f"c{case}-wc{j}"
        objs.append(_pvc(name, wffc, rng.randint(1, 50)))
        claims.append(name)
    for j in range(rng.randint(0, 2)):
        name = f"c{case}-zc{j}"
        key = rng.choice((ZONE, ZONE, BETA_ZONE))
        value = rng.choice((*ZONES, "za__zb", "zb__zc", "zx"))
        objs.append(_pv(f"c{case}-zpv{j}", immediate, 10, {key: value}, claim=name))
        objs.append(_pvc(name, immediate, 5))
        claims.append(name)
    if _maybe(rng, 0.3):
        name = f"c{case}-unbound"
        objs.append(_pvc(name, immediate, 5))
        claims.append(name)
    return objs, claims


def label_zones_of(case: Case) -> list[str]:
    """The zone label values of the case's volumes."""
    return [
        v for o in case.storage if o["kind"] == "PersistentVolume" for v in o["metadata"]["labels"].values()
    ]


def _pv(
    name: str,
    cls: str,
    gib: int,
    labels: dict[str, str],
    *,
    node_affinity: list[dict[str, Any]] | None = None,
    claim: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "storageClassName": cls,
        "capacity": {"storage": f"{gib}Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "local" if node_affinity else "hostPath": {"path": f"/mnt/{name}"},
    }
    if node_affinity:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": node_affinity}]}}
    if claim:
        spec["claimRef"] = {"namespace": NAMESPACE, "name": claim}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def _pvc(name: str, cls: str, gib: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": cls,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": f"{gib}Gi"}},
        },
    }


def make_case(rng: random.Random, index: int, probes: int | None = None) -> Case:
    """One cluster: small (2-6 nodes, ``SMALL_PROBES`` probes) or, one time in ten,
    pooled (20-120 nodes, ``LARGE_PROBES`` probes); ``probes`` overrides the count."""
    pooled = _maybe(rng, 0.1)
    pools: list[str] = []
    if pooled:
        nodes, pools = make_pooled_nodes(rng, index)
        existing = [
            make_existing(rng, index, i, nodes) for i in range(rng.randint(len(nodes) // 4, len(nodes) // 2))
        ]
    else:
        nodes = [make_node(rng, index, i) for i in range(rng.randint(2, 6))]
        existing = [make_existing(rng, index, i, nodes) for i in range(rng.randint(0, 6))]
    case = Case(index, nodes, existing, pooled=pooled)
    if _maybe(rng, 0.8 if pooled else 0.4):
        case.daemon_sets, case.daemon_pods = make_daemon_sets(rng, index, nodes)
    if existing and _maybe(rng, 0.5):
        case.pdbs = make_pdbs(rng, index, existing)
    claims: list[str] = []
    if _maybe(rng, 0.4):
        case.storage, claims = make_storage(rng, index, nodes)
    case.in_flight = _maybe(rng, 0.5)
    if existing and _maybe(rng, 0.3):
        case.terminating = [
            p["metadata"]["name"] for p in rng.sample(existing, k=min(len(existing), rng.randint(1, 3)))
        ]
    held = set(case.terminating)
    for p in [*existing, *case.daemon_pods]:
        if case.in_flight or p["metadata"]["name"] in held:
            p["metadata"]["finalizers"] = [FINALIZER]
    count = probes if probes is not None else (LARGE_PROBES if pooled else SMALL_PROBES)
    case.probes = [make_probe(rng, index, i, nodes, claims, pools) for i in range(count)]
    if case.in_flight:
        # Make preemptions likely, so that later probes meet them in flight: low-priority
        # existing pods, probes of middle or high priority.
        for p in existing:
            if _maybe(rng, 0.7):
                p["spec"]["priorityClassName"] = "unstick-low"
        for p in case.probes:
            if _maybe(rng, 0.5):
                p["spec"]["priorityClassName"] = rng.choice(("unstick-mid", "unstick-mid", "unstick-high"))
    return case
