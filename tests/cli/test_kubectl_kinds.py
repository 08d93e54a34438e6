"""`kubectl unstick` names every workload kind unstick analyses, in every spelling kubectl
accepts (kind, plural, short name, ``<resource>.<group>``), against the fake API through
the real kubernetes-asyncio client; each kind reads only what it needs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.commands.kubectl import PluginError, label_selector, parse_target
from agent.fakecluster import FakeCluster
from tests.cli.test_kubectl_plugin import PLUGIN, run

NODES = Path(__file__).parents[1] / "scenarios" / "scheduler-silent" / "scheduler-name-typo" / "nodes.yaml"
NS = "ml"


@pytest.mark.parametrize(
    ("word", "kind"),
    [
        ("job/x", "Job"),
        ("jobs/x", "Job"),
        ("jobs.batch/x", "Job"),
        ("cronjob/x", "CronJob"),
        ("cj/x", "CronJob"),
        ("cronjobs.batch/x", "CronJob"),
        ("sts/x", "StatefulSet"),
        ("statefulset.apps/x", "StatefulSet"),
        ("statefulsets/x", "StatefulSet"),
        ("ds/x", "DaemonSet"),
        ("daemonsets.apps/x", "DaemonSet"),
        ("rs/x", "ReplicaSet"),
        ("replicaset/x", "ReplicaSet"),
        ("rc/x", "ReplicationController"),
        ("replicationcontrollers/x", "ReplicationController"),
        ("pdb/x", "PodDisruptionBudget"),
        ("poddisruptionbudgets.policy/x", "PodDisruptionBudget"),
        ("deployments.apps/x", "Deployment"),
        ("deployments.v1.apps/x", "Deployment"),
        ("Deployment/x", "Deployment"),
        ("po/x", "Pod"),
        ("no/x", "Node"),
    ],
)
def test_every_spelling(word: str, kind: str) -> None:
    assert (parse_target([word]).kind, parse_target([word]).name) == (kind, "x")
    assert parse_target([word.split("/")[0], "x"]).kind == kind


@pytest.mark.parametrize("word", ["svc/x", "jobs.apps/x", "deployment.batch/x", "cronjob/"])
def test_what_kubectl_would_refuse(word: str) -> None:
    with pytest.raises(PluginError):
        parse_target([word])


def test_label_selector_in_the_api_servers_syntax() -> None:
    rc = {"kind": "ReplicationController", "spec": {"selector": {"app": "web", "tier": "fe"}}}
    assert label_selector(rc) == "app=web,tier=fe"
    sts = {
        "kind": "StatefulSet",
        "spec": {
            "selector": {
                "matchLabels": {"app": "db"},
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a", "b"]},
                    {"key": "canary", "operator": "DoesNotExist"},
                    {"key": "gpu", "operator": "Exists"},
                    {"key": "tier", "operator": "NotIn", "values": ["x"]},
                ],
            }
        },
    }
    assert label_selector(sts) == "app=db,zone in (a,b),!canary,gpu,tier notin (x)"
    assert label_selector({"kind": "Job", "spec": {}}) is None


_GROUPS = {
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicaSet": "apps/v1",
    "ReplicationController": "v1",
}


def _pod(name: str, owner_kind: str, owner: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": labels,
            "creationTimestamp": "2026-11-21T09:00:00Z",
            "ownerReferences": [
                {
                    "apiVersion": _GROUPS[owner_kind],
                    "kind": owner_kind,
                    "name": owner,
                    "uid": f"uid-{owner}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "64"}}}],
        },
        "status": {"phase": "Pending"},
    }


def _workload(kind: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    selector: dict[str, Any] = (
        dict(labels) if kind == "ReplicationController" else {"matchLabels": dict(labels)}
    )
    template = {
        "metadata": {"labels": dict(labels)},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    spec: dict[str, Any] = {"selector": selector, "template": template}
    if kind in ("StatefulSet", "ReplicaSet", "ReplicationController"):
        spec["replicas"] = 2
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {
        "apiVersion": _GROUPS[kind],
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-11-21T09:00:00Z",
        },
        "spec": spec,
    }


def _objects(kind: str) -> tuple[list[dict[str, Any]], str]:
    """Nodes of 7910m cpu, the target workload with two pods asking 64 cpu each, and a
    decoy workload of another kind in the same namespace (stuck too) that the target must
    not report. Returns (objects, the kind findings name)."""
    nodes = yaml.safe_load(NODES.read_text())["items"]
    objects: list[dict[str, Any]] = copy.deepcopy(nodes)
    labels = {"app": "target"}
    if kind == "CronJob":
        cron = {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "target", "namespace": NS, "uid": "uid-target"},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {}}}},
        }
        job = _workload("Job", "target-29012345", {"batch.kubernetes.io/job-name": "target-29012345"})
        job["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": "target",
                "uid": "uid-target",
                "controller": True,
            }
        ]
        pods = [
            _pod(
                f"target-29012345-{i}",
                "Job",
                "target-29012345",
                {"batch.kubernetes.io/job-name": "target-29012345"},
            )
            for i in range(2)
        ]
        objects += [cron, job, *pods]
        named = "Job"
    else:
        objects.append(_workload(kind, "target", labels))
        objects += [_pod(f"target-{i}", kind, "target", labels) for i in range(2)]
        named = kind
    decoy_kind = "Job" if kind != "Job" else "StatefulSet"
    objects.append(_workload(decoy_kind, "decoy", {"app": "decoy"}))
    objects += [_pod(f"decoy-{i}", decoy_kind, "decoy", {"app": "decoy"}) for i in range(2)]
    return objects, named


@pytest.mark.parametrize(
    ("word", "kind"),
    [
        ("job/target", "Job"),
        ("jobs.batch/target", "Job"),
        ("sts/target", "StatefulSet"),
        ("statefulset.apps/target", "StatefulSet"),
        ("ds/target", "DaemonSet"),
        ("rs/target", "ReplicaSet"),
        ("rc/target", "ReplicationController"),
        ("cronjob/target", "CronJob"),
    ],
)
async def test_each_workload_kind_is_diagnosed_live(tmp_path: Path, word: str, kind: str) -> None:
    objects, named = _objects(kind)
    cluster = FakeCluster()
    for obj in objects:
        cluster.apply(obj)
    await cluster.start()
    try:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig", context="fake")
        code, out, err = await run(PLUGIN, word, "-n", NS, "--kubeconfig", str(kubeconfig), "-o", "json")
        assert code == 0, err
        report = json.loads(out)
        subjects = {(f["subject"]["kind"], f["subject"]["name"]) for f in report["findings"]}
        assert subjects, report
        assert all(k == named and n.startswith("target") for k, n in subjects), subjects
        [finding] = [f for f in report["findings"] if f["rule_id"] == "insufficient-resources"]
        assert "cpu" in finding["explanation"]
        paths = [r.path for r in cluster.requests if r.verb in ("list", "get")]
        # Reads stay in the namespace (bound pods and cluster-scoped inputs aside) and read no
        # other workload kind's collection.
        assert not any(r.verb in ("watch", "create", "update") for r in cluster.requests)
        assert not any("/deployments" in p or ("/daemonsets" in p and kind != "DaemonSet") for p in paths)
        assert not any("/events" in p and f"/namespaces/{NS}/" not in p for p in paths)
        pod_lists = [r for r in cluster.requests if r.verb == "list" and r.path.endswith("/pods")]
        assert all(
            "labelSelector" in r.query or r.query.get("fieldSelector", "").startswith("spec.nodeName!=")
            for r in pod_lists
        ), [(r.path, r.query) for r in pod_lists]
    finally:
        await cluster.stop()


async def test_not_found_is_kubectls(tmp_path: Path) -> None:
    cluster = FakeCluster()
    await cluster.start()
    try:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig", context="fake")
        for word in ("job/nope", "cj/nope", "pdb/nope", "sts/nope"):
            code, out, err = await run(PLUGIN, word, "-n", NS, "--kubeconfig", str(kubeconfig))
            assert (code, out) == (1, "") and err.startswith("Error from server (NotFound): "), err
            assert '"nope"' in err
    finally:
        await cluster.stop()


async def test_pdb_says_which_evictions_it_blocks(tmp_path: Path) -> None:
    from tests.scenarios.test_golden import load_case

    objects, _ = load_case(
        Path(__file__).parents[1] / "scenarios" / "pdb-blocks-eviction" / "seed-004-drain-storefront"
    )
    cluster = FakeCluster()
    for obj in objects:
        cluster.apply(obj)
    await cluster.start()
    try:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig", context="fake")
        code, out, err = await run(
            PLUGIN, "pdb/storefront", "-n", "shop", "--kubeconfig", str(kubeconfig), "-o", "json"
        )
        assert code == 0, err
        findings = json.loads(out)["findings"]
        assert [f["rule_id"] for f in findings] == ["pdb-blocks-eviction"]
        assert [p["name"] for p in findings[0]["evidence"]["pdbs"]] == ["storefront"]
        # The rollouts it can hold up: the Deployments whose pods it selects, and only those.
        deployments = {o["metadata"]["name"] for o in objects if o.get("kind") == "Deployment"}
        assert [d["name"] for d in json.loads(out)["deployments"]] == ["storefront"]
        assert deployments - {"storefront"}, "the dump has Deployments the budget does not select"
        paths = {r.path for r in cluster.requests if r.verb == "get"}
        assert "/apis/policy/v1/namespaces/shop/poddisruptionbudgets/storefront" in paths
    finally:
        await cluster.stop()
