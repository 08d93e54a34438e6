"""DRA differential fidelity: DynamicResources simulated against the real kube-scheduler.

Each random DRA cluster (tests/realcluster/generator_dra.py) is published as a
DRA driver would publish it (DeviceClasses, ResourceSlices; no kubelet plugin is
needed to schedule and allocate), holders' claims are allocated by the real
scheduler, then each probe -- a claim or a template with one request form, and
the pod using it -- is scheduled alone. The simulator is fed the objects the API
server held before the probe's scheduling (the probe's claim without the
allocation the scheduler wrote). For every case: fits-or-not, the filter part of
the message (byte for byte), the preemption verdict, and for a fit the devices
the real scheduler allocated (the claim's ``status.allocation``) against what
unstick's allocator picks on that node.

Environment: ``UNSTICK_DRA_SEED`` (default from the clock, printed),
``UNSTICK_DRA_CASES`` (default 150), ``UNSTICK_DRA_RECORD_DIR`` (where
disagreements are written as regression cases).
"""

from __future__ import annotations

import copy
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realcluster.conftest import Cluster, scheduled_condition
from tests.realcluster.generator_dra import API, DraCase, make_case
from tests.realcluster.harness import ApiError, ControlPlane
from tests.realcluster.replay import delete_claim
from tests.realcluster.verdicts import (
    DRA_LISTS,
    LISTS,
    cluster_objects,
    preemption_histogram,
    simulate_objects,
    split_message,
)

pytestmark = pytest.mark.realcluster

PROBES_PER_CLUSTER = 6


def _path(obj: dict[str, Any], ns: str | None) -> str:
    plural = {
        "DeviceClass": "deviceclasses",
        "ResourceSlice": "resourceslices",
        "ResourceClaim": "resourceclaims",
        "ResourceClaimTemplate": "resourceclaimtemplates",
    }[obj["kind"]]
    where = f"/namespaces/{ns}" if ns else ""
    return f"/apis/resource.k8s.io/v1{where}/{plural}/{obj['metadata']['name']}"


def decided(p: dict[str, Any]) -> bool:
    cond = scheduled_condition(p)
    return bool(p["spec"].get("nodeName")) or (cond is not None and cond.get("status") == "False")


def wait_decided(cluster: Cluster, name: str, since: str) -> dict[str, Any]:
    return cluster.api.wait_for(
        f"/api/v1/namespaces/{cluster.ns}/pods?fieldSelector=metadata.name%3D{name}",
        decided,
        timeout=30,
        what=f"the scheduler's verdict on {cluster.ns}/{name}",
        since=since,
    )


def clear(cluster: Cluster, previous: DraCase | None) -> None:
    for pod in cluster.api.get(f"/api/v1/namespaces/{cluster.ns}/pods")["items"]:
        cluster.api.delete(f"/api/v1/namespaces/{cluster.ns}/pods/{pod['metadata']['name']}", grace=0)
    for claim in cluster.api.get(f"/apis/resource.k8s.io/v1/namespaces/{cluster.ns}/resourceclaims")["items"]:
        delete_claim(cluster, claim["metadata"]["name"])
    for t in cluster.api.get(f"/apis/resource.k8s.io/v1/namespaces/{cluster.ns}/resourceclaimtemplates")[
        "items"
    ]:
        cluster.api.delete(_path({"kind": "ResourceClaimTemplate", **t}, cluster.ns))
    if previous is not None:
        for s in previous.slices:
            try:
                cluster.api.delete(_path(s, None))
            except ApiError as exc:
                if exc.status != 404:
                    raise


def create(cluster: Cluster, obj: dict[str, Any], namespaced: bool) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    if namespaced:
        obj["metadata"]["namespace"] = cluster.ns
    try:
        if obj["kind"] == "Pod":
            return dict(cluster.api.create(obj))
        collection = _path(obj, cluster.ns if namespaced else None).rsplit("/", 1)[0]
        return dict(cluster.api.request("POST", collection, obj))
    except ApiError as exc:
        if exc.status != 409 or namespaced:
            raise
        return obj


def real_allocation(claim: dict[str, Any]) -> list[dict[str, str]]:
    results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return [{k: r[k] for k in ("request", "driver", "pool", "device")} for r in results]


def before_scheduling(claim: dict[str, Any]) -> dict[str, Any]:
    """The probe's claim as the scheduler found it: no allocation, no consumers."""
    out = copy.deepcopy(claim)
    out.pop("status", None)
    out["apiVersion"], out["kind"] = API, "ResourceClaim"
    return out


def compare_case(
    objects: list[dict[str, Any]],
    pod: dict[str, Any],
    claim: dict[str, Any] | None,
    ns: str,
    *,
    extended: bool = False,
    inputs: list[dict[str, Any]] | None = None,
) -> list[str]:
    """``extended``: ``claim`` is the scheduler's own claim for the DRA-backed extended
    resource -- not an input of the simulation, only the allocation to compare. ``inputs``
    receives what was simulated (recorded with a disagreement)."""
    inputs = [] if inputs is None else inputs
    name = pod["metadata"]["name"]
    real_fits = bool(pod["spec"].get("nodeName"))
    probe = copy.deepcopy(pod)
    probe["apiVersion"], probe["kind"] = "v1", "Pod"
    probe["spec"].pop("nodeName", None)
    probe["status"] = {k: v for k, v in (probe.get("status") or {}).items() if k == "resourceClaimStatuses"}
    probe["status"]["phase"] = "Pending"
    extra = [before_scheduling(claim)] if claim is not None and not extended else []
    inputs.extend([*objects, probe, *extra])
    verdict = simulate_objects(inputs, ns, name)
    diffs: list[str] = []
    if verdict.fits != real_fits:
        message = (scheduled_condition(pod) or {}).get("message", "")
        return [f"fits: real {real_fits} ({message!r}), simulated {verdict.fits} ({verdict.message!r})"]
    if real_fits:
        node_name = pod["spec"]["nodeName"]
        want = real_allocation(claim) if claim is not None else []
        got = [r.as_dict() for r in (verdict.allocations or {}).get(node_name, ())]
        if want != got:
            diffs.append(f"allocation on {node_name}: real {want}, simulated {got}")
        return diffs
    message = (scheduled_condition(pod) or {}).get("message", "")
    if split_message(message)[0] != split_message(verdict.message)[0]:
        diffs.append(f"filter part:\n  real:      {message}\n  simulated: {verdict.message}")
    nominated = bool((pod.get("status") or {}).get("nominatedNodeName"))
    if nominated != bool(verdict.preemption.candidates):
        diffs.append(f"preemption candidate: real {nominated}, simulated {verdict.preemption.candidates}")
    elif not nominated and preemption_histogram(message) != preemption_histogram(verdict.message):
        diffs.append(
            f"preemption: real {preemption_histogram(message)}, simulated {preemption_histogram(verdict.message)}"
        )
    return diffs


def record(
    out: Path, seed: int, objects: list[dict[str, Any]], pod: dict[str, Any], diffs: list[str]
) -> Path:
    folder = out / f"seed{seed}-{pod['metadata']['name']}"
    folder.mkdir(parents=True, exist_ok=True)
    for o in objects:
        o.get("metadata", {}).pop("managedFields", None)
    (folder / "objects.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False))
    (folder / "expected.yaml").write_text(
        yaml.safe_dump({"pod": pod, "differences": diffs}, sort_keys=False, width=1000)
    )
    return folder


def test_dra_simulation_agrees_with_the_real_scheduler(control_plane: ControlPlane, cluster: Cluster) -> None:
    seed = int(os.environ.get("UNSTICK_DRA_SEED") or time.time_ns() % 1_000_000)
    wanted = int(os.environ.get("UNSTICK_DRA_CASES") or 150)
    out = Path(os.environ.get("UNSTICK_DRA_RECORD_DIR") or tempfile.mkdtemp(prefix="unstick-dra-diff-"))
    print(f"\nDRA differential run: seed {seed}, {wanted} cases (UNSTICK_DRA_SEED={seed} reproduces it)")
    rng = random.Random(seed)
    cases = agree = fits = index = 0
    disagreements: list[str] = []
    previous: DraCase | None = None
    started = time.monotonic()
    try:
        while cases < wanted:
            case = make_case(rng, index, PROBES_PER_CLUSTER)
            index += 1
            clear(cluster, previous)
            previous = case
            cluster.nodes(case.nodes)
            for cls in case.classes:
                create(cluster, cls, namespaced=False)
            for s in case.slices:
                create(cluster, s, namespaced=False)
            for claim, pod in case.holders:
                create(cluster, claim, namespaced=True)
                made = create(cluster, pod, namespaced=True)
                wait_decided(cluster, made["metadata"]["name"], made["metadata"]["resourceVersion"])
            for obj, pod in case.probes:
                if cases >= wanted:
                    break
                objects = cluster_objects(cluster.api, LISTS + DRA_LISTS)
                if obj is not None:
                    create(cluster, obj, namespaced=True)
                made = create(cluster, pod, namespaced=True)
                name = made["metadata"]["name"]
                real = wait_decided(cluster, name, made["metadata"]["resourceVersion"])
                if obj is None:  # the scheduler's own claim for the DRA-backed extended resource
                    status = (real.get("status") or {}).get("extendedResourceClaimStatus") or {}
                    claim_name = status.get("resourceClaimName") or ""
                    extended = True
                else:
                    claim_name = obj["metadata"]["name"]
                    extended = False
                if obj is not None and obj["kind"] == "ResourceClaimTemplate":
                    statuses = (real.get("status") or {}).get("resourceClaimStatuses") or []
                    claim_name = next((s.get("resourceClaimName") for s in statuses), None) or ""
                    objects.append(
                        {
                            **copy.deepcopy(obj),
                            "apiVersion": API,
                            "kind": "ResourceClaimTemplate",
                            "metadata": {**obj["metadata"], "namespace": cluster.ns},
                        }
                    )
                claim = None
                if claim_name:
                    claim = cluster.api.get(
                        f"/apis/resource.k8s.io/v1/namespaces/{cluster.ns}/resourceclaims/{claim_name}"
                    )
                inputs: list[dict[str, Any]] = []
                diffs = compare_case(objects, real, claim, cluster.ns, extended=extended, inputs=inputs)
                cases += 1
                fits += bool(real["spec"].get("nodeName"))
                if diffs:
                    folder = record(out, seed, inputs, real, diffs)
                    disagreements.append(f"{folder}: " + "; ".join(diffs))
                else:
                    agree += 1
                cluster.api.delete(f"/api/v1/namespaces/{cluster.ns}/pods/{name}", grace=0)
                if claim_name:
                    delete_claim(cluster, claim_name)
                if obj is not None and obj["kind"] == "ResourceClaimTemplate":
                    cluster.api.delete(_path(obj, cluster.ns))
                time.sleep(0.2)  # the scheduler's claim tracker sees the deletion
    finally:
        clear(cluster, previous)
    print(
        f"DRA differential run: seed {seed}: {cases} cases on {index} clusters, {agree} agree ({fits} fit), "
        f"{time.monotonic() - started:.1f} s, disagreements recorded in {out}"
    )
    assert not disagreements, f"{len(disagreements)} disagreement(s) (seed {seed}):\n" + "\n".join(
        disagreements[:20]
    )
