"""The live agent's Kubernetes side against the real API server: list pagination,
watch bookmarks from the real watch cache (recorded and resumed from), 410 Gone after
an etcd compaction handled by a relist, and the agent running under a ServiceAccount
bound to deploy/'s ClusterRole."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.kube.gateway import Gateway
from agent.kube.kinds import kind_for
from agent.kube.watcher import Delta, KindWatcher
from agent.pipeline import PipelineConfig
from agent.runner import AgentHost, ClusterAgent
from tests.realcluster.conftest import Cluster

pytestmark = pytest.mark.realcluster

REPO = Path(__file__).resolve().parents[2]


class Recorder:
    def __init__(self) -> None:
        self.deltas: list[Delta] = []
        self.synced_kinds: list[str] = []

    async def delta(self, delta: Delta) -> None:
        self.deltas.append(delta)

    async def synced(self, kind: str) -> None:
        self.synced_kinds.append(kind)


def pdb(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}},
    }


async def test_lists_are_paginated_by_the_real_api_server(cluster: Cluster) -> None:
    for i in range(23):
        cluster.api.create(
            {**pdb(f"budget-{i:02d}"), "metadata": {"name": f"budget-{i:02d}", "namespace": cluster.ns}}
        )
    async with Gateway(str(cluster.plane.kubeconfig)) as gateway:
        first = await gateway.list_page("PodDisruptionBudget", namespace=cluster.ns, limit=10)
        assert len(first["items"]) == 10 and first["metadata"].get("continue")
        whole = await gateway.list_objects("PodDisruptionBudget", namespace=cluster.ns, page_size=10)
    names = [o["metadata"]["name"] for o in whole["items"]]
    assert names == [f"budget-{i:02d}" for i in range(23)]


async def test_watch_relists_after_a_compaction(cluster: Cluster) -> None:
    """PodDisruptionBudgets have the watch cache off in the harness
    (--watch-cache-sizes=poddisruptionbudgets.policy#0): their watches are served by
    etcd, so a watch from a compacted revision gets 410 Gone, as on a busy cluster."""
    ns = cluster.ns
    cluster.api.create({**pdb("before"), "metadata": {"name": "before", "namespace": ns}})
    async with Gateway(str(cluster.plane.kubeconfig)) as gateway:
        sink = Recorder()
        kind = kind_for("PodDisruptionBudget")
        watcher = KindWatcher(
            gateway, kind, sink, namespace=ns, page_size=2, watch_timeout=4, min_watch_duration=0
        )
        await watcher.list_once()
        assert [d.object["metadata"]["name"] for d in sink.deltas] == ["before"]

        listed_at = watcher.resource_version
        for name in ("after-1", "after-2"):
            cluster.api.create({**pdb(name), "metadata": {"name": name, "namespace": ns}})
        cluster.api.delete(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/before")
        revision = cluster.plane.compact_etcd()
        assert int(listed_at or 0) < revision
        assert await asyncio.wait_for(watcher.step(), 20) is True  # 410 Gone: forget the version
        assert watcher.stats.relists == 1 and watcher.resource_version is None
        sink.deltas.clear()
        await watcher.list_once()  # the relist reconciles: two added, one deletion inferred
        seen = sorted((d.type, d.object["metadata"]["name"], d.final_state_unknown) for d in sink.deltas)
        assert seen == [("ADDED", "after-1", False), ("ADDED", "after-2", False), ("DELETED", "before", True)]


async def test_watch_records_the_bookmark_of_the_real_watch_cache_and_resumes_from_it(
    cluster: Cluster,
) -> None:
    """kube-apiserver's watch cache (staging/src/k8s.io/apiserver/pkg/storage/cacher,
    v0.35.4 to v0.37.2: the bookmark code is the same) sends a watch with ``allowWatchBookmarks`` and a deadline a BOOKMARK about 2 s
    before the deadline (cache_watcher.go nextBookmarkTime: min(now + 1 min, deadline - 2 s),
    fired by cacher.go dispatchEvents' ~1 s bookmark timer) carrying the last resourceVersion
    the pods cache processed; cache_watcher.go process() only passes events, bookmarks too,
    newer than the watch's own resourceVersion. Only watches with a resourceVersion set are
    served by the cache (delegator.go Watch sends RV="" to etcd). So: watch pods from the
    listed version with a 6 s deadline, write one pod in another namespace (the watch filters
    it out, but the cache's version moves past ours): a bookmark must arrive within ~4 s."""
    ns = cluster.ns
    cluster.api.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "before", "namespace": ns},
            # No scheduler takes it: no binding or status write can reach the watch as a MODIFIED.
            "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]},
        }
    )
    async with Gateway(str(cluster.plane.kubeconfig)) as gateway:
        sink = Recorder()
        watcher = KindWatcher(
            gateway,
            kind_for("Pod"),
            sink,
            namespace=ns,
            watch_timeout=6,
            min_watch_duration=0,
            random=lambda: 0.0,  # exactly timeoutSeconds=6
        )
        await watcher.list_once()
        listed_at = int(watcher.resource_version or 0)
        elsewhere = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "bookmark-nudge-", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
        watching = asyncio.create_task(watcher.watch_once())
        await asyncio.sleep(0.5)  # let the watch register before the write it must not see
        nudge = await asyncio.to_thread(cluster.api.create, elsewhere)
        try:
            started = asyncio.get_running_loop().time()
            await asyncio.wait_for(watching, 15)
            took = asyncio.get_running_loop().time() - started
        finally:
            await asyncio.to_thread(
                cluster.api.delete, f"/api/v1/namespaces/default/pods/{nudge['metadata']['name']}", grace=0
            )
        assert watcher.stats.bookmarks >= 1, (watcher.stats, took)
        assert [d.object["metadata"]["name"] for d in sink.deltas] == ["before"]  # the nudge is filtered out
        bookmarked = int(watcher.resource_version or 0)
        assert bookmarked >= int(nudge["metadata"]["resourceVersion"]) > listed_at

        # resumed from the bookmark's version: the next watch delivers only what came after it
        sink.deltas.clear()
        watcher.watch_timeout = 3
        after = asyncio.create_task(watcher.watch_once())
        await asyncio.sleep(0.3)
        await asyncio.to_thread(
            cluster.api.create,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "after", "namespace": ns},
                "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "x"}]},
            },
        )
        await asyncio.wait_for(after, 15)
        seen = [(d.type, d.object["metadata"]["name"]) for d in sink.deltas]
        assert seen[0] == ("ADDED", "after") and {n for _, n in seen} == {"after"}, seen  # no replay
        assert watcher.stats.relists == 0
    print(f"\nbookmark: resourceVersion {listed_at} → {bookmarked} within a 6 s watch")


def rbac_from_deploy(cluster: Cluster) -> tuple[str, str]:
    """deploy/'s ClusterRole under a test name, bound to a fresh ServiceAccount."""
    docs = [d for d in yaml.safe_load_all((REPO / "deploy/manifests/unstick.yaml").read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    role_name = f"{cluster.ns}-unstick-read"
    role["metadata"] = {"name": role_name}
    cluster.api.create(role)
    cluster.api.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "unstick", "namespace": cluster.ns},
        }
    )
    cluster.api.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role_name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": "unstick", "namespace": cluster.ns}],
        }
    )
    return role_name, f"system:serviceaccount:{cluster.ns}:unstick"


async def test_agent_runs_under_the_deploy_cluster_role_and_can_write_nothing(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    role_name, user = rbac_from_deploy(cluster)
    try:
        token = cluster.plane.service_account_token(cluster.ns, "unstick")
        kubeconfig = cluster.plane.kubeconfig_for(f"sa-{cluster.ns}", token)
        can_i = cluster.plane.kubectl("auth", "can-i", "--list", kubeconfig=kubeconfig).stdout
        rows = [line for line in can_i.splitlines()[1:] if line.strip()]
        assert not [r for r in rows if r.split()[0].startswith("secrets")], can_i
        writes = {"create", "update", "patch", "delete", "deletecollection", "*"}
        for row in rows:
            resource = row.split()[0]
            verbs = set(re.findall(r"\[([^\]]*)\]\s*$", row)[0].split())
            # self-reviews are granted to every authenticated user by Kubernetes' bootstrap policy
            if resource.startswith(("selfsubject",)):
                continue
            assert not verbs & writes, f"{user} may {verbs & writes} {resource}"
        for verb, what in (
            ("get", "secrets"),
            ("list", "secrets"),
            ("patch", "deployments"),
            ("delete", "pods"),
            ("create", "pods"),
        ):
            out = cluster.plane.kubectl("auth", "can-i", verb, what, "-A", kubeconfig=kubeconfig, check=False)
            assert out.stdout.strip() == "no", (verb, what, out.stdout, out.stderr)

        caplog.set_level(logging.WARNING)
        host = await AgentHost.open(f"sqlite+aiosqlite:///{tmp_path}/agent.db")
        stop = asyncio.Event()
        try:
            agent = await ClusterAgent.connect(
                cluster="rbac",
                gateway=Gateway(str(kubeconfig)),
                sessions=host.sessions,
                config=PipelineConfig(grace=0, debounce=0.05, resync=0.5),
                renderer=host.renderer,
            )
            host.agents.append(agent)
            agent.start(stop)
            await asyncio.wait_for(agent.watcher.wait_synced(), 30)
            async with asyncio.timeout(20):
                while agent.pipeline.stats.passes < 1:
                    await asyncio.sleep(0.1)
        finally:
            stop.set()
            await host.close()
        refused = [
            r.getMessage() for r in caplog.records if "403" in r.getMessage() or "orbidden" in r.getMessage()
        ]
        assert not refused, refused
    finally:
        cluster.api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role_name}")
        cluster.api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{role_name}")
