"""Prometheus metrics of the live agent (the HTTP side has its own, in
``agent.api.metrics``; both share one registry).

Counters that already live in the watcher, cache and pipeline are read at
scrape time by a collector rather than mirrored, so nothing can drift.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


class AgentCollector(Collector):
    def __init__(self, agents: Callable[[], list[Any]]) -> None:
        # ``agents`` returns the running ClusterAgents (one per watched cluster).
        self._agents = agents

    def collect(self) -> Iterator[Any]:
        restarts = CounterMetricFamily(
            "unstick_watch_restarts", "Watch restarts per cluster and kind.", labels=["cluster", "kind"]
        )
        relists = CounterMetricFamily(
            "unstick_watch_relists", "Relists (410 Gone) per cluster and kind.", labels=["cluster", "kind"]
        )
        processed = CounterMetricFamily(
            "unstick_events_processed", "Watch deltas applied to the cache.", labels=["cluster"]
        )
        dropped = CounterMetricFamily(
            "unstick_events_dropped", "Deltas dropped: irrelevant events.", labels=["cluster"]
        )
        malformed = CounterMetricFamily(
            "unstick_objects_malformed", "Objects that could not be decoded (skipped).", labels=["cluster"]
        )
        passes = CounterMetricFamily(
            "unstick_analysis_passes", "Analysis passes run.", labels=["cluster", "outcome"]
        )
        open_by_rule = GaugeMetricFamily(
            "unstick_open_incidents",
            "Incidents open after the last pass, by rule.",
            labels=["cluster", "rule_id"],
        )
        held = GaugeMetricFamily(
            "unstick_findings_held", "Findings held back by the grace period.", labels=["cluster"]
        )
        waiting = GaugeMetricFamily(
            "unstick_incidents_waiting",
            "Open incidents waiting for an autoscaler's scale-up (not paged), after the last pass.",
            labels=["cluster"],
        )
        escalated = CounterMetricFamily(
            "unstick_incidents_escalated",
            "Waiting incidents paged because the scale-up failed or took too long.",
            labels=["cluster"],
        )
        synced = GaugeMetricFamily(
            "unstick_synced", "1 once the initial lists have synced.", labels=["cluster"]
        )
        for agent in self._agents():
            c = agent.cluster
            for kind, stats in agent.watcher.stats().items():
                restarts.add_metric([c, kind], stats.restarts)
                relists.add_metric([c, kind], stats.relists)
            processed.add_metric([c], agent.cache.stats.applied + agent.cache.stats.deleted)
            dropped.add_metric([c], agent.cache.stats.events_dropped)
            malformed.add_metric([c], agent.cache.stats.malformed)
            passes.add_metric([c, "ok"], agent.pipeline.stats.passes)
            passes.add_metric([c, "failed"], agent.pipeline.stats.failed_passes)
            for rule_id, n in Counter(f.rule_id for f in agent.last_tracked).items():
                open_by_rule.add_metric([c, rule_id], n)
            held.add_metric([c], agent.pipeline.stats.held)
            waiting.add_metric([c], agent.pipeline.stats.waiting)
            escalated.add_metric([c], agent.pipeline.stats.escalated)
            synced.add_metric([c], 1 if agent.watcher.synced else 0)
        yield from (
            restarts,
            relists,
            processed,
            dropped,
            malformed,
            passes,
            open_by_rule,
            held,
            waiting,
            escalated,
            synced,
        )


def analysis_histogram(registry: CollectorRegistry) -> Histogram:
    return Histogram(
        "unstick_analysis_seconds",
        "Duration of one analysis pass (snapshot → findings → incidents).",
        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        registry=registry,
    )
