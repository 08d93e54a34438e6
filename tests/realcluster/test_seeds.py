"""The seed incidents replayed on the real control plane, end to end.

For each seed (tests/realcluster/seeds.py), in its own namespace:
(a) the real kube-scheduler's ``PodScheduled=False`` message is the one Kubernetes'
    format strings give, and unstick's simulation of the same objects (as the API
    server returned them) prints the same filter part byte for byte and the same
    preemption reason codes and counts;
(b) the live agent (``unstick watch``'s ClusterAgent, in process) watching the real API
    server opens the expected incident with a verified remedy;
(c) that remedy, applied with kubectl, really unsticks the workload (every pod of it
    bound) and the agent resolves the incident. Every seed is covered; where the remedy
    is capacity (a PV's zone has no node) the command only lists the zone's nodes, and
    the test registers the Node a node group would add (``Seed.adds_nodes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent.kube.gateway import Gateway
from agent.pipeline import PipelineConfig
from agent.runner import AgentHost, ClusterAgent
from analyzers.report import build_report
from analyzers.snapshot import ClusterState
from storage.models import Incident
from tests.realcluster.conftest import Cluster, scheduled_condition
from tests.realcluster.harness import KUBE_VERSION, ApiError
from tests.realcluster.replay import (
    eventually,
    open_incidents,
    pending,
    run_remedy,
    set_up,
    stick,
    watch_remedy_resolve,
)
from tests.realcluster.seeds import EVICTION_REFUSED, Seed, drain_objects, recorder_seeds, seeds
from tests.realcluster.verdicts import (
    cluster_objects,
    cluster_objects_with_workloads,
    dry_run_every_remedy,
    preemption_histogram,
    simulate_objects,
    split_message,
)

pytestmark = pytest.mark.realcluster
REPO = Path(__file__).resolve().parents[2]

SEEDS = seeds()


def check_verdict(cluster: Cluster, seed: Seed, pod: dict[str, Any]) -> None:
    name = pod["metadata"]["name"]
    real = (scheduled_condition(pod) or {}).get("message", "")
    assert real == seed.message, f"kube-scheduler said:\n{real}"
    verdict = simulate_objects(cluster_objects(cluster.api), cluster.ns, name)
    assert split_message(verdict.message)[0] == split_message(real)[0]
    assert preemption_histogram(verdict.message) == preemption_histogram(real)


def dry_run_remedies(cluster: Cluster, seed: Seed) -> int:
    """Send every remedy unstick produces for the cluster that it can dry-run (patches,
    re-created pods, manifests) to the API server with dryRun=All; each must be
    accepted. Returns how many requests were sent."""
    state = ClusterState(KUBE_VERSION)
    state.load(cluster_objects_with_workloads(cluster))
    report = build_report(state.snapshot(), now=time.time() + seed.waited)
    findings = [f for f in report.findings if f.subject.namespace == cluster.ns]
    if seed.rule_id:
        assert seed.rule_id in {f.rule_id for f in findings}, [f.rule_id for f in findings]
    sent, refused = dry_run_every_remedy(cluster.plane.kubeconfig, findings, cluster.ns)
    assert not refused, "\n".join(refused)
    return sent


def record_and_reanalyse(cluster: Cluster, seed: Seed, out: Path) -> None:
    """scripts/record_scenario.py writes the stuck cluster in both fixture formats; the
    golden one analysed offline finds the seed's rule, the demo one loads as a scenario."""
    from agent.fakecluster.scenario import Scenario
    from analyzers.ingest import parse_documents

    base = [
        sys.executable,
        str(REPO / "scripts/record_scenario.py"),
        "-n",
        cluster.ns,
        f"--kubectl={cluster.plane.bin_dir / 'kubectl'}",
        f"--kubeconfig={cluster.plane.kubeconfig}",
    ]
    for fmt in ("golden", "demo"):
        proc = subprocess.run(
            [*base, f"--format={fmt}", f"--out={out / fmt}"], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
    objects = []
    for name in ("nodes.yaml", "workloads.yaml", "events.yaml"):
        objects.extend(parse_documents((out / "golden" / name).read_text(), name))
    state = ClusterState()
    state.load(objects)
    assert not state.warnings, state.warnings
    report = build_report(state.snapshot(), now=time.time() + seed.waited)
    if seed.rule_id:
        assert seed.rule_id in {f.rule_id for f in report.findings}
    scenario = Scenario.load(out / "demo")
    assert scenario.name == "demo"


@pytest.mark.parametrize("seed", SEEDS, ids=[s.id for s in SEEDS])
def test_the_real_scheduler_says_what_unstick_simulates(cluster: Cluster, seed: Seed, tmp_path: Path) -> None:
    cleanup = set_up(cluster, seed)
    try:
        check_verdict(cluster, seed, stick(cluster, seed))
        dry_run_remedies(cluster, seed)
        record_and_reanalyse(cluster, seed, tmp_path)
    finally:
        for path in cleanup:
            cluster.api.delete(path)


# -- (b) and (c): the live agent against the real API server ---------------------------------------


AGENT_SEEDS = [s for s in SEEDS if s.rule_id and s.remedy_contains]


@pytest.mark.parametrize("seed", AGENT_SEEDS, ids=[s.id for s in AGENT_SEEDS])
async def test_watch_opens_the_incident_and_the_remedy_resolves_it(
    cluster: Cluster, seed: Seed, tmp_path: Path
) -> None:
    cleanup = await asyncio.to_thread(set_up, cluster, seed)
    try:
        await watch_remedy_resolve(cluster, seed, tmp_path, cleanup)
    finally:
        for path in cleanup:
            with contextlib.suppress(ApiError):
                await asyncio.to_thread(cluster.api.delete, path)


# -- the PDB-blocked drain, with a real `kubectl drain` ----------------------------------------------

DRAIN_MESSAGE = next(s.message for s in recorder_seeds() if s.id == "pdb-blocked-drain")


def drain_seed_objects(ns: str) -> list[dict[str, Any]]:
    objects = drain_objects()
    for obj in objects:
        obj["metadata"]["namespace"] = ns
    return objects


async def test_pdb_blocked_drain_retries_on_the_real_refusal_and_the_remedy_lets_it_finish(
    cluster: Cluster, tmp_path: Path
) -> None:
    from tests.realcluster.harness import node

    def setup() -> None:
        cluster.nodes(
            [node("node-1", cpu="2", unschedulable=True), node("node-2", cpu="2"), node("node-3", cpu="2")]
        )
        for obj in drain_seed_objects(cluster.ns):
            cluster.api.create(obj)
        cluster.api.wait_for(
            f"/apis/policy/v1/namespaces/{cluster.ns}/poddisruptionbudgets",
            lambda p: (
                p.get("status", {}).get("currentHealthy") == 3 and p["status"].get("disruptionsAllowed") == 1
            ),
            timeout=60,
            what="storefront's budget to see 3 healthy pods",
        )

    await asyncio.to_thread(setup)
    host = await AgentHost.open(f"sqlite+aiosqlite:///{tmp_path}/agent.db")
    stop = asyncio.Event()
    try:
        agent = await ClusterAgent.connect(
            cluster="real",
            gateway=Gateway(str(cluster.plane.kubeconfig)),
            sessions=host.sessions,
            config=PipelineConfig(grace=0, debounce=0.05, resync=1.0),
            renderer=host.renderer,
            namespaces=[cluster.ns],
            verify_with_dry_run=True,
        )
        host.agents.append(agent)
        agent.start(stop)
        drain = await asyncio.to_thread(
            cluster.plane.kubectl, "drain", "node-2", "--ignore-daemonsets", "--timeout=15s", check=False
        )
        assert drain.returncode != 0
        assert f"(will retry after 5s): {EVICTION_REFUSED}" in drain.stderr, drain.stderr

        stuck = await asyncio.to_thread(
            cluster.api.wait_for,
            f"/api/v1/namespaces/{cluster.ns}/pods",
            lambda p: pending(p, {"app": "storefront"}),
            timeout=30,
            what="the evicted pod's replacement",
        )
        seed = Seed("pdb-drain", [], [], {"app": "storefront"}, DRAIN_MESSAGE)
        await asyncio.to_thread(check_verdict, cluster, seed, stuck)
        await asyncio.to_thread(dry_run_remedies, cluster, seed)

        async def opened() -> Incident | None:
            return next(
                (
                    i
                    for i in await open_incidents(host)
                    if i.rule_id == "pdb-blocks-eviction" and i.status == "open"
                ),
                None,
            )

        incident = await eventually(opened, 60, "an open pdb-blocks-eviction incident")
        assert incident.subject_name == "storefront"
        remedies = [r for r in incident.remedies if r["verified"] and "uncordon node-1" in r["command"]]
        assert remedies, incident.remedies
        applied = await asyncio.to_thread(run_remedy, cluster.plane, remedies[0]["command"])
        assert applied.returncode == 0, applied.stderr
        drain = await asyncio.to_thread(
            cluster.plane.kubectl, "drain", "node-2", "--ignore-daemonsets", "--timeout=60s", check=False
        )
        assert drain.returncode == 0, drain.stderr
        assert "node/node-2 drained" in drain.stdout

        async def resolved() -> bool:
            rows = [i for i in await open_incidents(host) if i.id == incident.id]
            return bool(rows) and rows[0].status == "resolved"

        await eventually(resolved, 90, "the pdb-blocks-eviction incident to resolve after the drain")
    finally:
        stop.set()
        await host.close()
