"""The live cluster cache: watch deltas in, an up-to-date ClusterState out.

It is the watchers' sink. Each delta is decoded into a slim record (never a
kubernetes-asyncio model) and applied to the ClusterState one object at a
time; the analyzers read the state's immutable snapshot. A malformed object is
counted, logged with its identity and skipped — it never stops the stream.

Only events that matter to analysis are kept (scheduling, autoscaler, eviction
and rollout reasons), and each is dropped an hour after it was last seen, so
memory stays bounded by the cluster's objects, not by its event rate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.kube.watcher import Delta, MetricsSample
from analyzers.ingest import InputError, describe
from analyzers.kueue import WORKLOAD_EVENT_REASONS
from analyzers.records import Record
from analyzers.snapshot import ClusterState

log = logging.getLogger(__name__)

# Event reasons the analysis reads; other events are dropped on arrival.
RELEVANT_EVENT_REASONS = frozenset(
    {
        "FailedScheduling",
        "Scheduled",
        # cluster-autoscaler
        "TriggeredScaleUp",
        "NotTriggerScaleUp",
        "FailedScaleUp",
        "ScaleDown",
        # Karpenter
        "Nominated",
        "FailedLaunching",
        "InsufficientCapacityError",
        "LaunchFailed",
        # evictions and rollouts
        "EvictionBlocked",
        "FailedEviction",
        "Evicted",
        "ScalingReplicaSet",
        "ProgressDeadlineExceeded",
        "FailedCreate",
        # a claim's provisioner and the PersistentVolume controller (the scheduler-error rule quotes them)
        "ProvisioningFailed",
        "FailedBinding",
    }
)
EVENT_TTL_SECONDS = 3600.0


def _relevant_event(obj: dict[str, Any]) -> bool:
    """An event the analysis reads: one of RELEVANT_EVENT_REASONS, or Kueue's word on a
    Workload (generic reasons, so kept only for that kind)."""
    reason = obj.get("reason")
    if reason in RELEVANT_EVENT_REASONS:
        return True
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    return (
        reason in WORKLOAD_EVENT_REASONS and isinstance(involved, dict) and involved.get("kind") == "Workload"
    )


@dataclass
class CacheStats:
    applied: int = 0
    deleted: int = 0
    malformed: int = 0
    events_dropped: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class ClusterCache:
    """A watcher sink keeping a ClusterState current and signalling changes."""

    def __init__(
        self,
        state: ClusterState | None = None,
        *,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.state = state or ClusterState()
        self.stats = CacheStats()
        self.changed = asyncio.Event()
        self.synced_kinds: set[str] = set()
        self.on_event = on_event
        self._clock = clock

    # -- the watcher Sink protocol --------------------------------------------
    async def delta(self, delta: Delta) -> None:
        self.apply(delta)

    async def synced(self, kind: str) -> None:
        self.mark_listed(kind)

    # -- plain methods (tests and the faust worker call these directly) --------
    def mark_listed(self, kind: str) -> None:
        """The initial list of ``kind`` is in (in every namespace watched): an object of it
        the state lacks does not exist (a missing ResourceClaim is judged)."""
        self.synced_kinds.add(kind)
        self.state.mark_collected(kind)
        self.changed.set()

    def apply(self, delta: Delta) -> bool:
        """Apply one delta; returns whether the state changed."""
        obj = delta.object
        kind = delta.kind
        stats = self.stats
        by_kind = stats.by_kind
        by_kind[kind] = by_kind.get(kind, 0) + 1
        if delta.type == "DELETED":
            meta = obj.get("metadata") or {}
            removed = self.state.delete(kind, meta.get("namespace") or "", meta.get("name") or "")
            if removed:
                stats.deleted += 1
                self.changed.set()
            return removed
        is_event = kind == "Event"
        if is_event and not _relevant_event(obj):
            stats.events_dropped += 1
            return False
        if not obj.get("kind"):
            obj = {**obj, "kind": kind}
        try:
            record = self.state.apply_object(obj, "watch")
        except InputError as exc:
            stats.malformed += 1
            log.warning(
                "skipped a malformed object: %s",
                exc.detail,
                extra={"k8s_object": exc.obj, "kind": kind},
            )
            return False
        except Exception:  # a decoder bug must not stop the stream either
            stats.malformed += 1
            log.exception("could not decode an object", extra={"k8s_object": describe(obj), "kind": kind})
            return False
        if record is None:
            return False
        stats.applied += 1
        if is_event and self.on_event is not None:
            self.on_event(obj)
        self.changed.set()
        return True

    def apply_record(self, record: Record) -> None:
        """Apply a record read beside the watches (a ``/scale`` reading, agent.scales)."""
        self.state.apply(record)
        self.changed.set()

    def apply_metrics(self, sample: MetricsSample) -> None:
        """Replace all metrics with a fresh sample (metrics are a poll, not a watch)."""
        for coll, kind in (("node_metrics", "NodeMetrics"), ("pod_metrics", "PodMetrics")):
            for key in list(self.state.collections[coll]):
                ns, name = key if isinstance(key, tuple) else ("", key)
                self.state.delete(kind, ns, name)
        for obj in [*sample.nodes, *sample.pods]:
            try:
                self.state.apply_object(obj, source="metrics.k8s.io")
            except InputError as exc:
                self.stats.malformed += 1
                log.warning("skipped malformed metrics: %s", exc.detail, extra={"k8s_object": exc.obj})
        self.changed.set()

    def expire_events(self, now: float) -> int:
        """Drop events last seen more than EVENT_TTL_SECONDS ago (the API server's default event TTL)."""
        events = self.state.collections["events"]
        old = [key for key, ev in events.items() if (ev.last_seen or now) < now - EVENT_TTL_SECONDS]
        for ns, name in old:
            self.state.delete("Event", ns, name)
        return len(old)
