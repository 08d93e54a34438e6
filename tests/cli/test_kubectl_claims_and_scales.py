"""``kubectl unstick`` reads what the live agent reads for the two cases only a live read can
tell: ResourceClaims (``resource.k8s.io/v1``; DynamicResources' PreEnqueue holds a pod whose
claim is missing, being deleted or not its own, pkg/scheduler/framework/plugins/
dynamicresources/dynamicresources.go v1.35.4) and custom controllers' ``/scale`` for budgets
(getScaleController, pkg/controller/disruption/disruption.go v1.35.4). Each test runs the
plugin's diagnosis against the fake API endpoint over HTTP through kubernetes-asyncio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.commands.kubectl import build_parser, diagnose
from agent.fakecluster import FakeCluster
from tests.agent.test_live_resource_claims import claim, claimed_web
from tests.agent.test_scales import _database, _state_objects, _uid
from tests.core.test_disruption_scale import SCALE, crd
from tests.rules.placement_fixtures import node

# Every way the plugin names what to explain, for the pending pod of claimed_web().
TARGETS = {
    "pod": lambda pod: [f"pod/{pod}", "-n", "default"],
    "deploy": lambda pod: ["deploy/web", "-n", "default"],
    "namespace": lambda pod: ["-n", "default"],
    "all-namespaces": lambda pod: ["-A"],
}


async def _diagnose(cluster: FakeCluster, tmp_path: Path, *args: str) -> tuple[Any, list[str]]:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    report, _, notes, _ = await diagnose(build_parser().parse_args([*args, "--kubeconfig", str(kubeconfig)]))
    return report, notes


def _pending(cluster: FakeCluster) -> str:
    (name,) = [p["metadata"]["name"] for p in cluster.objects("Pod") if not p["spec"].get("nodeName")]
    return str(name)


def _silent(report: Any) -> list[Any]:
    return [f for f in report.findings if f.rule_id == "scheduler-silent"]


@pytest.mark.parametrize("target", list(TARGETS))
async def test_a_named_claim_that_does_not_exist_is_judged_from_an_empty_list(
    tmp_path: Path, target: str
) -> None:
    """The cluster holds no ResourceClaim at all: the list succeeded, so the claim is missing."""
    async with FakeCluster() as cluster:
        for obj in [node("w-0"), *claimed_web()]:
            cluster.apply(obj)
        report, notes = await _diagnose(cluster, tmp_path, *TARGETS[target](_pending(cluster)))
        (finding,) = _silent(report)
        assert finding.evidence["cause"] == "missing-resourceclaim"
        assert finding.evidence["preenqueue_status"] == 'could not find ResourceClaim "default/shared-gpu"'
        assert notes == []
        listed = {r.path for r in cluster.requests if r.verb == "list"}
        assert listed & {
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims",
            "/apis/resource.k8s.io/v1/resourceclaims",
        }


@pytest.mark.parametrize("target", ["pod", "deploy"])
async def test_a_claim_being_deleted_is_named(tmp_path: Path, target: str) -> None:
    async with FakeCluster() as cluster:
        for obj in [node("w-0"), *claimed_web(), claim("shared-gpu", deleting=True)]:
            cluster.apply(obj)
        report, _ = await _diagnose(cluster, tmp_path, *TARGETS[target](_pending(cluster)))
        (finding,) = _silent(report)
        assert (finding.evidence["cause"], finding.evidence["resource_claim"]) == (
            "resourceclaim-being-deleted",
            "shared-gpu",
        )


async def test_a_claim_that_exists_holds_nothing(tmp_path: Path) -> None:
    async with FakeCluster() as cluster:
        for obj in [node("w-0"), *claimed_web(), claim("shared-gpu", deleting=False)]:
            cluster.apply(obj)
        report, notes = await _diagnose(cluster, tmp_path, "-n", "default")
        assert _silent(report) == [] and notes == []


@pytest.mark.parametrize("target", list(TARGETS))
async def test_a_cluster_without_resource_k8s_io_is_diagnosed_without_claims(
    tmp_path: Path, target: str
) -> None:
    """404 on the claims' list: go on without them (as the live agent's watcher does); the
    claim is then unjudged, and the note says so."""
    async with FakeCluster(unserved_groups={"resource.k8s.io"}) as cluster:
        for obj in [node("w-0"), *claimed_web()]:
            cluster.apply(obj)
        pod = _pending(cluster)
        report, notes = await _diagnose(cluster, tmp_path, *TARGETS[target](pod))
        assert _silent(report) == []
        assert [p.pod.name for p in report.pods] == [pod]
        (note,) = notes
        assert f"pod default/{pod} names ResourceClaim shared-gpu" in note
        assert "404" in note and "not judged" in note


async def test_a_forbidden_claims_list_leaves_them_unjudged(tmp_path: Path) -> None:
    async with FakeCluster() as cluster:
        for obj in [node("w-0"), *claimed_web()]:
            cluster.apply(obj)
        cluster.faults.fail(403, verb="list", kind="ResourceClaim")
        report, notes = await _diagnose(cluster, tmp_path, "-n", "default")
        assert _silent(report) == []
        (note,) = notes
        assert "403" in note and "not judged" in note


def _drain_cluster(cluster: FakeCluster, replicas: int) -> None:
    cluster.apply(crd(scale=SCALE))
    cluster.apply(_database(replicas))
    for obj in _state_objects(_uid(cluster)):
        cluster.apply(obj)


async def test_a_drain_reads_the_custom_controllers_scale(tmp_path: Path) -> None:
    """3 Ready pods of a Database whose /scale says 5: 5 - maxUnavailable 1 = 4 must stay
    healthy, so no eviction is allowed although the PDB's status says 1 (as the live agent)."""
    async with FakeCluster() as cluster:
        _drain_cluster(cluster, 5)
        report, _ = await _diagnose(cluster, tmp_path, "node/n1")
        (budget,) = [b.as_dict() for b in report.pdbs]
        assert (budget["expected_pods"], budget["desired_healthy"], budget["disruptions_allowed"]) == (
            5,
            4,
            0,
        )
        assert (budget["figures"], budget["unknown"]) == ("computed", None)
        assert "pdb-blocks-eviction" in [f.rule_id for f in report.findings]
        gets = [r.path for r in cluster.requests if r.verb == "get"]
        assert "/apis/db.example.com/v1/namespaces/default/databases/orders/scale" in gets


async def test_a_refused_scale_is_unknown_with_the_reason(tmp_path: Path) -> None:
    async with FakeCluster() as cluster:
        _drain_cluster(cluster, 5)
        message = (
            'databases.db.example.com "orders" is forbidden: User "jane" cannot get resource '
            '"databases/scale" in API group "db.example.com" in the namespace "default"'
        )
        cluster.faults.fail(403, verb="get", kind="databases", message=message)
        report, _ = await _diagnose(cluster, tmp_path, "node/n1")
        (budget,) = [b.as_dict() for b in report.pdbs]
        assert budget["figures"] == "status"
        assert "403 Forbidden" in budget["unknown"] and "cannot get resource" in budget["unknown"]
        assert "databases/scale" in budget["unknown"]
        # The figures are the PDB's own status (expected 3, allowed 1), not invented.
        assert (budget["expected_pods"], budget["disruptions_allowed"]) == (3, 1)
