"""Seed 003 replayed on the real control plane: the real kube-scheduler decides
where 20 request-less replicas land, before and after requests-missing-load-skew's
own remedy, and every binding must be one unstick predicted.

The cluster is the seed's (tests/scenarios/requests-missing-load-skew/
seed-003-cassandra-no-requests): its five nodes (labels, allocatable), its
pods bound where the seed shows them (with their requests), and Cassandra as a
real StatefulSet of two request-less pods on the ``role=cassandra`` nodes
(node2, node3). Two changes from the seed's manifests, both outside what
scores new pods: the StatefulSet gets a required pod anti-affinity on
hostname, so the real scheduler reproduces the seed's one-Cassandra-per-node
layout (and keeps it through the rollout), and no volumeClaimTemplates (the
test cluster has no provisioner). Real usage cannot come from fake kubelets:
the seed's metrics.k8s.io objects are added to the snapshot the rule reads.

1. The rule runs on the snapshot read back from the API server (plus the
   metrics) and predicts the next 20 request-less pods today and after its
   proposed requests.
2. A Deployment without requests is scaled 1 -> 20, one replica at a time:
   before each step the cluster is re-read and unstick predicts the next pod
   (``unstick place``'s own target: the Deployment's newest ReplicaSet's
   template); the real binding must be in the predicted ``top`` set, and the
   real distribution within the rule's predicted support.
3. The rule's remedy command (``kubectl set resources statefulset/cassandra``)
   is run with the real kubectl; the StatefulSet controller rolls Cassandra;
   the Deployment is scaled to 0 and again 1 -> 20, compared likewise with
   the rule's "after" prediction.
"""

from __future__ import annotations

import copy
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from agent.commands.place import target_pod
from analyzers.rules import requests_missing_load_skew as rule
from analyzers.rules.context import RuleContext
from analyzers.simulator.scoring.placement import attempt
from analyzers.snapshot import ClusterSnapshot
from tests.realcluster.conftest import Cluster
from tests.realcluster.harness import KUBE_VERSION, node
from tests.scenarios.test_golden import load_case

pytestmark = pytest.mark.realcluster

SEED = (
    Path(__file__).parents[1] / "scenarios" / "requests-missing-load-skew" / "seed-003-cassandra-no-requests"
)
REPLICAS = rule.PREDICTED_REPLICAS
APP = "nginx"
HOT = ("node2", "node3")


def _seed() -> list[dict[str, Any]]:
    objects, _ = load_case(SEED)
    return objects


def _nodes(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for obj in objects:
        if obj["kind"] != "Node":
            continue
        alloc = obj["status"]["allocatable"]
        name = obj["metadata"]["name"]
        out.append(
            node(
                name,
                cpu=alloc["cpu"],
                memory=alloc["memory"],
                pods=alloc["pods"],
                labels=obj["metadata"]["labels"],
            )
        )
    return out


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": c["name"], "image": c["image"], "resources": copy.deepcopy(c.get("resources") or {})}
        for c in spec["containers"]
    ]


def _bound_pods(objects: list[dict[str, Any]], ns: str) -> list[dict[str, Any]]:
    """The seed's pods other than Cassandra's, bound where the seed shows them."""
    out = []
    for obj in objects:
        if obj["kind"] != "Pod" or obj["metadata"]["name"].startswith("cassandra-"):
            continue
        spec = obj["spec"]
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": obj["metadata"]["name"],
                    "namespace": ns,
                    "labels": obj["metadata"]["labels"],
                },
                "spec": {
                    "nodeName": spec["nodeName"],
                    "containers": _containers(spec),
                    "tolerations": spec.get("tolerations") or [],
                },
            }
        )
    return out


def _cassandra(objects: list[dict[str, Any]], ns: str) -> dict[str, Any]:
    sts = next(o for o in objects if o["kind"] == "StatefulSet")
    spec = sts["spec"]
    labels = spec["selector"]["matchLabels"]
    template = spec["template"]["spec"]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": sts["metadata"]["name"], "namespace": ns},
        "spec": {
            "replicas": spec["replicas"],
            "serviceName": spec["serviceName"],
            "podManagementPolicy": spec["podManagementPolicy"],
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": _containers(template),
                    "nodeSelector": template["nodeSelector"],
                    "affinity": {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {"matchLabels": labels},
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        }
                    },
                },
            },
        },
    }


def _metrics(objects: list[dict[str, Any]], ns: str) -> list[dict[str, Any]]:
    out = []
    for obj in objects:
        if obj["kind"] in ("NodeMetrics", "PodMetrics"):
            obj = copy.deepcopy(obj)
            if obj["kind"] == "PodMetrics":
                obj["metadata"]["namespace"] = ns
            out.append(obj)
    return out


def _read(cluster: Cluster, metrics: list[dict[str, Any]]) -> ClusterSnapshot:
    """The cluster as the API server shows it now (plus the seed's metrics)."""
    ns = cluster.ns
    objects: list[dict[str, Any]] = []
    for path, api_version, kind in (
        ("/api/v1/nodes", "v1", "Node"),
        ("/api/v1/pods", "v1", "Pod"),
        ("/api/v1/namespaces", "v1", "Namespace"),
        (f"/apis/apps/v1/namespaces/{ns}/deployments", "apps/v1", "Deployment"),
        (f"/apis/apps/v1/namespaces/{ns}/replicasets", "apps/v1", "ReplicaSet"),
        (f"/apis/apps/v1/namespaces/{ns}/statefulsets", "apps/v1", "StatefulSet"),
    ):
        for item in cluster.api.get(path)["items"]:
            item["apiVersion"], item["kind"] = api_version, kind
            objects.append(item)
    return ClusterSnapshot.from_objects([*objects, *metrics], kube_version=KUBE_VERSION)


def _app_pods(cluster: Cluster) -> list[dict[str, Any]]:
    items = cluster.api.get(f"/api/v1/namespaces/{cluster.ns}/pods", labelSelector=f"app={APP}")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def _wait(what: str, ready: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _scale(cluster: Cluster, replicas: int) -> None:
    cluster.api.patch(
        f"/apis/apps/v1/namespaces/{cluster.ns}/deployments/{APP}/scale",
        {"spec": {"replicas": replicas}},
        kind="merge-patch",
    )


def _scale_one_by_one(cluster: Cluster, metrics: list[dict[str, Any]]) -> tuple[dict[str, int], list[str]]:
    """Scale the Deployment 1 -> REPLICAS; (real replicas per node, bindings outside the prediction)."""
    seen: dict[str, str] = {}
    outside: list[str] = []
    for k in range(1, REPLICAS + 1):
        snap = _read(cluster, metrics)
        step = attempt(snap, target_pod(snap, f"{cluster.ns}/deploy/{APP}"), kube_version=KUBE_VERSION)
        _scale(cluster, k)
        pods = _wait(
            f"replica {k} of {APP} bound",
            lambda k=k: (
                lambda ps: ps if len(ps) == k and all(p["spec"].get("nodeName") for p in ps) else None
            )(_app_pods(cluster)),
        )
        new = [p for p in pods if p["metadata"]["name"] not in seen]
        assert len(new) == 1, [p["metadata"]["name"] for p in new]
        where = new[0]["spec"]["nodeName"]
        seen[new[0]["metadata"]["name"]] = where
        if where not in step.top:
            outside.append(f"replica {k}: bound to {where}, predicted {list(step.top)}")
        time.sleep(0.6)  # past OpportunisticBatching's 500 ms window for same-signature pods
    counts: dict[str, int] = {}
    for where in seen.values():
        counts[where] = counts.get(where, 0) + 1
    return counts, outside


def _rolled(cluster: Cluster) -> bool:
    """The StatefulSet controller saw the new template (observedGeneration) and both
    Cassandra pods are re-created with requests, bound and Ready: a status read before
    the controller observed the change would still say "2 updated, 2 ready"."""
    ns = cluster.ns
    sts = cluster.api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/cassandra")
    status = sts.get("status") or {}
    if status.get("observedGeneration", 0) < sts["metadata"]["generation"]:
        return False
    if status.get("currentRevision") != status.get("updateRevision") or status.get("readyReplicas") != 2:
        return False
    labels = ",".join(f"{k}={v}" for k, v in sts["spec"]["selector"]["matchLabels"].items())
    pods = cluster.api.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=labels)["items"]
    return len(pods) == 2 and all(
        not p["metadata"].get("deletionTimestamp")
        and p["spec"].get("nodeName")
        and (p["spec"]["containers"][0].get("resources") or {}).get("requests")
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in p["status"].get("conditions") or ()
        )
        for p in pods
    )


def _on_hot(dist: dict[str, Any]) -> float:
    return sum(float(dist.get(n, 0)) for n in HOT)


def test_seed_003_real_placement_before_and_after_the_remedy(cluster: Cluster) -> None:
    t0 = time.monotonic()
    objects = _seed()
    ns = cluster.ns
    metrics = _metrics(objects, ns)
    cluster.nodes(_nodes(objects))
    for pod in _bound_pods(objects, ns):
        cluster.api.create(pod)
    cluster.api.create(_cassandra(objects, ns))
    _wait(
        "cassandra's two pods ready",
        lambda: (
            cluster.api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/cassandra")["status"].get(
                "readyReplicas"
            )
            == 2
        ),
    )

    # 1. The rule, on the cluster read back, predicts today and after its own remedy.
    snap = _read(cluster, metrics)
    [finding] = [
        f for f in rule.analyze(RuleContext(snapshot=snap, now=time.time())) if f.subject.name == "cassandra"
    ]
    predicted = finding.evidence["predicted_placement"]
    [remedy] = [r for r in finding.remedies if r.command.startswith("kubectl set resources")]
    assert remedy.verified, remedy.verification

    # 2. Twenty request-less replicas, one at a time, by the real scheduler.
    cluster.api.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": APP, "namespace": ns},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": APP}},
                "template": {
                    "metadata": {"labels": {"app": APP}},
                    "spec": {"containers": [{"name": APP, "image": "nginx:1.27"}]},
                },
            },
        }
    )
    _wait(
        f"{APP}'s ReplicaSet", lambda: cluster.api.get(f"/apis/apps/v1/namespaces/{ns}/replicasets")["items"]
    )
    before, outside_before = _scale_one_by_one(cluster, metrics)

    # 3. The remedy, as the rule words it, with the real kubectl; the rollout; again.
    cluster.plane.kubectl(*shlex.split(remedy.command)[1:])
    _wait("cassandra rolled with the new requests", lambda: _rolled(cluster), timeout=90)
    _scale(cluster, 0)
    _wait(
        f"{APP} scaled to 0",
        lambda: not cluster.api.get(f"/api/v1/namespaces/{ns}/pods", labelSelector=f"app={APP}")["items"],
    )
    after, outside_after = _scale_one_by_one(cluster, metrics)

    print(
        f"\nseed 003 on the real scheduler ({time.monotonic() - t0:.0f} s): on {'/'.join(HOT)} "
        f"before {_on_hot(before):g} of {REPLICAS} (predicted {predicted['on_hot_nodes_before']:g}), "
        f"after the remedy {_on_hot(after):g} (predicted {predicted['on_hot_nodes_after']:g}); "
        f"real before {dict(sorted(before.items()))}, after {dict(sorted(after.items()))}"
    )
    assert not outside_before and not outside_after, outside_before + outside_after
    # The real distributions lie within the rule's predicted ones (its support).
    assert set(before) <= {n for n, v in predicted["before"].items() if v > 0}, (before, predicted["before"])
    assert set(after) <= {n for n, v in predicted["after"].items() if v > 0}, (after, predicted["after"])
    assert sum(before.values()) == sum(after.values()) == REPLICAS
