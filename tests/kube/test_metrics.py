"""metrics.k8s.io polling: samples when metrics-server is there, a clean
"not available" when it is not, logged once."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from agent.fakecluster import FakeCluster
from agent.kube.gateway import Gateway
from agent.kube.watcher import MetricsPoller, MetricsSample, MetricsUnavailable, poll_metrics_once

NODE_METRICS = {
    "apiVersion": "metrics.k8s.io/v1beta1",
    "kind": "NodeMetrics",
    "metadata": {"name": "node-a"},
    "timestamp": "2024-06-01T12:00:00Z",
    "window": "20.027s",
    "usage": {"cpu": "3512m", "memory": "12Gi"},
}
POD_METRICS = {
    "apiVersion": "metrics.k8s.io/v1beta1",
    "kind": "PodMetrics",
    "metadata": {"name": "cassandra-0", "namespace": "db"},
    "timestamp": "2024-06-01T12:00:00Z",
    "window": "18.4s",
    "containers": [{"name": "cassandra", "usage": {"cpu": "1900m", "memory": "7Gi"}}],
}


async def test_metrics_are_polled_when_served(tmp_path: Path) -> None:
    async with FakeCluster(metrics=True) as cluster:
        cluster.apply(NODE_METRICS)
        cluster.apply(POD_METRICS)
        async with Gateway(cluster.write_kubeconfig(tmp_path / "kc")) as gw:
            assert await gw.metrics_available()
            result = await poll_metrics_once(gw)
            assert isinstance(result, MetricsSample)
            assert [(n["kind"], n["metadata"]["name"], n["usage"]["cpu"]) for n in result.nodes] == [("NodeMetrics", "node-a", "3512m")]
            assert [p["metadata"]["namespace"] for p in result.pods] == ["db"]
            scoped = await poll_metrics_once(gw, namespaces=["web"])
            assert isinstance(scoped, MetricsSample) and scoped.pods == []


async def test_metrics_not_available_is_reported_once(
    cluster: FakeCluster, gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    results: list[Any] = []

    async def collect(result: Any) -> None:
        results.append(result)

    async def no_sleep(_: float) -> None:
        return None

    poller = MetricsPoller(gateway, collect, interval=30, sleep=no_sleep)
    with caplog.at_level(logging.WARNING, logger="agent.kube.watcher"):
        await poller.run(_iterations=3)
    assert len(results) == 3
    assert all(isinstance(r, MetricsUnavailable) for r in results)
    assert "not served" in results[0].reason
    assert len([r for r in caplog.records if "metrics unavailable" in r.getMessage()]) == 1


async def test_metrics_server_errors_are_not_raised(tmp_path: Path) -> None:
    async with FakeCluster(metrics=True) as cluster:
        cluster.faults.fail(503, verb="list", kind="NodeMetrics")
        async with Gateway(cluster.write_kubeconfig(tmp_path / "kc")) as gw:
            result = await poll_metrics_once(gw)
    assert isinstance(result, MetricsUnavailable)
    assert "503" in result.reason
