"""Prometheus metrics of the notifier, read from the worker at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


class NotifyCollector(Collector):
    def __init__(self, worker: Callable[[], Any]) -> None:
        # ``worker`` returns the running OutboxWorker, or None before it starts.
        self._worker = worker

    def collect(self) -> Iterator[Any]:
        sent = CounterMetricFamily("unstick_notifications_sent", "Notifications delivered.", labels=["sink"])
        retried = CounterMetricFamily(
            "unstick_notification_retries", "Failed attempts that will be retried.", labels=["sink"]
        )
        limited = CounterMetricFamily(
            "unstick_notification_rate_limited", "Attempts the receiver rate-limited.", labels=["sink"]
        )
        dead = CounterMetricFamily(
            "unstick_notifications_dead_lettered",
            "Notifications given up on by this process (permanent error or attempts exhausted).",
            labels=["sink"],
        )
        rows = GaugeMetricFamily(
            "unstick_outbox_notifications",
            "Outbox rows by sink and status (pending, sending, sent, failed = dead-lettered); refreshed every 5 s.",
            labels=["sink", "status"],
        )
        worker = self._worker()
        if worker is not None:
            for name, stats in worker.stats().items():
                sent.add_metric([name], stats.sent)
                retried.add_metric([name], stats.retried)
                limited.add_metric([name], stats.rate_limited)
                dead.add_metric([name], stats.dead_lettered)
            for (sink, status), n in sorted(worker.counts.items()):
                rows.add_metric([sink, status], n)
        yield from (sent, retried, limited, dead, rows)
