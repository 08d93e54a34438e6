"""Regression cases the real-cluster tier found, replayed deterministically on the real
control plane.

A remedy the real API server refuses is a bug in the rule that wrote it: each case here
replays one. Until the rule is fixed a case is listed in ``verdicts.KNOWN_REFUSALS`` (so
a random differential run that meets it again prints it instead of failing) and marked
``xfail(strict=True)``; once fixed, both go and the case stays as a regression test.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agent.dryrun import DryRunVerifier
from agent.kube.gateway import Gateway
from analyzers.report import build_report
from analyzers.snapshot import ClusterState
from tests.realcluster.conftest import Cluster, scheduled_condition
from tests.realcluster.generator import FINALIZER, NAMESPACE, Case
from tests.realcluster.harness import KUBE_VERSION, node
from tests.realcluster.replay import pending
from tests.realcluster.test_differential import (
    clear_case,
    ensure_priority_classes,
    set_up,
    settle,
    verdict_of,
)
from tests.realcluster.verdicts import (
    LISTS,
    Comparison,
    cluster_objects,
    cluster_objects_with_workloads,
    compare,
    simulate_objects,
)

pytestmark = pytest.mark.realcluster
ZONE = "topology.kubernetes.io/zone"


def web_pod(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "x:1"}], **spec},
    }


async def test_spread_as_a_preference_drops_min_domains(cluster: Cluster) -> None:
    """Two zones, one matching pod in each, a pending pod spreading over zones with
    minDomains 3: fewer domains than minDomains make the global minimum 0, so both zones
    are over the skew. The rule's ScheduleAnyway remedy must be a pod the server accepts."""
    # Fixed (the remedy sets minDomains: null); found by the differential run, seed 254654.
    ns = cluster.ns
    await asyncio.to_thread(cluster.nodes, [node("a-1", labels={ZONE: "a"}), node("b-1", labels={ZONE: "b"})])
    for name, where in (("web-a", "a-1"), ("web-b", "b-1")):
        cluster.api.create(web_pod(name, ns, nodeName=where))
    spread = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "minDomains": 3,
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    cluster.api.create(web_pod("web-new", ns, topologySpreadConstraints=[spread]))
    await asyncio.to_thread(
        cluster.api.wait_for,
        f"/api/v1/namespaces/{ns}/pods",
        lambda p: p["metadata"]["name"] == "web-new" and pending(p, {"app": "web"}),
        timeout=30,
        what="web-new to be refused by the scheduler",
    )
    state = ClusterState(KUBE_VERSION)
    state.load(await asyncio.to_thread(cluster_objects_with_workloads, cluster))
    report = build_report(state.snapshot(), now=time.time())
    remedies = [
        r
        for f in report.findings
        if f.rule_id == "topology-spread-infeasible" and f.subject.namespace == ns
        for r in f.remedies
        if "ScheduleAnyway" in r.yaml
    ]
    assert remedies, [(f.rule_id, [r.title for r in f.remedies]) for f in report.findings]
    async with Gateway(str(cluster.plane.kubeconfig)) as gateway:
        refusal = await DryRunVerifier(gateway).outcome(remedies[0])
    assert refusal is None, refusal


# --- the four simulator classes of issue 22, replayed -----------------------------------------
# Each case is a cluster the differential run's generator could make (tests/realcluster/
# generator.py), set up and settled the same way; its probes are judged in order (a nominated
# probe stays, its victims held terminating by their finalizer) and every verdict must agree
# with unstick's simulation of the same objects. The real message is asserted too, so a case
# proves the class it stands for is exercised.


def _claim(name: str, cls: str, gib: int = 5) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "storageClassName": cls,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": f"{gib}Gi"}},
        },
    }


def _class(name: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": mode,
    }


def _volume(
    name: str, cls: str, *, labels: dict[str, str] | None = None, claim: str = "", host: str = ""
) -> Any:
    spec: dict[str, Any] = {
        "storageClassName": cls,
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
    }
    if host:
        spec["local"] = {"path": f"/mnt/{name}"}
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}
                        ]
                    }
                ]
            }
        }
    else:
        spec["hostPath"] = {"path": f"/mnt/{name}"}
    if claim:
        spec["claimRef"] = {"namespace": NAMESPACE, "name": claim}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def _probe(name: str, *, cpu: str = "", priority: str = "", claims: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "x:1"}]}
    if cpu:
        spec["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    if priority:
        spec["priorityClassName"] = priority
    if claims:
        spec["volumes"] = [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "probe"}},
        "spec": spec,
    }


def _judge(cluster: Cluster, case: Case) -> list[tuple[dict[str, Any], Comparison]]:
    """Set ``case`` up, judge its probes in order; a nominated probe stays (in flight)."""
    ensure_priority_classes(cluster.plane)
    out: list[tuple[dict[str, Any], Comparison]] = []
    try:
        set_up(cluster, case)
        objects = cluster_objects(cluster.api)
        for probe in case.probes:
            probe["metadata"]["namespace"] = cluster.ns
            created = cluster.api.create(probe)
            name = created["metadata"]["name"]
            real = verdict_of(cluster, name, created["metadata"]["resourceVersion"])
            created["apiVersion"], created["kind"] = "v1", "Pod"
            out.append((real, compare([*objects, created], real, cluster.ns, name)))
            if not real["spec"].get("nodeName") and real.get("status", {}).get("nominatedNodeName"):
                settle(cluster)
            else:
                cluster.api.delete(f"/api/v1/namespaces/{cluster.ns}/pods/{name}", grace=0)
            objects = cluster_objects(cluster.api)
    finally:
        clear_case(cluster, case)
    return out


def _message(real: dict[str, Any]) -> str:
    cond = scheduled_condition(real) or {}
    return str(cond.get("message", ""))


def test_a_nominated_preemptor_holds_the_room_its_victim_frees(cluster: Cluster) -> None:
    victim = web_pod("victim", cluster.ns, nodeName="n-1", priorityClassName="unstick-low")
    victim["metadata"]["finalizers"] = [FINALIZER]
    victim["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "7400m"}}
    case = Case(
        0,
        [node("n-1", cpu="8")],
        [victim],
        [
            _probe("preemptor", cpu="7951m", priority="unstick-mid"),
            _probe("peer", cpu="600m", priority="unstick-mid"),
            _probe("higher", cpu="600m", priority="unstick-high"),
        ],
        in_flight=True,
    )
    (pre, c1), (peer, c2), (_, c3) = _judge(cluster, case)
    assert pre["status"].get("nominatedNodeName") == "n-1", _message(pre)
    assert not c2.real_fits and _message(peer).startswith("0/1 nodes are available: 1 Insufficient cpu."), (
        _message(peer)
    )
    assert c3.real_fits  # a higher priority ignores the nomination
    for cmp in (c1, c2, c3):
        assert cmp.agrees, cmp.differences()


def test_a_volume_zone_keeps_the_pod_out_of_other_zones(cluster: Cluster) -> None:
    ns = cluster.ns
    cls = f"{ns}-zonal"
    case = Case(
        0,
        [node("n-a", labels={ZONE: "za"}), node("n-c", labels={ZONE: "zc"})],
        [],
        [_probe("in-b", claims=("data-b",)), _probe("in-a-or-c", claims=("data-ac",))],
        storage=[
            _class(cls, "Immediate"),
            _volume(f"{ns}-pv-b", cls, labels={ZONE: "zb"}, claim="data-b"),
            _volume(
                f"{ns}-pv-ac",
                cls,
                labels={"failure-domain.beta.kubernetes.io/zone": "za__zc"},
                claim="data-ac",
            ),
            _claim("data-b", cls),
            _claim("data-ac", cls),
        ],
    )
    (in_b, c1), (_, c2) = _judge(cluster, case)
    assert _message(in_b).startswith("0/2 nodes are available: 2 node(s) had no available volume zone."), (
        _message(in_b)
    )
    assert c2.real_fits
    for cmp in (c1, c2):
        assert cmp.agrees, cmp.differences()


def test_two_claims_cannot_bind_one_volume(cluster: Cluster) -> None:
    ns = cluster.ns
    cls = f"{ns}-local"
    case = Case(
        0,
        [node("n-1"), node("n-2")],
        [],
        [_probe("two-claims", claims=("data", "logs"))],
        storage=[
            _class(cls, "WaitForFirstConsumer"),
            _volume(f"{ns}-pv-1", cls, host="n-1"),
            _claim("data", cls),
            _claim("logs", cls),
        ],
    )
    ((real, cmp),) = _judge(cluster, case)
    assert _message(real).startswith(
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    ), _message(real)
    assert cmp.agrees, cmp.differences()


def test_an_unbound_immediate_claim_ends_the_message_with_not_found(cluster: Cluster) -> None:
    cls = f"{cluster.ns}-immediate"
    case = Case(
        0,
        [node("n-1"), node("n-2")],
        [],
        [_probe("unbound", claims=("nowhere",)), _probe("missing", claims=("no-such-claim",))],
        storage=[_class(cls, "Immediate"), _claim("nowhere", cls)],
    )
    (unbound, c1), (missing, c2) = _judge(cluster, case)
    assert (
        _message(unbound)
        == "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found"
    )
    assert (
        _message(missing)
        == '0/2 nodes are available: persistentvolumeclaim "no-such-claim" not found. not found'
    )
    for cmp in (c1, c2):
        assert cmp.agrees, cmp.differences()


def test_a_claim_of_a_missing_device_class_is_followed_by_preemption(cluster: Cluster) -> None:
    """Found by the DRA differential on v1.37.2 (seed 708245): DynamicResources' own PreFilter
    rejection (``request gpu: device class unstick-none does not exist``) leaves its state written,
    so its PostFilter does not err and DefaultPreemption's clause follows (on 1.34-1.36 after
    ``no new claims to deallocate``); the simulator had printed the PostFilter error instead."""
    from tests.realcluster.test_dra_differential import DRA_LISTS

    cluster.nodes([node("n-1"), node("n-2")])
    # A published device and a class, so the simulation judges DRA (it stays silent on a dump
    # without them: were they collected?).
    published = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{cluster.ns}-n-1"},
        "spec": {
            "driver": "gpu.unstick.test",
            "nodeName": "n-1",
            "pool": {"name": "n-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}],
        },
    }
    cluster.api.create(published)
    gpu_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": f"{cluster.ns}-gpu"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.unstick.test"'}}]},
    }
    cluster.api.create(gpu_class)
    cluster.api.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "gpu", "namespace": cluster.ns},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "unstick-none"}}]}
            },
        }
    )
    probe = _probe("wants-gpu")
    probe["metadata"]["namespace"] = cluster.ns
    probe["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu"}]
    objects = cluster_objects(cluster.api, LISTS + DRA_LISTS)
    created = cluster.api.create(probe)
    real = verdict_of(cluster, "wants-gpu", created["metadata"]["resourceVersion"])
    created["apiVersion"], created["kind"] = "v1", "Pod"
    dra = "no new claims to deallocate, " if 34 <= int(KUBE_VERSION.lstrip("v").split(".")[1]) <= 36 else ""
    expected = (
        "0/2 nodes are available: request gpu: device class unstick-none does not exist. "
        f"{dra}preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    try:
        assert _message(real) == expected
        assert simulate_objects([*objects, created], cluster.ns, "wants-gpu").message == expected
    finally:
        cluster.api.delete(f"/apis/resource.k8s.io/v1/resourceslices/{cluster.ns}-n-1")
        cluster.api.delete(f"/apis/resource.k8s.io/v1/deviceclasses/{cluster.ns}-gpu")
