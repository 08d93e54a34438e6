"""``unstick watch --publish``: the watcher's deltas to Kafka instead of a local pipeline.

:class:`DeltaPublisher` is a watcher ``Sink`` (and a metrics callback): each
delta is encoded (``agent.stream.codec``) into a bounded in-memory buffer and
the call returns at once, so a slow or absent broker never blocks a watch.
One sender task drains the buffer through aiokafka in chunks, in order,
keyed by the cluster name; a chunk leaves the buffer only once the broker
acknowledged it, and after an error (with backoff) sending starts again
from the first record not acknowledged, so a broker restart loses nothing the buffer could hold.
A chunk that failed half-way may have landed in part (aiokafka retries batches
independently), so copies may repeat, but the last copy of every record comes
in order, and a worker skips a record not newer (epoch, seq) than the last it applied
(agent.stream.fleet). When the buffer is full,
new records are dropped, counted (``unstick_publish_dropped_total``) and
logged, and a ``gap`` marker saying how many follows once sending resumes.

:class:`ScaleRelay` reads custom controllers' ``/scale`` for PodDisruptionBudget
arithmetic, as the live agent does before each pass (agent.scales): the workers
have no access to the cluster, so the publisher reads and sends each reading
that changed (``scale`` records), the first ones before ``ready``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from prometheus_client import CollectorRegistry, Counter, Gauge

from agent.kube.watcher import Backoff, Delta, MetricsSample, MetricsUnavailable, Watcher
from agent.scales import ScaleReader
from agent.stream import codec
from analyzers.disruption import is_custom_kind
from analyzers.ingest import InputError
from analyzers.records import ScaleReading
from analyzers.snapshot import ClusterState

log = logging.getLogger(__name__)

CHUNK = 5000  # records per send round


async def ensure_topics(bootstrap: str, topics: Sequence[tuple[str, int]], *, timeout: float = 30.0) -> None:
    """Create the topics (name, partitions) that do not exist yet; existing ones are kept."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [NewTopic(name, n, 1) for name, n in topics if name not in existing]
        if missing:
            with contextlib.suppress(KafkaError):  # created meanwhile by another process
                await admin.create_topics(missing)
            # Produce only once every partition has a leader: records sent into a topic that is
            # still being created can be acknowledged and yet not be readable (seen with tansu).
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            names = [t.name for t in missing]
            while loop.time() < deadline:
                described = await admin.describe_topics(names)
                if all(
                    d.get("error_code") == 0
                    and d.get("partitions")
                    and all(p.get("leader", -1) >= 0 for p in d["partitions"])
                    for d in described
                ) and len(described) == len(names):
                    break
                await asyncio.sleep(0.2)
    finally:
        await admin.close()


class PublisherMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.sent = Counter(
            "unstick_publish_sent", "Records the broker acknowledged.", ["cluster"], registry=registry
        )
        self.dropped = Counter(
            "unstick_publish_dropped",
            "Records dropped: the buffer was full while the broker was away.",
            ["cluster"],
            registry=registry,
        )
        self.errors = Counter(
            "unstick_publish_errors", "Failed send rounds (retried).", ["cluster"], registry=registry
        )
        self.buffered = Gauge(
            "unstick_publish_buffered", "Records waiting to be sent.", ["cluster"], registry=registry
        )


class DeltaPublisher:
    """A watcher Sink that publishes to ``topic``, keyed by ``cluster``."""

    def __init__(
        self,
        cluster: str,
        *,
        bootstrap: str,
        topic: str,
        partitions: int,
        buffer: int = 100_000,
        registry: CollectorRegistry | None = None,
        producer_options: dict[str, Any] | None = None,
    ) -> None:
        self.cluster = cluster
        self.key = cluster.encode()
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.limit = buffer
        self.epoch = time.time_ns()
        self.seq = 0
        self.buffer: deque[bytes] = deque()
        self.dropped = 0  # in total
        self.sent = 0
        self._unreported_drops = 0
        self._wake = asyncio.Event()
        self._connected = asyncio.Event()
        self.metrics = PublisherMetrics(registry or CollectorRegistry())
        for family in (self.metrics.sent, self.metrics.dropped, self.metrics.errors, self.metrics.buffered):
            family.labels(cluster)  # exported as 0 from the start
        self._producer_options = producer_options or {}
        self.observers: list[Callable[[Delta], None]] = []  # e.g. ScaleRelay.observe

    # -- what the watcher calls (never blocks) ----------------------------------
    def _put(self, type_: str, **fields: Any) -> None:
        if len(self.buffer) >= self.limit:
            self.dropped += 1
            self._unreported_drops += 1
            self.metrics.dropped.labels(self.cluster).inc()
            if self._unreported_drops == 1 or self._unreported_drops % 10_000 == 0:
                log.warning(
                    "publish buffer full (%d records, broker unreachable?): dropped %d record(s) of %s so far",
                    self.limit,
                    self.dropped,
                    self.cluster,
                )
            return
        self.seq += 1
        if type_ == "delta":
            value = codec.encode_delta(self.cluster, self.epoch, self.seq, **fields)
        elif type_ == "scale":
            value = codec.encode_scale(self.cluster, self.epoch, self.seq, fields["reading"])
        else:
            value = codec.encode(self.cluster, self.epoch, self.seq, type_, **fields)
        self.buffer.append(value)
        self._wake.set()

    async def delta(self, delta: Delta) -> None:
        for observe in self.observers:
            observe(delta)
        self._put(
            "delta", kind=delta.kind, op=delta.type, obj=delta.object, unknown=delta.final_state_unknown
        )

    async def synced(self, kind: str) -> None:
        self._put("synced", kind=kind)

    async def relisted(self, kind: str) -> None:
        self._put("relisted", kind=kind)

    def hello(self, kube_version: str | None) -> None:
        self._put("hello", kube_version=kube_version)

    def ready(self, unavailable: Sequence[str]) -> None:
        self._put("ready", unavailable=list(unavailable))

    def scale(self, reading: ScaleReading) -> None:
        self._put("scale", reading=reading)

    async def metrics_sample(self, result: MetricsSample | MetricsUnavailable) -> None:
        if isinstance(result, MetricsSample):
            self._put(
                "metrics",
                nodes=[codec.normalise(o) for o in result.nodes],
                pods=[codec.normalise(o) for o in result.pods],
            )

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    # -- the sender ----------------------------------------------------------
    async def _send_round(self, producer: AIOKafkaProducer, chunk: list[bytes]) -> list[Any]:
        """Send ``chunk``; the outcome of each record (metadata or the exception). Every record
        settles before this returns: nothing of the round is still in flight when it is sent again."""
        futures: list[asyncio.Future[Any]] = []
        failed: BaseException | None = None
        try:
            for value in chunk:
                futures.append(await producer.send(self.topic, value, key=self.key))
        except (KafkaError, OSError) as exc:  # e.g. no metadata for the topic in time
            failed = exc
        results: list[Any] = list(await asyncio.gather(*futures, return_exceptions=True))
        if failed is not None:
            results.append(failed)
        return results + [failed] * (len(chunk) - len(results))

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Send until cancelled (or ``stop`` is set and the buffer is empty)."""
        backoff = Backoff(initial=0.5, cap=10.0)
        producer: AIOKafkaProducer | None = None
        try:
            while True:
                if producer is None:
                    try:
                        await ensure_topics(self.bootstrap, [(self.topic, self.partitions)], timeout=10)
                        producer = AIOKafkaProducer(
                            bootstrap_servers=self.bootstrap,
                            acks=1,
                            linger_ms=10,
                            max_batch_size=256 * 1024,  # records are kilobytes: a few per 16 KB default batch
                            request_timeout_ms=10_000,
                            **self._producer_options,
                        )
                        await producer.start()
                    except (KafkaError, OSError) as exc:
                        if producer is not None:
                            with contextlib.suppress(Exception):
                                await asyncio.wait_for(producer.stop(), 5)
                        producer = None
                        self._connected.clear()
                        delay = backoff.next()
                        log.warning(
                            "cannot reach Kafka at %s (%s); retrying in %.1fs", self.bootstrap, exc, delay
                        )
                        await asyncio.sleep(delay)
                        continue
                    self._connected.set()
                    log.info("publishing %s to %s at %s", self.cluster, self.topic, self.bootstrap)
                if self._unreported_drops and len(self.buffer) < self.limit:
                    dropped, self._unreported_drops = self._unreported_drops, 0
                    self.seq += 1
                    self.buffer.append(
                        codec.encode(self.cluster, self.epoch, self.seq, "gap", dropped=dropped)
                    )
                if not self.buffer:
                    if stop is not None and stop.is_set():
                        return
                    self._wake.clear()
                    waiters = [asyncio.ensure_future(self._wake.wait())]
                    if stop is not None:
                        waiters.append(asyncio.ensure_future(stop.wait()))
                    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                    for w in waiters:
                        w.cancel()
                    continue
                chunk = [self.buffer[i] for i in range(min(CHUNK, len(self.buffer)))]
                self.metrics.buffered.labels(self.cluster).set(len(self.buffer))
                try:
                    results = await self._send_round(producer, chunk)
                    acked = next(
                        (i for i, r in enumerate(results) if isinstance(r, BaseException)), len(chunk)
                    )
                    for _ in range(acked):
                        self.buffer.popleft()
                    self.sent += acked
                    self.metrics.sent.labels(self.cluster).inc(acked)
                    if acked:
                        # The broker answered: the rest is retried after the shortest delay, so a
                        # round that failed half-way does not arrive split by a long backoff.
                        backoff.reset()
                    if acked < len(chunk):
                        raise results[acked]
                except (KafkaError, OSError) as exc:
                    self.metrics.errors.labels(self.cluster).inc()
                    delay = backoff.next()
                    log.warning(
                        "sending to %s failed (%s); %d record(s) buffered, retrying in %.1fs",
                        self.topic,
                        exc,
                        len(self.buffer),
                        delay,
                    )
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(producer.stop(), 5)
                    producer = None
                    self._connected.clear()
                    await asyncio.sleep(delay)
                    continue
                self.metrics.buffered.labels(self.cluster).set(len(self.buffer))
                backoff.reset()
        finally:
            if producer is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(producer.stop(), 5)


def custom_controlled(obj: dict[str, Any]) -> bool:
    """Whether a pod's controllerRef names a kind of a custom group (the only owners whose
    ``/scale`` is read, analyzers.disruption.scale_targets)."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            api = ref.get("apiVersion")
            return isinstance(api, str) and api.count("/") == 1 and is_custom_kind(api.split("/")[0])
    return False


class ScaleRelay:
    """The publisher's ``/scale`` reads. It keeps what ``scale_targets`` reads --
    PodDisruptionBudgets and the pods whose controller is a custom kind -- in a small
    ClusterState of its own, reads the targets with a :class:`ScaleReader` (each at most
    once per ``interval``, as the live agent), and publishes the readings that changed."""

    def __init__(self, reader: ScaleReader, publisher: DeltaPublisher, *, debounce: float = 1.0) -> None:
        self.reader = reader
        self.publisher = publisher
        self.debounce = debounce
        self.state = ClusterState()
        self.sent = 0
        self._changed = asyncio.Event()

    def observe(self, delta: Delta) -> None:
        """A watcher delta (called by the publisher for each one, never blocks)."""
        kind = delta.kind
        if kind not in ("Pod", "PodDisruptionBudget"):
            return
        obj = delta.object
        if delta.type == "DELETED" or (kind == "Pod" and not custom_controlled(obj)):
            meta = obj.get("metadata") or {}
            if self.state.delete(kind, meta.get("namespace") or "", meta.get("name") or ""):
                self._changed.set()
            return
        try:
            self.state.apply_object(obj if obj.get("kind") else {**obj, "kind": kind}, "watch")
        except InputError:
            return  # the workers' decoder refuses it too (and dead-letters it)
        self._changed.set()

    async def refresh(self) -> int:
        """Read the scales due and publish those that changed; returns how many."""
        try:
            readings = await self.reader.refresh_readings(self.state)
        except Exception:  # a bug must not stop publishing
            log.exception("could not read the custom controllers' /scale")
            return 0
        for reading in readings:
            self.publisher.scale(reading)
        self.sent += len(readings)
        return len(readings)

    async def run(self) -> None:
        """Refresh after changes (debounced) and at least every ``interval``, until cancelled."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), self.reader.interval)
            self._changed.clear()
            await asyncio.sleep(self.debounce)
            await self.refresh()


async def announce_ready(watcher: Watcher, relay: ScaleRelay, publisher: DeltaPublisher) -> None:
    """Once every kind is listed: the first ``/scale`` readings, then ``ready`` (so a worker's
    first pass has what the live agent's has), then the relay's refreshes until cancelled."""
    await watcher.wait_synced()
    await relay.refresh()
    publisher.ready(watcher.unavailable_kinds)
    await relay.run()


async def publish_cluster(
    *,
    cluster: str,
    gateway: Any,
    stream: Any,
    listen: tuple[str, int],
    namespaces: Sequence[str] | None,
    stop: asyncio.Event,
    kube_version: str | None = None,
    metrics_interval: float = 30.0,
) -> str:
    """Watch one cluster and publish what changes until ``stop``; serves /healthz, /readyz
    (initial lists sent to the broker) and /metrics on ``listen``. Returns when stopped."""
    from aiohttp import web
    from prometheus_client import generate_latest

    from agent.kube.watcher import MetricsPoller
    from agent.runner import minor_version

    registry = CollectorRegistry()
    publisher = DeltaPublisher(
        cluster,
        bootstrap=stream.bootstrap,
        topic=stream.deltas_topic,
        partitions=stream.partitions,
        buffer=stream.buffer,
        registry=registry,
    )
    await gateway.open()
    if kube_version is None:
        try:
            kube_version = minor_version(await gateway.version())
        except Exception as exc:
            log.warning("could not read the API server version (%s); assuming a recent release", exc)
    publisher.hello(kube_version)
    relay = ScaleRelay(ScaleReader(gateway), publisher)
    publisher.observers.append(relay.observe)
    watcher = Watcher(gateway, publisher, namespaces=namespaces)
    sender = asyncio.create_task(publisher.run(stop), name=f"publish:{cluster}")
    tasks = [asyncio.create_task(watcher.run(), name=f"watch:{cluster}")]
    if await gateway.metrics_available():
        poller = MetricsPoller(
            gateway, publisher.metrics_sample, interval=metrics_interval, namespaces=namespaces
        )
        tasks.append(asyncio.create_task(poller.run(), name=f"metrics:{cluster}"))

    tasks.append(asyncio.create_task(announce_ready(watcher, relay, publisher)))

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        ready = watcher.synced and publisher.connected and not watcher.failing
        body = {
            "synced": watcher.synced,
            "api_failing": watcher.failing,
            "connected": publisher.connected,
            "buffered": len(publisher.buffer),
            "sent": publisher.sent,
            "dropped": publisher.dropped,
        }
        return web.json_response(body, status=200 if ready else 503)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, listen[0], listen[1])
        await site.start()
        port = site._server.sockets[0].getsockname()[1] if site._server else listen[1]  # type: ignore[union-attr]
        url = f"http://{listen[0] if listen[0] not in ('', '0.0.0.0') else '127.0.0.1'}:{port}"
        import sys

        print(
            f"unstick: publishing {cluster} to {stream.deltas_topic} at {stream.bootstrap}; health on {url}",
            file=sys.stderr,
            flush=True,
        )
        await stop.wait()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        # Flush what is buffered (bounded: a broker that stays away does not hold the exit).
        with contextlib.suppress(asyncio.TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(sender), timeout=10)
        if publisher.buffer:
            log.warning("stopping with %d record(s) not sent", len(publisher.buffer))
        return url
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await sender
        await runner.cleanup()
        await gateway.close()
