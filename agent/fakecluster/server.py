"""A protocol-faithful Kubernetes API endpoint in aiohttp, for tests and the demo.

It serves what unstick's gateway uses, with the semantics a real API server has:

- ``/version``, discovery (``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>``,
  ``/apis/<g>/<v>``), list, get and watch for the kinds in
  ``agent.kube.kinds``, cluster-wide and per namespace; create (POST) and
  update (PUT, resourceVersion-guarded: 409 on a stale one) for
  coordination.k8s.io Leases, which leader election writes.
- One global, monotonically increasing resourceVersion, as etcd's revision:
  every create, update and delete takes the next number; a list carries the
  revision it was read at; a DELETED event carries the deletion revision.
- ``limit``/``continue`` pagination. The token encodes the list snapshot's
  revision and the next key, like ``staging/src/k8s.io/apiserver/pkg/storage/
  continue.go`` (base64url JSON ``{"v":"meta.k8s.io/v1","rv":N,"start":"key\\0"}``);
  every page of one list is read from that snapshot. When the snapshot has
  been compacted the answer is 410 ``Expired`` with etcd3's message
  (``staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go``).
- Watch from a resourceVersion replays the history after it. A version older
  than the kept history is answered as the watch cache does
  (``staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go`` Watch →
  ``newErrWatcher``): HTTP 200 and a single ``ERROR`` event whose object is a
  410 ``Expired`` Status, ``too old resource version: R (oldest)``
  (``cacher/watch_cache.go`` getAllEventsSinceLocked). ``resourceVersion=0``
  starts with synthetic ADDED events for the current state; no version means
  "from now". ``allowWatchBookmarks`` adds periodic ``BOOKMARK`` events whose
  object carries only ``metadata.resourceVersion`` (the cacher sends them
  about once a minute; here the interval is configurable). ``timeoutSeconds``
  ends the stream cleanly. With selectors, an object that starts or stops
  matching is seen as ADDED or DELETED (``cacher/cache_watcher.go``
  convertToWatchEvent).
- Streaming lists (watch-list, KEP-3157): ``watch=true&sendInitialEvents=true&
  resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`` streams the current
  state as ADDED events, then one ``BOOKMARK`` at the current revision annotated
  ``k8s.io/initial-events-end: "true"``, then changes as any watch. Served as the
  release's ``WatchList`` gate defaults (1.32, 1.34+; ``watch_list=`` overrides);
  otherwise the parameters are refused with 422 Invalid ``ListOptions`` as
  ``validateWatchOptions`` words it (before 1.27 they are ignored).
- Field selectors (``=``, ``==``, ``!=``, commas; labels each registry
  supports) and label selectors.
- Newline-delimited JSON watch frames ``{"type":…,"object":…}`` written in
  chunks, as ``staging/src/k8s.io/apimachinery/pkg/runtime/serializer/json``
  frames them.

Faults are injected from Python through ``FakeCluster.faults`` (the test
holds the server object): Status errors (410, 429 with Retry-After, 500, …),
an ERROR 410 on the next or on live watches, streams cut in the middle of a
JSON line, stalls, raw malformed lines, frozen watches, and an overload window
(``faults.overload``: for some seconds every list and watch is answered 429 with
Retry-After, 503 or 500 in turn, as an API server under priority and fairness
or restarting answers).
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import itertools
import logging
import random
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson
from aiohttp import web

from agent.fakecluster.custom import CustomResources
from agent.fakecluster.kubeconfig import write_kubeconfig
from agent.fakecluster.selectors import FieldSelector, LabelSelector, SelectorError
from agent.kube.kinds import EVENT, LEASE, METRICS_GROUP, NAMESPACE, SERVED_KINDS, Kind, kind_for

__all__ = ["FakeCluster", "Faults", "RequestRecord", "status_body"]

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
Verb = Literal["list", "watch", "get", "create", "update", "discovery"]
# Kinds clients may write (POST/PUT); every other kind answers 405 to a write.
_WRITABLE = frozenset({LEASE})

_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token results "
    "in an inconsistent list - objects that were created, modified, or deleted between the time "
    "the first chunk was returned and now may show up in the list."
)
_NOT_FOUND_PATH = "the server could not find the requested resource"
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
_CHUNK = 64 * 1024
# metav1.InitialEventsAnnotationKey (staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/types.go)
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def status_body(code: int, message: str, reason: str | None = None, details: Obj | None = None) -> Obj:
    """A ``metav1.Status`` failure object as the API server writes it."""
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason if reason is not None else _REASONS.get(code, "Unknown"),
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def _rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sort_key(key: tuple[str, str]) -> str:
    # etcd keeps objects at /registry/<resource>/<namespace>/<name> and lists
    # them in key order.
    return f"{key[0]}/{key[1]}" if key[0] else key[1]


class _Change:
    """One entry of the watch history: a revision and what happened at it."""

    __slots__ = ("_line", "key", "kind", "obj", "prev", "rv", "type")

    def __init__(self, rv: int, kind: Kind, key: tuple[str, str], type_: str, obj: Obj, prev: Obj | None) -> None:
        self.rv = rv
        self.kind = kind
        self.key = key
        self.type = type_
        self.obj = obj
        self.prev = prev
        self._line: bytes | None = None

    def line(self) -> bytes:
        if self._line is None:
            self._line = orjson.dumps({"type": self.type, "object": self.obj}, option=orjson.OPT_APPEND_NEWLINE)
        return self._line


@dataclass(slots=True)
class RequestRecord:
    """One request the endpoint received (tests assert on these)."""

    method: str
    path: str
    query: dict[str, str]
    verb: str | None
    kind: str | None
    namespace: str | None
    at: float = 0.0  # time.monotonic() when it arrived
    status: int = 0  # the status a fault answered it with (0: served)


@dataclass(slots=True)
class _RequestFault:
    action: Literal["status", "stall", "gone", "cut"]
    verb: str | None
    kind: str | None
    times: int
    status: int = 500
    message: str | None = None
    reason: str | None = None
    retry_after: float | None = None
    seconds: float = 0.0
    after_events: int = 0
    needs_continue: bool = False

    def matches(self, verb: str | None, kind: Kind | None, has_continue: bool) -> bool:
        if self.verb is not None and self.verb != verb:
            return False
        if self.needs_continue and not has_continue:
            return False
        return self.kind is None or (kind is not None and self.kind in (kind.kind, kind.plural))


@dataclass(slots=True)
class _Overload:
    until: float  # time.monotonic()
    statuses: Iterator[int]
    retry_after: float | None
    verbs: frozenset[str]


class _Watch:
    """A live watch stream and the faults aimed at it."""

    __slots__ = (
        "bookmarks",
        "cut_after",
        "cut_now",
        "error",
        "fields",
        "inject",
        "kind",
        "labels",
        "namespace",
        "position",
        "sent",
    )

    def __init__(
        self, kind: Kind, namespace: str | None, fields: FieldSelector, labels: LabelSelector, bookmarks: bool
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.fields = fields
        self.labels = labels
        self.bookmarks = bookmarks
        self.position = 0  # the next revision to deliver
        self.sent = 0
        self.error: Obj | None = None
        self.cut_now = False
        self.cut_after: int | None = None
        self.inject: list[bytes] = []

    def selects(self, key: tuple[str, str], obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and key[0] != self.namespace:
            return False
        return (not self.fields or self.fields.matches(obj)) and (not self.labels or self.labels.matches(obj))


class Faults:
    """Faults to inject, held by the test through ``cluster.faults``.

    Request faults apply to the next ``times`` requests that match ``verb``
    (``list``, ``watch``, ``get``, ``discovery`` or None for any) and ``kind``
    (``Pod`` or ``pods``; None for any). Live-watch faults act at once on the
    streams open now.
    """

    def __init__(self, cluster: FakeCluster) -> None:
        self._cluster = cluster
        self._pending: list[_RequestFault] = []
        self.frozen: set[str] = set()  # kind names whose live watches deliver nothing
        self._overload: _Overload | None = None
        self.overload_answers: Counter[int] = Counter()  # status → requests the window refused

    # -- a window of time ----------------------------------------------------
    def overload(
        self,
        seconds: float,
        *,
        statuses: Iterable[int] = (429, 503, 500),
        retry_after: float | None = 1.0,
        verbs: Iterable[Verb] = ("list", "watch"),
        cut_watches: bool = True,
    ) -> None:
        """For ``seconds`` from now, answer every list and watch (``verbs``) with ``statuses``
        in turn: a 429 always with ``Retry-After`` (API Priority and Fairness answers
        "Too many requests, please try again later." with one, staging/src/k8s.io/apiserver/
        pkg/server/filters/priority-and-fairness.go ``tooManyRequests``, v0.37.2; a server
        shutting down answers 429 with ``Retry-After: 5``, with_retry_after.go), a 5xx with it
        when ``retry_after`` is given. Live watches are
        cut first (``cut_watches``), as a restarting server drops them, so the clients meet the
        window. ``overload_answers`` counts the refusals per status."""
        self._overload = _Overload(
            until=time.monotonic() + seconds,
            statuses=itertools.cycle(tuple(statuses)),
            retry_after=retry_after,
            verbs=frozenset(verbs),
        )
        if cut_watches:
            self.cut_watches()

    @property
    def overloaded(self) -> bool:
        return self._overload is not None and time.monotonic() < self._overload.until

    def _overload_fault(self, verb: str | None) -> _RequestFault | None:
        window = self._overload
        if window is None or verb not in window.verbs:
            return None
        if time.monotonic() >= window.until:
            self._overload = None
            return None
        status = next(window.statuses)
        self.overload_answers[status] += 1
        retry_after = window.retry_after if window.retry_after is not None else (1.0 if status == 429 else None)
        return _RequestFault("status", verb, None, 1, status=status, retry_after=retry_after)

    # -- next requests ---------------------------------------------------
    def fail(
        self,
        status: int,
        *,
        verb: Verb | None = None,
        kind: str | None = None,
        times: int = 1,
        retry_after: float | None = None,
        message: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Answer the next matching requests with ``status`` and a Status body
        (429 and 503 carry ``Retry-After`` when ``retry_after`` is given)."""
        self._pending.append(
            _RequestFault("status", verb, kind, times, status=status, message=message, reason=reason, retry_after=retry_after)
        )

    def throttle(self, *, retry_after: float = 1.0, verb: Verb | None = None, kind: str | None = None, times: int = 1) -> None:
        """429 TooManyRequests with ``Retry-After``, as API Priority and Fairness answers."""
        self.fail(429, verb=verb, kind=kind, times=times, retry_after=retry_after, message="Too many requests, please try again later.")

    def stall(self, seconds: float, *, verb: Verb | None = None, kind: str | None = None, times: int = 1) -> None:
        """Say nothing for ``seconds``: before answering a list, or right after
        a watch's headers (an open connection that carries no bytes)."""
        self._pending.append(_RequestFault("stall", verb, kind, times, seconds=seconds))

    def gone_on_next_watch(self, *, kind: str | None = None, times: int = 1) -> None:
        """The next matching watch gets HTTP 200 and one ERROR event with a 410
        Expired Status, whatever resourceVersion it asks for."""
        self._pending.append(_RequestFault("gone", "watch", kind, times))

    def cut_next_watch(self, *, kind: str | None = None, after_events: int = 0, times: int = 1) -> None:
        """Cut the next matching watch stream in the middle of a JSON line,
        after ``after_events`` complete events (the connection is aborted, no
        terminating chunk)."""
        self._pending.append(_RequestFault("cut", "watch", kind, times, after_events=after_events))

    # -- live watches ------------------------------------------------------
    def expire_watches(self, kind: str | None = None) -> int:
        """Live watches get an ERROR 410 event now (before anything still
        undelivered) and the history is compacted to the current revision, so
        resuming from any older version fails too: the client must relist.
        Returns how many streams were hit."""
        cluster = self._cluster
        oldest = cluster.compact()
        hit = 0
        for w in cluster._live(kind):
            w.error = status_body(410, f"too old resource version: {w.position - 1} ({oldest})", "Expired")
            hit += 1
        cluster._wake()
        return hit

    def cut_watches(self, kind: str | None = None, *, after_events: int | None = None) -> int:
        """Cut live watches in the middle of a JSON line: now, or after
        ``after_events`` more complete events."""
        hit = 0
        for w in self._cluster._live(kind):
            if after_events is None:
                w.cut_now = True
            else:
                w.cut_after = after_events
            hit += 1
        self._cluster._wake()
        return hit

    def inject_line(self, raw: bytes, kind: str | None = None) -> int:
        """Write ``raw`` (a newline is added when missing) into live watches,
        e.g. a line that is not JSON or an event without an object."""
        line = raw if raw.endswith(b"\n") else raw + b"\n"
        hit = 0
        for w in self._cluster._live(kind):
            w.inject.append(line)
            hit += 1
        self._cluster._wake()
        return hit

    def freeze(self, kind: str) -> None:
        """Live and new watches of ``kind`` stop delivering changes (bookmarks
        too) until ``thaw``; the changes stay in the history."""
        self.frozen.add(kind_for(kind).kind)

    def thaw(self, kind: str) -> None:
        self.frozen.discard(kind_for(kind).kind)
        self._cluster._wake()

    def expire_next_continue(self, *, kind: str | None = None, times: int = 1) -> None:
        """The next list request that carries a continue token is answered
        410 Expired, as when etcd compaction passed the token's revision."""
        self._pending.append(
            _RequestFault("status", "list", kind, times, status=410, message=_CONTINUE_EXPIRED, reason="Expired", needs_continue=True)
        )

    def expire_continue_tokens(self) -> None:
        """Every continue token handed out so far answers 410 Expired."""
        self._cluster._snapshots.clear()

    def clear(self) -> None:
        self._pending.clear()
        self.frozen.clear()
        self._overload = None
        self._cluster._wake()

    def _take(self, verb: str | None, kind: Kind | None, has_continue: bool = False) -> _RequestFault | None:
        overloaded = self._overload_fault(verb)
        if overloaded is not None:
            return overloaded
        for fault in self._pending:
            if fault.matches(verb, kind, has_continue):
                fault.times -= 1
                if fault.times <= 0:
                    self._pending.remove(fault)
                return fault
        return None


@dataclass(slots=True)
class _Route:
    verb: Verb
    kind: Kind | None = None
    namespace: str | None = None
    name: str | None = None
    body: Obj | None = field(default=None)
    subresource: str | None = None


class FakeCluster:
    """An in-process Kubernetes API endpoint.

    ``async with FakeCluster() as cluster`` starts it on ``127.0.0.1`` and a free
    port (``cluster.url``); ``cluster.apply(obj)``, ``cluster.delete(...)`` and
    ``cluster.record_event(...)`` change its state; ``cluster.faults`` injects
    failures; ``cluster.write_kubeconfig(path)`` points a client at it.
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        metrics: bool = False,
        version: str = "v1.30.2",
        bookmark_interval: float = 60.0,
        history_size: int = 100_000,
        default_watch_timeout: float = 1800.0,
        now: Callable[[], datetime] | None = None,
        seed: int | None = 0,
        unserved_groups: Iterable[str] = (),
        watch_list: bool | None = None,
    ) -> None:
        self.token = token
        # Streaming lists (sendInitialEvents): None follows the release's WatchList gate default.
        self.watch_list = watch_list
        self.metrics_enabled = metrics
        # API groups this cluster does not serve (an older release, a feature gate off):
        # discovery leaves them out and their paths answer 404, as kube-apiserver does.
        self.unserved_groups = frozenset(unserved_groups)
        self.version = version
        self.bookmark_interval = bookmark_interval
        self.history_size = history_size
        self.default_watch_timeout = default_watch_timeout
        self.now: Callable[[], datetime] = now or (lambda: datetime.now(UTC))
        self.faults = Faults(self)
        self.requests: list[RequestRecord] = []
        self._random = random.Random(seed)
        self._rv = 0
        # kind name -> (namespace, name) -> object
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {k.kind: {} for k in SERVED_KINDS}
        self._history: list[_Change] = []
        self._compacted = 0  # watches from a revision below this are too old
        self._snapshots: OrderedDict[tuple[str, int], list[tuple[str, tuple[str, str], Obj]]] = OrderedDict()
        self._watches: set[_Watch] = set()
        self._watch_counts: dict[str, int] = {}
        self._tick: asyncio.Future[None] | None = None
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._url: str | None = None
        self._event_names = itertools.count(1)
        self.custom = CustomResources()  # CustomResourceDefinitions and their objects
        for ns in _DEFAULT_NAMESPACES:
            self._ensure_namespace(ns)

    # ------------------------------------------------------------------
    # lifecycle
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a client that hangs up ends its watch handler.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        sock_host, sock_port = self._runner.addresses[0][:2]
        self._url = f"http://{sock_host}:{sock_port}"
        self._closing = False
        return self._url

    async def stop(self) -> None:
        self._closing = True
        self._wake()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeCluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the fake cluster is not started")
        return self._url

    def write_kubeconfig(self, path: str | Path, *, context: str = "unstick-fake", namespace: str | None = None) -> Path:
        return write_kubeconfig(path, self.url, token=self.token, context=context, namespace=namespace)

    # ------------------------------------------------------------------
    # state
    @property
    def resource_version(self) -> int:
        return self._rv

    def objects(self, kind: str) -> list[Obj]:
        k = kind_for(kind)
        return [self._objects[k.kind][key] for key in sorted(self._objects[k.kind], key=_sort_key)]

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        k = kind_for(kind)
        return self._objects[k.kind].get(((namespace or "default") if k.namespaced else "", name))

    def apply(self, obj: Mapping[str, Any], *, copy: bool = True) -> Obj:
        """Create or replace an object (a ``List`` applies each item). Fills
        uid, creationTimestamp and resourceVersion; returns the stored object,
        which callers must not mutate."""
        if obj.get("kind", "").endswith("List") and isinstance(obj.get("items"), list):
            stored: Obj = {}
            for item in obj["items"]:
                stored = self.apply(item, copy=copy)
            return stored
        new: Obj = orjson.loads(orjson.dumps(obj)) if copy else dict(obj)
        if new.get("kind") == "CustomResourceDefinition" or self.custom.serves(new):
            return self._apply_custom(new)
        kind = kind_for(str(new.get("kind")), new.get("apiVersion"))
        meta = new.setdefault("metadata", {})
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise ValueError(f"{kind.kind} without metadata.name or generateName")
            meta["name"] = prefix + "".join(self._random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
        if kind.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
            if kind.group != METRICS_GROUP:
                self._ensure_namespace(meta["namespace"])
        else:
            meta.pop("namespace", None)
        key = (meta.get("namespace", ""), meta["name"])
        if kind is EVENT:
            self._default_event(new)
        if kind.group == METRICS_GROUP:
            # metrics-server objects are computed, not stored: no revision.
            meta.setdefault("creationTimestamp", _rfc3339(self.now()))
            self._objects[kind.kind][key] = new
            return new
        prev = self._objects[kind.kind].get(key)
        if prev is not None:
            meta["uid"] = prev["metadata"].get("uid")
            meta["creationTimestamp"] = prev["metadata"].get("creationTimestamp")
        else:
            meta.setdefault("uid", str(uuid.UUID(int=self._random.getrandbits(128), version=4)))
            meta.setdefault("creationTimestamp", _rfc3339(self.now()))
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._objects[kind.kind][key] = new
        self._record(kind, key, "MODIFIED" if prev is not None else "ADDED", new, prev)
        return new

    def _apply_custom(self, new: Obj) -> Obj:
        """A CustomResourceDefinition (its kind is served from then on) or an object of one;
        no watch events (unstick does not watch custom resources)."""
        meta = new.setdefault("metadata", {})
        if new["kind"] == "CustomResourceDefinition":
            held = self.custom.definitions.get(meta["name"])
            meta.pop("namespace", None)
        else:
            (group, kind), (_, name) = self.custom.key(new)
            version = new["apiVersion"].rpartition("/")[2]
            if any(v.kind.namespaced for v in self.custom.versions(group, version) if v.kind.kind == kind):
                meta["namespace"] = meta.get("namespace") or "default"
                self._ensure_namespace(meta["namespace"])
            else:
                meta.pop("namespace", None)
            held = self.custom.objects[(group, kind)].get((meta.get("namespace", ""), name))
        if held is not None:
            meta["uid"] = held["metadata"].get("uid")
            meta["creationTimestamp"] = held["metadata"].get("creationTimestamp")
        else:
            meta.setdefault("uid", str(uuid.UUID(int=self._random.getrandbits(128), version=4)))
            meta.setdefault("creationTimestamp", _rfc3339(self.now()))
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        if new["kind"] == "CustomResourceDefinition":
            self.custom.define(new)
        else:
            coll, key = self.custom.key(new)
            self.custom.objects[coll][key] = new
        return new

    def delete(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """Delete an object; the DELETED event carries the deletion revision.
        Returns the deleted object, or None when there was none."""
        k = kind_for(kind)
        key = ((namespace or "default") if k.namespaced else "", name)
        prev = self._objects[k.kind].pop(key, None)
        if prev is None or k.group == METRICS_GROUP:
            return prev
        self._rv += 1
        gone = dict(prev)
        gone["metadata"] = {**prev["metadata"], "resourceVersion": str(self._rv)}
        self._record(k, key, "DELETED", gone, prev)
        return gone

    def record_event(
        self,
        involved: Mapping[str, Any],
        reason: str,
        message: str,
        *,
        type: str = "Warning",
        component: str = "default-scheduler",
        namespace: str | None = None,
    ) -> Obj:
        """Emit a core/v1 Event about ``involved`` (an object or an
        ObjectReference) as the event recorder does: a repeat of the same
        source, object, reason and message bumps ``count`` and
        ``lastTimestamp`` of the existing Event instead of creating a new one
        (``staging/src/k8s.io/client-go/tools/record/events_cache.go``)."""
        meta = involved.get("metadata") or {}
        ref = {
            "kind": involved.get("kind"),
            "namespace": involved.get("namespace", meta.get("namespace")),
            "name": involved.get("name", meta.get("name")),
            "uid": involved.get("uid", meta.get("uid")),
            "apiVersion": involved.get("apiVersion"),
            "resourceVersion": involved.get("resourceVersion", meta.get("resourceVersion")),
        }
        ref = {k: v for k, v in ref.items() if v is not None}
        ns = namespace or ref.get("namespace") or "default"
        now = _rfc3339(self.now())
        for existing in self._objects[EVENT.kind].values():
            io = existing.get("involvedObject", {})
            if (
                existing["metadata"].get("namespace") == ns
                and io.get("kind") == ref.get("kind")
                and io.get("name") == ref.get("name")
                and io.get("uid") == ref.get("uid")
                and existing.get("reason") == reason
                and existing.get("message") == message
                and (existing.get("source") or {}).get("component") == component
            ):
                bumped = orjson.loads(orjson.dumps(existing))
                bumped["count"] = int(existing.get("count", 1)) + 1
                bumped["lastTimestamp"] = now
                return self.apply(bumped, copy=False)
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ref.get('name', 'object')}.{next(self._event_names):016x}", "namespace": ns},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        return self.apply(event, copy=False)

    def compact(self, rv: int | None = None) -> int:
        """Drop the watch history up to ``rv`` (default: everything), as etcd
        compaction does; watches and continue tokens from older revisions then
        get 410. Returns the compacted revision."""
        target = self._rv if rv is None else min(rv, self._rv)
        if target > self._compacted:
            self._compacted = target
            drop = 0
            while drop < len(self._history) and self._history[drop].rv <= target:
                drop += 1
            del self._history[:drop]
            for snap_key in [k for k in self._snapshots if k[1] < target]:
                del self._snapshots[snap_key]
        return self._compacted

    def watch_count(self, kind: str | None = None) -> int:
        """How many watch requests of ``kind`` (all kinds when None) have
        arrived, including those answered with an injected error."""
        if kind is None:
            return sum(self._watch_counts.values())
        return self._watch_counts.get(kind_for(kind).kind, 0)

    def live_watches(self, kind: str | None = None) -> int:
        return sum(1 for _ in self._live(kind))

    async def wait_for_watches(self, kind: str | None = None, *, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until ``count`` watch requests of ``kind`` have been served in
        total and at least one is live (tests use it before injecting a fault
        into a live stream)."""
        async with asyncio.timeout(timeout):
            while self.watch_count(kind) < count or self.live_watches(kind) == 0:
                await asyncio.sleep(0.005)

    # -- internals ---------------------------------------------------------
    def _ensure_namespace(self, name: str) -> None:
        if ("", name) in self._objects[NAMESPACE.kind]:
            return
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            },
            copy=False,
        )

    def _default_event(self, event: Obj) -> None:
        now = _rfc3339(self.now())
        meta = event["metadata"]
        involved = event.setdefault("involvedObject", {})
        if not meta.get("name"):
            meta["name"] = f"{involved.get('name', 'object')}.{next(self._event_names):016x}"
        involved.setdefault("namespace", meta.get("namespace"))
        event.setdefault("type", "Normal")
        event.setdefault("count", 1)
        event.setdefault("firstTimestamp", event.get("lastTimestamp") or now)
        event.setdefault("lastTimestamp", event["firstTimestamp"])
        source = event.setdefault("source", {})
        source.setdefault("component", event.get("reportingComponent") or "default-scheduler")
        event.setdefault("reportingComponent", source["component"])

    def _record(self, kind: Kind, key: tuple[str, str], type_: str, obj: Obj, prev: Obj | None) -> None:
        self._history.append(_Change(self._rv, kind, key, type_, obj, prev))
        if len(self._history) > self.history_size:
            # Trim in steps so appends stay amortised O(1).
            drop = len(self._history) - self.history_size + max(1, self.history_size // 10)
            drop = min(drop, len(self._history))
            self._compacted = max(self._compacted, self._history[drop - 1].rv)
            del self._history[:drop]
        self._wake()

    def _wake(self) -> None:
        if self._tick is not None and not self._tick.done():
            self._tick.set_result(None)
        self._tick = None

    async def _wait_change(self, timeout: float) -> None:
        if self._tick is None:
            self._tick = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._tick), timeout=max(timeout, 0.0))

    def _live(self, kind: str | None) -> Iterator[_Watch]:
        name = kind_for(kind).kind if kind is not None else None
        return (w for w in list(self._watches) if name is None or w.kind.kind == name)

    def _changes_since(self, rv: int) -> list[_Change]:
        """History entries with revision >= rv."""
        hist = self._history
        if not hist or rv > hist[-1].rv:
            return []
        # Revisions in the history are consecutive except across deletes of
        # metrics (never recorded) – search to be safe.
        idx = bisect.bisect_left(hist, rv, key=lambda c: c.rv)
        return hist[idx:]

    # ------------------------------------------------------------------
    # HTTP
    def _route(self, request: web.Request) -> _Route | web.Response:
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return _Route("discovery", body={"paths": ["/api", "/api/v1", "/apis", "/version"]})
        if parts == ["version"]:
            major, minor, *_ = self.version.lstrip("v").split(".")
            return _Route(
                "discovery",
                body={
                    "major": major,
                    "minor": minor,
                    "gitVersion": self.version,
                    "gitCommit": "0000000000000000000000000000000000000000",
                    "gitTreeState": "clean",
                    "buildDate": "2024-06-11T20:20:00Z",
                    "goVersion": "go1.22.4",
                    "compiler": "gc",
                    "platform": "linux/amd64",
                },
            )
        if parts[0] in ("healthz", "readyz", "livez") and len(parts) == 1:
            return web.Response(text="ok")
        if parts[0] == "api":
            if len(parts) == 1:
                return _Route("discovery", body={"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            if len(parts) == 1:
                return _Route("discovery", body=self._group_list())
            group = parts[1]
            if not self._group_served(group):
                return self._error(404, _NOT_FOUND_PATH, details={})
            if len(parts) == 2:
                return _Route("discovery", body=self._group(group))
            version, rest = parts[2], parts[3:]
        else:
            return self._error(404, _NOT_FOUND_PATH, details={})
        if self.custom.versions(group, version):
            return self._route_custom(group, version, rest)
        kinds = [k for k in SERVED_KINDS if k.group == group and k.version == version]
        if not kinds or (group == METRICS_GROUP and not self.metrics_enabled):
            return self._error(404, _NOT_FOUND_PATH, details={})
        if not rest:
            return _Route("discovery", body=self._resource_list(group, version, kinds))
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        by_plural = {k.plural: k for k in kinds}
        kind = by_plural.get(rest[0])
        if kind is None or len(rest) > 2 or (namespace is not None and not kind.namespaced):
            return self._error(404, _NOT_FOUND_PATH, details={})
        if len(rest) == 2:
            return _Route("update" if request.method == "PUT" else "get", kind, namespace, rest[1])
        if request.method == "POST":
            return _Route("create", kind, namespace)
        watch = request.query.get("watch", "").lower() in ("true", "1")
        return _Route("watch" if watch else "list", kind, namespace)

    def _route_custom(self, group: str, version: str, rest: list[str]) -> _Route | web.Response:
        """Discovery, GET of an object and GET of its /scale for a CRD's group version."""
        if not rest:
            return _Route("discovery", body=self.custom.resource_list(group, version))
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        served = self.custom.versions(group, version)
        found = next((v for v in served if v.kind.plural == rest[0]), None)
        if found is None or len(rest) not in (2, 3) or (namespace is not None) != found.kind.namespaced:
            return self._error(404, _NOT_FOUND_PATH, details={})
        if len(rest) == 3 and (rest[2] != "scale" or found.spec_replicas_path is None):
            return self._error(404, _NOT_FOUND_PATH, details={})
        return _Route("get", found.kind, namespace, rest[1], subresource=rest[2] if len(rest) == 3 else None)

    def _serve_custom_get(self, route: _Route) -> web.Response:
        kind, name = route.kind, route.name or ""
        assert kind is not None
        obj = self.custom.get(kind, route.namespace, name)
        if obj is None:
            details = {"name": name, "group": kind.group, "kind": kind.plural}
            return self._error(404, f'{kind.plural}.{kind.group} "{name}" not found', details=details)
        if route.subresource == "scale":
            status, body = self.custom.scale(kind, obj)
            if status != 200:
                return self._error(status, body["message"], reason=body.get("reason"))
            return self._json(body)
        return self._json(obj)

    def _authorised(self, request: web.Request) -> bool:
        return self.token is None or request.headers.get("Authorization") == f"Bearer {self.token}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if not self._authorised(request):
            return self._error(401, "Unauthorized")
        routed = self._route(request)
        route = routed if isinstance(routed, _Route) else None
        self.requests.append(
            RequestRecord(
                request.method,
                request.path,
                dict(request.query),
                route.verb if route else None,
                route.kind.kind if route and route.kind else None,
                route.namespace if route else None,
                time.monotonic(),
            )
        )
        if not isinstance(routed, _Route):
            return routed
        writes = routed.verb in ("create", "update") and routed.kind in _WRITABLE
        if request.method != "GET" and not (writes and request.method in ("POST", "PUT")):
            return self._error(405, "the server does not allow this method on the requested resource")
        if routed.verb == "watch" and routed.kind is not None:
            self._watch_counts[routed.kind.kind] = self._watch_counts.get(routed.kind.kind, 0) + 1
        fault = self.faults._take(routed.verb, routed.kind, bool(request.query.get("continue")))
        if fault is not None and fault.action == "status":
            self.requests[-1].status = fault.status
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
            details = {"retryAfterSeconds": int(fault.retry_after)} if fault.retry_after else None
            message = fault.message or {
                410: "The resourceVersion for the provided watch is too old.",
                429: "Too many requests, please try again later.",
                500: "Internal error occurred: injected fault",
                503: "The server is currently unable to handle the request",
            }.get(fault.status, f"injected HTTP {fault.status}")
            return self._error(fault.status, message, reason=fault.reason, details=details, headers=headers)
        if fault is not None and fault.action == "stall" and routed.verb != "watch":
            await asyncio.sleep(fault.seconds)
        if routed.body is not None:
            return self._json(routed.body)
        assert routed.kind is not None
        try:
            if routed.verb == "get" and self.custom.owns(routed.kind):
                return self._serve_custom_get(routed)
            if routed.verb == "get":
                return self._serve_get(routed.kind, routed.namespace, routed.name or "")
            if routed.verb == "list":
                return self._serve_list(routed.kind, routed.namespace, request.query)
            if routed.verb in ("create", "update"):
                return await self._serve_write(request, routed.verb, routed.kind, routed.namespace, routed.name)
            return await self._serve_watch(request, routed.kind, routed.namespace, fault)
        except SelectorError as exc:
            return self._error(400, str(exc))

    def _json(self, body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
        return web.Response(body=orjson.dumps(body), status=status, content_type="application/json", headers=headers)

    def _error(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: Obj | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> web.Response:
        body = status_body(code, message, reason, details)
        if details == {}:
            body["details"] = {}
        return self._json(body, code, headers)

    def _group_served(self, group: str) -> bool:
        if group in self.unserved_groups:
            return False
        if group == METRICS_GROUP:
            return self.metrics_enabled
        return any(k.group == group for k in SERVED_KINDS) or group in self.custom.groups()

    def _group(self, group: str) -> Obj:
        custom = self.custom.groups().get(group, [])
        versions = sorted({k.version for k in SERVED_KINDS if k.group == group} | set(custom))
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries, "preferredVersion": entries[0]}

    def _group_list(self) -> Obj:
        served = {k.group for k in SERVED_KINDS if k.group and self._group_served(k.group)}
        groups = sorted(served | set(self.custom.groups()))
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group(g) for g in groups]}

    def _resource_list(self, group: str, version: str, kinds: Iterable[Kind]) -> Obj:
        resources = []
        for k in kinds:
            verbs = ["get", "list", "watch"] if k.watchable else ["get", "list"]
            if k in _WRITABLE:
                verbs = sorted({*verbs, "create", "update"})
            resources.append(
                {
                    "name": k.plural,
                    "singularName": k.kind.lower(),
                    "namespaced": k.namespaced,
                    "kind": k.kind,
                    "verbs": verbs,
                }
            )
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    def _serve_get(self, kind: Kind, namespace: str | None, name: str) -> web.Response:
        key = ((namespace or "") if kind.namespaced else "", name)
        obj = self._objects[kind.kind].get(key)
        if obj is None:
            return self._error(
                404, f'{kind.plural}{"." + kind.group if kind.group else ""} "{name}" not found', details={"name": name, "kind": kind.plural}
            )
        return self._json(obj)

    async def _serve_write(
        self, request: web.Request, verb: str, kind: Kind, namespace: str | None, name: str | None
    ) -> web.Response:
        """POST (create) and PUT (update) with the API server's checks and messages.

        ``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go``: a create of an
        existing name is 409 AlreadyExists; an update is 404 when the object is gone and the kind
        does not allow create-on-update, 422 when it carries no resourceVersion and the kind does
        not allow unconditional updates (both false for Leases,
        ``pkg/registry/coordination/lease/strategy.go``), and 409 Conflict with
        ``OptimisticLockErrorMsg`` when its resourceVersion is not the stored one
        (``staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go`` NewConflict). A name or
        namespace in the body that differs from the URL's is 400
        (``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go`` checkName).
        """
        resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError as exc:
            return self._error(400, f"the body of the request was in an unknown format: {exc}")
        if not isinstance(body, dict):
            return self._error(400, "the body of the request is not an object")
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            return self._error(400, "metadata must be an object")
        ns = namespace or "default"
        if meta.get("namespace") not in (None, "", ns):
            return self._error(
                400, "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = ns
        if body.get("kind") not in (None, kind.kind) or body.get("apiVersion") not in (None, kind.api_version):
            return self._error(400, f"the object is not a {kind.api_version} {kind.kind}")
        body["kind"], body["apiVersion"] = kind.kind, kind.api_version
        if verb == "update":
            assert name is not None
            if meta.get("name") not in (None, "", name):
                return self._error(
                    400, f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
                )
            meta["name"] = name
            current = self._objects[kind.kind].get((ns, name))
            if current is None:
                return self._error(
                    404, f'{resource} "{name}" not found', details={"name": name, "group": kind.group, "kind": kind.plural}
                )
            rv = meta.get("resourceVersion")
            if not rv:
                return self._error(
                    422,
                    f'{kind.kind}.{kind.group} "{name}" is invalid: metadata.resourceVersion: '
                    "Invalid value: 0x0: must be specified for an update",
                    details={"name": name, "group": kind.group, "kind": kind.kind},
                )
            if rv != current["metadata"]["resourceVersion"]:
                return self._error(
                    409,
                    f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                    details={"name": name, "group": kind.group, "kind": kind.plural},
                )
            return self._json(self.apply(body, copy=False))
        if not meta.get("name") and not meta.get("generateName"):
            return self._error(422, f"{kind.kind}.{kind.group} is invalid: metadata.name: Required value: name or generateName is required")
        if meta.get("resourceVersion"):
            return self._error(500, "resourceVersion should not be set on objects to be created")
        if meta.get("name") and (ns, meta["name"]) in self._objects[kind.kind]:
            return self._error(
                409,
                f'{resource} "{meta["name"]}" already exists',
                reason="AlreadyExists",
                details={"name": meta["name"], "group": kind.group, "kind": kind.plural},
            )
        return self._json(self.apply(body, copy=False), status=201)

    def _serve_list(self, kind: Kind, namespace: str | None, query: Mapping[str, str]) -> web.Response:
        if "sendInitialEvents" in query and self._watch_list_served() is not None:
            # ValidateListOptions: streaming is for watches only.
            return self._invalid_list_options(
                [("sendInitialEvents", "FieldValueForbidden", "Forbidden: sendInitialEvents is forbidden for list")]
            )
        fields = FieldSelector.parse(query.get("fieldSelector"), kind)
        labels = LabelSelector.parse(query.get("labelSelector"))
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            return self._error(400, f"invalid limit {query.get('limit')!r}")
        token = query.get("continue")
        snap_key = (kind.kind, self._rv)
        start = ""
        if token:
            try:
                decoded = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
                rv, start = int(decoded["rv"]), str(decoded["start"])
            except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
                return self._error(400, "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
            snap_key = (kind.kind, rv)
            if rv < self._compacted or snap_key not in self._snapshots:
                return self._error(410, _CONTINUE_EXPIRED, reason="Expired")
            snapshot = self._snapshots[snap_key]
        else:
            snapshot = sorted(
                ((_sort_key(key), key, obj) for key, obj in self._objects[kind.kind].items()), key=lambda entry: entry[0]
            )
        list_rv = snap_key[1] if kind.group != METRICS_GROUP else 0
        idx = bisect.bisect_left(snapshot, start, key=lambda entry: entry[0]) if start else 0
        items: list[Obj] = []
        next_key: str | None = None
        remaining = 0
        last_key = ""
        filtered = bool(fields or labels)
        for pos in range(idx, len(snapshot)):
            sort_key, key, obj = snapshot[pos]
            if namespace is not None and key[0] != namespace:
                continue
            if filtered and not ((not fields or fields.matches(obj)) and (not labels or labels.matches(obj))):
                continue
            if limit and len(items) == limit:
                # storage/etcd3/store.go: the next page starts right after the
                # last key returned.
                next_key = last_key + "\x00"
                remaining = len(snapshot) - pos
                break
            last_key = sort_key
            items.append({k: v for k, v in obj.items() if k != "kind" and k != "apiVersion"})
        metadata: Obj = {"resourceVersion": str(list_rv)} if kind.group != METRICS_GROUP else {}
        if next_key is not None:
            self._snapshots[snap_key] = snapshot
            self._snapshots.move_to_end(snap_key)
            while len(self._snapshots) > 64:
                self._snapshots.popitem(last=False)
            raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": snap_key[1], "start": next_key})
            metadata["continue"] = base64.urlsafe_b64encode(raw).decode().rstrip("=")
            if not filtered and namespace is None:
                metadata["remainingItemCount"] = remaining
        body = {"kind": kind.list_kind, "apiVersion": kind.api_version, "metadata": metadata, "items": items}
        return self._json(body)

    async def _serve_watch(
        self, request: web.Request, kind: Kind, namespace: str | None, fault: _RequestFault | None
    ) -> web.StreamResponse:
        query = request.query
        if not kind.watchable:
            return self._error(405, "the server does not allow this method on the requested resource")
        fields = FieldSelector.parse(query.get("fieldSelector"), kind)
        labels = LabelSelector.parse(query.get("labelSelector"))
        rv_param = query.get("resourceVersion", "")
        try:
            timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else self.default_watch_timeout
            start_rv = int(rv_param) if rv_param else None
        except ValueError:
            return self._error(400, f"invalid watch parameters: {dict(query)!r}")
        bookmarks = query.get("allowWatchBookmarks", "").lower() in ("true", "1")
        invalid = self._watch_list_errors(query)
        if invalid:
            return self._invalid_list_options(invalid)
        # A streaming list (watch-list): sendInitialEvents=true with bookmarks allowed
        # (cacher.go isListWatchRequest); "" or any version: the current state, then the end bookmark.
        initial_events = (
            self._watch_list_served() is not None
            and query.get("sendInitialEvents", "").lower() in ("true", "1")
        )

        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        w = _Watch(kind, namespace, fields, labels, bookmarks)
        if fault is not None and fault.action == "cut":
            w.cut_after = fault.after_events
        if fault is not None and fault.action == "stall":
            await asyncio.sleep(fault.seconds)

        pending: list[bytes] = []
        if fault is not None and fault.action == "gone":
            oldest = max(self._compacted, (start_rv or 0) + 1)
            w.error = status_body(410, f"too old resource version: {start_rv or 0} ({oldest})", "Expired")
        elif initial_events:
            # cacher.go getWatchCacheResourceVersion / setInitialEventsEndBookmarkIfRequested: the
            # state at the current revision (a version given is "not older than"), as ADDED events,
            # then a BOOKMARK at that revision annotated k8s.io/initial-events-end (with bookmarks
            # allowed; without, the initial events alone, as the cacher sends them).
            for key in sorted(self._objects[kind.kind], key=_sort_key):
                obj = self._objects[kind.kind][key]
                if w.selects(key, obj):
                    pending.append(orjson.dumps({"type": "ADDED", "object": obj}, option=orjson.OPT_APPEND_NEWLINE))
            if bookmarks:
                end = {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": kind.kind,
                        "apiVersion": kind.api_version,
                        "metadata": {
                            "resourceVersion": str(self._rv),
                            "annotations": {INITIAL_EVENTS_END: "true"},
                        },
                    },
                }
                pending.append(orjson.dumps(end, option=orjson.OPT_APPEND_NEWLINE))
            w.position = self._rv + 1
        elif start_rv is None:
            w.position = self._rv + 1
        elif start_rv == 0:
            # "Any" version: the current state as synthetic ADDED events first.
            for key in sorted(self._objects[kind.kind], key=_sort_key):
                obj = self._objects[kind.kind][key]
                if w.selects(key, obj):
                    pending.append(orjson.dumps({"type": "ADDED", "object": obj}, option=orjson.OPT_APPEND_NEWLINE))
            w.position = self._rv + 1
        elif start_rv < self._compacted:
            w.error = status_body(410, f"too old resource version: {start_rv} ({self._compacted})", "Expired")
        else:
            w.position = start_rv + 1

        self._watches.add(w)
        next_bookmark = loop.time() + self.bookmark_interval
        try:
            while not self._closing:
                if w.error is None and w.position <= self._compacted:
                    # History this watch has not delivered yet was compacted
                    # away (a frozen or slow watcher): fail it like etcd's
                    # "required revision has been compacted", never skip silently.
                    w.error = status_body(410, f"too old resource version: {w.position - 1} ({self._compacted})", "Expired")
                if w.error is not None:
                    pending.append(orjson.dumps({"type": "ERROR", "object": w.error}, option=orjson.OPT_APPEND_NEWLINE))
                    await self._write_lines(resp, pending)
                    break
                if w.inject:
                    pending.extend(w.inject)
                    w.inject.clear()
                frozen = kind.kind in self.faults.frozen
                if not frozen:
                    for change in self._changes_since(w.position):
                        if change.kind is kind:
                            line = self._event_line(w, change)
                            if line is not None:
                                pending.append(line)
                    w.position = self._rv + 1
                if w.cut_now or (w.cut_after is not None and len(pending) > w.cut_after):
                    keep = len(pending) if w.cut_now else (w.cut_after or 0)
                    await self._cut(request, resp, pending[:keep], pending[keep] if keep < len(pending) else None)
                    return resp
                if pending:
                    w.sent += len(pending)
                    if w.cut_after is not None:
                        w.cut_after -= len(pending)
                    await self._write_lines(resp, pending)
                now = loop.time()
                if now >= deadline:
                    break
                if bookmarks and not frozen and now >= next_bookmark:
                    # The cacher's bookmark carries only the object's type and
                    # the resourceVersion the watcher is known to be synced to.
                    bookmark = {
                        "type": "BOOKMARK",
                        "object": {
                            "kind": kind.kind,
                            "apiVersion": kind.api_version,
                            "metadata": {"resourceVersion": str(w.position - 1)},
                        },
                    }
                    await self._write_lines(resp, [orjson.dumps(bookmark, option=orjson.OPT_APPEND_NEWLINE)])
                    next_bookmark = now + self.bookmark_interval
                wake_at = min(deadline, next_bookmark) if bookmarks else deadline
                await self._wait_change(wake_at - now)
        finally:
            # Also when the client went away: aiohttp cancels the handler.
            self._watches.discard(w)
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp

    def _watch_list_served(self) -> bool | None:
        """Whether this release serves streaming lists: None when it does not know the
        parameters at all (before 1.27: ignored), else the WatchList gate's default
        (staging/src/k8s.io/apiserver/pkg/features/kube_features.go, v1.37.2: alpha off from
        1.27, on in 1.32, off in 1.33, on from 1.34) unless ``watch_list`` says otherwise."""
        parts = self.version.lstrip("v").split(".")
        try:
            minor = int(parts[1]) if len(parts) > 1 else 0
        except ValueError:
            minor = 99
        if minor < 27:
            return None
        if self.watch_list is not None:
            return self.watch_list
        return minor == 32 or minor >= 34

    def _watch_list_errors(self, query: Mapping[str, str]) -> list[tuple[str, str, str]]:
        """validateWatchOptions (staging/src/k8s.io/apimachinery/pkg/apis/meta/internalversion/
        validation/validation.go, v1.37.2): (field, reason, message) of each error."""
        served = self._watch_list_served()
        if served is None:
            return []
        errors: list[tuple[str, str, str]] = []
        match = query.get("resourceVersionMatch", "")
        if "sendInitialEvents" in query:
            if match != "NotOlderThan":
                errors.append(
                    (
                        "resourceVersionMatch",
                        "FieldValueForbidden",
                        "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    )
                )
            if not served:
                errors.append(
                    (
                        "sendInitialEvents",
                        "FieldValueForbidden",
                        "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                    )
                )
        if match:
            if "sendInitialEvents" not in query:
                errors.append(
                    (
                        "resourceVersionMatch",
                        "FieldValueForbidden",
                        "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    )
                )
            if match != "NotOlderThan":
                errors.append(
                    (
                        "resourceVersionMatch",
                        "FieldValueNotSupported",
                        f'Unsupported value: "{match}": supported values: "NotOlderThan"',
                    )
                )
        return errors

    def _invalid_list_options(self, errors: list[tuple[str, str, str]]) -> web.Response:
        """422 Invalid for ListOptions, as handlers/get.go answers a failed ValidateListOptions
        (errors.NewInvalid: ``ListOptions.meta.k8s.io "" is invalid: [field: message, …]``)."""
        parts = [f"{f}: {m}" for f, _, m in errors]
        joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
        causes = [{"reason": r, "message": m, "field": f} for f, r, m in errors]
        return self._error(
            422,
            f'ListOptions.meta.k8s.io "" is invalid: {joined}',
            reason="Invalid",
            details={"group": "meta.k8s.io", "kind": "ListOptions", "causes": causes},
        )

    def _event_line(self, w: _Watch, change: _Change) -> bytes | None:
        if not w.fields and not w.labels:
            if w.namespace is not None and change.key[0] != w.namespace:
                return None
            return change.line()
        now_in = change.type != "DELETED" and w.selects(change.key, change.obj)
        was_in = change.prev is not None and w.selects(change.key, change.prev)
        if change.type == "DELETED":
            return change.line() if was_in else None
        if now_in and was_in:
            return change.line()
        if now_in:
            type_ = "ADDED"
            obj = change.obj
        elif was_in:
            # Left the selection: a DELETED carrying the new state (cache_watcher.go).
            type_ = "DELETED"
            obj = change.obj
        else:
            return None
        return orjson.dumps({"type": type_, "object": obj}, option=orjson.OPT_APPEND_NEWLINE)

    async def _write_lines(self, resp: web.StreamResponse, lines: list[bytes]) -> None:
        if not lines:
            return
        chunk: list[bytes] = []
        size = 0
        for line in lines:
            chunk.append(line)
            size += len(line)
            if size >= _CHUNK:
                await resp.write(b"".join(chunk))
                chunk, size = [], 0
        if chunk:
            await resp.write(b"".join(chunk))
        lines.clear()

    async def _cut(self, request: web.Request, resp: web.StreamResponse, complete: list[bytes], victim: bytes | None) -> None:
        """Write the complete lines, then half of the next one, and drop the
        connection without the chunked terminator."""
        await self._write_lines(resp, complete)
        if victim is None:
            victim = orjson.dumps(
                {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self._rv)}}},
                option=orjson.OPT_APPEND_NEWLINE,
            )
        await resp.write(victim[: max(1, len(victim) // 2)])
        await asyncio.sleep(0.02)  # let the half line reach the socket
        transport = request.transport
        if transport is not None:
            transport.abort()
