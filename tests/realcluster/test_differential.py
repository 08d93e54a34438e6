"""Differential fidelity: the simulator against the real kube-scheduler on random clusters.

Each random cluster (tests/realcluster/generator.py) is set up in the real control
plane, then its probe pods are created one at a time; the real verdict is read by
watching the pod (bound, or ``PodScheduled=False``), and unstick simulates the same
objects as the API server returned them. Fits-or-not, the filter part of the message
(byte for byte) and the preemption verdict (reason codes and counts, or whether a
node was nominated) must agree.

Environment: ``UNSTICK_DIFF_SEED`` (default: from the clock, printed),
``UNSTICK_DIFF_CASES`` (probe pods, default 300; thousands for a soak run),
``UNSTICK_DIFF_RECORD_DIR`` (where disagreements are written as regression cases;
default a temporary folder, printed).
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from analyzers.report import build_report
from analyzers.snapshot import ClusterState
from tests.realcluster.conftest import Cluster, scheduled_condition
from tests.realcluster.generator import PRIORITY_CLASSES, make_case
from tests.realcluster.harness import KUBE_VERSION, ApiError, ControlPlane
from tests.realcluster.stats import DIFFERENTIAL
from tests.realcluster.verdicts import (
    Comparison,
    cluster_objects,
    compare,
    dry_run_every_remedy,
    known_refusal,
)

pytestmark = pytest.mark.realcluster

PROBES_PER_CLUSTER = 8
STATS = DIFFERENTIAL


def ensure_priority_classes(plane: ControlPlane) -> None:
    for name, value in PRIORITY_CLASSES.items():
        try:
            plane.api.create(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                }
            )
        except ApiError as exc:
            if exc.status != 409:
                raise


def clear_pods(cluster: Cluster) -> None:
    for pod in cluster.api.get(f"/api/v1/namespaces/{cluster.ns}/pods")["items"]:
        cluster.api.delete(f"/api/v1/namespaces/{cluster.ns}/pods/{pod['metadata']['name']}", grace=0)


def verdict_of(cluster: Cluster, name: str, since: str) -> dict[str, Any]:
    """The scheduler's first verdict on the pod: watched from its creation's resourceVersion,
    so a PodScheduled=False before a preemption and a bind is seen even when both are quick."""

    def decided(p: dict[str, Any]) -> bool:
        cond = scheduled_condition(p)
        return bool(p["spec"].get("nodeName")) or (cond is not None and cond.get("status") == "False")

    return cluster.api.wait_for(
        f"/api/v1/namespaces/{cluster.ns}/pods?fieldSelector=metadata.name%3D{name}",
        decided,
        timeout=30,
        what=f"the scheduler's verdict on {cluster.ns}/{name}",
        since=since,
    )


def existing_intact(cluster: Cluster, existing: list[dict[str, Any]]) -> bool:
    pods = cluster.api.get(f"/api/v1/namespaces/{cluster.ns}/pods")["items"]
    alive = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    return all(e["metadata"]["name"] in alive for e in existing)


def record(out: Path, seed: int, objects: list[dict[str, Any]], pod: dict[str, Any], cmp: Comparison) -> Path:
    name = pod["metadata"]["name"]
    folder = out / f"seed{seed}-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    ns = pod["metadata"]["namespace"]
    keep = [
        o
        for o in objects
        if o["kind"] in ("Node", "PriorityClass")
        or o.get("metadata", {}).get("namespace") == ns
        or (o["kind"] == "Namespace" and o["metadata"]["name"] == ns)
    ]
    for o in keep:
        o.get("metadata", {}).pop("managedFields", None)
    (folder / "objects.yaml").write_text(yaml.safe_dump_all(keep, sort_keys=False))
    (folder / "expected.yaml").write_text(
        yaml.safe_dump(
            {
                "pod": {"namespace": ns, "name": name},
                "real_fits": cmp.real_fits,
                "real_message": cmp.real_message,
                "real_nominated": cmp.real_nominated,
                "real_node": pod["spec"].get("nodeName"),
                "simulated_message": cmp.sim_message,
                "differences": cmp.differences(),
            },
            sort_keys=False,
            width=1000,
        )
    )
    return folder


def dry_run_report_remedies(cluster: Cluster, objects: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """Every remedy unstick's report gives for the namespace that it can dry-run, sent
    with dryRun=All: (how many requests were sent, the API server's refusals)."""
    state = ClusterState(KUBE_VERSION)
    state.load(objects)
    report = build_report(state.snapshot(), now=time.time())
    return dry_run_every_remedy(cluster.plane.kubeconfig, report.findings, cluster.ns)


def test_simulator_agrees_with_the_real_scheduler_on_random_clusters(
    control_plane: ControlPlane, cluster: Cluster
) -> None:
    seed = int(os.environ.get("UNSTICK_DIFF_SEED") or time.time_ns() % 1_000_000)
    wanted = int(os.environ.get("UNSTICK_DIFF_CASES") or 300)
    out = Path(os.environ.get("UNSTICK_DIFF_RECORD_DIR") or tempfile.mkdtemp(prefix="unstick-diff-"))
    print(f"\ndifferential run: seed {seed}, {wanted} cases (UNSTICK_DIFF_SEED={seed} reproduces it)")
    STATS.update(seed=seed, cases=0, agree=0, seconds=0.0, record_dir=str(out))
    ensure_priority_classes(control_plane)
    rng = random.Random(seed)
    started = time.monotonic()
    disagreements: list[str] = []
    known: list[str] = []  # refusals of remedies with a regression case (verdicts.KNOWN_REFUSALS)
    fits = preempted = 0
    index = 0
    while STATS["cases"] < wanted:
        case = make_case(rng, index, PROBES_PER_CLUSTER)
        index += 1
        clear_pods(cluster)
        cluster.nodes(case.nodes)
        for pod in case.existing:
            pod["metadata"]["namespace"] = cluster.ns
            cluster.api.create(pod)
        objects = cluster_objects(cluster.api)
        for probe in case.probes:
            if STATS["cases"] >= wanted:
                break
            if not existing_intact(cluster, case.existing):
                break  # an earlier probe's preemption removed victims: this cluster is spent
            probe["metadata"]["namespace"] = cluster.ns
            created = cluster.api.create(probe)
            name = created["metadata"]["name"]
            real = verdict_of(cluster, name, created["metadata"]["resourceVersion"])
            created["apiVersion"], created["kind"] = "v1", "Pod"
            cmp = compare([*objects, created], real, cluster.ns, name)
            STATS["cases"] += 1
            fits += cmp.real_fits
            if cmp.agrees:
                STATS["agree"] += 1
            else:
                folder = record(out, seed, [*objects, created], real, cmp)
                disagreements.append(f"{folder}: " + "; ".join(cmp.differences()))
            if not cmp.real_fits:
                refusals = dry_run_report_remedies(cluster, [*objects, real])
                STATS["remedies"] = STATS.get("remedies", 0) + refusals[0]
                for refusal in refusals[1]:
                    if (case := known_refusal(refusal)) is not None:
                        known.append(f"{cluster.ns}/{name}: {refusal.splitlines()[0]} (known: {case})")
                    else:
                        disagreements.append(f"{cluster.ns}/{name}: {refusal}")
            cluster.api.delete(f"/api/v1/namespaces/{cluster.ns}/pods/{name}", grace=0)
            if real.get("status", {}).get("nominatedNodeName"):
                preempted += 1
                break  # the real scheduler evicted victims: this cluster is spent
    STATS["seconds"] = time.monotonic() - started
    STATS.update(fits=fits, preempted=preempted, clusters=index)
    print(
        f"differential run: seed {seed}: {STATS['cases']} cases on {index} clusters, {STATS['agree']} agree "
        f"({fits} fit, {preempted} preempted), {STATS.get('remedies', 0)} remedies dry-run, {STATS['seconds']:.1f} s"
    )
    STATS["known_refusals"] = len(known)
    for line in known:
        print(f"KNOWN BUG, remedy refused by the real API server: {line}")
    assert not disagreements, f"{len(disagreements)} disagreement(s) (seed {seed}):\n" + "\n".join(
        disagreements[:20]
    )
