"""The seed incidents as objects to create in the real control plane.

Each :class:`Seed` names its Nodes, the objects to create in the test's namespace,
an optional step that makes it stick (e.g. a new image for the rollout), how to
recognise the stuck pod, the message kube-scheduler prints for it (at the release the
tier runs, harness.KUBE_VERSION), the rule unstick must open and the remedy that
unsticks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.realcluster.harness import KUBE_VERSION, node

GPU = "nvidia.com/gpu"
# DynamicResources' PostFilter text for a pod without claims, in front of preemption's:
# ``fwk.NewStatus(fwk.Unschedulable, "no new claims to deallocate")`` in
# pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go from 1.34 (DRA on by
# default) to v1.36.5; v1.37.0 returns ``fwk.NewStatus(fwk.Unschedulable)`` without a reason.
_MINOR = int(KUBE_VERSION.lstrip("v").split(".")[1])
DRA_POSTFILTER = "no new claims to deallocate, " if 34 <= _MINOR <= 36 else ""
ZONE = "topology.kubernetes.io/zone"


def deployment(
    name: str,
    replicas: int,
    pod_spec: dict[str, Any],
    *,
    strategy: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = labels or {"app": name}
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"terminationGracePeriodSeconds": 0, **pod_spec},
        },
    }
    if strategy:
        spec["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}


def container(image: str = "registry.example/app:1", **requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "app", "image": image}
    if requests:
        req = {k.replace("_", "/").replace("nvidia/com", "nvidia.com"): v for k, v in requests.items()}
        c["resources"] = {"requests": req}
        if GPU in req:
            c["resources"]["limits"] = {GPU: req[GPU]}
    return c


@dataclass
class Seed:
    id: str
    nodes: list[dict[str, Any]]
    objects: list[dict[str, Any]]
    stuck_label: dict[str, str]  # labels of the pod that ends up Pending
    message: str  # kube-scheduler's PodScheduled=False message, as Kubernetes' format strings give it
    rule_id: str | None = None
    subject: str | None = None  # the Deployment (or other workload) the finding names
    severity: str = "warning"  # the finding's (critical: a Deployment with no ready pod left)
    remedy_contains: str = ""  # picks the remedy to apply among the finding's verified ones
    stick: list[str] = field(default_factory=list)  # kubectl args (namespace added) that make it stick
    cluster_scoped: list[dict[str, Any]] = field(default_factory=list)
    ready_first: bool = False  # wait for the Deployment's first rollout before ``stick``
    waited: float = 0.0  # analyse as if this many seconds had passed (rules with a time threshold)
    # The remedy adds capacity, which no kubectl command does: the test registers these Nodes
    # instead (the fake kubelet runs them), as a node group scaling up would.
    adds_nodes: list[dict[str, Any]] = field(default_factory=list)
    # -- what the fixture recorder (record_seeds.py) needs beyond the replay tests --
    demo: str = ""  # the demo scenario (agent/demo/scenarios/<demo>) recorded from this seed
    namespace: str = ""  # where the recorder plays it (default: the seed's id)
    stick_fails: bool = False  # ``stick`` exits non-zero by design (a drain that times out on a refusal)
    stick_objects: list[dict[str, Any]] = field(default_factory=list)  # created after ``stick``
    pending: bool = True  # False: nothing is Pending when stuck (pods pile up where they run)
    after_remedy: list[str] = field(default_factory=list)  # kubectl args the remedy says to run next
    # Per-pod usage by ``app`` label, as metrics.k8s.io would report it: the control plane runs no
    # containers and no metrics-server, so the recorder writes PodMetrics/NodeMetrics from these.
    usage: dict[str, dict[str, str]] = field(default_factory=dict)


def seeds() -> list[Seed]:
    plain = [node(f"node-{i}", cpu="4", memory="16Gi") for i in range(9)]
    return [
        Seed(
            id="gpu-rollout-deadlock",
            namespace="vision",
            demo="gpu-rollout-deadlock",
            nodes=[
                *plain,
                node("gpu-node", cpu="8", memory="32Gi", extra={GPU: "1"}, labels={"gpu": "a10g"}),
            ],
            objects=[
                deployment(
                    "tracker",
                    1,
                    {
                        "nodeSelector": {"kubernetes.io/hostname": "gpu-node"},
                        "containers": [
                            container("registry.example/tracker:1", cpu="500m", nvidia_com_gpu="1")
                        ],
                    },
                )
            ],
            stuck_label={"app": "tracker"},
            ready_first=True,
            stick=["set", "image", "deployment/tracker", "app=registry.example/tracker:2"],
            message=(
                "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node "
                f"affinity/selector. {DRA_POSTFILTER}preemption: 0/10 nodes are available: "
                "1 No preemption victims found for incoming pod, 9 Preemption is not helpful for scheduling."
            ),
            severity="critical",
            rule_id="rollout-surge-deadlock",
            subject="tracker",
            remedy_contains="maxSurge: 0",
        ),
        Seed(
            id="node-selector-matches-nothing",
            namespace="ml",
            demo="gpu-selector-typo",
            nodes=[node(f"gpu-{i}", labels={"gpu-type": "a10g"}) for i in range(3)],
            objects=[
                deployment(
                    "embedder",
                    2,
                    {
                        "nodeSelector": {"gpu-typ": "a10g"},
                        "containers": [container(cpu="100m")],
                    },
                )
            ],
            stuck_label={"app": "embedder"},
            message=(
                "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
                f"{DRA_POSTFILTER}preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
            ),
            severity="critical",
            rule_id="node-selector-mismatch",
            subject="embedder",
            remedy_contains="gpu-type: a10g",
        ),
        Seed(
            id="bare-pod-selector-typo",
            nodes=[node(f"gpu-{i}", labels={"gpu-type": "a10g"}) for i in range(3)],
            objects=[
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "notebook", "labels": {"app": "notebook"}},
                    "spec": {
                        "terminationGracePeriodSeconds": 0,
                        "nodeSelector": {"gpu-typ": "a10g"},
                        "containers": [container(cpu="100m")],
                    },
                }
            ],
            stuck_label={"app": "notebook"},
            message=(
                "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
                f"{DRA_POSTFILTER}preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
            ),
            rule_id="node-selector-mismatch",
            subject="notebook",
            # a pod's nodeSelector is immutable: the remedy re-creates the pod with the fix
            remedy_contains="kubectl replace --force",
        ),
        Seed(
            id="untolerated-taint",
            nodes=[
                node(f"pool-{i}", taints=[{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}])
                for i in range(3)
            ],
            objects=[deployment("api", 1, {"containers": [container(cpu="100m")]})],
            stuck_label={"app": "api"},
            message=(
                "0/3 nodes are available: 3 node(s) had untolerated taint(s). "
                f"{DRA_POSTFILTER}preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
            ),
            severity="critical",
            rule_id="untolerated-taint",
            subject="api",
            remedy_contains="tolerations",
        ),
        Seed(
            id="larger-than-any-node",
            nodes=[node(f"m5-{i}", cpu="8", memory="32Gi") for i in range(3)],
            objects=[deployment("trino", 1, {"containers": [container(cpu="12", memory="48Gi")]})],
            stuck_label={"app": "trino"},
            message=(
                "0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory. "
                f"{DRA_POSTFILTER}preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
            ),
            severity="critical",
            rule_id="insufficient-resources",
            subject="trino",
            remedy_contains="--requests=cpu=8,memory=32Gi",
        ),
        Seed(
            id="anti-affinity-more-replicas-than-nodes",
            nodes=[node(f"node-{i}") for i in range(3)],
            objects=[
                deployment(
                    "cart",
                    4,
                    {
                        "affinity": {
                            "podAntiAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "labelSelector": {"matchLabels": {"app": "cart"}},
                                        "topologyKey": "kubernetes.io/hostname",
                                    }
                                ]
                            }
                        },
                        "containers": [container(cpu="100m")],
                    },
                )
            ],
            stuck_label={"app": "cart"},
            message=(
                "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "
                f"{DRA_POSTFILTER}preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
            ),
            rule_id="anti-affinity-infeasible",
            subject="cart",
            remedy_contains="--replicas=3",
        ),
        Seed(
            id="spread-over-a-full-zone",
            nodes=[
                node("a-1", cpu="2", labels={ZONE: "a"}),
                node("b-1", cpu="2", labels={ZONE: "b"}),
                node("c-1", cpu="2", labels={ZONE: "c"}, unschedulable=True),
            ],
            objects=[
                deployment(
                    "web",
                    4,
                    {
                        "topologySpreadConstraints": [
                            {
                                "maxSkew": 1,
                                "topologyKey": ZONE,
                                "whenUnsatisfiable": "DoNotSchedule",
                                "labelSelector": {"matchLabels": {"app": "web"}},
                            }
                        ],
                        "containers": [container(cpu="100m")],
                    },
                )
            ],
            stuck_label={"app": "web"},
            message=(
                "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match pod topology spread "
                f"constraints. {DRA_POSTFILTER}preemption: 0/3 nodes are available: 1 Preemption is "
                "not helpful for scheduling, 2 No preemption victims found for incoming pod."
            ),
            rule_id="topology-spread-infeasible",
            subject="web",
            remedy_contains="whenUnsatisfiable: ScheduleAnyway",
        ),
        Seed(
            id="scheduling-gates",
            nodes=[node("node-0")],
            objects=[
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "gated", "labels": {"app": "gated"}},
                    "spec": {
                        "schedulingGates": [{"name": "example.com/quota"}],
                        "containers": [container(cpu="100m")],
                    },
                }
            ],
            stuck_label={"app": "gated"},
            message="Scheduling is blocked due to non-empty scheduling gates",
            rule_id="scheduling-gated",
            subject="gated",
            remedy_contains='"path":"/spec/schedulingGates"',
            waited=3600.0,  # a gate is normal for a while; the rule speaks up once it has stayed
        ),
        Seed(
            id="pv-in-another-zone",
            nodes=[node("b-1", labels={ZONE: "b"}), node("b-2", labels={ZONE: "b"})],
            cluster_scoped=[
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": "{ns}-data-a"},
                    "spec": {
                        "capacity": {"storage": "10Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "",
                        "persistentVolumeReclaimPolicy": "Retain",
                        "claimRef": {"namespace": "{ns}", "name": "data"},
                        "local": {"path": "/mnt/data"},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}
                                ]
                            }
                        },
                    },
                }
            ],
            objects=[
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "",
                        "volumeName": "{ns}-data-a",
                        "resources": {"requests": {"storage": "10Gi"}},
                    },
                },
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "db", "labels": {"app": "db"}},
                    "spec": {
                        "containers": [container(cpu="100m")],
                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                    },
                },
            ],
            stuck_label={"app": "db"},
            message=(
                "0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity. "
                f"{DRA_POSTFILTER}preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
            ),
            rule_id="volume-binding",
            subject="db",
            remedy_contains="-l topology.kubernetes.io/zone=a",
            adds_nodes=[node("a-1", labels={ZONE: "a"})],
        ),
        Seed(
            id="wait-for-first-consumer-no-usable-node",
            nodes=[node("b-1", labels={ZONE: "b"})],
            cluster_scoped=[
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {"name": "{ns}-local"},
                    "provisioner": "kubernetes.io/no-provisioner",
                    "volumeBindingMode": "WaitForFirstConsumer",
                },
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": "{ns}-local-a"},
                    "spec": {
                        "capacity": {"storage": "10Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "{ns}-local",
                        "local": {"path": "/mnt/a"},
                        "nodeAffinity": {
                            "required": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}
                                ]
                            }
                        },
                    },
                },
            ],
            objects=[
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "scratch"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "{ns}-local",
                        "resources": {"requests": {"storage": "5Gi"}},
                    },
                },
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "etl", "labels": {"app": "etl"}},
                    "spec": {
                        "containers": [container(cpu="100m")],
                        "volumes": [{"name": "s", "persistentVolumeClaim": {"claimName": "scratch"}}],
                    },
                },
            ],
            stuck_label={"app": "etl"},
            message=(
                "0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind. "
                f"{DRA_POSTFILTER}preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
                "scheduling."
            ),
            rule_id="volume-binding",
            subject="etl",
            remedy_contains="claimRef:",
        ),
    ]


# -- seeds only the fixture recorder plays (the demo's storylines) ---------------------------------

EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."


def drain_objects() -> list[dict[str, Any]]:
    """A filler leaving node-3 no room (created first, so the scheduler knows it), then storefront
    (3 x 500m, minAvailable 2), which lands on node-2 as node-1 is cordoned."""
    store = deployment("storefront", 3, {"containers": [container("registry.example/store:1", cpu="500m")]})
    filler = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "batch-filler", "labels": {"app": "filler"}},
        "spec": {
            "nodeName": "node-3",
            "terminationGracePeriodSeconds": 0,
            "containers": [container("registry.example/batch:1", cpu="1600m")],
        },
    }
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "storefront"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "storefront"}}},
    }
    return [filler, store, budget]


DRAIN = ["drain", "node-2", "--ignore-daemonsets"]


def recorder_seeds() -> list[Seed]:
    """The PDB-blocked drain (seed 004) and the Cassandra load skew (seed 003): stories the
    replay tests cover elsewhere (test_seeds.py's drain test) or that leave no pod Pending."""
    no_requests = {
        "nodeSelector": {"role": "cassandra"},
        "containers": [{"name": "cassandra", "image": "registry.example/cassandra:4.1"}],
    }
    cassandra = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "cassandra"},
        "spec": {
            "replicas": 3,
            "serviceName": "cassandra",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "cassandra"}},
            "template": {
                "metadata": {"labels": {"app": "cassandra"}},
                "spec": {"terminationGracePeriodSeconds": 0, **no_requests},
            },
        },
    }
    return [
        Seed(
            id="pdb-blocked-drain",
            namespace="shop",
            demo="pdb-blocked-drain",
            nodes=[
                node("node-1", cpu="2", unschedulable=True),
                node("node-2", cpu="2"),
                node("node-3", cpu="2"),
            ],
            objects=drain_objects(),
            stuck_label={"app": "storefront"},
            ready_first=True,
            # the first eviction passes (1 disruption allowed), its replacement finds no node, the
            # second is refused; kubectl drain retries every 5 s until --timeout
            stick=[*DRAIN, "--timeout=10s"],
            stick_fails=True,
            message=(
                "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable. "
                f"{DRA_POSTFILTER}preemption: 0/3 nodes are available: 1 No preemption victims found for incoming "
                "pod, 2 Preemption is not helpful for scheduling."
            ),
            severity="critical",
            rule_id="pdb-blocks-eviction",
            subject="storefront",
            remedy_contains="uncordon node-1",
            after_remedy=[*DRAIN, "--timeout=60s"],  # "then let the drain continue"
        ),
        Seed(
            id="cassandra-load-skew",
            namespace="db",
            demo="cassandra-load-skew",
            # Cassandra's nodes (role=cassandra) beside an app node; the real scheduler spreads the
            # three replicas 2 + 1, and the node with two runs hot while nothing is requested there
            nodes=[
                node("node-1", cpu="4", memory="16Gi", labels={"role": "app"}),
                node("node-2", cpu="4", memory="16Gi", labels={"role": "cassandra"}),
                node("node-3", cpu="4", memory="16Gi", labels={"role": "cassandra"}),
            ],
            objects=[
                deployment(
                    "search",
                    2,
                    {
                        "nodeSelector": {"role": "app"},
                        "containers": [container("registry.example/search:1", cpu="1500m", memory="6Gi")],
                    },
                )
            ],
            ready_first=True,
            stick_objects=[cassandra],
            pending=False,
            stuck_label={"app": "cassandra"},
            message="",
            rule_id="requests-missing-load-skew",
            subject="cassandra",
            remedy_contains="kubectl set resources statefulset/cassandra",
            usage={
                "search": {"cpu": "1200m", "memory": "5Gi"},
                "cassandra": {"cpu": "1500m", "memory": "5Gi"},
            },
        ),
    ]
