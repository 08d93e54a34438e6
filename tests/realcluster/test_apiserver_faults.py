"""The real kube-apiserver restarted, with etcd compacted while it is down, under a running
``unstick watch`` (its own process, the real kubernetes-asyncio client) with open incidents
and a webhook receiver that counts deliveries.

What holds afterwards:

* ``/readyz`` of the agent is 503 while the API server is down and 200 once it serves again;
* every watcher whose resourceVersion was compacted away relists, once (410 Gone → relist, as
  client-go's reflector does: staging/src/k8s.io/client-go/tools/cache/reflector.go, v0.37.2,
  ``isExpiredError`` ends ``ListAndWatch`` and the next one lists), never in a loop;
* the agent's new watches carry what changes after the restart: a change to an open
  incident's workload is re-analysed without re-notifying, a new stuck workload opens a third
  incident; each "opened" message arrived exactly once;
* the recovery time (API server ready → agent ready) is printed.

The control plane is this module's own: restarting the session's would disturb the other
tests' components.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.conftest import start_unstick
from tests.faults.receivers import ChaosReceiver, Collector
from tests.realcluster.conftest import Cluster, running_control_plane
from tests.realcluster.harness import ControlPlane, node
from tests.waiting import eventually

pytestmark = pytest.mark.realcluster


@pytest.fixture(scope="module")
def own_plane() -> Iterator[ControlPlane]:
    with running_control_plane() as plane:
        yield plane


def stuck_deployment(name: str, namespace: str) -> dict[str, Any]:
    """One replica asking for more CPU than any node has: Pending, Insufficient cpu."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "64"}}}]
                },
            },
        },
    }


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


async def ready_is(url: str, status: int) -> bool:
    got, _ = await asyncio.to_thread(get, url + "/readyz")
    return got == status


async def metric(url: str, name: str) -> dict[str, float]:
    """``name``'s samples on /metrics by their ``kind`` (or whole label set) label."""
    _, text = await asyncio.to_thread(get, url + "/metrics")
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(rf"{name}(?:_total)?\{{(.*)\}} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            out[labels.get("kind") or labels.get("outcome") or m.group(1)] = float(m.group(2))
    return out


async def test_apiserver_restart_and_compaction_relist_once_without_renotifying(
    own_plane: ControlPlane, tmp_path: Path
) -> None:
    plane = own_plane
    cluster = Cluster(plane, plane.new_namespace("apiserver-restart"))
    cluster.nodes([node("restart-node", cpu="4")])
    for name in ("web", "api"):
        cluster.api.create(stuck_deployment(name, cluster.ns))
    cluster.api.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": cluster.ns},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    secret = tmp_path / "hmac"
    secret.write_text("whsec-fault-tests-0123456789abcdef")
    proc = None
    try:
        async with Collector() as elsewhere, ChaosReceiver(redirect_to=elsewhere.port) as receiver:
            proc, url = await start_unstick(
                "watch", "--kubeconfig", str(plane.kubeconfig), "--cluster", "real",
                "--listen", "127.0.0.1:0", "--no-auth", "--grace", "0", "--namespace", cluster.ns,
                "--webhook-url", receiver.url + "/hook", "--webhook-secret-file", str(secret),
                env={**os.environ, "UNSTICK_DB_URL": f"sqlite+aiosqlite:///{tmp_path}/agent.db"},
            )  # fmt: skip
            await eventually(lambda: len(receiver.accepted) == 2, timeout=45)  # two incidents opened
            await eventually(lambda: ready_is(url, 200), timeout=15)
            before = await metric(url, "unstick_watch_relists")
            passes_before = sum((await metric(url, "unstick_analysis_passes")).values())

            stopped_in = await asyncio.to_thread(plane.stop_apiserver)
            down_at = time.monotonic()
            await eventually(lambda: ready_is(url, 503), timeout=30, interval=0.2)
            noticed = time.monotonic() - down_at
            compacted_at = await asyncio.to_thread(plane.compact_etcd)
            ready_in = await asyncio.to_thread(plane.start_apiserver)
            up_at = time.monotonic()
            await eventually(lambda: ready_is(url, 200), timeout=40, interval=0.1)
            recovered = time.monotonic() - up_at

            # changes after the restart reach the agent through its new watches: one touches an
            # open incident's workload (re-analysed, not re-notified), one opens a third incident
            await asyncio.to_thread(
                cluster.api.patch,
                f"/apis/apps/v1/namespaces/{cluster.ns}/deployments/web",
                {"metadata": {"labels": {"touched": "after-restart"}}},
                kind="merge-patch",
            )
            await asyncio.to_thread(cluster.api.create, stuck_deployment("db", cluster.ns))
            await eventually(lambda: len(receiver.accepted) == 3, timeout=45)
            passes = sum((await metric(url, "unstick_analysis_passes")).values())
            await asyncio.sleep(3)  # time enough for a duplicate, were one coming
            after = await metric(url, "unstick_watch_relists")
            accepted = dict(receiver.accepted)
    finally:
        if proc is not None and proc.returncode is None:
            proc.terminate()
            await proc.wait()
        plane.delete_namespace(cluster.ns)
        plane.delete_nodes(["restart-node"])

    relisted = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    # PodDisruptionBudgets are served by etcd (no watch cache in the harness): the compaction
    # took their resourceVersion away, so they relist; no kind relists more than once.
    assert relisted.get("PodDisruptionBudget") == 1, relisted
    assert max(relisted.values()) == 1, relisted
    # two "opened" before the restart, the third incident's after it, nothing twice
    assert len(accepted) == 3 and set(accepted.values()) == {1}, accepted
    assert passes > passes_before
    print(
        f"\nkube-apiserver stopped in {stopped_in:.1f} s; the agent not ready {noticed:.1f} s after; "
        f"etcd compacted at revision {compacted_at}; API server ready {ready_in:.1f} s after start, "
        f"agent ready {recovered:.2f} s after that; relisted: "
        f"{json.dumps({k: int(v) for k, v in relisted.items() if v})}; 3 incidents, 3 messages, each once"
    )
