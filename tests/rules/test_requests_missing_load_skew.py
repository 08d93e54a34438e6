"""requests-missing-load-skew: edge cases beyond the golden scenarios (seed 003 lives in
tests/scenarios/requests-missing-load-skew/)."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.ingest import parse_time
from analyzers.rules import requests_missing_load_skew
from analyzers.rules.context import RuleContext, Thresholds
from analyzers.snapshot import ClusterSnapshot
from tests.core.helpers import deployment, node, pod, replicaset

NOW = parse_time("2026-11-18T03:12:00Z") or 0.0


def node_metrics(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "NodeMetrics",
        "metadata": {"name": name},
        "timestamp": "2026-11-18T03:11:40Z",
        "window": "20s",
        "usage": {"cpu": cpu, "memory": memory},
    }


def pod_metrics(name: str, cpu: str, memory: str, containers: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "PodMetrics",
        "metadata": {"name": name, "namespace": "default"},
        "timestamp": "2026-11-18T03:11:31Z",
        "window": "15s",
        "containers": [{"name": f"c{i}", "usage": {"cpu": cpu, "memory": memory}} for i in range(containers)],
    }


def cluster(
    *,
    app_requests: dict[str, str] | None,
    app_usage: tuple[str, str] = ("2800m", "9Gi"),
    hot_usage: tuple[str, str] = ("3400m", "11Gi"),
    containers: int = 1,
    metrics: bool = True,
) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [node("hot", cpu="4", memory="16Gi"), node("cool", cpu="4", memory="16Gi")]
    objs += [
        deployment("heavy", replicas=1, labels={"app": "heavy"}),
        replicaset("heavy-7f", "heavy", labels={"app": "heavy"}),
    ]
    heavy = pod(
        "heavy-7f-a",
        node_name="hot",
        labels={"app": "heavy"},
        owner=("ReplicaSet", "heavy-7f"),
        requests=app_requests,
    )
    if containers > 1:
        heavy["spec"]["containers"] = [
            dict(heavy["spec"]["containers"][0], name=f"c{i}") for i in range(containers)
        ]
    objs.append(heavy)
    objs.append(pod("busy-1", node_name="cool", requests={"cpu": "1500m", "memory": "4Gi"}))
    if metrics:
        objs += [
            node_metrics("hot", *hot_usage),
            node_metrics("cool", "1200m", "3Gi"),
            pod_metrics("heavy-7f-a", *app_usage, containers=containers)
            if containers == 1
            else pod_metrics("heavy-7f-a", "1400m", "4608Mi", containers=containers),
            pod_metrics("busy-1", "1100m", "2500Mi"),
        ]
    return objs


def run(objs: list[dict[str, Any]], thresholds: Thresholds | None = None) -> list[Any]:
    snap = ClusterSnapshot.from_objects(objs)
    ctx = RuleContext(snapshot=snap, now=NOW, thresholds=thresholds or Thresholds())
    return requests_missing_load_skew.analyze(ctx)


def test_no_metrics_no_word() -> None:
    assert run(cluster(app_requests=None, metrics=False)) == []


def test_requests_without_usage_skew_are_quiet() -> None:
    assert run(cluster(app_requests={"cpu": "2800m", "memory": "9Gi"})) == []


def test_cool_cluster_is_quiet() -> None:
    assert run(cluster(app_requests=None, app_usage=("800m", "2Gi"), hot_usage=("1400m", "4Gi"))) == []


def test_far_too_small_requests_count() -> None:
    [finding] = run(cluster(app_requests={"cpu": "200m", "memory": "512Mi"}))
    assert finding.subject.name == "heavy" and finding.subject.kind == "Deployment"
    assert "requests 200m cpu" in finding.explanation
    assert "too little" in finding.title
    [sized] = [r for r in finding.remedies if r.command.startswith("kubectl set resources")]
    assert sized.verified, sized.verification
    assert "--requests=cpu=" in sized.command and "deployment/heavy -n default" in sized.command
    # 2800m * 1.25 = 3500m; the hot node then requests what it really uses.
    assert "cpu=3500m" in sized.command


def test_requests_that_no_longer_fit_are_not_verified() -> None:
    # The pod uses almost the whole node; even without headroom its requests would not fit next to busy pods.
    objs = cluster(app_requests=None, app_usage=("3900m", "9Gi"), hot_usage=("3990m", "11Gi"))
    objs.append(pod("other", node_name="hot", requests={"cpu": "300m"}))
    objs.append(pod("other2", node_name="cool", requests={"cpu": "2400m"}))
    [finding] = run(objs)
    [sized] = [r for r in finding.remedies if r.command.startswith("kubectl set resources")]
    assert not sized.verified
    assert "would not fit" in sized.verification


def test_several_containers_are_not_verified_per_container() -> None:
    [finding] = run(cluster(app_requests=None, containers=2))
    [sized] = [r for r in finding.remedies if r.command.startswith("kubectl set resources")]
    assert not sized.verified
    assert "-c <container>" in sized.yaml


def test_limit_range_is_a_floor_and_honestly_unverified() -> None:
    [finding] = run(cluster(app_requests=None))
    [lr] = [r for r in finding.remedies if r.kind == "manifest"]
    assert not lr.verified
    assert "kind: LimitRange" in lr.yaml and "defaultRequest" in lr.yaml
    assert "cpu: 100m" in lr.yaml  # no other request-less pods: the floor


def test_small_unrequested_pods_do_not_count() -> None:
    # The node is hot because of requested pods; the request-less pod is tiny.
    objs = cluster(app_requests=None, app_usage=("100m", "128Mi"), hot_usage=("3400m", "11Gi"))
    assert run(objs) == []


def test_many_small_requestless_pods_of_one_workload_add_up() -> None:
    objs: list[dict[str, Any]] = [node("hot", cpu="4", memory="16Gi"), node("cool", cpu="4", memory="16Gi")]
    objs += [
        deployment("nginx", replicas=12, labels={"app": "nginx"}),
        replicaset("nginx-5b", "nginx", labels={"app": "nginx"}),
    ]
    for i in range(12):
        objs.append(
            pod(f"nginx-5b-{i}", node_name="hot", labels={"app": "nginx"}, owner=("ReplicaSet", "nginx-5b"))
        )
        objs.append(pod_metrics(f"nginx-5b-{i}", "250m", "300Mi"))
    objs += [node_metrics("hot", "3300m", "5Gi"), node_metrics("cool", "400m", "2Gi")]
    [finding] = run(objs)
    assert finding.subject.name == "nginx"
    assert "and 7 more pod(s) like them" in finding.explanation
    [sized] = [r for r in finding.remedies if r.command.startswith("kubectl set resources")]
    # 250m * 1.25 rounds to 350m: 12 of them exceed the node; at usage (250m -> 300m) they fit.
    assert sized.verified and "cpu=300m" in sized.command
    assert "every pod still fits where it runs (hot 3600m/4 cpu" in sized.verification


def test_seed_003_predicts_the_next_pods_and_verifies_the_remedy_by_re_predicting() -> None:
    """Seed 003's dump: the next 20 request-less pods are placed by the Score phase
    today and after the proposed requests; both distributions are in the evidence
    and the requests remedy is verified only because fewer land on the hot nodes."""
    from pathlib import Path

    import yaml

    folder = (
        Path(__file__).parents[1]
        / "scenarios"
        / "requests-missing-load-skew"
        / "seed-003-cassandra-no-requests"
    )
    objs: list[dict[str, Any]] = []
    for f in sorted(folder.glob("*.yaml")):
        if f.name == "expected.yaml":
            continue
        for doc in yaml.safe_load_all(f.read_text()):
            objs.extend(doc.get("items", [doc]) if isinstance(doc, dict) else [])
    snap = ClusterSnapshot.from_objects(objs)
    ctx = RuleContext(snapshot=snap, now=NOW, thresholds=Thresholds())
    (finding,) = [f for f in requests_missing_load_skew.analyze(ctx) if f.subject.name == "cassandra"]
    pred = finding.evidence["predicted_placement"]
    assert pred["hot_nodes"] == ["node2", "node3"]
    assert sum(pred["before"].values()) == 20 and sum(pred["after"].values()) == 20
    before = pred["before"]["node2"] + pred["before"]["node3"]
    after = pred["after"]["node2"] + pred["after"]["node3"]
    assert pred["on_hot_nodes_before"] == before and pred["on_hot_nodes_after"] == after
    assert after < before
    requests_remedy = next(r for r in finding.remedies if r.command.startswith("kubectl set resources"))
    assert requests_remedy.verified
    assert f"{before:g} \u2192 {after:g} on node2 and node3" in requests_remedy.verification
    assert f"Predicted: {before:g} of the next 20 pods without requests" in finding.explanation


def test_large_clusters_are_not_predicted_and_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requests_missing_load_skew, "PREDICT_MAX_NODES", 1)
    snap = ClusterSnapshot.from_objects(cluster(app_requests=None))
    ctx = RuleContext(snapshot=snap, now=NOW, thresholds=Thresholds())
    (finding,) = requests_missing_load_skew.analyze(ctx)
    assert "predicted_placement" not in finding.evidence
    assert "not predicted here for 2 nodes" in finding.explanation
