"""Regression cases the real-cluster tier found, replayed deterministically on the real
control plane.

A remedy the real API server refuses is a bug in the rule that wrote it (analyzers/,
owned elsewhere): each case here is reported, listed in ``verdicts.KNOWN_REFUSALS`` so a
random differential run that meets it again prints it instead of failing, and marked
``xfail(strict=True)``: the day the rule is fixed this test passes, strictness turns
that into a failure, and the mark and the KNOWN_REFUSALS entry are removed.
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
from tests.realcluster.conftest import Cluster
from tests.realcluster.harness import KUBE_VERSION, node
from tests.realcluster.replay import pending
from tests.realcluster.verdicts import KNOWN_REFUSALS, cluster_objects_with_workloads

pytestmark = pytest.mark.realcluster
ZONE = "topology.kubernetes.io/zone"
MIN_DOMAINS_WITH_SCHEDULE_ANYWAY = "can only use minDomains if whenUnsatisfiable=DoNotSchedule"


def web_pod(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "x:1"}], **spec},
    }


@pytest.mark.xfail(
    strict=True,
    reason="topology-spread-infeasible's 'Spread as a preference' remedy keeps minDomains with "
    "whenUnsatisfiable: ScheduleAnyway, which pod validation refuses (pkg/apis/core/validation/validation.go "
    "ValidateTopologySpreadConstraints, v1.35.4); found by the differential run, seeds 254654 (c6-p7, c27-p2)",
)
async def test_spread_as_a_preference_drops_min_domains(cluster: Cluster) -> None:
    """Two zones, one matching pod in each, a pending pod spreading over zones with
    minDomains 3: fewer domains than minDomains make the global minimum 0, so both zones
    are over the skew. The rule's ScheduleAnyway remedy must be a pod the server accepts."""
    assert MIN_DOMAINS_WITH_SCHEDULE_ANYWAY in KNOWN_REFUSALS
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
