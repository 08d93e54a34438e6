"""The worker's plain part: stream records in, per-cluster caches and pipelines.

Nothing here imports faust: :class:`Fleet` is handed a mapping to keep the
clusters' objects in (the worker passes its faust Table, whose changelog
topic makes it survive a worker; tests pass a dict), a dead-letter callback
and the database, and the faust agent calls :meth:`Fleet.handle` for each
record. Each cluster gets the same ``ClusterCache`` and ``Pipeline`` the
in-process agent uses; what differs is only where its deltas come from.

The mapping holds, per cluster, the last record of every live object (the
raw record, so nothing is encoded twice), the last metrics sample, the last
``/scale`` reading of each custom controller the publisher read (agent.scales)
and one meta entry (partition, kube version, whether the initial list is
complete, which kinds were listed in full).
A worker that is assigned a partition rebuilds each of its clusters from
these (:meth:`Fleet.adopt`) before analysing it, so a takeover needs no relist;
the records after the last committed offset are then delivered again and
applied again, which converges to the same state.

A publisher re-sends the rest of a send round that failed half-way, and part of
it may have landed (agent.stream.publisher): the copies come right after the
originals, so a record not newer (epoch, seq) than the last one this runtime
applied is a copy and is skipped — the state never steps back to an older
version of an object between the two.

Every failure of one record — not JSON, an unknown version, an object the
decoder rejects, a bug — is caught here, sent to the dead-letter callback with
the error and counted; the partition goes on. Rule errors of a pass are
dead-lettered too, with the offsets applied since the previous pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.cache import ClusterCache
from agent.kube.watcher import Delta, MetricsSample
from agent.pipeline import PassOutcome, Pipeline, PipelineConfig
from agent.stream import codec
from analyzers.records import ScaleReading
from analyzers.remedies import RemedyRenderer
from analyzers.snapshot import ClusterState

log = logging.getLogger(__name__)

# dead_letter(key, value, error, partition, offset)
DeadLetter = Callable[[bytes | None, bytes | None, str, int, int], Awaitable[None]]
# backlog(partition): records of the partition the broker holds and this worker has not handled yet
Backlog = Callable[[int], int]

# A pass over a state the partition's backlog is about to change is work thrown away (and a
# pass between two records of one change sees a state the cluster never had): before a pass,
# while more than BACKLOG_HOLD records of its partition wait, they are handled first, for at
# most MAX_HOLD seconds (a partition that never drains still gets a pass that often).
BACKLOG_HOLD = 0
MAX_HOLD = 2.0

META, OBJECT, METRICS, SCALE = b"C\x00", b"O\x00", b"M\x00", b"S\x00"


def meta_key(cluster: str) -> bytes:
    return META + cluster.encode()


def object_key(cluster: str, kind: str, obj: dict[str, Any]) -> bytes:
    meta = obj.get("metadata") or {}
    return b"\x00".join(
        (
            OBJECT + cluster.encode(),
            kind.encode(),
            str(meta.get("namespace") or "").encode(),
            str(meta.get("name") or "").encode(),
        )
    )


def metrics_key(cluster: str) -> bytes:
    return METRICS + cluster.encode()


def scale_key(cluster: str, reading: ScaleReading) -> bytes:
    return b"\x00".join((SCALE + cluster.encode(), *(part.encode() for part in reading.key)))


@dataclass
class ClusterRuntime:
    """One cluster's cache and pipeline inside a worker."""

    cluster: str
    partition: int
    cache: ClusterCache
    pipeline: Pipeline
    meta: dict[str, Any]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    applied_seq: int = 0  # seq of the newest record applied (of the newest epoch; also after a rebuild)
    epoch: int = 0
    records: int = 0
    gaps: int = 0
    first_offset: int | None = None  # offsets applied since the last pass (for dead letters of rule errors)
    last_offset: int | None = None
    last_applied: tuple[int, int] | None = None  # (epoch, seq) of the newest record applied since built
    copies: int = 0  # records skipped as copies of ones applied (a publisher's re-sent round)

    @property
    def synced(self) -> bool:
        return bool(self.meta.get("synced"))

    def status(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "synced": self.synced,
            "epoch": self.epoch,
            "applied_seq": self.applied_seq,
            "records": self.records,
            "objects": self.cache.stats.applied,
            "passes": self.pipeline.stats.passes,
            "failed_passes": self.pipeline.stats.failed_passes,
            "caught_up": self.synced and self.pipeline.caught_up,
            "gaps": self.gaps,
            "copies": self.copies,
        }


class FleetMetrics(Collector):
    """Per-worker counters read at scrape time from the fleet's runtimes."""

    def __init__(self, fleet: Fleet, registry: CollectorRegistry) -> None:
        self.fleet = fleet
        self.records = Counter(
            "unstick_stream_records",
            "Stream records handled, per partition.",
            ["partition"],
            registry=registry,
        )
        self.dead_letters = Counter(
            "unstick_stream_dead_letters",
            "Records (or passes) sent to the dead-letter topic.",
            ["reason"],
            registry=registry,
        )
        registry.register(self)

    def collect(self) -> Iterator[Any]:
        passes = CounterMetricFamily(
            "unstick_analysis_passes", "Analysis passes run.", labels=["cluster", "outcome"]
        )
        applied = CounterMetricFamily(
            "unstick_events_processed", "Deltas applied to the cache.", labels=["cluster"]
        )
        malformed = CounterMetricFamily(
            "unstick_objects_malformed", "Objects that could not be decoded (skipped).", labels=["cluster"]
        )
        gaps = CounterMetricFamily(
            "unstick_stream_gaps", "Gap markers: records a publisher dropped.", labels=["cluster"]
        )
        synced = GaugeMetricFamily(
            "unstick_synced", "1 once the cluster's initial lists are in.", labels=["cluster"]
        )
        for rt in list(self.fleet.runtimes.values()):
            c = rt.cluster
            passes.add_metric([c, "ok"], rt.pipeline.stats.passes)
            passes.add_metric([c, "failed"], rt.pipeline.stats.failed_passes)
            applied.add_metric([c], rt.cache.stats.applied + rt.cache.stats.deleted)
            malformed.add_metric([c], rt.cache.stats.malformed)
            gaps.add_metric([c], rt.gaps)
            synced.add_metric([c], 1 if rt.synced else 0)
        yield from (passes, applied, malformed, gaps, synced)


class Fleet:
    """The clusters a worker analyses, keyed by name."""

    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        table: MutableMapping[bytes, bytes],
        dead_letter: DeadLetter,
        config: PipelineConfig,
        registry: CollectorRegistry | None = None,
        renderer: RemedyRenderer | None = None,
        clock: Callable[[], float] = time.time,
        backlog: Backlog | None = None,
        max_hold: float = MAX_HOLD,
    ) -> None:
        self.sessions = sessions
        self.backlog = backlog
        self.max_hold = max_hold
        self.table = table
        self.dead_letter = dead_letter
        self.config = config
        self.renderer = renderer or RemedyRenderer()
        self.clock = clock
        self.runtimes: dict[str, ClusterRuntime] = {}
        self.adopted: set[int] = set()  # partitions whose clusters are rebuilt
        self.metrics = FleetMetrics(self, registry or CollectorRegistry())
        self.dead_letters = 0
        self.handled = 0
        self.held_passes = 0  # passes that waited for their partition's backlog first
        self._records_by_partition: dict[int, Any] = {}  # the counter's child per partition

    # -- one record (the faust agent's whole body) ------------------------------
    async def handle(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        """Apply one record; never raises (failures go to the dead-letter topic)."""
        self.handled += 1
        counter = self._records_by_partition.get(partition)
        if counter is None:
            counter = self._records_by_partition[partition] = self.metrics.records.labels(str(partition))
        counter.inc()
        try:
            msg = codec.decode(value, key)
        except codec.CodecError as exc:
            await self._dead(key, value, f"undecodable record: {exc}", partition, offset, "undecodable")
            return
        try:
            error = self._apply(msg, partition, offset, value or b"")
        except Exception as exc:  # a bug must not stop the partition either
            log.exception("could not apply a record of %s", msg.cluster, extra={"cluster": msg.cluster})
            error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            await self._dead(key, value, error, partition, offset, "rejected")

    async def _dead(
        self, key: bytes | None, value: bytes | None, error: str, partition: int, offset: int, reason: str
    ) -> None:
        self.dead_letters += 1
        self.metrics.dead_letters.labels(reason).inc()
        log.warning("dead letter (partition %d, offset %d): %s", partition, offset, error)
        try:
            await self.dead_letter(key, value, error, partition, offset)
        except Exception:
            log.exception("could not write a dead letter (partition %d, offset %d)", partition, offset)

    def _apply(self, msg: codec.StreamMessage, partition: int, offset: int, value: bytes) -> str | None:
        rt = self.runtimes.get(msg.cluster) or self._load(msg.cluster, partition)
        if rt.partition != partition:
            rt.partition = partition
            self._save_meta(rt)
        rt.records += 1
        stamp = (msg.epoch, msg.seq)
        if rt.last_applied is not None and stamp <= rt.last_applied:
            rt.copies += 1
            return None
        rt.last_applied = stamp
        if msg.epoch >= rt.epoch:
            rt.epoch, rt.applied_seq = msg.epoch, msg.seq
        rt.first_offset = offset if rt.first_offset is None else rt.first_offset
        rt.last_offset = offset
        kind = msg.type
        if kind != "delta" or msg.op == "DELETED":
            # What the table keeps tells how far the cluster was applied (stored records carry
            # their seq); records that leave nothing there (deletions, markers) note it here.
            rt.meta["epoch"], rt.meta["seq"] = rt.epoch, rt.applied_seq
            self._save_meta(rt)
        if kind == "delta":
            okey = object_key(msg.cluster, msg.kind, msg.object)
            if msg.op == "DELETED":
                self.table.pop(okey, None)
            else:
                self.table[okey] = value
            before = rt.cache.stats.malformed
            rt.cache.apply(Delta(msg.kind, msg.op, msg.object, msg.unknown))  # type: ignore[arg-type]
            if rt.cache.stats.malformed != before:
                self.table.pop(okey, None)
                rt.meta["epoch"], rt.meta["seq"] = rt.epoch, rt.applied_seq
                self._save_meta(rt)
                meta = msg.object.get("metadata") or {}
                name = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}".lstrip("/")
                return f"{msg.kind} {name!r} rejected by the decoder (see the worker's log)"
        elif kind == "hello":
            version = msg.extra.get("kube_version")
            if version != rt.meta.get("kube_version"):
                rt.meta["kube_version"] = version
                self._save_meta(rt)
                self._set_version(rt, version)
        elif kind == "ready":
            if not rt.synced:
                rt.meta["synced"] = True
                self._save_meta(rt)
            self._start(rt)
        elif kind == "synced":
            # The publisher's initial list of this kind is complete: an object of it the
            # state lacks does not exist (a missing ResourceClaim is judged, as live).
            rt.cache.mark_listed(msg.kind)
            listed = sorted({*rt.meta.get("listed", ()), msg.kind})
            if listed != rt.meta.get("listed"):
                rt.meta["listed"] = listed
                self._save_meta(rt)
        elif kind == "scale":
            reading = codec.scale_reading(msg)
            self.table[scale_key(msg.cluster, reading)] = value
            rt.cache.apply_record(reading)
        elif kind == "metrics":
            self.table[metrics_key(msg.cluster)] = value
            rt.cache.apply_metrics(MetricsSample(msg.extra["nodes"], msg.extra["pods"]))
        elif kind == "gap":
            rt.gaps += 1
            log.warning(
                "cluster %s: its publisher dropped %s record(s); the analysis may miss changes until objects change again",
                msg.cluster,
                msg.extra.get("dropped"),
            )
        return None

    # -- state: build, adopt, drop -------------------------------------------
    def _new_runtime(self, cluster: str, partition: int, meta: dict[str, Any]) -> ClusterRuntime:
        version = meta.get("kube_version")
        cache = ClusterCache(ClusterState(version))
        config = replace(self.config, cluster=cluster, kube_version=version)
        rt: ClusterRuntime

        async def on_pass(outcome: PassOutcome) -> None:
            first, last = rt.first_offset, rt.last_offset
            rt.first_offset = rt.last_offset = None
            for err in outcome.report.rule_errors:
                doc = {
                    "cluster": cluster,
                    "rule_id": err.rule_id,
                    "error": err.error,
                    "partition": rt.partition,
                    "offsets": [first, last],
                }
                await self._dead(
                    cluster.encode(),
                    orjson.dumps(doc),
                    f"rule {err.rule_id} failed: {err.error}",
                    rt.partition,
                    last if last is not None else -1,
                    "rule-error",
                )

        async def backlog_first() -> None:
            await self._let_backlog_in(rt.partition)

        pipeline = Pipeline(
            cache,
            self.sessions,
            config,
            renderer=self.renderer,
            clock=self.clock,
            on_pass=on_pass,
            before_pass=backlog_first if self.backlog is not None else None,
        )
        cache.on_event = pipeline.on_event
        rt = ClusterRuntime(cluster, partition, cache, pipeline, {"partition": partition, **meta})
        self.runtimes[cluster] = rt
        return rt

    async def _let_backlog_in(self, partition: int) -> None:
        """Before a pass: wait while more than BACKLOG_HOLD records of ``partition`` are not
        handled yet, at most ``max_hold`` seconds."""
        assert self.backlog is not None
        if self.backlog(partition) <= BACKLOG_HOLD:
            return
        self.held_passes += 1
        deadline = time.monotonic() + self.max_hold
        while self.backlog(partition) > BACKLOG_HOLD and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    def _set_version(self, rt: ClusterRuntime, version: str | None) -> None:
        rt.cache.state.kube_version = version
        rt.pipeline.config = replace(rt.pipeline.config, kube_version=version)

    def _save_meta(self, rt: ClusterRuntime) -> None:
        rt.meta["partition"] = rt.partition
        self.table[meta_key(rt.cluster)] = orjson.dumps(rt.meta)

    def _load(self, cluster: str, partition: int) -> ClusterRuntime:
        """A cluster first seen by this worker: rebuilt from the table (empty when it is new)."""
        raw = self.table.get(meta_key(cluster))
        meta = orjson.loads(raw) if raw else {}
        rt = self._new_runtime(cluster, partition, meta)
        rt.epoch, rt.applied_seq = int(meta.get("epoch") or 0), int(meta.get("seq") or 0)
        prefix = OBJECT + cluster.encode() + b"\x00"
        self._replay(rt, (v for k, v in list(self.table.items()) if k.startswith(prefix)))
        for kind in meta.get("listed") or ():
            rt.cache.mark_listed(kind)
        prefix = SCALE + cluster.encode() + b"\x00"
        for value in [v for k, v in list(self.table.items()) if k.startswith(prefix)]:
            try:
                msg = codec.decode(value)
                self._note_seq(rt, msg)
                rt.cache.apply_record(codec.scale_reading(msg))
            except Exception as exc:  # as _replay: skip it, keep the rest
                log.warning("cluster %s: a stored /scale reading could not be restored: %s", cluster, exc)
        sample = self.table.get(metrics_key(cluster))
        if sample:
            msg = codec.decode(sample)
            self._note_seq(rt, msg)
            rt.cache.apply_metrics(MetricsSample(msg.extra["nodes"], msg.extra["pods"]))
        if not raw:
            self._save_meta(rt)
        if rt.synced:
            self._start(rt)
        return rt

    def _replay(self, rt: ClusterRuntime, records: Iterator[bytes] | Any) -> None:
        for value in records:
            try:
                msg = codec.decode(value)
                self._note_seq(rt, msg)
                rt.cache.apply(Delta(msg.kind, "ADDED", msg.object))
            except Exception as exc:  # stored before a decoder change, say: skip it, keep the rest
                log.warning("cluster %s: a stored object could not be restored: %s", rt.cluster, exc)

    @staticmethod
    def _note_seq(rt: ClusterRuntime, msg: codec.StreamMessage) -> None:
        if (msg.epoch, msg.seq) > (rt.epoch, rt.applied_seq):
            rt.epoch, rt.applied_seq = msg.epoch, msg.seq

    def adopt(self, partitions: set[int]) -> list[str]:
        """Rebuild every cluster the table holds for ``partitions`` (after the table is recovered);
        returns the clusters rebuilt."""
        rebuilt = []
        for key, raw in list(self.table.items()):
            if not key.startswith(META):
                continue
            cluster = key[len(META) :].decode()
            meta = orjson.loads(raw)
            if meta.get("partition") in partitions and cluster not in self.runtimes:
                self._load(cluster, int(meta["partition"]))
                rebuilt.append(cluster)
        self.adopted |= partitions
        if rebuilt:
            log.info(
                "rebuilt %d cluster(s) from the state table: %s", len(rebuilt), ", ".join(sorted(rebuilt))
            )
        return rebuilt

    async def revoke(self, partitions: set[int]) -> None:
        """Stop analysing the clusters of ``partitions`` (another worker takes them over)."""
        self.adopted -= partitions
        gone = [rt for rt in self.runtimes.values() if rt.partition in partitions]
        for rt in gone:
            del self.runtimes[rt.cluster]
        await self._stop_all(gone)

    async def close(self) -> None:
        gone, self.runtimes = list(self.runtimes.values()), {}
        await self._stop_all(gone)

    @staticmethod
    async def _stop_all(runtimes: list[ClusterRuntime]) -> None:
        for rt in runtimes:
            rt.stop.set()
            if rt.task is not None:
                rt.task.cancel()
        for rt in runtimes:
            if rt.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await rt.task

    def _start(self, rt: ClusterRuntime) -> None:
        if rt.task is None:
            rt.task = asyncio.create_task(rt.pipeline.run(rt.stop), name=f"pipeline:{rt.cluster}")

    def ready(self, partitions: set[int]) -> bool:
        return partitions <= self.adopted

    def status(self) -> dict[str, Any]:
        return {
            "adopted": sorted(self.adopted),
            "handled": self.handled,
            "held_passes": self.held_passes,
            "dead_letters": self.dead_letters,
            "clusters": {name: rt.status() for name, rt in sorted(self.runtimes.items())},
        }
