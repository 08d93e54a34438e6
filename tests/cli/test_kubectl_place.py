"""`kubectl unstick place` (the installed plugin, as kubectl runs it) against the fake API
endpoint over real HTTP through the real kubernetes-asyncio client: the same answer, human
and JSON, as `unstick place` on a dump of the same objects; a missing or terminating pod is
one line; nothing is watched or written."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.fakecluster import FakeCluster
from tests.cli import inprocess
from tests.cli.test_kubectl_plugin import PLUGIN, run
from tests.scenarios.test_golden import load_case

SEED_003 = (
    Path(__file__).parents[1] / "scenarios" / "requests-missing-load-skew" / "seed-003-cassandra-no-requests"
)
VERSION = "1.30"  # the fake API server's minor version (its wording)


def _served(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") not in ("NodeMetrics", "PodMetrics")]


@pytest.fixture
async def seed003(tmp_path: Path) -> AsyncIterator[tuple[FakeCluster, Path]]:
    objects, _ = load_case(SEED_003)
    cluster = FakeCluster(version=f"v{VERSION}.2")
    for obj in _served(objects):
        cluster.apply(obj)
    await cluster.start()
    try:
        yield cluster, cluster.write_kubeconfig(tmp_path / "kubeconfig", context="fake")
    finally:
        await cluster.stop()


def _offline(*args: str) -> tuple[int, str, str]:
    return inprocess.run("place", str(SEED_003), "--kube-version", VERSION, *args)


async def test_deploy_replicas_are_unstick_place_on_the_same_objects(
    seed003: tuple[FakeCluster, Path],
) -> None:
    cluster, kubeconfig = seed003
    code, out, err = await run(
        PLUGIN,
        "place",
        "deploy/web-frontend",
        "-n",
        "web",
        "--replicas",
        "20",
        "--json",
        "--kubeconfig",
        str(kubeconfig),
    )
    assert code == 0, err
    live = json.loads(out)
    code, out, err = _offline("--pod", "web/deploy/web-frontend", "--replicas", "20", "--json")
    assert code == 0, err
    assert live == json.loads(out)
    assert sum(live["distribution"].values()) == pytest.approx(20) and len(live["placements"]) == 20
    # Only get and list; the namespace's reads stay in it.
    assert {r.verb for r in cluster.requests} <= {"discovery", "get", "list"}
    assert not any("/replicasets" in r.path and "/namespaces/web/" not in r.path for r in cluster.requests)


async def test_a_running_pod_human_report_is_unstick_places(seed003: tuple[FakeCluster, Path]) -> None:
    cluster, kubeconfig = seed003
    running = next(
        p for p in cluster.objects("Pod") if p["metadata"]["namespace"] == "web" and p["spec"].get("nodeName")
    )
    name = running["metadata"]["name"]
    code, live, err = await run(PLUGIN, "place", f"web/{name}", "--kubeconfig", str(kubeconfig))
    assert code == 0, err
    code, offline, err = _offline("--pod", f"web/{name}")
    assert code == 0, err
    assert live == offline
    assert f"It runs on {running['spec']['nodeName']}" in live and "Feasible nodes, best first" in live
    # TYPE NAME and pod/NAME with -n are the same question.
    code, again, err = await run(PLUGIN, "place", "pod", name, "-n", "web", "--kubeconfig", str(kubeconfig))
    assert (code, again) == (0, live), err


async def test_a_missing_or_terminating_pod_is_one_line(seed003: tuple[FakeCluster, Path]) -> None:
    cluster, kubeconfig = seed003
    code, out, err = await run(PLUGIN, "place", "web/nope", "--kubeconfig", str(kubeconfig))
    assert (code, out) == (1, "") and err.count("\n") == 1
    assert err.startswith("Error from server (NotFound): ") and '"nope"' in err
    code, out, err = await run(
        PLUGIN, "place", "deploy/nope", "-n", "web", "--json", "--kubeconfig", str(kubeconfig)
    )
    assert code == 1 and err.count("\n") == 1 and "NotFound" in json.loads(out)["error"]

    running = next(p for p in cluster.objects("Pod") if p["metadata"]["namespace"] == "web")
    meta = running["metadata"]
    cluster.apply({**running, "metadata": {**meta, "deletionTimestamp": "2026-11-18T03:11:00Z"}})
    code, out, err = await run(
        PLUGIN, "place", f"web/{meta['name']}", "--json", "--kubeconfig", str(kubeconfig)
    )
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err == f"error: pod web/{meta['name']}: the pod is terminating (deletionTimestamp is set)\n"
    assert json.loads(out)["error"] in err


async def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    code, _, err = await run(PLUGIN, "place", "node/n1")
    assert code == 1 and err.startswith("error: ") and "node" in err and err.count("\n") == 1
    code, _, err = await run(PLUGIN, "place", "deploy/web", "--replicas", "0")
    assert code == 2 and err == "error: --replicas: must be at least 1, got 0\n"
    bad = tmp_path / "sched.yaml"
    bad.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\npercentageOfNodesToScore: 101\n"
    )
    code, _, err = await run(PLUGIN, "place", "deploy/web", "--scheduler-config", str(bad))
    assert code == 2 and err.count("\n") == 1 and "percentageOfNodesToScore" in err and str(bad) in err
