"""End to end through the real broker: ``unstick watch --publish`` reads a custom
controller's ``/scale`` and lists the ResourceClaims of a cluster (the in-process Kubernetes
API), an ``unstick worker`` process analyses the stream into PostgreSQL, and the incidents it
opens are the single-process agent's: the drain blocked by a budget only the /scale read
can compute (5 replicas - maxUnavailable 1 = 4 healthy needed, 3 are), and the pod held by
DynamicResources' PreEnqueue on a claim that does not exist."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from storage.engine import create_engine, create_sessionmaker
from tests.agent.test_live_resource_claims import claimed_web
from tests.stream.conftest import SETTLE_TIMEOUT, START_TIMEOUT, Publisher, Worker, eventually
from tests.stream.test_scales_and_claims import agent_verdict, custom_cluster, open_incidents

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

EXPECTED = {"pdb-blocks-eviction", "scheduler-silent"}


def _summary(incidents: list[Any]) -> list[tuple[str, str, Any]]:
    return [
        (i.rule_id, i.fingerprint, i.evidence.get("pdbs") or i.evidence.get("preenqueue_status"))
        for i in incidents
    ]


async def test_the_worker_opens_what_the_agent_opens(broker, pg_server, prefix, tmp_path: Path) -> None:
    async with custom_cluster() as cluster:
        for obj in claimed_web():
            cluster.apply(obj)
        agent_incidents, _ = await agent_verdict(cluster, tmp_path)
        assert {i.rule_id for i in agent_incidents} == EXPECTED
        async with pg_server.database() as db_url:
            engine = create_engine(db_url)
            sessions = create_sessionmaker(engine)
            worker = Worker(broker, db_url, prefix, tmp_path / "worker.log")
            publisher = None
            try:
                await eventually(worker.ready, START_TIMEOUT, "a ready worker")
                kubeconfig = cluster.write_kubeconfig(tmp_path / "custom.kubeconfig")
                publisher = Publisher(broker, kubeconfig, "c1", prefix, tmp_path / "publish.log")
                async with asyncio.timeout(SETTLE_TIMEOUT):
                    while {i.rule_id for i in await open_incidents(sessions)} != EXPECTED:
                        assert publisher.proc.poll() is None, publisher.log()[-3000:]
                        await asyncio.sleep(0.5)
                worker_incidents = await open_incidents(sessions)
            finally:
                if publisher is not None:
                    publisher.stop()
                worker.stop()
                await engine.dispose()
    assert _summary(worker_incidents) == _summary(agent_incidents)
    (drain,) = [i for i in worker_incidents if i.rule_id == "pdb-blocks-eviction"]
    (budget,) = drain.evidence["pdbs"]
    assert (budget["expected_pods"], budget["disruptions_allowed"], budget["figures"]) == (5, 0, "computed")
    (held,) = [i for i in worker_incidents if i.rule_id == "scheduler-silent"]
    assert held.evidence["cause"] == "missing-resourceclaim"
    assert any(r.path.endswith("/databases/orders/scale") and r.verb == "get" for r in cluster.requests)
    assert "Traceback" not in worker.log() and "Traceback" not in publisher.log()
