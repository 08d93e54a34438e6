"""`kubectl-unstick` (the installed entry point, as kubectl runs it) against the fake API endpoint
through the real kubernetes-asyncio client: pods, deployments, nodes and -A give the report
`unstick analyze` gives for the same objects, from only the requests the question needs."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from agent.demo import SCENARIOS
from agent.fakecluster import FakeCluster
from agent.fakecluster.scenario import Scenario, play_step

PLUGIN = str(Path(sys.executable).with_name("kubectl-unstick"))
UNSTICK = str(Path(sys.executable).with_name("unstick"))


async def run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def started(name: str, tmp_path: Path, steps: int = 1) -> tuple[FakeCluster, Path, Scenario]:
    scenario = Scenario.load(SCENARIOS / name)
    cluster = scenario.cluster()
    await cluster.start()
    for step in scenario.timeline[:steps]:
        play_step(cluster, step)
    return cluster, cluster.write_kubeconfig(tmp_path / "kubeconfig", context="fake"), scenario


def dump(cluster: FakeCluster, path: Path) -> Path:
    kinds = (
        "Node",
        "Pod",
        "Event",
        "Deployment",
        "ReplicaSet",
        "PodDisruptionBudget",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "PersistentVolumeClaim",
        "PersistentVolume",
        "StorageClass",
        "PriorityClass",
    )
    items = [o for kind in kinds for o in cluster.objects(kind)]
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def summary(report: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return sorted(
        (
            f["rule_id"],
            f"{f['subject']['kind']}/{f['subject']['namespace']}/{f['subject']['name']}",
            [r["yaml"] for r in f["remedies"]],
        )
        for f in report["findings"]
    )


async def test_all_namespaces_is_the_analyze_report(tmp_path: Path) -> None:
    cluster, kubeconfig, _ = await started("gpu-rollout-deadlock", tmp_path)
    try:
        code, out, err = await run(PLUGIN, "-A", "--kubeconfig", str(kubeconfig), "-o", "json")
        assert code == 0, err
        live = json.loads(out)
        code, out, err = await run(UNSTICK, "analyze", str(dump(cluster, tmp_path / "dump.json")), "--json")
        assert code == 0, err
        offline = json.loads(out)
        assert summary(live) == summary(offline) and summary(live)
        assert [p["name"] for p in live["pods"]] == [p["name"] for p in offline["pods"]]
    finally:
        await cluster.stop()


async def test_deploy_reads_only_what_it_needs(tmp_path: Path) -> None:
    cluster, kubeconfig, scenario = await started("gpu-rollout-deadlock", tmp_path)
    meta = next(o for o in scenario.timeline[0].apply if o["kind"] == "Deployment")["metadata"]
    ns, name = meta["namespace"], meta["name"]
    try:
        code, out, err = await run(
            PLUGIN,
            f"deploy/{name}",
            "-n",
            ns,
            "--kubeconfig",
            str(kubeconfig),
            "-o",
            "yaml",
        )
        assert code == 0, err
        report = yaml.safe_load(out)
        assert [f["rule_id"] for f in report["findings"]] == ["rollout-surge-deadlock"]
        subject = report["findings"][0]["subject"]
        assert (subject["kind"], subject["namespace"], subject["name"]) == ("Deployment", ns, name)
        paths = {r.path for r in cluster.requests if r.verb in ("list", "get")}
        # Namespaced reads stay in the namespace; nothing is watched or written.
        assert not any(r.verb in ("watch", "create", "update") for r in cluster.requests)
        assert not any(p.startswith("/apis/apps/v1/deployments") for p in paths)
        assert f"/apis/apps/v1/namespaces/{ns}/deployments/{name}" in paths
        assert not any("/events" in p and f"/namespaces/{ns}/" not in p for p in paths)
    finally:
        await cluster.stop()


async def test_pod_in_the_contexts_namespace(tmp_path: Path) -> None:
    cluster, kubeconfig, _ = await started("gpu-selector-typo", tmp_path)
    try:
        pending = next(p for p in cluster.objects("Pod") if not p["spec"].get("nodeName"))
        ns, name = pending["metadata"]["namespace"], pending["metadata"]["name"]
        cluster.write_kubeconfig(kubeconfig, context="fake", namespace=ns)  # kubectl's default namespace
        code, out, err = await run(
            PLUGIN, f"pod/{name}", "--kubeconfig", str(kubeconfig), "--context", "fake"
        )
        assert code == 0, err
        assert "node-selector-mismatch" in out and f"{ns}/{name}" in out
        assert out.startswith("Analysed ")  # the analyze command's human report
        code, out, err = await run(
            PLUGIN, "pods", name, "-n", ns, "--kubeconfig", str(kubeconfig), "-o", "json"
        )
        assert code == 0 and [p["name"] for p in json.loads(out)["pods"]] == [name]
    finally:
        await cluster.stop()


@pytest.mark.parametrize("cordoned", [False, True], ids=["before-cordon", "cordoned"])
async def test_node_says_why_a_drain_hangs(tmp_path: Path, cordoned: bool) -> None:
    # After the first step the budget allows no disruption (its replacement pod has nowhere to go).
    cluster, kubeconfig, _ = await started("pdb-blocked-drain", tmp_path, steps=1)
    try:
        if not cordoned:  # the same cluster with node-2 not cordoned yet: a drain would cordon it first
            node = cluster.get("Node", "node-2")
            assert node is not None
            spec = {k: v for k, v in node["spec"].items() if k not in ("unschedulable", "taints")}
            cluster.apply({**node, "spec": spec})
        code, out, err = await run(PLUGIN, "node/node-2", "--kubeconfig", str(kubeconfig), "-o", "json")
        assert code == 0, err
        rules = [f["rule_id"] for f in json.loads(out)["findings"]]
        assert "pdb-blocks-eviction" in rules
        assert ("is not cordoned" in err) is not cordoned
    finally:
        await cluster.stop()


async def test_errors_are_kubectls(tmp_path: Path) -> None:
    cluster, kubeconfig, _ = await started("gpu-rollout-deadlock", tmp_path)
    try:
        code, out, err = await run(PLUGIN, "pod/nope", "-n", "vision", "--kubeconfig", str(kubeconfig))
        assert (code, out) == (1, "") and err.startswith("Error from server (NotFound): ") and '"nope"' in err
        code, _, err = await run(PLUGIN, "svc/x", "--kubeconfig", str(kubeconfig))
        assert code == 1 and err.startswith("error: ") and "svc" in err
        code, _, err = await run(PLUGIN, "pod/x", "-A", "--kubeconfig", str(kubeconfig))
        assert code == 1 and "across all namespaces" in err
        code, _, err = await run(PLUGIN, "--bogus")
        assert code == 1 and "error: unrecognized arguments: --bogus" in err
        code, _, err = await run(PLUGIN, "-A", "--kubeconfig", str(tmp_path / "missing"))
        assert code == 1 and err.startswith("error: ") and "Traceback" not in err
    finally:
        await cluster.stop()


async def _golden_pod(tmp_path: Path, case: str, pod: str, namespace: str) -> list[dict[str, Any]]:
    """``kubectl unstick pod/POD -o json`` against a golden case served by the fake API
    (no --now: the golden pods were created days before the wall clock, past every threshold)."""
    from agent.fakecluster import FakeCluster as Cluster
    from tests.scenarios.test_golden import load_case

    objects, _ = load_case(Path(__file__).parents[1] / "scenarios" / case)
    cluster = Cluster()
    for obj in objects:
        cluster.apply(obj)
    await cluster.start()
    try:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig", context="fake")
        code, out, err = await run(
            PLUGIN, f"pod/{pod}", "-n", namespace, "--kubeconfig", str(kubeconfig), "-o", "json"
        )
        assert code == 0, err
        findings: list[dict[str, Any]] = json.loads(out)["findings"]
        return findings
    finally:
        await cluster.stop()


async def test_pod_reads_the_events_of_what_it_waits_on(tmp_path: Path) -> None:
    """pod/NAME also reads its claims' events: scheduler-error quotes the provisioner's
    own refusal."""
    findings = await _golden_pod(
        tmp_path, "scheduler-error/prebind-provisioning-failed", "orders-db-0", "orders"
    )
    [finding] = [f for f in findings if f["rule_id"] == "scheduler-error"]
    assert finding["evidence"]["claim_event"]["reason"] == "ProvisioningFailed"
    assert "VolumeLimitExceeded" in finding["explanation"]


async def test_a_pod_kueue_gates_reads_its_workloads_words(tmp_path: Path) -> None:
    """pod/NAME of a pod behind kueue.x-k8s.io/admission reads the namespace's Workload
    events: scheduling-gated quotes Kueue's Pending."""
    findings = await _golden_pod(
        tmp_path, "scheduling-gated/kueue-quota-in-use", "embeddings-worker-6f4d8c7b95-9r58l", "ml-team-a"
    )
    [finding] = [f for f in findings if f["rule_id"] == "scheduling-gated"]
    assert finding["evidence"]["kueue_workload"] == "pod-embeddings-worker-6f4d8c7b95-9r58l-69c4e"
    assert finding["evidence"]["kueue_reasons"] == ["queue-quota-in-use"]


async def test_scheduler_config_decides_the_filters(tmp_path: Path) -> None:
    """--scheduler-config: a profile that disables NodeAffinity's filter finds the pod
    feasible (no node-selector finding); a bad file is a kubectl-style error naming it."""
    cluster, kubeconfig, _ = await started("gpu-selector-typo", tmp_path)
    try:
        pending = next(p for p in cluster.objects("Pod") if not p["spec"].get("nodeName"))
        ns, name = pending["metadata"]["namespace"], pending["metadata"]["name"]
        config = tmp_path / "sched.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "profiles": [
                        {
                            "schedulerName": "default-scheduler",
                            "plugins": {"filter": {"disabled": [{"name": "NodeAffinity"}]}},
                        }
                    ],
                }
            )
        )
        args = (PLUGIN, f"pod/{name}", "-n", ns, "--kubeconfig", str(kubeconfig), "-o", "json")
        code, out, err = await run(*args)
        assert code == 0, err
        assert "node-selector-mismatch" in [f["rule_id"] for f in json.loads(out)["findings"]]
        code, out, err = await run(*args, "--scheduler-config", str(config))
        assert code == 0, err
        report = json.loads(out)
        assert "node-selector-mismatch" not in [f["rule_id"] for f in report["findings"]]
        assert [p["scheduling"]["fits"] for p in report["pods"]] == [True]
        config.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Nope\n")
        code, out, err = await run(*args, "--scheduler-config", str(config))
        assert code == 1 and out == ""
        assert err.startswith("error: --scheduler-config ") and str(config) in err and "kind" in err
    finally:
        await cluster.stop()
