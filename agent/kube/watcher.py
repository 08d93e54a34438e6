"""Watchers: a tiny forever-loop around a testable single pass (kopf's
``watching.py``; client-go's ``tools/cache/reflector.go``).

``KindWatcher`` keeps one kind (in one namespace, or all) in step with the API
server and hands every change to a ``Sink`` as a ``Delta`` —
``(kind, "ADDED" | "MODIFIED" | "DELETED", object dict)``:

- ``step()`` is one pass. Without a resourceVersion it lists, page by page
  with ``limit``/``continue``, and reconciles the result with what it has
  delivered before: new objects are ADDED, changed ones (another
  resourceVersion) MODIFIED, unchanged ones are not repeated, and objects that
  vanished between two lists get a synthesised DELETED
  (``final_state_unknown=True``, like client-go's ``DeletedFinalStateUnknown``
  from ``DeltaFIFO.Replace``). Then it watches from the list's
  resourceVersion with ``allowWatchBookmarks=true`` until the stream ends;
  BOOKMARK events only move the version forward. A 410 — as HTTP status or
  as an ERROR event — drops the version so the next pass relists.
- ``run()`` loops over ``step()`` forever: a clean end (the server's
  ``timeoutSeconds``) re-watches at once from the last version; dropped
  connections, stalls, 429 and 5xx back off exponentially with jitter as the
  reflector does (``wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0,
  1.0)``). A 429 or 5xx answer's ``Retry-After`` is honoured instead, as client-go's
  ``checkWait`` does (staging/src/k8s.io/client-go/rest/with_retry.go, v0.37.2: "any
  500 error code and 429 can trigger a wait"), bounded by the backoff's cap (30 s)
  so a server cannot park the watcher for an hour.
- While a kind's last attempt failed with a transient error (the API server down,
  throttling, 5xx) and no list has completed or watch opened since,
  ``WatchStats.failing`` names the error; ``Watcher.failing`` collects them and the
  agent's ``/readyz`` is false meanwhile.
- Where the API server serves it, the list is a *streaming list* (watch-list,
  KEP-3157; client-go's reflector ``watchList``): one watch with
  ``sendInitialEvents=true`` and ``resourceVersionMatch=NotOlderThan`` streams the
  current state as ADDED events, reconciled exactly as a list's items, until a
  BOOKMARK annotated ``k8s.io/initial-events-end: "true"`` says the state is
  complete (its resourceVersion is the list's); the same stream then goes on as
  the watch. The API server streams from its watch cache instead of building
  whole list responses in memory. A server that refuses the parameters (422:
  the ``WatchList`` gate off) or ignores them (an event other than ADDED, or a
  bookmark without the annotation, before the end) is listed with
  ``limit``/``continue`` instead, and every watcher sharing its
  :class:`WatchListMode` stops asking.
- The first successful list of a kind signals ``synced``.

``Watcher`` runs one ``KindWatcher`` per kind and namespace scope and
aggregates their sync state and counters. Time, sleep and randomness are
injectable so tests observe backoff without waiting for it.

``MetricsPoller`` polls metrics.k8s.io (NodeMetrics, PodMetrics) when
discovery shows the group, with a clean ``MetricsUnavailable`` otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import random as _random
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent.kube.errors import BadRequest, Gone, KubeError, NotFound, Throttled, Unavailable
from agent.kube.kinds import WATCHED_KINDS, Kind

__all__ = [
    "Backoff",
    "CallbackSink",
    "Delta",
    "KindWatcher",
    "KubeSource",
    "MetricsPoller",
    "MetricsSample",
    "MetricsUnavailable",
    "QueueSink",
    "Sink",
    "Synced",
    "WatchListMode",
    "WatchSpec",
    "WatchStats",
    "Watcher",
    "poll_metrics_once",
]

logger = logging.getLogger(__name__)

DeltaType = Literal["ADDED", "MODIFIED", "DELETED"]
RawObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Delta:
    """One change of one object. ``object`` is the API-shaped dict (with
    ``kind`` and ``apiVersion``). When ``final_state_unknown`` is true the
    deletion was inferred from a relist and ``object`` is only a stub with
    ``metadata`` name, namespace, uid and the last resourceVersion seen."""

    kind: str
    type: DeltaType
    object: RawObject
    final_state_unknown: bool = False


# Every watch event becomes a Delta: build it by setting the slots directly,
# which skips the frozen dataclass's per-field object.__setattr__ (the same
# value; tests/kube/test_watcher.py checks it).
_new = object.__new__
_DELTA_SLOTS = tuple(vars(Delta)[f].__set__ for f in ("kind", "type", "object", "final_state_unknown"))


def _delta(kind: str, type_: DeltaType, obj: RawObject) -> Delta:
    """``Delta(kind, type_, obj)``, built faster."""
    delta: Delta = _new(Delta)
    set_kind, set_type, set_object, set_unknown = _DELTA_SLOTS
    set_kind(delta, kind)
    set_type(delta, type_)
    set_object(delta, obj)
    set_unknown(delta, False)
    return delta


@dataclass(frozen=True, slots=True)
class Synced:
    """Queue marker: the initial list of ``kind`` has been delivered."""

    kind: str


class Sink(Protocol):
    async def delta(self, delta: Delta) -> None: ...

    async def synced(self, kind: str) -> None: ...


class QueueSink:
    """Put deltas and ``Synced`` markers on an ``asyncio.Queue`` (a bounded
    queue gives backpressure to the watchers)."""

    def __init__(self, queue: asyncio.Queue[Delta | Synced]) -> None:
        self.queue = queue

    async def delta(self, delta: Delta) -> None:
        await self.queue.put(delta)

    async def synced(self, kind: str) -> None:
        await self.queue.put(Synced(kind))


class CallbackSink:
    """Adapt two coroutine functions to a ``Sink``."""

    def __init__(
        self,
        on_delta: Callable[[Delta], Awaitable[None]],
        on_synced: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._on_delta = on_delta
        self._on_synced = on_synced

    async def delta(self, delta: Delta) -> None:
        await self._on_delta(delta)

    async def synced(self, kind: str) -> None:
        if self._on_synced is not None:
            await self._on_synced(kind)


class KubeSource(Protocol):
    """What a watcher needs from the gateway (``agent.kube.gateway.Gateway``)."""

    async def list_page(
        self,
        kind: Kind,
        *,
        namespace: str | None = ...,
        limit: int | None = ...,
        continue_token: str | None = ...,
        resource_version: str | None = ...,
        field_selector: str | None = ...,
        label_selector: str | None = ...,
    ) -> Any: ...

    def watch(
        self,
        kind: Kind,
        *,
        namespace: str | None = ...,
        resource_version: str | None = ...,
        timeout_seconds: int | None = ...,
        allow_bookmarks: bool = ...,
        field_selector: str | None = ...,
        label_selector: str | None = ...,
        send_initial_events: bool = ...,
    ) -> AbstractAsyncContextManager[Any]: ...


Sleep = Callable[[float], Awaitable[None]]


class Backoff:
    """Exponential backoff with jitter, as client-go's
    ``exponentialBackoffManagerImpl`` (k8s.io/apimachinery/pkg/util/wait):
    the delay starts at ``initial``, is multiplied by ``factor`` per failure
    up to ``cap``, gets ``delay * jitter * random()`` added, and starts over
    when no backoff was needed for ``reset_after`` seconds. Seconds."""

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.initial, self.cap, self.factor, self.jitter, self.reset_after = (
            initial,
            cap,
            factor,
            jitter,
            reset_after,
        )
        self._clock = clock
        self._random = random
        self._next = initial
        self._last: float | None = None

    def next(self) -> float:
        now = self._clock()
        if self._last is not None and now - self._last > self.reset_after:
            self._next = self.initial
        self._last = now
        delay = min(self._next, self.cap)
        self._next = min(self._next * self.factor, self.cap)
        if self.jitter > 0:
            delay += delay * self.jitter * self._random()
        return delay

    def reset(self) -> None:
        self._next = self.initial
        self._last = None


@dataclass(slots=True)
class WatchStats:
    """Counters of one kind (summed over its namespace scopes)."""

    kind: str
    lists: int = 0  # full states read (paginated lists and streaming lists)
    watch_lists: int = 0  # of those, streaming lists (sendInitialEvents)
    relists: int = 0  # lists forced by 410 Gone
    restarts: int = 0  # watch streams re-opened, for any reason
    events: int = 0  # deltas delivered from watch streams
    listed: int = 0  # deltas delivered from lists
    bookmarks: int = 0
    malformed: int = 0
    duplicates: int = 0
    synthesised_deletes: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    resource_version: str | None = None
    synced: bool = False
    available: bool = True
    # the last attempt's transient error ("Throttled: …") until a list completes or a watch opens
    failing: str | None = None

    def add(self, other: WatchStats) -> None:
        for name in (
            "lists",
            "watch_lists",
            "relists",
            "restarts",
            "events",
            "listed",
            "bookmarks",
            "malformed",
            "duplicates",
            "synthesised_deletes",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for err, count in other.errors.items():
            self.errors[err] = self.errors.get(err, 0) + count


INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""metav1.InitialEventsAnnotationKey (staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go)."""


class WatchListMode:
    """Whether to ask for streaming lists: on until the API server refuses or ignores them
    (then off for every watcher that shares this object, with the reason kept).

    The first watcher to ask probes; the others sharing the mode wait until the server has
    accepted (a stream opened) or refused (422), so a server without watch-list is asked once."""

    __slots__ = ("_probing", "_settled", "decided", "enabled", "reason")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.reason = "" if enabled else "disabled"
        self.decided = not enabled
        self._probing = False
        self._settled = asyncio.Event()

    async def turn(self) -> bool:
        """Whether this watcher should ask for a streaming list now."""
        while not self.decided and self._probing:
            await self._settled.wait()
        if not self.decided:
            self._probing = True  # this watcher asks first; accepted() or refuse() settles it
        return self.enabled

    def accepted(self) -> None:
        self.decided = True
        self._settle()

    def refuse(self, reason: str) -> None:
        if self.enabled:
            logger.info("streaming lists (watch-list) not served: %s; listing page by page", reason)
        self.enabled = False
        self.reason = reason
        self.decided = True
        self._settle()

    def undecided(self) -> None:
        """The probe failed for another reason (a dropped connection): the next one asks again."""
        if not self.decided:
            self._settle()

    def _settle(self) -> None:
        self._probing = False
        self._settled.set()
        self._settled = asyncio.Event()


class _NotStreamed(Exception):
    """The server answered a streaming list as a plain watch (it ignores sendInitialEvents)."""


@dataclass(frozen=True, slots=True)
class WatchSpec:
    """A kind to watch, with optional server-side selectors."""

    kind: Kind
    field_selector: str | None = None
    label_selector: str | None = None


class KindWatcher:
    """List-then-watch for one kind in one scope (a namespace, or all)."""

    def __init__(
        self,
        source: KubeSource,
        kind: Kind,
        sink: Sink,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        min_watch_duration: float = 1.0,
        backoff: Backoff | None = None,
        sleep: Sleep = asyncio.sleep,
        random: Callable[[], float] = _random.random,
        clock: Callable[[], float] = time.monotonic,
        on_synced: Callable[[KindWatcher], Awaitable[None]] | None = None,
        watch_list: WatchListMode | None = None,
    ) -> None:
        self.source = source
        self.watch_list = watch_list if watch_list is not None else WatchListMode()
        self.kind = kind
        self.sink = sink
        self.namespace = namespace if kind.namespaced else None
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.page_size = page_size
        # reflector.go: watch timeouts are random in [minWatchTimeout, 2*minWatchTimeout)
        # so that watchers spread their reconnects.
        self.watch_timeout = watch_timeout
        self.min_watch_duration = min_watch_duration
        self.backoff = backoff or Backoff(clock=clock, random=random)
        self._sleep = sleep
        self._random = random
        self._clock = clock
        self._on_synced = on_synced
        self.resource_version: str | None = None
        # namespace -> name -> (uid, resourceVersion) of what was delivered; what a relist is
        # reconciled against. One dict of names per namespace, the namespace interned: no key
        # tuple per object (the name and uid strings are the decoded object's, which the cache's
        # record holds too).
        self._known: dict[str, dict[str, tuple[str, str]]] = {}
        self.stats = WatchStats(kind.kind)
        self._kind_name = kind.kind

    def __repr__(self) -> str:
        scope = self.namespace or "*"
        return f"KindWatcher({self.kind}, namespace={scope}, rv={self.resource_version})"

    @property
    def known_count(self) -> int:
        return sum(len(names) for names in self._known.values())

    def _known_get(self, ns: str, name: str) -> tuple[str, str] | None:
        """(uid, resourceVersion) delivered for the object, if any."""
        names = self._known.get(ns)
        return names.get(name) if names is not None else None

    def _known_put(self, ns: str, name: str, uid: str, rv: str) -> None:
        names = self._known.get(ns)
        if names is None:
            names = self._known[sys.intern(ns)] = {}
        names[name] = (uid, rv)

    def _known_pop(self, ns: str, name: str) -> None:
        names = self._known.get(ns)
        if names is not None and names.pop(name, None) is not None and not names:
            del self._known[ns]

    # -- the single pass ---------------------------------------------------
    async def step(self) -> bool:
        """List when no resourceVersion is held (a streaming list where served,
        else page by page), then watch until the stream ends. A 410 Gone from the
        watch forgets the version so that the next step relists, and returns True;
        other errors propagate (a 410 on a list that has no continue token to fall
        back from, too)."""
        if self.resource_version is None and await self.watch_list.turn():
            try:
                await self.watch_list_once()
                return False
            except (BadRequest, _NotStreamed) as exc:
                self.watch_list.refuse(str(exc))
            except Gone as exc:
                return self._expired(exc)
            finally:
                self.watch_list.undecided()
        if self.resource_version is None:
            await self.list_once()
        try:
            await self.watch_once()
        except Gone as exc:
            return self._expired(exc)
        return False

    def _expired(self, exc: Gone) -> bool:
        # reflector.go: isExpiredError → return, and ListAndWatch relists.
        logger.info("%s: %s; relisting", self, exc, extra={"kind": self.kind.kind})
        self.resource_version = None
        self.stats.relists += 1
        return True

    async def list_once(self) -> None:
        """A full, paginated list reconciled with what was delivered before.

        The list carries no resourceVersion: a consistent read, which the API
        server paginates with ``limit``/``continue`` (reflector.go notes that
        RV="0" lists are served from the watch cache, which ignores limit)."""
        self.stats.lists += 1
        seen: set[tuple[str, str]] = set()
        token: str | None = None
        limit: int | None = self.page_size or None
        list_rv: str | None = None
        while True:
            try:
                page = await self.source.list_page(
                    self.kind,
                    namespace=self.namespace,
                    limit=limit,
                    continue_token=token,
                    field_selector=self.field_selector,
                    label_selector=self.label_selector,
                )
            except Gone:
                if token is None:
                    raise
                # tools/pager/pager.go: an expired continue token falls back to
                # a full list; what was delivered from earlier pages stays and
                # is reconciled by resourceVersion, so nothing is repeated.
                logger.info(
                    "%s: continue token expired; listing in full", self, extra={"kind": self.kind.kind}
                )
                token, limit = None, None
                continue
            for obj in page["items"]:
                await self._reconcile(obj, seen)
            list_rv = page["metadata"].get("resourceVersion") or list_rv
            token = page["metadata"].get("continue") or None
            if token is None:
                break
        await self._complete(seen, list_rv)

    async def _complete(self, seen: set[tuple[str, str]], list_rv: str | None) -> None:
        """The whole state has been read (``seen``, at ``list_rv``): what vanished since the last
        one is DELETED, the version is held, and the first complete state signals ``synced``."""
        vanished = [
            (ns, name) for ns, names in self._known.items() for name in names if (ns, name) not in seen
        ]
        for key in vanished:
            uid, rv = self._known_get(*key) or ("", "")
            self._known_pop(*key)
            self.stats.synthesised_deletes += 1
            await self.sink.delta(
                Delta(self.kind.kind, "DELETED", self._stub(key, uid, rv), final_state_unknown=True)
            )
        self.resource_version = list_rv or "0"
        self.stats.resource_version = self.resource_version
        self.stats.failing = None
        if not self.stats.synced:
            self.stats.synced = True
            if self._on_synced is not None:
                await self._on_synced(self)
            else:
                await self.sink.synced(self.kind.kind)
        else:
            # A relist after 410 Gone: sinks that care (the Kafka publisher) get a marker.
            relisted = getattr(self.sink, "relisted", None)
            if relisted is not None:
                await relisted(self.kind.kind)

    async def watch_list_once(self) -> None:
        """A streaming list, then the watch on the same stream until it ends.

        As client-go's reflector (``watchList`` and ``handleListWatch`` in
        staging/src/k8s.io/client-go/tools/cache/reflector.go, v1.37.2): no
        resourceVersion (the most recent state, read consistently), bookmarks on;
        ADDED events until the BOOKMARK annotated ``k8s.io/initial-events-end``, whose
        resourceVersion the state is complete at. Raises :class:`BadRequest` when the
        server refuses the request and ``_NotStreamed`` when it answers with a plain
        watch; a stream that ends before the end bookmark is ``Unavailable`` (backoff,
        and the next step streams the list again)."""
        timeout = int(self.watch_timeout * (1.0 + self._random()))
        seen: set[tuple[str, str]] = set()
        initial = True
        stream_cm = self.source.watch(
            self.kind,
            namespace=self.namespace,
            resource_version=None,
            timeout_seconds=max(timeout, 1),
            allow_bookmarks=True,
            field_selector=self.field_selector,
            label_selector=self.label_selector,
            send_initial_events=True,
        )
        accept = self._accept
        deliver = self.sink.delta
        async with stream_cm as stream:
            # The server accepted the request (a server without the gate answers 422 before any
            # event): the other watchers may ask too. One that ignores it (before 1.27) is found
            # out by each watcher's own stream.
            self.watch_list.accepted()
            self.stats.lists += 1
            self.stats.watch_lists += 1
            try:
                async for event in stream:
                    if not initial:
                        delta = accept(event)
                        if delta is not None:
                            await deliver(delta)
                        continue
                    type_, obj = event["type"], event["object"]
                    if type_ == "ADDED":
                        await self._reconcile(obj, seen)
                        continue
                    meta = obj.get("metadata") if isinstance(obj, dict) else None
                    annotations = (meta or {}).get("annotations") or {}
                    if type_ == "BOOKMARK" and annotations.get(INITIAL_EVENTS_END) == "true":
                        initial = False
                        self.stats.bookmarks += 1
                        await self._complete(seen, (meta or {}).get("resourceVersion"))
                        continue
                    raise _NotStreamed(f"a {type_} event before the {INITIAL_EVENTS_END} bookmark")
            finally:
                self.stats.malformed += stream.malformed
                self.stats.resource_version = self.resource_version
        if initial:
            raise Unavailable(f"streaming list of {self.kind} ended before the {INITIAL_EVENTS_END} bookmark")

    def _stub(self, key: tuple[str, str], uid: str, rv: str) -> RawObject:
        """The last known identity of an object whose final state we missed."""
        meta: dict[str, str] = {"name": key[1], "uid": uid, "resourceVersion": rv}
        if key[0]:
            meta["namespace"] = key[0]
        return {"apiVersion": self.kind.api_version, "kind": self.kind.kind, "metadata": meta}

    async def _reconcile(self, obj: RawObject, seen: set[tuple[str, str]]) -> None:
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            self.stats.malformed += 1
            return
        key = (meta.get("namespace") or "", meta["name"])
        uid, rv = meta.get("uid") or "", meta.get("resourceVersion") or ""
        seen.add(key)
        old = self._known_get(*key)
        self._known_put(key[0], key[1], uid, rv)
        if old is None:
            type_: DeltaType = "ADDED"
        elif old[0] != uid:
            # Deleted and re-created under the same name while we were away.
            self.stats.synthesised_deletes += 1
            await self.sink.delta(
                Delta(self.kind.kind, "DELETED", self._stub(key, *old), final_state_unknown=True)
            )
            type_ = "ADDED"
        elif old[1] != rv:
            type_ = "MODIFIED"
        else:
            return
        self.stats.listed += 1
        await self.sink.delta(Delta(self.kind.kind, type_, obj))

    async def watch_once(self) -> None:
        """One watch stream from the held resourceVersion until it ends."""
        timeout = int(self.watch_timeout * (1.0 + self._random()))
        started = self._clock()
        received = 0
        stream_cm = self.source.watch(
            self.kind,
            namespace=self.namespace,
            resource_version=self.resource_version,
            timeout_seconds=max(timeout, 1),
            allow_bookmarks=True,
            field_selector=self.field_selector,
            label_selector=self.label_selector,
        )
        accept = self._accept
        deliver = self.sink.delta
        async with stream_cm as stream:
            self.stats.failing = None  # the API server answered 200: it serves this kind again
            try:
                async for event in stream:
                    received += 1
                    delta = accept(event)
                    if delta is not None:
                        await deliver(delta)
            finally:
                self.stats.malformed += stream.malformed
                self.stats.resource_version = self.resource_version
        if received == 0 and self._clock() - started < self.min_watch_duration:
            # reflector.go watchHandler: "very short watch" is an error (backoff).
            raise Unavailable(f"very short watch of {self.kind}: closed with no events")

    def _accept(self, event: dict[str, Any]) -> Delta | None:
        """Book one watch event (version, known objects, counters) and return
        the Delta to deliver, or None for a bookmark, a duplicate or a
        malformed event. Runs for every event of every stream: kept lean."""
        type_ = event["type"]
        obj = event["object"]
        meta = obj.get("metadata")
        if type(meta) is not dict:
            self.stats.malformed += 1
            return None
        rv = meta.get("resourceVersion")
        if type_ == "BOOKMARK":
            if rv:
                self.resource_version = rv
            self.stats.bookmarks += 1
            return None
        name = meta.get("name")
        if not name or not rv:
            self.stats.malformed += 1
            return None
        ns = meta.get("namespace") or ""
        if type_ == "DELETED":
            self._known_pop(ns, name)
        else:
            names = self._known.get(ns)
            if names is None:
                names = self._known[sys.intern(ns)] = {}
            old = names.get(name)
            if old is not None and old[1] == rv:
                self.stats.duplicates += 1
                self.resource_version = rv
                return None
            names[name] = (meta.get("uid") or "", rv)
        self.resource_version = rv
        self.stats.events += 1
        return _delta(self._kind_name, type_, obj)

    # -- the forever loop ----------------------------------------------------
    async def run(self, *, _iterations: int | None = None) -> None:
        """Step forever (or ``_iterations`` times, for tests), backing off
        between failed passes. Returns only when the API server does not
        serve this kind at all (404 on the first list)."""
        done = 0
        gone_in_a_row = 0
        while _iterations is None or done < _iterations:
            done += 1
            delay = 0.0
            try:
                if await self.step():
                    gone_in_a_row += 1
                    if gone_in_a_row > 1:
                        # A watch that expires again right after a fresh list:
                        # relist, but not in a tight loop.
                        delay = self.backoff.next()
                else:
                    gone_in_a_row = 0
            except NotFound as exc:
                if self.stats.synced:
                    delay = self.backoff.next()
                    self._count_error(exc, delay)
                else:
                    self.stats.available = False
                    logger.warning(
                        "%s is not served by this cluster (%s); not watching it",
                        self.kind,
                        exc,
                        extra={"kind": self.kind.kind},
                    )
                    if self._on_synced is not None:
                        await self._on_synced(self)
                    return
            except KubeError as exc:
                delay = self._retry_delay(exc)
                self._count_error(exc, delay)
            self.stats.restarts += 1
            if delay > 0:
                await self._sleep(delay)

    def _retry_delay(self, exc: KubeError) -> float:
        """The server's ``Retry-After`` on a 429 or 5xx (client-go rest/with_retry.go
        ``checkWait``, v0.37.2), at most the backoff's cap; else the next backoff delay."""
        after = exc.retry_after
        if after is not None and after > 0 and (isinstance(exc, Throttled) or (exc.status or 0) >= 500):
            return min(after, self.backoff.cap)
        return self.backoff.next()

    def _count_error(self, exc: KubeError, delay: float) -> None:
        name = type(exc).__name__
        self.stats.errors[name] = self.stats.errors.get(name, 0) + 1
        if exc.transient:
            self.stats.failing = f"{name}: {exc}"
        log = logger.warning if not exc.transient else logger.info
        log("%s: %s; retrying in %.2fs", self, exc, delay, extra={"kind": self.kind.kind})


class Watcher:
    """Watch several kinds (``WATCHED_KINDS`` by default) in all namespaces
    or in a list of them, delivering deltas to one sink."""

    def __init__(
        self,
        source: KubeSource,
        sink: Sink,
        *,
        kinds: Iterable[Kind | WatchSpec] = WATCHED_KINDS,
        namespaces: Sequence[str] | None = None,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        min_watch_duration: float = 1.0,
        backoff: Callable[[], Backoff] | None = None,
        sleep: Sleep = asyncio.sleep,
        random: Callable[[], float] = _random.random,
        clock: Callable[[], float] = time.monotonic,
        watch_list: bool = True,
    ) -> None:
        self.sink = sink
        self.watch_list = WatchListMode(watch_list)  # shared: one refusal ends it for every kind
        self.watchers: list[KindWatcher] = []
        self._pending: dict[str, int] = {}
        self._synced_event = asyncio.Event()
        specs = [k if isinstance(k, WatchSpec) else WatchSpec(k) for k in kinds]
        for spec in specs:
            scopes: Sequence[str | None] = namespaces if (namespaces and spec.kind.namespaced) else [None]
            for ns in scopes:
                self.watchers.append(
                    KindWatcher(
                        source,
                        spec.kind,
                        sink,
                        namespace=ns,
                        field_selector=spec.field_selector,
                        label_selector=spec.label_selector,
                        page_size=page_size,
                        watch_timeout=watch_timeout,
                        min_watch_duration=min_watch_duration,
                        backoff=backoff() if backoff else Backoff(clock=clock, random=random),
                        sleep=sleep,
                        random=random,
                        clock=clock,
                        on_synced=self._scope_synced,
                        watch_list=self.watch_list,
                    )
                )
                self._pending[spec.kind.kind] = self._pending.get(spec.kind.kind, 0) + 1
        if not self._pending:
            self._synced_event.set()

    async def _scope_synced(self, watcher: KindWatcher) -> None:
        name = watcher.kind.kind
        self._pending[name] -= 1
        if self._pending[name] == 0:
            del self._pending[name]
            if all(w.stats.available for w in self.watchers if w.kind.kind == name):
                await self.sink.synced(name)
            if not self._pending:
                self._synced_event.set()

    @property
    def synced(self) -> bool:
        """True once every kind has been listed (or found not served)."""
        return self._synced_event.is_set()

    async def wait_synced(self) -> None:
        await self._synced_event.wait()

    @property
    def failing(self) -> dict[str, str]:
        """Kind → the transient error its last attempt met, for kinds not served again since
        (empty when the API server answers every watcher)."""
        return {w.kind.kind: w.stats.failing for w in self.watchers if w.stats.failing is not None}

    @property
    def unavailable_kinds(self) -> list[str]:
        return sorted({w.kind.kind for w in self.watchers if not w.stats.available})

    def stats(self) -> dict[str, WatchStats]:
        out: dict[str, WatchStats] = {}
        for w in self.watchers:
            agg = out.get(w.kind.kind)
            if agg is None:
                agg = out[w.kind.kind] = WatchStats(w.kind.kind, synced=True)
            agg.add(w.stats)
            agg.synced = agg.synced and w.stats.synced
            agg.available = agg.available and w.stats.available
            agg.resource_version = w.stats.resource_version
        return out

    async def run(self) -> None:
        """Run every kind's watcher until cancelled."""
        async with asyncio.TaskGroup() as tg:
            for w in self.watchers:
                tg.create_task(w.run(), name=f"watch {w.kind} {w.namespace or '*'}")


# -- metrics.k8s.io ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricsSample:
    """NodeMetrics and PodMetrics items as metrics-server lists them."""

    nodes: list[RawObject]
    pods: list[RawObject]


@dataclass(frozen=True, slots=True)
class MetricsUnavailable:
    """Why there are no metrics: the group is not served, or it failed."""

    reason: str


class MetricsSource(Protocol):
    async def metrics_available(self) -> bool: ...

    async def list_node_metrics(self) -> Any: ...

    async def list_pod_metrics(self, namespace: str | None = None) -> Any: ...


async def poll_metrics_once(
    source: MetricsSource, *, namespaces: Sequence[str] | None = None
) -> MetricsSample | MetricsUnavailable:
    """One poll of metrics.k8s.io; never raises the project's errors."""
    try:
        if not await source.metrics_available():
            return MetricsUnavailable(
                "metrics.k8s.io/v1beta1 is not served by this cluster (no metrics-server)"
            )
        nodes = (await source.list_node_metrics())["items"]
        pods: list[RawObject] = []
        scopes: Sequence[str | None] = namespaces or [None]
        for ns in scopes:
            pods.extend((await source.list_pod_metrics(ns))["items"])
    except KubeError as exc:
        return MetricsUnavailable(f"metrics.k8s.io failed: {exc}")
    return MetricsSample(nodes, pods)


class MetricsPoller:
    """Poll metrics every ``interval`` seconds and pass each result
    (``MetricsSample`` or ``MetricsUnavailable``) to ``callback``; a change
    of availability is logged once, not every poll."""

    def __init__(
        self,
        source: MetricsSource,
        callback: Callable[[MetricsSample | MetricsUnavailable], Awaitable[None]],
        *,
        interval: float = 30.0,
        namespaces: Sequence[str] | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.source = source
        self.callback = callback
        self.interval = interval
        self.namespaces = namespaces
        self._sleep = sleep
        self.last: MetricsSample | MetricsUnavailable | None = None

    async def poll(self) -> MetricsSample | MetricsUnavailable:
        result = await poll_metrics_once(self.source, namespaces=self.namespaces)
        previous = self.last
        if isinstance(result, MetricsUnavailable):
            if not isinstance(previous, MetricsUnavailable) or previous.reason != result.reason:
                logger.warning("resource usage metrics unavailable: %s", result.reason)
        elif isinstance(previous, MetricsUnavailable):
            logger.warning("resource usage metrics available again")
        self.last = result
        await self.callback(result)
        return result

    async def run(self, *, _iterations: int | None = None) -> None:
        done = 0
        while _iterations is None or done < _iterations:
            done += 1
            await self.poll()
            await self._sleep(self.interval)
