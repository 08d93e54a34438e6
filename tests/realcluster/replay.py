"""Playing a seed (tests/realcluster/seeds.py) on the real control plane: its objects
created, made to stick, a remedy applied as a user would; shared by the seed tests and
the fixture recorder (record_seeds.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select

from agent.dryrun import ACCEPTED
from agent.kube.gateway import Gateway
from agent.pipeline import PipelineConfig
from agent.runner import AgentHost, ClusterAgent
from storage.models import Incident
from tests.realcluster.conftest import Cluster, scheduled_condition
from tests.realcluster.harness import CLUSTER_SCOPED, KUBE_VERSION, ApiError, ControlPlane, object_path
from tests.realcluster.seeds import Seed
from tests.waiting import eventually


def substitute(obj: Any, ns: str) -> Any:
    return json.loads(json.dumps(obj).replace("{ns}", ns))


def set_up(cluster: Cluster, seed: Seed) -> list[str]:
    """Create the seed's objects; return the paths of cluster-scoped ones to delete after."""
    cleanup = set_up_cluster(cluster, seed)
    create_objects(cluster, seed)
    return cleanup


def set_up_cluster(cluster: Cluster, seed: Seed) -> list[str]:
    """The seed's Nodes and cluster-scoped objects; returns the paths of the latter."""
    cluster.nodes(seed.nodes)
    cleanup: list[str] = []
    for obj in seed.cluster_scoped:
        obj = substitute(obj, cluster.ns)
        cluster.api.create(obj)
        cleanup.append(object_path(obj))
    return cleanup


def create_objects(cluster: Cluster, seed: Seed) -> None:
    """The seed's objects in the test's namespace."""
    for obj in seed.objects:
        obj = substitute(obj, cluster.ns)
        obj["metadata"]["namespace"] = cluster.ns
        cluster.api.create(obj)
        if obj["kind"] == "PersistentVolumeClaim" and obj["spec"].get("volumeName"):
            # pre-bound: wait for the PV controller, else the pod meets an unbound claim
            name = obj["metadata"]["name"]
            cluster.api.wait_for(
                f"/api/v1/namespaces/{cluster.ns}/persistentvolumeclaims",
                lambda c, name=name: (
                    c["metadata"]["name"] == name and c.get("status", {}).get("phase") == "Bound"
                ),
                timeout=30,
                what=f"claim {name} to bind",
            )


def matches(pod: dict[str, Any], labels: dict[str, str]) -> bool:
    have = pod["metadata"].get("labels", {})
    return all(have.get(k) == v for k, v in labels.items())


def pending(pod: dict[str, Any], labels: dict[str, str]) -> bool:
    cond = scheduled_condition(pod)
    return (
        matches(pod, labels)
        and cond is not None
        and cond.get("status") == "False"
        and not pod["metadata"].get("deletionTimestamp")
    )


def first_rollout(cluster: Cluster, seed: Seed) -> None:
    """Wait until the seed's Deployments and StatefulSets are fully rolled out and its
    PodDisruptionBudgets count every pod they select (seeds that break a healthy cluster)."""
    for obj in seed.objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind in ("Deployment", "StatefulSet"):
            cluster.api.wait_for(
                f"/apis/apps/v1/namespaces/{cluster.ns}/{kind.lower()}s",
                lambda d, name=name: (
                    d["metadata"]["name"] == name
                    and d.get("status", {}).get("observedGeneration", 0) >= d["metadata"]["generation"]
                    and d["status"].get("availableReplicas", 0) == d["spec"]["replicas"]
                    and d["status"].get("updatedReplicas") == d["spec"]["replicas"]
                ),
                timeout=60,
                what=f"{name}'s first rollout",
            )
        elif kind == "PodDisruptionBudget":
            cluster.api.wait_for(
                f"/apis/policy/v1/namespaces/{cluster.ns}/poddisruptionbudgets",
                lambda b, name=name: (
                    b["metadata"]["name"] == name
                    and b.get("status", {}).get("expectedPods", 0) > 0
                    and b["status"].get("currentHealthy") == b["status"]["expectedPods"]
                ),
                timeout=60,
                what=f"budget {name} to count its healthy pods",
            )


def stick(cluster: Cluster, seed: Seed) -> dict[str, Any]:
    """Make the seed stick and return its Pending pod (as the scheduler left it); for a seed
    where nothing is Pending, the first of its pods once every one is bound."""
    if seed.ready_first:
        first_rollout(cluster, seed)
    if seed.stick:
        done = cluster.plane.kubectl("-n", cluster.ns, *seed.stick, check=not seed.stick_fails)
        if seed.stick_fails:
            assert done.returncode != 0, f"kubectl {' '.join(seed.stick)} was meant to fail:\n{done.stdout}"
    for obj in seed.stick_objects:
        obj = substitute(obj, cluster.ns)
        obj["metadata"]["namespace"] = cluster.ns
        cluster.api.create(obj)
    if not seed.pending:  # the new workload rolled out: every pod bound and Ready
        first_rollout(cluster, dataclasses.replace(seed, objects=seed.stick_objects))
        return next(
            p
            for p in cluster.api.get(f"/api/v1/namespaces/{cluster.ns}/pods")["items"]
            if matches(p, seed.stuck_label)
        )
    return cluster.api.wait_for(
        f"/api/v1/namespaces/{cluster.ns}/pods",
        lambda p: pending(p, seed.stuck_label),
        timeout=60,
        what=f"a Pending pod of {seed.id}",
    )


def run_remedy(
    plane: ControlPlane, command: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a remedy's command as a user pastes it (``kubectl apply -f -`` reads the YAML on stdin)."""
    env = {
        **os.environ,
        "PATH": f"{plane.bin_dir}:{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(plane.kubeconfig),
    }
    return subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, env=env, timeout=60, input=stdin
    )


def all_scheduled(cluster: Cluster, labels: dict[str, str], timeout: float) -> None:
    """Wait (watching pods) until every live pod with ``labels`` is bound to a node."""
    path = f"/api/v1/namespaces/{cluster.ns}/pods"
    deadline = time.monotonic() + timeout
    while True:
        listing = cluster.api.get(path)
        live = [
            p for p in listing["items"] if matches(p, labels) and not p["metadata"].get("deletionTimestamp")
        ]
        if live and all(p["spec"].get("nodeName") for p in live):
            return
        left = deadline - time.monotonic()
        if left <= 0:
            names = sorted(p["metadata"]["name"] for p in live if not p["spec"].get("nodeName"))
            raise AssertionError(f"pods {labels} still unscheduled after {timeout:.0f}s: {names}")
        with contextlib.suppress(TimeoutError):  # any change to the namespace's pods: look again
            next(iter(cluster.api.watch(path, listing["metadata"]["resourceVersion"], min(left, 5))), None)


def apply_remedy(cluster: Cluster, seed: Seed, remedy: dict[str, Any], cleanup: list[str]) -> None:
    """Apply ``remedy`` as a user would: its command (a manifest's YAML piped to it), then, for a
    remedy that adds capacity, the seed's new Nodes registered as a node group would."""
    manifest = remedy["kind"] == "manifest"
    applied = run_remedy(cluster.plane, remedy["command"], remedy["yaml"] if manifest else None)
    assert applied.returncode == 0, f"`{remedy['command']}`: {applied.stderr}"
    if manifest:
        for doc in yaml.safe_load_all(remedy["yaml"]):
            if doc and doc.get("kind") in CLUSTER_SCOPED:
                cleanup.append(object_path(doc))
    for new in seed.adds_nodes:
        cluster.api.create(new)
    if seed.after_remedy:
        cluster.plane.kubectl("-n", cluster.ns, *seed.after_remedy)


async def open_incidents(host: AgentHost) -> list[Incident]:
    async with host.sessions() as session:
        return list((await session.execute(select(Incident).order_by(Incident.id))).scalars())


async def watch_remedy_resolve(
    cluster: Cluster,
    seed: Seed,
    tmp_path: Path,
    cleanup: list[str],
    on_stuck: Callable[[dict[str, Any]], None] | None = None,
) -> Incident:
    """With the seed's objects created: the live agent (``unstick watch``'s ClusterAgent, in
    process, remedies verified with a server dry-run) watches the real API server while the
    seed sticks, must open the seed's incident with a verified remedy; that remedy applied
    with kubectl must get every pod of the workload bound, and the incident must resolve.
    ``on_stuck`` is called (in a thread) with the stuck pod as the scheduler left it.
    Returns the incident as it was opened."""
    host = await AgentHost.open(f"sqlite+aiosqlite:///{tmp_path}/agent.db")
    stop = asyncio.Event()
    try:
        agent = await ClusterAgent.connect(
            cluster="real",
            gateway=Gateway(str(cluster.plane.kubeconfig), request_timeout=10, connect_timeout=5),
            sessions=host.sessions,
            config=PipelineConfig(grace=0, debounce=0.05, resync=1.0),
            renderer=host.renderer,
            namespaces=[cluster.ns],
            verify_with_dry_run=True,
        )
        host.agents.append(agent)
        if seed.waited:  # a rule with a time threshold: the agent looks as if that long had passed
            agent.pipeline.clock = lambda: time.time() + seed.waited
        agent.start(stop)
        assert agent.pipeline.config.kube_version == KUBE_VERSION.lstrip("v")  # read from the real /version
        stuck = await asyncio.to_thread(stick, cluster, seed)
        if on_stuck is not None:
            await asyncio.to_thread(on_stuck, stuck)

        async def opened() -> Incident | None:
            return next(
                (i for i in await open_incidents(host) if i.rule_id == seed.rule_id and i.status == "open"),
                None,
            )

        incident: Incident = await eventually(opened, 60, f"an open {seed.rule_id} incident")
        if seed.subject:
            assert incident.subject_name == seed.subject
        remedies = [
            r for r in incident.remedies if r["verified"] and seed.remedy_contains in r["yaml"] + r["command"]
        ]
        assert remedies, f"no verified remedy with {seed.remedy_contains!r}: {incident.remedies}"
        if remedies[0]["kind"] in ("patch", "manifest"):  # --verify-with-dry-run recorded the server's answer
            assert ACCEPTED in remedies[0]["verification"], remedies[0]["verification"]
        await asyncio.to_thread(apply_remedy, cluster, seed, remedies[0], cleanup)
        await asyncio.to_thread(all_scheduled, cluster, seed.stuck_label, 60)

        async def resolved() -> bool:
            rows = [i for i in await open_incidents(host) if i.id == incident.id]
            return bool(rows) and rows[0].status == "resolved"

        await eventually(
            resolved, 90, f"the {seed.rule_id} incident to resolve after `{remedies[0]['command']}`"
        )
        return incident
    finally:
        stop.set()
        await host.close()


def delete_claim(cluster: Cluster, name: str) -> None:
    """Remove the scheduler's resource.kubernetes.io/delete-protection finalizer, then delete."""
    path = f"/apis/resource.k8s.io/v1/namespaces/{cluster.ns}/resourceclaims/{name}"
    try:
        cluster.api.patch(path, {"metadata": {"finalizers": None}}, kind="merge-patch")
        cluster.api.delete(path, grace=0)
    except ApiError as exc:
        if exc.status != 404:
            raise
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            cluster.api.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(0.1)
    raise TimeoutError(f"ResourceClaim {name} was not deleted")
