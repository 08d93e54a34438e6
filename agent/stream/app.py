"""The faust-streaming app of ``unstick worker``: thin agents over :class:`Fleet`.

One agent reads ``<prefix>-deltas`` (keyed by cluster, so each cluster is in
one partition and one worker at a time) and hands every record to
:meth:`Fleet.handle`; the clusters' objects live in the Table ``objects``,
whose changelog topic (``<app id>-objects-changelog``) lets a worker that is
assigned a partition rebuild its clusters without a relist. After each
rebalance, once the table is recovered, the fleet adopts the partitions it
was given and drops those it lost.

Faust's settings here are production ones (``processing_guarantee=
"at_least_once"``, the broker's session and rebalance timeouts from
:class:`StreamSettings`, the web server on the pod's IP); tests pass the
short timeouts and the one-record producer batches their broker needs
through the same settings (environment), never as defaults.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import faust
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.pipeline import PipelineConfig
from agent.settings import StreamSettings
from agent.stream.fleet import Fleet
from agent.stream.stall import StallWatch

log = logging.getLogger(__name__)

OBJECTS_TABLE = "objects"


class LagCollector(Collector):
    """Lag per assigned partition: the partition's high watermark minus the next offset to handle."""

    def __init__(self, worker: StreamWorker) -> None:
        self.worker = worker

    def collect(self) -> Iterator[Any]:
        lag = GaugeMetricFamily(
            "unstick_stream_lag", "Records not yet handled, per partition.", labels=["partition"]
        )
        for partition, value in sorted(self.worker.lag().items()):
            lag.add_metric([str(partition)], value)
        ready = GaugeMetricFamily("unstick_stream_ready", "1 when every assigned partition is recovered.")
        ready.add_metric([], 1 if self.worker.ready() else 0)
        yield from (lag, ready)


def faust_worker(app: faust.App, loglevel: str) -> faust.Worker:
    """faust's Worker for ``app``, without its terminal spinner.

    At WARN and above, faust's Worker (faust/worker.py ``_setup_spinner_handler``,
    faust-streaming 0.15.3) sets the root logger to DEBUG so that every log call turns
    the spinner, and it stays so after start-up: every ``debug()`` in aiokafka, faust,
    mode and SQLAlchemy — several per record handled (the changelog send, each request)
    — builds a LogRecord the handlers then drop. Without the spinner the root logger
    keeps the level asked for.
    """
    worker = faust.Worker(app, loglevel=loglevel)
    worker.spinner = None
    return worker


class StreamWorker:
    """The faust App, its topics and table, and the fleet they feed."""

    def __init__(
        self,
        settings: StreamSettings,
        sessions: async_sessionmaker[AsyncSession],
        config: PipelineConfig,
        *,
        app_id: str | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry or CollectorRegistry()
        self.app = faust.App(
            app_id or f"{settings.topic_prefix}-worker",
            broker=settings.faust_broker or "kafka://127.0.0.1:9092",
            store="memory://",
            processing_guarantee="at_least_once",
            topic_partitions=settings.partitions,
            broker_session_timeout=settings.session_timeout,
            broker_rebalance_timeout=settings.rebalance_timeout,
            broker_heartbeat_interval=settings.heartbeat_interval,
            producer_max_batch_size=settings.producer_max_batch_size,
            web_bind=settings.web_host,
            web_port=settings.web_port,
            web_host=settings.web_host,
            datadir=settings.datadir or f"{settings.topic_prefix}-worker-data",
        )
        self.deltas = self.app.topic(
            settings.deltas_topic,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=settings.partitions,
        )
        self.dead_letters = self.app.topic(
            settings.dead_letter_topic,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
        )
        self.objects = self.app.Table(
            OBJECTS_TABLE,
            key_type=bytes,  # bytes: stored raw, no codec
            value_type=bytes,
            partitions=settings.partitions,
        )
        self.fleet = Fleet(
            sessions=sessions,
            table=self.objects,
            dead_letter=self._dead_letter,
            config=config,
            registry=self.registry,
            backlog=lambda partition: self.lag().get(partition, 0),
        )
        self._next_offset: dict[int, int] = {}
        self.stall = StallWatch(settings.stall_timeout)
        self.registry.register(LagCollector(self))
        self._wire()

    # -- the agent and the signals: a few lines each ---------------------------
    def _wire(self) -> None:
        app, fleet = self.app, self.fleet

        @app.agent(self.deltas, name="analyse")
        async def analyse(stream: Any) -> None:
            async for event in stream.events():
                message = event.message
                await fleet.handle(message.partition, message.offset, event.key, event.value)
                self._next_offset[message.partition] = message.offset + 1
                self.stall.handled(message.partition)

        self.agent = analyse

        @app.on_rebalance_complete.connect
        async def adopt(sender: Any, **_: Any) -> None:
            fleet.adopt(self.assigned())

        @app.on_partitions_assigned.connect
        async def assigned(sender: Any, assigned: Any, **_: Any) -> None:
            topic = self.deltas.get_topic_name()
            self.stall.assigned({tp.partition for tp in assigned if tp.topic == topic})

        @app.on_partitions_revoked.connect
        async def revoke(sender: Any, revoked: Any, **_: Any) -> None:
            lost = {tp.partition for tp in revoked if tp.topic == self.deltas.get_topic_name()}
            for partition in lost:
                self._next_offset.pop(partition, None)
            await fleet.revoke(lost)

        @app.page("/healthz")
        async def healthz(view: Any, request: Any) -> Any:
            # Alive unless the consumer stopped delivering (agent.stream.stall): then a liveness
            # probe restarts the worker, which rejoins the group and recovers.
            reason = self.stall.stalled(ready=self.ready(), lag=self.lag(), restored=self._restored())
            if reason is not None:
                log.warning("stalled: %s", reason)
                return view.json({"status": "stalled", "reason": reason}, status=503)
            return view.json({"status": "ok"})

        @app.page("/readyz")
        async def readyz(view: Any, request: Any) -> Any:
            ready = self.ready()
            body = {"ready": ready, "assigned": sorted(self.assigned()), "adopted": sorted(fleet.adopted)}
            return view.json(body, status=200 if ready else 503)

        @app.page("/metrics")
        async def metrics(view: Any, request: Any) -> Any:
            return view.bytes(generate_latest(self.registry), content_type="text/plain; version=0.0.4")

        @app.page("/status")
        async def status(view: Any, request: Any) -> Any:
            body = {"ready": self.ready(), "assigned": sorted(self.assigned()), **fleet.status()}
            return view.json({**body, "consumer": self.consumer_state()})

    async def _dead_letter(
        self, key: bytes | None, value: bytes | None, error: str, partition: int, offset: int
    ) -> None:
        headers = [
            ("error", error.encode()[:4096]),
            ("source-topic", self.deltas.get_topic_name().encode()),
            ("source-partition", str(partition).encode()),
            ("source-offset", str(offset).encode()),
        ]
        await self.dead_letters.send(key=key, value=value if value is not None else b"", headers=headers)

    # -- state for the probes ------------------------------------------------
    def assigned(self) -> set[int]:
        topic = self.deltas.get_topic_name()
        try:
            assignment = self.app.consumer.assignment()
        except Exception:  # not started yet
            return set()
        return {tp.partition for tp in assignment if tp.topic == topic}

    def ready(self) -> bool:
        try:
            recovered = self.app.tables.recovery.completed.is_set()
        except Exception:
            return False
        return recovered and self.fleet.ready(self.assigned())

    def _restored(self) -> int:
        """Entries in the state table: what the table's recovery has read so far."""
        try:
            return len(self.objects)
        except Exception:  # not started yet
            return 0

    def consumer_state(self) -> dict[str, Any]:
        """What faust's consumer and aiokafka's under it say about fetching (for diagnosis:
        which partitions are paused, whether the flow is on, positions and high watermarks)."""
        topic = self.deltas.get_topic_name()
        state: dict[str, Any] = {}
        try:
            consumer = self.app.consumer
            mine = lambda tps: sorted(tp.partition for tp in tps if tp.topic == topic)  # noqa: E731
            state["flow_active"] = consumer.flow_active
            state["can_resume_flow"] = consumer.can_resume_flow.is_set()
            state["paused"] = mine(consumer._paused_partitions)
            state["active"] = mine(consumer._active_partitions or ())
            inner = consumer._thread._consumer
            if inner is not None:
                state["aiokafka_paused"] = mine(inner.paused())
                state["aiokafka_assignment"] = mine(inner.assignment())
                state["highwater"] = {
                    tp.partition: inner.highwater(tp) for tp in inner.assignment() if tp.topic == topic
                }
            state["next_offset"] = dict(self._next_offset)
        except Exception as exc:  # internals of faust and aiokafka: report what could be read
            state["error"] = f"{type(exc).__name__}: {exc}"
        return state

    def lag(self) -> dict[int, int]:
        out: dict[int, int] = {}
        topic = self.deltas.get_topic_name()
        try:
            consumer = self.app.consumer
            for tp in consumer.assignment():
                if tp.topic != topic:
                    continue
                high = consumer.highwater(tp)
                if high is None:
                    continue
                position = self._next_offset.get(tp.partition)
                if position is None:
                    position = consumer._committed_offset.get(tp) or 0
                out[tp.partition] = max(0, high - position)
        except Exception:
            return out
        return out
