"""Synthetic, realistic cluster dumps for benchmarks: N nodes in node pools across
three zones (labels, taints, cordoned nodes as real clusters have them) and M
pods spread over ~W workloads (DaemonSets on every node, Deployments with their
ReplicaSets, StatefulSets, Jobs; requests, tolerations, node selectors,
required anti-affinity and topology spread on some), plus a few pending pods.

As a function: ``generate(nodes=5000, pods=150000, workloads=100)`` returns the
API objects as dicts (what ``kubectl get -o json`` prints). As a script:

    python bench/generate.py --nodes 5000 --pods 150000 -o cluster.json

writes one ``List``. Deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any

Obj = dict[str, Any]

ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
# pool: (share of nodes, cpu, memory Gi, pods, instance type, taints, extra allocatable)
POOLS: dict[str, tuple[float, int, int, int, str, list[Obj], dict[str, str]]] = {
    "general": (0.70, 16, 64, 110, "m6i.4xlarge", [], {}),
    "highmem": (0.15, 16, 128, 110, "r6i.4xlarge", [], {}),
    "gpu": (
        0.05,
        32,
        256,
        110,
        "g5.8xlarge",
        [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        {"nvidia.com/gpu": "4"},
    ),
    "system": (
        0.05,
        8,
        32,
        58,
        "m6i.2xlarge",
        [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}],
        {},
    ),
    "spot": (
        0.05,
        16,
        64,
        110,
        "m6i.4xlarge",
        [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}],
        {},
    ),
}
NAMESPACES = (
    "payments",
    "checkout",
    "search",
    "catalog",
    "identity",
    "analytics",
    "ml",
    "platform",
    "monitoring",
    "batch",
)
DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]
CREATED = "2024-05-01T08:00:00Z"


def _node(i: int, pool: str, rng: random.Random) -> Obj:
    _, cpu, mem, pods, itype, taints, extra = POOLS[pool]
    name = f"ip-10-{i // 250}-{i % 250}-{pool}.eu-west-1.compute.internal"
    zone = ZONES[i % 3]
    alloc = {
        "cpu": f"{cpu * 1000 - 90}m",
        "memory": f"{mem * 1024 - 700}Mi",
        "pods": str(pods),
        "ephemeral-storage": "95551679124",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        **extra,
    }
    capacity = {**alloc, "cpu": str(cpu), "memory": f"{mem}Gi"}
    spec: Obj = {"providerID": f"aws:///{zone}/i-{i:017x}"}
    node_taints = list(taints)
    if rng.random() < 0.01:
        spec["unschedulable"] = True
        node_taints.append(
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": CREATED}
        )
    if node_taints:
        spec["taints"] = node_taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-{i:08d}",
            "creationTimestamp": CREATED,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": itype,
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": zone,
                "failure-domain.beta.kubernetes.io/zone": zone,
                "eks.amazonaws.com/nodegroup": pool,
                "node-pool": pool,
            },
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.29.3"},
        },
    }


def _container(
    name: str, cpu: str, mem: str, extra: dict[str, str] | None = None, ports: list[Obj] | None = None
) -> Obj:
    c: Obj = {
        "name": name,
        "image": f"registry.example.com/{name}:1.4.2",
        "resources": {
            "requests": {"cpu": cpu, "memory": mem, **(extra or {})},
            "limits": {"memory": mem, **(extra or {})},
        },
    }
    if ports:
        c["ports"] = ports
    return c


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    weights = [rng.paretovariate(1.3) for _ in range(parts)]
    scale = total / sum(weights)
    counts = [max(1, int(w * scale)) for w in weights]
    counts[0] += total - sum(counts)
    if counts[0] < 1:  # pragma: no cover - only for tiny totals
        counts[0] = 1
    return counts


def generate(
    nodes: int = 5000,
    pods: int = 150_000,
    workloads: int = 100,
    *,
    pending: int = 20,
    seed: int = 0,
) -> list[Obj]:
    """The objects of one cluster: Namespaces, PriorityClasses, Nodes, workloads and their Pods."""
    rng = random.Random(seed)
    out: list[Obj] = []
    for ns in NAMESPACES:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns, "team": ns}},
            }
        )
    for pc, value in (("critical-service", 100000), ("batch-low", -10)):
        out.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": pc},
                "value": value,
            }
        )

    # Nodes, by pool.
    pool_names = list(POOLS)
    pool_of: list[str] = []
    for pool in pool_names:
        pool_of.extend([pool] * round(POOLS[pool][0] * nodes))
    pool_of = (pool_of + ["general"] * nodes)[:nodes]
    rng.shuffle(pool_of)
    node_objs = [_node(i, pool_of[i], rng) for i in range(nodes)]
    out.extend(node_objs)
    names_by_pool: dict[str, list[str]] = {p: [] for p in pool_names}
    for obj, pool in zip(node_objs, pool_of, strict=True):
        names_by_pool[pool].append(obj["metadata"]["name"])
    all_names = [o["metadata"]["name"] for o in node_objs]
    untainted = names_by_pool["general"] + names_by_pool["highmem"] + names_by_pool["spot"]

    pod_objs: list[Obj] = []

    def add_pods(
        kind: str,
        owner: str,
        ns: str,
        labels: dict[str, str],
        spec: Obj,
        placement: list[str],
        count: int,
        *,
        names: list[str] | None = None,
        start: int = 0,
    ) -> None:
        for k in range(count):
            name = names[k] if names else f"{owner}-{rng.getrandbits(20):05x}{k % 100000:05d}"
            node_name = placement[(start + k) % len(placement)] if placement else ""
            meta: Obj = {
                "name": name,
                "namespace": ns,
                "uid": f"pod-{len(pod_objs):08d}",
                "creationTimestamp": CREATED,
                "labels": labels
                if kind != "StatefulSet"
                else {**labels, "statefulset.kubernetes.io/pod-name": name},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": kind,
                        "name": owner,
                        "uid": f"{owner}-uid",
                        "controller": True,
                    }
                ],
            }
            status: Obj = {
                "phase": "Running",
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "True"},
                ],
            }
            pod_spec = {**spec, "nodeName": node_name} if node_name else spec
            pod_objs.append(
                {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec, "status": status}
            )

    # DaemonSets: one pod per node (system ones tolerate everything).
    daemonsets = [
        ("kube-proxy", "kube-system", _container("kube-proxy", "100m", "64Mi"), True),
        (
            "node-exporter",
            "monitoring",
            _container(
                "node-exporter",
                "50m",
                "64Mi",
                ports=[{"containerPort": 9100, "hostPort": 9100, "protocol": "TCP"}],
            ),
            True,
        ),
        ("fluent-bit", "platform", _container("fluent-bit", "100m", "128Mi"), False),
    ]
    ds_total = 0
    for ds, ns, container, everywhere in daemonsets:
        labels = {
            "app.kubernetes.io/name": ds,
            "controller-revision-hash": "7c9f8d6b5",
            "pod-template-generation": "3",
        }
        tolerations = (
            [{"operator": "Exists"}]
            if everywhere
            else [*DEFAULT_TOLERATIONS, {"key": "spot", "operator": "Exists"}]
        )
        spec = {
            "containers": [container],
            "tolerations": tolerations,
            "schedulerName": "default-scheduler",
            "priorityClassName": "system-node-critical",
            "priority": 2000001000,
        }
        targets = all_names if everywhere else untainted
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": ds, "namespace": ns, "uid": f"{ds}-uid"},
                "spec": {
                    "selector": {"matchLabels": {"app.kubernetes.io/name": ds}},
                    "template": {"metadata": {"labels": labels}, "spec": spec},
                },
                "status": {
                    "desiredNumberScheduled": len(targets),
                    "currentNumberScheduled": len(targets),
                    "numberReady": len(targets),
                },
            }
        )
        add_pods(
            "DaemonSet",
            ds,
            ns,
            labels,
            spec,
            targets,
            len(targets),
            names=[f"{ds}-{k:05x}" for k in range(len(targets))],
        )
        ds_total += len(targets)

    # Other workloads share the remaining pods.
    remaining = max(workloads - len(daemonsets), 1)
    counts = _split(max(pods - ds_total - pending, remaining), remaining, rng)

    def cap(w: int, n: int) -> int:
        placement = (
            names_by_pool["gpu"] if w % 20 == 3 else names_by_pool["highmem"] if w % 7 == 2 else untainted
        )
        if w % 12 == 5:
            n = min(n, 60)
        if w % 20 == 3:
            n = min(n, 2 * len(placement))
        if w % 10 == 4:
            n = min(n, len(placement) // 2)
        return max(n, 1)

    capped = [cap(w, n) for w, n in enumerate(counts)]
    free_slots = [w for w in range(len(counts)) if cap(w, 10**9) == 10**9]
    deficit = sum(counts) - sum(capped)
    for j, w in enumerate(free_slots):
        share = deficit // len(free_slots) + (1 if j < deficit % len(free_slots) else 0)
        capped[w] += share
    counts = capped
    cursor = 0
    for w, replicas in enumerate(counts):
        ns = NAMESPACES[w % len(NAMESPACES)]
        app = f"svc-{w:03d}"
        kind = "StatefulSet" if w % 12 == 5 else "Job" if w % 15 == 7 else "Deployment"
        if kind == "StatefulSet":
            replicas = min(replicas, 60)
        cpu = rng.choice(("50m", "100m", "250m", "500m", "1"))
        mem = rng.choice(("128Mi", "256Mi", "512Mi", "1Gi", "2Gi"))
        extra: dict[str, str] = {}
        placement = untainted
        spec: Obj = {
            "schedulerName": "default-scheduler",
            "tolerations": DEFAULT_TOLERATIONS,
            "terminationGracePeriodSeconds": 30,
        }
        labels: dict[str, str] = {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": ns}
        if w % 20 == 3:  # GPU workload
            extra = {"nvidia.com/gpu": "1"}
            placement = names_by_pool["gpu"]
            spec["tolerations"] = [
                *DEFAULT_TOLERATIONS,
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ]
            spec["nodeSelector"] = {"node-pool": "gpu"}
            replicas = min(replicas, 2 * len(placement))
        elif w % 7 == 2:
            spec["nodeSelector"] = {"node-pool": "highmem"}
            placement = names_by_pool["highmem"]
        if w % 10 == 4:
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": app}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            }
            replicas = min(replicas, len(placement) // 2)
        if w % 10 == 6:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": app}},
                }
            ]
        if w % 9 == 1:
            spec["priorityClassName"] = "critical-service"
            spec["priority"] = 100000
        if kind == "Job":
            spec["priorityClassName"] = "batch-low"
            spec["priority"] = -10
            spec["restartPolicy"] = "Never"
        spec["containers"] = [_container(app, cpu, mem, extra)]
        owner = app
        if kind == "Deployment":
            rs = f"{app}-6d4f9b7c8"
            labels = {**labels, "pod-template-hash": "6d4f9b7c8"}
            template = {"metadata": {"labels": labels}, "spec": spec}
            out.append(
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": app, "namespace": ns, "uid": f"{app}-d-uid", "generation": 1},
                    "spec": {
                        "replicas": replicas,
                        "selector": {"matchLabels": {"app.kubernetes.io/name": app}},
                        "template": template,
                    },
                    "status": {
                        "replicas": replicas,
                        "readyReplicas": replicas,
                        "availableReplicas": replicas,
                        "updatedReplicas": replicas,
                    },
                }
            )
            out.append(
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {
                        "name": rs,
                        "namespace": ns,
                        "uid": f"{rs}-uid",
                        "annotations": {"deployment.kubernetes.io/revision": "1"},
                        "ownerReferences": [
                            {
                                "apiVersion": "apps/v1",
                                "kind": "Deployment",
                                "name": app,
                                "uid": f"{app}-d-uid",
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {
                        "replicas": replicas,
                        "selector": {
                            "matchLabels": {"app.kubernetes.io/name": app, "pod-template-hash": "6d4f9b7c8"}
                        },
                        "template": template,
                    },
                    "status": {"replicas": replicas, "readyReplicas": replicas},
                }
            )
            kind, owner = "ReplicaSet", rs
        elif kind == "StatefulSet":
            out.append(
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "metadata": {"name": app, "namespace": ns, "uid": f"{app}-uid"},
                    "spec": {
                        "replicas": replicas,
                        "serviceName": app,
                        "selector": {"matchLabels": {"app.kubernetes.io/name": app}},
                        "template": {"metadata": {"labels": labels}, "spec": spec},
                    },
                    "status": {"replicas": replicas, "readyReplicas": replicas},
                }
            )
        else:
            out.append(
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": app, "namespace": ns, "uid": f"{app}-uid"},
                    "spec": {
                        "parallelism": replicas,
                        "template": {"metadata": {"labels": labels}, "spec": spec},
                    },
                    "status": {"active": replicas},
                }
            )
        names = [f"{app}-{k}" for k in range(replicas)] if kind == "StatefulSet" else None
        add_pods(kind, owner, ns, labels, spec, placement, replicas, names=names, start=cursor)
        cursor += replicas

    # Pending pods: a GPU pod asking for more than any node has, and pods of a
    # Deployment pinned to a pool that does not exist.
    for k in range(pending):
        ns = NAMESPACES[k % len(NAMESPACES)]
        spec = {
            "schedulerName": "default-scheduler",
            "tolerations": DEFAULT_TOLERATIONS,
            "containers": [_container("pending", "2", "4Gi", {"nvidia.com/gpu": "8"} if k % 2 else None)],
        }
        if not k % 2:
            spec["nodeSelector"] = {"node-pool": "arm64"}
        pod_objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"pending-{k}",
                    "namespace": ns,
                    "uid": f"pending-{k}",
                    "creationTimestamp": CREATED,
                    "labels": {"app.kubernetes.io/name": "pending"},
                },
                "spec": spec,
                "status": {
                    "phase": "Pending",
                    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
                },
            }
        )
    out.extend(pod_objs)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--workloads", type=int, default=100)
    parser.add_argument("--pending", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    items = generate(args.nodes, args.pods, args.workloads, pending=args.pending, seed=args.seed)
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    if args.output == "-":
        json.dump(doc, sys.stdout)
    else:
        with open(args.output, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
    print(
        f"{len(items)} objects ({sum(1 for o in items if o['kind'] == 'Pod')} pods, "
        f"{sum(1 for o in items if o['kind'] == 'Node')} nodes)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
