"""Placement proven by the real kube-scheduler: on random clusters
(tests/realcluster/generator_scoring.py), pods are created one at a time and
every real binding must be in unstick's predicted ``top`` set -- or, when the
prediction says kube-scheduler scores only a subset (percentageOfNodesToScore),
in its ``possible`` set. The cluster state is re-read before every prediction.

The pods name profiles of a second kube-scheduler this test starts with its
own KubeSchedulerConfiguration (generator_scoring.scheduler_config): the
default plugins, MostAllocated, and custom weights with
RequestedToCapacityRatio, a hard pod-affinity weight and List default spread
constraints; unstick reads the same file. OpportunisticBatching (on by
default since 1.35) reuses a previous cycle's ranking for a pod of the same
signature within 500 ms: consecutive pods here differ in signature or are
half a second apart.

Environment: ``UNSTICK_PLACE_SEED`` (default: from the clock, printed),
``UNSTICK_PLACE_RECORD_DIR`` (where mismatches are written as regression cases;
default tests/realcluster/regressions/placement).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from analyzers.simulator.schedconfig import parse_config
from analyzers.simulator.scoring.placement import attempt
from analyzers.snapshot import ClusterSnapshot
from tests.realcluster.conftest import Cluster, scheduled_condition
from tests.realcluster.generator_scoring import existing_pods, incoming_pod, make_nodes, scheduler_config
from tests.realcluster.harness import KUBE_VERSION, ControlPlane, free_port

pytestmark = pytest.mark.realcluster

HERE = Path(__file__).parent
RECORD_DIR = Path(os.environ.get("UNSTICK_PLACE_RECORD_DIR") or HERE / "regressions" / "placement")
PROFILES = ("place-default", "place-most", "place-weights")
# (size of the allowed set, feasible nodes) per binding: the prediction must discriminate.
SIZES: list[tuple[int, int]] = []


def _discriminates(before: int) -> None:
    sizes = SIZES[before:]
    allowed = sum(a for a, _ in sizes) / len(sizes)
    feasible = sum(f for _, f in sizes) / len(sizes)
    single = sum(1 for a, _ in sizes if a == 1)
    print(
        f"placement: the predicted set averages {allowed:.2f} of {feasible:.1f} feasible nodes; {single} of {len(sizes)} predictions name one node"
    )
    assert allowed < feasible / 2


class Scheduler:
    """A second kube-scheduler with its own configuration file."""

    def __init__(self, plane: ControlPlane, percentage: int | None) -> None:
        self.plane = plane
        work = plane.work
        self.doc = scheduler_config(str(plane.kubeconfig), percentage)
        self.path = work / f"place-scheduler-{percentage}.yaml"
        self.path.write_text(yaml.safe_dump(self.doc))
        self.log = work / f"place-scheduler-{percentage}.log"
        port = free_port()
        self.proc = subprocess.Popen(
            [
                str(plane.bin_dir / "kube-scheduler"),
                f"--config={self.path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--authentication-kubeconfig={plane.kubeconfig}",
                f"--authorization-kubeconfig={plane.kubeconfig}",
                "--v=1",
            ],
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.profiles = parse_config(self.doc)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def scheduler_factory(control_plane: ControlPlane) -> Iterator[Any]:
    started: list[Scheduler] = []

    def make(percentage: int | None) -> Scheduler:
        s = Scheduler(control_plane, percentage)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def sync(cluster: Cluster, scheduler: Scheduler, count: int) -> None:
    """Wait until the test's scheduler counts ``count`` nodes (a probe no node takes)."""
    deadline = time.monotonic() + 60
    last = ""
    while time.monotonic() < deadline:
        assert scheduler.proc.poll() is None, scheduler.log.read_text()[-3000:]
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "sync-", "namespace": cluster.ns},
            "spec": {
                "schedulerName": PROFILES[0],
                "nodeSelector": {"unstick.test/sync": "nowhere"},
                "containers": [{"name": "c", "image": "x"}],
            },
        }
        name = cluster.api.create(probe)["metadata"]["name"]
        try:
            pod = cluster.api.wait_for(
                f"/api/v1/namespaces/{cluster.ns}/pods?fieldSelector=metadata.name%3D{name}",
                lambda p: scheduled_condition(p) is not None,
                timeout=10,
                what="the placement scheduler's sync probe",
            )
            last = (scheduled_condition(pod) or {}).get("message", "")
        except TimeoutError:
            last = "(no verdict yet)"
        cluster.api.delete(f"/api/v1/namespaces/{cluster.ns}/pods/{name}", grace=0)
        if last.startswith(f"0/{count} nodes are available"):
            return
        time.sleep(0.5)
    raise AssertionError(f"the placement scheduler does not see {count} nodes: {last!r}")


def clear_pods(cluster: Cluster) -> None:
    """The previous random cluster's pods gone (names repeat from cluster to cluster)."""
    cluster.api.delete(f"/api/v1/namespaces/{cluster.ns}/pods", grace=0)
    deadline = time.monotonic() + 60
    while cluster.api.get(f"/api/v1/namespaces/{cluster.ns}/pods")["items"]:
        assert time.monotonic() < deadline, "the previous cluster's pods are not gone after 60 s"
        time.sleep(0.3)


def state_objects(cluster: Cluster) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path, kind in (
        ("/api/v1/nodes", "Node"),
        ("/api/v1/pods", "Pod"),
        ("/api/v1/namespaces", "Namespace"),
    ):
        for item in cluster.api.get(path)["items"]:
            item["apiVersion"], item["kind"] = "v1", kind
            out.append(item)
    return out


def run_cluster(
    cluster: Cluster, scheduler: Scheduler, seed: int, nodes: int, existing: int, incoming: int, prefix: str
) -> tuple[int, list[dict[str, Any]], int]:
    """(bindings checked, mismatches, bindings where only a subset was scored)."""
    rng = random.Random(seed)
    clear_pods(cluster)
    node_objs = make_nodes(rng, nodes, prefix)
    cluster.nodes(node_objs)
    sync(cluster, scheduler, nodes)
    for p in existing_pods(rng, node_objs, cluster.ns, existing):
        cluster.api.create(p)
    checked = 0
    subset = 0
    mismatches: list[dict[str, Any]] = []
    last_image = ""
    for k in range(incoming):
        profile_name = rng.choice(PROFILES)
        pod = incoming_pod(rng, cluster.ns, profile_name, k)
        image = pod["spec"]["containers"][0]["image"]
        if image == last_image:
            time.sleep(0.6)  # past OpportunisticBatching's 500 ms window
        last_image = image
        objects = state_objects(cluster)
        pending = json.loads(json.dumps(pod))
        pending["metadata"]["uid"] = f"predict-{k}"
        snap = ClusterSnapshot.from_objects([*objects, pending], kube_version=KUBE_VERSION)
        profile = scheduler.profiles[profile_name]
        step = attempt(
            snap, snap.pods[(cluster.ns, pod["metadata"]["name"])], profile, kube_version=KUBE_VERSION
        )
        cluster.api.create(pod)
        bound = cluster.api.wait_for(
            f"/api/v1/namespaces/{cluster.ns}/pods?fieldSelector=metadata.name%3D{pod['metadata']['name']}",
            lambda p: bool(p["spec"].get("nodeName")) or scheduled_condition(p) is not None,
            timeout=30,
            what=f"binding of {pod['metadata']['name']}",
        )
        node = bound["spec"].get("nodeName", "")
        if not node:
            mismatches.append({"why": "not bound", "pod": pod, "condition": scheduled_condition(bound)})
            continue
        checked += 1
        allowed = step.top if step.scored is None else step.possible
        feasible = sum(1 for r in step.rows if r.feasible)
        SIZES.append((len(allowed), feasible))
        if step.scored is not None:
            subset += 1
        if node not in allowed:
            mismatches.append(
                {
                    "seed": seed,
                    "profile": profile_name,
                    "scheduler_config": scheduler.doc,
                    "bound": node,
                    "predicted_top": list(step.top),
                    "scored": step.scored,
                    "possible": list(step.possible),
                    "rows": [
                        {"node": r.node, "feasible": r.feasible, "scores": r.scores, "total": r.total}
                        for r in step.rows
                    ],
                    "pod": pod,
                    "objects": objects,
                }
            )
    return checked, mismatches, subset


def _record(mismatches: list[dict[str, Any]], seed: int) -> None:
    if not mismatches:
        return
    RECORD_DIR.mkdir(parents=True, exist_ok=True)
    for i, m in enumerate(mismatches):
        (RECORD_DIR / f"seed-{seed}-{i}.json").write_text(json.dumps(m, indent=1, default=str))


def test_real_bindings_are_in_the_predicted_top_set(cluster: Cluster, scheduler_factory: Any) -> None:
    seed = int(os.environ.get("UNSTICK_PLACE_SEED") or time.time())
    print(f"\nplacement run seed {seed} (UNSTICK_PLACE_SEED={seed} repeats it)")
    scheduler = scheduler_factory(None)
    before = len(SIZES)
    total = 0
    mismatches: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for c in range(6):
        checked, bad, _ = run_cluster(
            cluster, scheduler, seed + c, nodes=6 + (c % 4) * 2, existing=12, incoming=30, prefix=f"pl{c}"
        )
        total += checked
        mismatches += bad
    _record(mismatches, seed)
    print(
        f"placement: {total} bindings, {len(mismatches)} outside the prediction, {time.monotonic() - t0:.0f} s"
    )
    _discriminates(before)
    assert total >= 160
    assert not mismatches, f"{len(mismatches)} mismatches recorded in {RECORD_DIR} (seed {seed})"


def test_hundred_nodes_all_scored(cluster: Cluster, scheduler_factory: Any) -> None:
    seed = int(os.environ.get("UNSTICK_PLACE_SEED") or time.time())
    print(f"\nplacement 100-node run seed {seed}")
    scheduler = scheduler_factory(100)
    before = len(SIZES)
    checked, mismatches, subset = run_cluster(
        cluster, scheduler, seed, nodes=100, existing=60, incoming=40, prefix="big"
    )
    _record(mismatches, seed)
    _discriminates(before)
    assert subset == 0 and checked >= 40
    assert not mismatches, f"{len(mismatches)} mismatches recorded in {RECORD_DIR} (seed {seed})"


def test_default_percentage_scores_a_subset(cluster: Cluster, scheduler_factory: Any) -> None:
    """250 nodes, default percentage: 250 * (50 - 2)% = 120 nodes scored; the
    prediction must say so, and the real binding must be among the possible winners."""
    seed = int(os.environ.get("UNSTICK_PLACE_SEED") or time.time())
    print(f"\nplacement subset run seed {seed}")
    scheduler = scheduler_factory(None)
    checked, mismatches, subset = run_cluster(
        cluster, scheduler, seed, nodes=250, existing=40, incoming=12, prefix="wide"
    )
    _record(mismatches, seed)
    assert subset == checked and checked >= 12
    assert not mismatches, f"{len(mismatches)} mismatches recorded in {RECORD_DIR} (seed {seed})"
