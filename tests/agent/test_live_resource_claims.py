"""The live agent watches ResourceClaims (resource.k8s.io/v1): a pod held out of the
scheduler's queue by a claim being deleted is an incident naming the claim, read through
the real kubernetes-asyncio client from the fake endpoint; a cluster that does not serve
the kind (404 on the first list) is watched without it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent.fakecluster.server import FakeCluster
from agent.kube.gateway import Gateway
from agent.pipeline import PipelineConfig
from agent.runner import AgentHost, ClusterAgent
from tests.agent.conftest import incidents
from tests.rules.placement_fixtures import deployment, node, template
from tests.waiting import eventually


def claimed_web() -> list[dict]:
    tpl = template()
    tpl["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared-gpu"}]
    tpl["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return deployment("web", tpl)


def claim(name: str, *, deleting: bool) -> dict:
    meta: dict = {"name": name, "namespace": "default", "uid": f"uid-claim-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2025-12-31T23:55:00Z"
        meta["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": []}},
    }


async def connect(host: AgentHost, cluster: FakeCluster, tmp_path: Path) -> ClusterAgent:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    agent = await ClusterAgent.connect(
        cluster="dra",
        gateway=Gateway(str(kubeconfig), request_timeout=5, connect_timeout=2, watch_idle_timeout=5),
        sessions=host.sessions,
        config=PipelineConfig(grace=0, debounce=0.05, resync=0.5),
        renderer=host.renderer,
    )
    host.agents.append(agent)
    return agent


async def silent_incident(host: AgentHost, cluster: FakeCluster, tmp_path: Path) -> Any:
    """The scheduler-silent incident the live agent opens for the cluster."""
    agent = await connect(host, cluster, tmp_path)
    stop = asyncio.Event()
    agent.start(stop)
    try:

        async def silent() -> list | None:
            rows = [i for i in await incidents(host) if i.rule_id == "scheduler-silent"]
            return rows or None

        (incident,) = await eventually(silent, timeout=30)
        return incident
    finally:
        stop.set()
        await agent.stop()


async def test_a_claim_being_deleted_is_named_by_the_live_agent(host: AgentHost, tmp_path: Path) -> None:
    async with FakeCluster() as cluster:
        for obj in [node("w-0"), *claimed_web(), claim("shared-gpu", deleting=True)]:
            cluster.apply(obj)
        incident = await silent_incident(host, cluster, tmp_path)
        assert incident.evidence["cause"] == "resourceclaim-being-deleted"
        assert incident.evidence["resource_claim"] == "shared-gpu"
        paths = {r.path for r in cluster.requests}
        assert "/apis/resource.k8s.io/v1/resourceclaims" in paths


async def test_a_missing_claim_is_judged_once_the_claims_are_listed(host: AgentHost, tmp_path: Path) -> None:
    """The cluster holds no ResourceClaim: the (empty) list succeeded, so the named claim is
    missing, as PreEnqueue's ``could not find ResourceClaim`` says."""
    async with FakeCluster() as cluster:
        for obj in [node("w-0"), *claimed_web()]:
            cluster.apply(obj)
        incident = await silent_incident(host, cluster, tmp_path)
        assert incident.evidence["cause"] == "missing-resourceclaim"
        assert incident.evidence["preenqueue_status"] == 'could not find ResourceClaim "default/shared-gpu"'


async def test_a_cluster_without_resource_k8s_io_is_watched_without_claims(
    host: AgentHost, tmp_path: Path
) -> None:
    """404 on the claims' first list: the other kinds are watched and analysed; the named
    claim is not judged missing (it was never listed)."""
    async with FakeCluster(unserved_groups={"resource.k8s.io"}) as cluster:
        for obj in [node("w-0"), *claimed_web()]:
            cluster.apply(obj)
        agent = await connect(host, cluster, tmp_path)
        stop = asyncio.Event()
        agent.start(stop)
        try:
            await eventually(lambda: agent.pipeline.stats.passes >= 1, timeout=30)
            assert sorted(agent.watcher.unavailable_kinds) == [
                "DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"
            ]
            snapshot = agent.cache.state.snapshot()
            assert not snapshot.holds_every("ResourceClaim", "default")
            assert snapshot.holds_every("Pod", "default")
            assert [i for i in await incidents(host) if i.rule_id == "scheduler-silent"] == []
        finally:
            stop.set()
            await agent.stop()


async def test_the_live_agent_watches_slices_and_classes_and_explains_dra(host: AgentHost, tmp_path: Path) -> None:
    """DeviceClasses and ResourceSlices listed and watched like the other kinds: the web
    pods' claim asks a GPU model no slice offers, and the incident says which values exist."""
    from tests.dra.test_dra_allocation import device, device_class, slice_

    wanted = claim("shared-gpu", deleting=False)
    wanted["spec"] = {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu",
                        "selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "H200"'}}],
                    },
                }
            ]
        }
    }
    async with FakeCluster() as cluster:
        for obj in [node("w-0"), *claimed_web(), wanted, device_class(), slice_("w-0", [device("gpu-0", "H100")])]:
            cluster.apply(obj)
        agent = await connect(host, cluster, tmp_path)
        stop = asyncio.Event()
        agent.start(stop)
        try:

            async def dra() -> list | None:
                rows = [i for i in await incidents(host) if i.rule_id == "dra-devices-unavailable"]
                return rows or None

            (incident,) = await eventually(dra, timeout=30)
            assert incident.evidence["cause"] == "no-matching-devices"
            assert incident.evidence["attribute_values"]["model"] == {"H100": [1, 1], "H200": [0, 0]}
            paths = {r.path for r in cluster.requests}
            assert "/apis/resource.k8s.io/v1/resourceslices" in paths
            assert "/apis/resource.k8s.io/v1/deviceclasses" in paths
        finally:
            stop.set()
            await agent.stop()
