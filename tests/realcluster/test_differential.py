"""Differential fidelity: the simulator against the real kube-scheduler on random clusters.

Each random cluster (tests/realcluster/generator.py) is set up in the real control
plane -- nodes, storage, DaemonSet pods, existing pods, PDBs, pods left terminating --
and once it has settled (claims bound, PDB statuses current, nothing changing), its
probe pods are created one at a time; the real verdict is read by watching the pod
(bound, or ``PodScheduled=False``), and unstick simulates the same objects as the API
server returned them. Fits-or-not, the filter part of the message (byte for byte) and
the preemption verdict (reason codes and counts, or whether a node was nominated) must
agree.

In an "in flight" cluster every pod carries a finalizer: a probe that preempts stays,
nominated, and its victims stay terminating, so the next probes are judged with both in
the state (and compared on it). Elsewhere a preemption ends the cluster.

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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from analyzers.report import build_report
from analyzers.snapshot import ClusterState
from tests.realcluster.conftest import Cluster, scheduled_condition
from tests.realcluster.generator import NAMESPACE, PRIORITY_CLASSES, Case, daemon_set_of, make_case
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

STATS = DIFFERENTIAL
MAX_NOMINATIONS = 2  # in-flight preemptions per cluster; then it is spent


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


def _each(fn: Callable[[Any], object], items: list[Any]) -> None:
    """``fn`` over ``items``, a few API requests at a time (the order among them is free)."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(fn, items))


def clear_pods(cluster: Cluster) -> None:
    """Every pod of the namespace gone: finalizers lifted, then deleted at once."""
    base = f"/api/v1/namespaces/{cluster.ns}/pods"

    def gone(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("finalizers"):
            try:
                cluster.api.patch(f"{base}/{name}", {"metadata": {"finalizers": None}}, kind="merge-patch")
            except ApiError as exc:
                if exc.status != 404:
                    raise
        cluster.api.delete(f"{base}/{name}", grace=0)

    _each(gone, cluster.api.get(base)["items"])


def clear_case(cluster: Cluster, previous: Case | None) -> None:
    """The namespace and the cluster-scoped objects of ``previous`` cleared for the next case."""
    clear_pods(cluster)
    ns = cluster.ns
    for path in (
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        f"/apis/apps/v1/namespaces/{ns}/daemonsets",
        f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
    ):
        for item in cluster.api.get(path)["items"]:
            cluster.api.delete(f"{path}/{item['metadata']['name']}")
    if previous is not None:
        for obj in previous.storage:
            if obj["kind"] == "PersistentVolume":
                cluster.api.delete(f"/api/v1/persistentvolumes/{obj['metadata']['name']}")
            elif obj["kind"] == "StorageClass":
                cluster.api.delete(f"/apis/storage.k8s.io/v1/storageclasses/{obj['metadata']['name']}")


def set_up(cluster: Cluster, case: Case) -> None:
    """Create the case's cluster in the namespace and wait until it has settled."""
    ns = cluster.ns
    cluster.nodes(case.nodes)
    for obj in case.storage:
        if obj["kind"] == "PersistentVolumeClaim":
            obj["metadata"]["namespace"] = ns
        ref = obj.get("spec", {}).get("claimRef")
        if ref is not None and ref.get("namespace") == NAMESPACE:
            ref["namespace"] = ns
        cluster.api.create(obj)
    owners: dict[str, dict[str, Any]] = {}
    for ds in case.daemon_sets:
        ds["metadata"]["namespace"] = ns
        owners[ds["metadata"]["name"]] = cluster.api.request(
            "POST", f"/apis/apps/v1/namespaces/{ns}/daemonsets", ds
        )
    for pod in case.daemon_pods:
        owner = owners[daemon_set_of(pod)]["metadata"]
        pod["metadata"]["namespace"] = ns
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": owner["name"],
                "uid": owner["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    for pod in case.existing:
        pod["metadata"]["namespace"] = ns
    _each(cluster.api.create, [*case.daemon_pods, *case.existing])
    for pdb in case.pdbs:
        pdb["metadata"]["namespace"] = ns
        cluster.api.create(pdb)
    for name in case.terminating:
        cluster.api.delete(f"/api/v1/namespaces/{ns}/pods/{name}", grace=0)
    if case.pdbs or case.storage:
        settle(cluster)  # PDB statuses and claim bindings are written by controllers


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions", []) or []
    )


def settle(cluster: Cluster, *, timeout: float = 20.0) -> None:
    """Wait until the namespace stops changing: every bound pod Running, claims naming a
    volume or named by one Bound, every PDB's status current (the disruption controller's
    count of healthy pods matches the pods), and two listings 0.1 s apart alike."""
    ns = cluster.ns
    deadline = time.monotonic() + timeout
    last: tuple[Any, ...] | None = None
    while time.monotonic() < deadline:
        pods = cluster.api.get(f"/api/v1/namespaces/{ns}/pods")["items"]
        pvcs = cluster.api.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims")["items"]
        pdbs = cluster.api.get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets")["items"]
        pvs = cluster.api.get("/api/v1/persistentvolumes")["items"]
        # (Running pods matter to PDBs only: the disruption controller counts ready pods.)
        ready = not pdbs or all(
            p.get("status", {}).get("phase") == "Running"
            for p in pods
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        )
        # A claim a volume is pre-bound to (claimRef) must be Bound by the PV controller.
        claimed = {
            v["spec"]["claimRef"]["name"]
            for v in pvs
            if (v["spec"].get("claimRef") or {}).get("namespace") == ns
        }
        ready = ready and all(
            c.get("status", {}).get("phase") == "Bound"
            for c in pvcs
            if (c["spec"].get("volumeName") or c["metadata"]["name"] in claimed)
            and not c["metadata"].get("deletionTimestamp")
        )
        for pdb in pdbs:
            status = pdb.get("status", {})
            want = pdb["spec"]["selector"]["matchLabels"]
            healthy = sum(
                1
                for p in pods
                if not p["metadata"].get("deletionTimestamp")
                and _ready(p)
                and all(p["metadata"].get("labels", {}).get(k) == v for k, v in want.items())
            )
            if (
                status.get("observedGeneration") != pdb["metadata"]["generation"]
                or status.get("currentHealthy") != healthy
            ):
                ready = False
        signature = tuple(
            (o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in (*pods, *pvcs, *pdbs, *pvs)
        )
        if ready and signature == last:
            return
        last = signature if ready else None
        time.sleep(0.1)
    raise AssertionError(f"namespace {ns} did not settle in {timeout:.0f} s")


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


def existing_intact(cluster: Cluster, case: Case) -> bool:
    pods = cluster.api.get(f"/api/v1/namespaces/{cluster.ns}/pods")["items"]
    alive = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    held = set(case.terminating)
    return all(e["metadata"]["name"] in alive for e in case.existing if e["metadata"]["name"] not in held)


def record(out: Path, seed: int, objects: list[dict[str, Any]], pod: dict[str, Any], cmp: Comparison) -> Path:
    name = pod["metadata"]["name"]
    folder = out / f"seed{seed}-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    ns = pod["metadata"]["namespace"]
    keep = [
        o
        for o in objects
        if o["kind"] in ("Node", "PriorityClass", "StorageClass", "PersistentVolume")
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
    fits = preempted = in_flight = 0
    setup_seconds = 0.0  # clearing and creating clusters, waiting for them to settle
    index = 0
    previous: Case | None = None
    try:
        while STATS["cases"] < wanted:
            case = make_case(rng, index)
            index += 1
            t0 = time.monotonic()
            clear_case(cluster, previous)
            previous = case
            set_up(cluster, case)
            objects = cluster_objects(cluster.api)
            setup_seconds += time.monotonic() - t0
            nominations = 0
            for probe in case.probes:
                if STATS["cases"] >= wanted:
                    break
                if not case.in_flight and not existing_intact(cluster, case):
                    break  # an earlier probe's preemption removed victims: this cluster is spent
                probe["metadata"]["namespace"] = cluster.ns
                created = cluster.api.create(probe)
                name = created["metadata"]["name"]
                real = verdict_of(cluster, name, created["metadata"]["resourceVersion"])
                created["apiVersion"], created["kind"] = "v1", "Pod"
                cmp = compare([*objects, created], real, cluster.ns, name)
                STATS["cases"] += 1
                fits += cmp.real_fits
                in_flight += nominations > 0
                if cmp.agrees:
                    STATS["agree"] += 1
                else:
                    folder = record(out, seed, [*objects, created], real, cmp)
                    disagreements.append(f"{folder}: " + "; ".join(cmp.differences()))
                # (a bound pod may keep the node it was expected on as its nominated node)
                nominated = not cmp.real_fits and bool(real.get("status", {}).get("nominatedNodeName"))
                if not cmp.real_fits and not nominated and nominations == 0:
                    # (a nominated probe's victims are being evicted: remedies naming them are stale)
                    refusals = dry_run_report_remedies(cluster, [*objects, real])
                    STATS["remedies"] = STATS.get("remedies", 0) + refusals[0]
                    for refusal in refusals[1]:
                        if (regression := known_refusal(refusal)) is not None:
                            known.append(
                                f"{cluster.ns}/{name}: {refusal.splitlines()[0]} (known: {regression})"
                            )
                        else:
                            disagreements.append(f"{cluster.ns}/{name}: {refusal}")
                if nominated:
                    preempted += 1
                    if not case.in_flight:
                        cluster.api.delete(f"/api/v1/namespaces/{cluster.ns}/pods/{name}", grace=0)
                        break  # the real scheduler evicted victims: this cluster is spent
                    nominations += 1
                    if nominations >= MAX_NOMINATIONS:
                        break
                    # The preemptor stays, nominated; its victims stay terminating (finalizers).
                    settle(cluster)
                    objects = cluster_objects(cluster.api)
                    continue
                cluster.api.delete(f"/api/v1/namespaces/{cluster.ns}/pods/{name}", grace=0)
                if cmp.real_fits and created["spec"].get("volumes"):
                    settle(cluster)  # its claims were bound to volumes: the state changed
                    objects = cluster_objects(cluster.api)
    finally:
        clear_case(cluster, previous)
    STATS["seconds"] = time.monotonic() - started
    STATS.update(fits=fits, preempted=preempted, clusters=index, in_flight=in_flight)
    print(
        f"differential run: seed {seed}: {STATS['cases']} cases on {index} clusters, {STATS['agree']} agree "
        f"({fits} fit, {preempted} preempted, {in_flight} judged with a preemption in flight), "
        f"{STATS.get('remedies', 0)} remedies dry-run, {STATS['seconds']:.1f} s "
        f"({setup_seconds:.1f} s setting clusters up)"
    )
    STATS["known_refusals"] = len(known)
    for line in known:
        print(f"KNOWN BUG, remedy refused by the real API server: {line}")
    assert not disagreements, f"{len(disagreements)} disagreement(s) (seed {seed}):\n" + "\n".join(
        disagreements[:20]
    )
