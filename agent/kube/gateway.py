"""The one gateway to the Kubernetes API: the only module of unstick that
imports ``kubernetes_asyncio`` (an import-linter contract holds it to that).

kubernetes-asyncio provides configuration (kubeconfig with a selectable
context, or the in-cluster service account), authentication (bearer tokens,
client certificates, exec/OIDC refresh hooks) and its aiohttp session. Every
request goes through ``ApiClient.call_api(..., _preload_content=False)``,
which applies all of that and hands back the raw aiohttp response; the body is
decoded here with orjson into API-shaped dicts, exactly what
``kubectl get -o json`` prints. The client's generated models are never
built: they cost many times the memory of the fields we read, and its model
deserialisation reaches only a few percent of orjson's speed on watch streams.

Every client failure leaves this module as one of ``agent.kube.errors``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any, Literal, TypedDict

import aiohttp
import orjson
import yaml
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException, ApiValueError
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.kube_config import KUBE_CONFIG_DEFAULT_LOCATION

from agent.kube.errors import (
    ConfigError,
    Gone,
    ProtocolError,
    Timeout,
    Unavailable,
    error_from_response,
    error_from_status,
)
from agent.kube.kinds import METRICS_GROUP, METRICS_VERSION, Kind, kind_for

__all__ = ["Gateway", "RawList", "RawObject", "RawWatchEvent", "WatchStream"]

logger = logging.getLogger(__name__)

RawObject = dict[str, Any]


class RawList(TypedDict):
    """A list response: ``{"kind": "PodList", "apiVersion": "v1",
    "metadata": {...}, "items": [...]}``; each item has ``kind`` and
    ``apiVersion`` filled in (the API server omits them in lists)."""

    kind: str
    apiVersion: str
    metadata: dict[str, Any]
    items: list[RawObject]


class RawWatchEvent(TypedDict):
    """One watch frame: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK
    (ERROR frames are raised as errors, never yielded)."""

    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
    object: RawObject


_ACCEPT = {"Accept": "application/json"}
_AUTH = ["BearerToken"]
_WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


def _fill_type(item: RawObject, kind: str, api_version: str) -> None:
    if "kind" not in item:
        item["kind"] = kind
    if "apiVersion" not in item:
        item["apiVersion"] = api_version


class WatchStream:
    """One watch request: ``async with gateway.watch(...) as stream`` opens it
    (raising the project's errors for a non-2xx answer); ``async for event in
    stream`` yields the events.

    A line that is not a JSON watch frame is counted in ``malformed`` and
    skipped. An ``ERROR`` frame is raised as the project's error (a 410
    becomes ``Gone``). A connection cut mid-line or a
    read that stalls past the idle timeout raises ``Unavailable``/``Timeout``;
    the incomplete line is dropped, never parsed.
    """

    def __init__(self, gateway: Gateway, kind: Kind, path: str, params: list[tuple[str, str]]) -> None:
        self._gateway = gateway
        self.kind = kind
        self._path = path
        self._params = params
        self._resp: aiohttp.ClientResponse | None = None
        self.malformed = 0
        self.events = 0

    async def __aenter__(self) -> WatchStream:
        self._resp = await self._gateway._open(self._path, self._params, self._gateway._watch_timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._resp is not None:
            # A watch body is never read to its end here: drop the connection
            # instead of returning it to the pool.
            self._resp.close()
            self._resp = None

    def __aiter__(self) -> AsyncIterator[RawWatchEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[RawWatchEvent]:
        resp = self._resp
        if resp is None:
            raise RuntimeError("WatchStream used outside 'async with'")
        kind_name, api_version = self.kind.kind, self.kind.api_version
        loads = orjson.loads
        content = resp.content
        tail = b""
        while True:
            # Read whatever the socket has (up to the session's 2 MiB read
            # buffer) and cut it into lines ourselves: one await per network
            # read instead of one per line. Each line is decoded just before
            # it is yielded, so a decoded object is handed on (and can be
            # freed) before the next is built; decoding a whole read buffer
            # first would keep hundreds of fresh dicts alive and run at half
            # the speed (allocator and cyclic-GC pressure).
            try:
                chunk = await content.readany()
            except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
                raise Timeout(
                    f"watch of {self.kind} stalled: no bytes for {self._gateway._watch_idle_timeout:g}s"
                ) from exc
            except aiohttp.ClientPayloadError as exc:
                raise Unavailable(f"watch of {self.kind} cut: {exc}") from exc
            except aiohttp.ClientError as exc:
                raise Unavailable(f"watch of {self.kind} failed: {exc}") from exc
            if not chunk:
                break
            if tail:
                chunk = tail + chunk
            end = chunk.rfind(b"\n")
            if end < 0:
                tail = chunk
                continue
            tail = chunk[end + 1 :]
            for line in chunk[:end].split(b"\n"):
                if not line or line.isspace():
                    continue
                try:
                    frame = loads(line)
                    type_ = frame["type"]
                    obj = frame["object"]
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    self._malformed(line)
                    continue
                if type_ in _WATCH_TYPES and type(obj) is dict:
                    if "kind" not in obj:
                        _fill_type(obj, kind_name, api_version)
                    self.events += 1
                    yield frame
                elif type_ == "ERROR" and isinstance(obj, dict):
                    # The API server reports watch failures (410 Expired from
                    # the watch cache, internal errors) as an ERROR frame with
                    # a metav1.Status after HTTP 200 (cacher.go newErrWatcher).
                    code = obj.get("code")
                    raise error_from_status(code if isinstance(code, int) else 500, obj)
                else:
                    self._malformed(line)
        if tail.strip():
            # The server closed the stream cleanly in the middle of a line.
            raise Unavailable(f"watch of {self.kind} ended mid-object ({len(tail)} bytes dropped)")

    def _malformed(self, line: bytes) -> None:
        self.malformed += 1
        logger.warning(
            "skipping malformed watch frame of %s (%d so far): %r",
            self.kind,
            self.malformed,
            line[:120],
            extra={"kind": self.kind.kind},
        )


def _service_account_namespace() -> str | None:
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _check_kubeconfig(paths: str) -> None:
    """Each file of a kubeconfig path list exists, is readable and holds a YAML map;
    ConfigError naming the file and the problem otherwise."""
    for path in filter(None, paths.split(os.pathsep)):
        try:
            with open(path, encoding="utf-8") as fh:
                doc = yaml.safe_load(fh)
        except FileNotFoundError:
            raise ConfigError(f"kubeconfig {path}: no such file") from None
        except IsADirectoryError:
            raise ConfigError(f"kubeconfig {path}: is a folder, not a file") from None
        except OSError as exc:
            raise ConfigError(f"kubeconfig {path}: cannot read it: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"kubeconfig {path}: not UTF-8 text") from None
        if not isinstance(doc, dict):
            raise ConfigError(
                f"kubeconfig {path}: not a kubeconfig (expected a map with clusters, contexts and users)"
            )


def _log_refresh_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error(
            "refreshing Kubernetes credentials failed; requests will fail once the token expires",
            exc_info=task.exception(),
        )


async def _sent(what: str, call: Awaitable[aiohttp.ClientResponse]) -> aiohttp.ClientResponse:
    """Await a kubernetes-asyncio request made with ``_preload_content=False``; the client's
    failures leave as ``agent.kube.errors`` (the body is not read)."""
    try:
        return await call
    except ApiException as exc:
        headers: Mapping[str, str] = exc.headers or {}
        raw = exc.body.encode() if isinstance(exc.body, str) else (exc.body or b"")
        raise error_from_response(exc.status or 0, raw, headers) from exc
    except ApiValueError as exc:
        raise ProtocolError(f"{what}: {exc}") from exc
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        raise Timeout(f"{what}: timed out") from exc
    except aiohttp.ClientError as exc:
        raise Unavailable(f"{what}: {exc}") from exc


async def _body(what: str, resp: aiohttp.ClientResponse) -> bytes:
    """The whole body of ``resp`` (released afterwards); read failures as ``agent.kube.errors``."""
    try:
        return await resp.read()
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        raise Timeout(f"{what}: timed out reading the body") from exc
    except aiohttp.ClientError as exc:
        raise Unavailable(f"{what}: {exc}") from exc
    finally:
        resp.release()


async def _object_response(what: str, call: Awaitable[aiohttp.ClientResponse]) -> RawObject:
    """Await a kubernetes-asyncio request made with ``_preload_content=False`` and decode its
    JSON object; client failures and non-2xx answers leave as ``agent.kube.errors``."""
    resp = await _sent(what, call)
    payload = await _body(what, resp)
    if not 200 <= resp.status < 300:
        raise error_from_response(resp.status, payload, resp.headers)
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"{what}: body is not JSON ({payload[:80]!r})") from exc
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what}: body is not an object")
    return obj


class Gateway:
    """Reads the Kubernetes API and returns API-shaped dicts.

    Configuration comes from a kubeconfig (``kubeconfig`` path, default
    ``$KUBECONFIG`` or ``~/.kube/config``; ``context`` default its current
    context) or, when ``in_cluster`` is true or no kubeconfig exists, from the
    pod's service account. ``open()`` (or ``async with``) loads it.
    Timeouts are in seconds: ``request_timeout`` bounds a whole list/get,
    ``connect_timeout`` a connection attempt, and ``watch_idle_timeout`` how
    long a watch may carry no bytes at all before it is declared stalled
    (keep it above the server's bookmark interval, about a minute).
    """

    def __init__(
        self,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        *,
        in_cluster: bool | None = None,
        request_timeout: float = 60.0,
        connect_timeout: float = 10.0,
        watch_idle_timeout: float = 120.0,
        discovery_ttl: float = 300.0,
        user_agent: str = "unstick/0.1",
    ) -> None:
        self._kubeconfig = os.fspath(kubeconfig) if kubeconfig is not None else None
        self._context = context
        self._in_cluster = in_cluster
        self._request_timeout = aiohttp.ClientTimeout(total=request_timeout, sock_connect=connect_timeout)
        self._watch_idle_timeout = watch_idle_timeout
        self._watch_timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout, sock_connect=connect_timeout, sock_read=watch_idle_timeout
        )
        self._discovery_ttl = discovery_ttl
        self._user_agent = user_agent
        self._api: k8s_client.ApiClient | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._groups: dict[str, list[str]] | None = None
        self._groups_at = 0.0
        self._resources: dict[tuple[str, str], tuple[float, list[dict[str, Any]]]] = {}
        self.namespace: str | None = None
        """The kubeconfig context's namespace (in a pod: the service account's), as kubectl's default."""

    def __repr__(self) -> str:
        # Never the token: only where we point.
        return f"Gateway(server={self.server!r}, context={self._context!r})"

    # -- lifecycle ---------------------------------------------------------
    async def open(self) -> Gateway:
        if self._api is not None:
            return self
        configuration = k8s_client.Configuration()
        path = ""
        try:
            if self._in_cluster:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                self.namespace = _service_account_namespace()
            else:
                path = self._kubeconfig or os.path.expanduser(KUBE_CONFIG_DEFAULT_LOCATION)
                if self._kubeconfig is None and self._in_cluster is None and not os.path.exists(path):
                    try:
                        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                    except ConfigException as exc:
                        raise ConfigError(
                            f"no kubeconfig at {path} (give --kubeconfig or KUBECONFIG) "
                            f"and not inside a cluster: {exc}"
                        ) from None
                    self.namespace = _service_account_namespace()
                else:
                    _check_kubeconfig(path)
                    loader = await k8s_config.load_kube_config(
                        config_file=path,
                        context=self._context,
                        client_configuration=configuration,
                        persist_config=False,
                    )
                    context = loader.current_context or {}
                    self.namespace = (context.get("context") or {}).get("namespace") or None
                    # exec plugins (EKS, AKS) and gcp tokens expire; the
                    # library re-runs the plugin in this loop (it returns at
                    # once for static tokens and certificates).
                    self._refresher = asyncio.create_task(
                        k8s_config.refresh_token(loader, configuration), name="kube credentials refresh"
                    )
                    self._refresher.add_done_callback(_log_refresh_failure)
        except ConfigError:
            raise
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "invalid YAML"
            raise ConfigError(f"kubeconfig {path}: not valid YAML{where}: {problem}") from None
        except (ConfigException, OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
            where = "in-cluster configuration" if self._in_cluster else f"kubeconfig {path}"
            raise ConfigError(f"{where}: {exc}") from None
        api = k8s_client.ApiClient(configuration)
        api.user_agent = self._user_agent
        self._api = api
        return self

    async def close(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
            self._refresher = None
        if self._api is not None:
            api, self._api = self._api, None
            await api.close()

    async def __aenter__(self) -> Gateway:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def server(self) -> str | None:
        return self._api.configuration.host if self._api is not None else None

    # -- raw HTTP ------------------------------------------------------------
    async def _open(
        self, path: str, params: Sequence[tuple[str, str]], timeout: aiohttp.ClientTimeout
    ) -> aiohttp.ClientResponse:
        """GET ``path`` through kubernetes-asyncio (auth, TLS, session) and
        return the unread response; non-2xx answers are raised."""
        api = self._api
        if api is None:
            raise RuntimeError("Gateway.open() was not awaited")
        resp = await _sent(
            f"GET {path}",
            api.call_api(
                path,
                "GET",
                query_params=list(params),
                header_params=dict(_ACCEPT),
                auth_settings=_AUTH,
                _preload_content=False,
                _request_timeout=timeout,
            ),
        )
        if not 200 <= resp.status < 300:
            try:
                payload = await resp.read()
            except (aiohttp.ClientError, TimeoutError):
                payload = b""
            finally:
                resp.release()
            raise error_from_response(resp.status, payload, resp.headers)
        return resp

    async def _send(
        self,
        method: Literal["POST", "PUT"],
        path: str,
        body: RawObject,
        params: Sequence[tuple[str, str]] = (),
    ) -> RawObject:
        """POST or PUT a JSON object and decode the answer; non-2xx answers are raised
        (a 409 as ``Conflict``, a 404 as ``NotFound``)."""
        api = self._api
        if api is None:
            raise RuntimeError("Gateway.open() was not awaited")
        call = api.call_api(
            path,
            method,
            query_params=list(params),
            header_params={**_ACCEPT, "Content-Type": "application/json"},
            body=body,
            auth_settings=_AUTH,
            _preload_content=False,
            _request_timeout=self._request_timeout,
        )
        return await _object_response(f"{method} {path}", call)

    async def get_json(self, path: str, params: Sequence[tuple[str, str]] = ()) -> Any:
        """GET a path and decode its JSON body."""
        resp = await self._open(path, params, self._request_timeout)
        payload = await _body(f"GET {path}", resp)
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise ProtocolError(f"GET {path}: body is not JSON ({payload[:80]!r})") from exc

    # -- server-side dry run ------------------------------------------------------
    async def dry_run_patch(
        self,
        kind: Kind | str,
        name: str,
        namespace: str | None,
        patch: Any,
        patch_type: Literal["strategic", "merge", "json"] = "strategic",
    ) -> RawObject:
        """PATCH an object with ``dryRun=All``: the API server validates, admits and
        defaults the change and returns the object it would store, persisting nothing
        (the only write-shaped request unstick sends; it needs ``patch`` RBAC)."""
        api = self._api
        if api is None:
            raise RuntimeError("Gateway.open() was not awaited")
        k = kind if isinstance(kind, Kind) else kind_for(kind)
        path = k.path(namespace, name)
        content_type = {
            "strategic": "application/strategic-merge-patch+json",
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
        }[patch_type]
        call = api.call_api(
            path,
            "PATCH",
            query_params=[("dryRun", "All"), ("fieldManager", "unstick-dry-run")],
            header_params={**_ACCEPT, "Content-Type": content_type},
            body=patch,
            auth_settings=_AUTH,
            _preload_content=False,
            _request_timeout=self._request_timeout,
        )
        return await _object_response(f"PATCH {path}", call)

    async def dry_run_create(self, kind: Kind | str, obj: RawObject) -> RawObject:
        """POST ``obj`` with ``dryRun=All`` and ``fieldValidation=Strict`` (kubectl's default):
        validated, admitted and defaulted, never stored (needs ``create`` RBAC on the kind).
        ``Conflict`` (409 AlreadyExists) when an object of that name exists."""
        k = kind if isinstance(kind, Kind) else kind_for(kind)
        params = (("dryRun", "All"), ("fieldManager", "unstick-dry-run"), ("fieldValidation", "Strict"))
        return await self._send("POST", k.path(obj.get("metadata", {}).get("namespace")), obj, params)

    # -- reads -----------------------------------------------------------------
    async def version(self) -> dict[str, Any]:
        """``/version``: ``{"major": "1", "minor": "30", "gitVersion": ...}``."""
        doc = await self.get_json("/version")
        if not isinstance(doc, dict):
            raise ProtocolError("/version is not an object")
        return doc

    async def get(self, kind: Kind | str, name: str, namespace: str | None = None) -> RawObject:
        k = kind if isinstance(kind, Kind) else kind_for(kind)
        obj = await self.get_json(k.path(namespace, name))
        if not isinstance(obj, dict):
            raise ProtocolError(f"GET {k.path(namespace, name)} is not an object")
        _fill_type(obj, k.kind, k.api_version)
        return obj

    # -- writes (leader election's Lease only) -------------------------------
    async def create(self, kind: Kind | str, obj: RawObject) -> RawObject:
        """Create ``obj`` in its namespace; ``Conflict`` (409 AlreadyExists) when it exists."""
        k = kind if isinstance(kind, Kind) else kind_for(kind)
        created = await self._send("POST", k.path(obj.get("metadata", {}).get("namespace")), obj)
        _fill_type(created, k.kind, k.api_version)
        return created

    async def replace(self, kind: Kind | str, obj: RawObject) -> RawObject:
        """Update ``obj`` (PUT) guarded by its ``metadata.resourceVersion``: ``Conflict`` (409) when
        someone else wrote it since, ``NotFound`` when it is gone."""
        k = kind if isinstance(kind, Kind) else kind_for(kind)
        meta = obj.get("metadata", {})
        updated = await self._send("PUT", k.path(meta.get("namespace"), meta.get("name")), obj)
        _fill_type(updated, k.kind, k.api_version)
        return updated

    async def list_page(
        self,
        kind: Kind | str,
        *,
        namespace: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> RawList:
        """One list request (one page when ``limit`` is set; the next page's
        token is ``result["metadata"].get("continue")``)."""
        k = kind if isinstance(kind, Kind) else kind_for(kind)
        params: list[tuple[str, str]] = []
        if limit:
            params.append(("limit", str(limit)))
        if continue_token:
            params.append(("continue", continue_token))
        elif resource_version is not None:
            params.append(("resourceVersion", resource_version))
        if field_selector:
            params.append(("fieldSelector", field_selector))
        if label_selector:
            params.append(("labelSelector", label_selector))
        doc = await self.get_json(k.path(namespace), params)
        if not isinstance(doc, dict) or not isinstance(doc.get("items", []), list):
            raise ProtocolError(f"list of {k} is not a List object")
        items = doc.get("items") or []
        doc["items"] = items
        doc.setdefault("metadata", {})
        doc.setdefault("kind", k.list_kind)
        doc.setdefault("apiVersion", k.api_version)
        for item in items:
            _fill_type(item, k.kind, k.api_version)
        return doc  # type: ignore[return-value]

    async def list_objects(
        self,
        kind: Kind | str,
        *,
        namespace: str | None = None,
        page_size: int = 500,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> RawList:
        """A whole list, read page by page with ``limit``/``continue``. If a
        continue token expires midway (410), the list restarts once without
        pagination, as client-go's pager falls back to a full list
        (``staging/src/k8s.io/client-go/tools/pager/pager.go``)."""
        k = kind if isinstance(kind, Kind) else kind_for(kind)
        items: list[RawObject] = []
        token: str | None = None
        first: RawList | None = None
        while True:
            try:
                page = await self.list_page(
                    k,
                    namespace=namespace,
                    limit=page_size,
                    continue_token=token,
                    field_selector=field_selector,
                    label_selector=label_selector,
                )
            except Gone:
                if token is None:
                    raise
                logger.info("continue token for %s expired; listing again in full", k, extra={"kind": k.kind})
                return await self.list_page(
                    k, namespace=namespace, field_selector=field_selector, label_selector=label_selector
                )
            if first is None:
                first = page
            items.extend(page["items"])
            token = page["metadata"].get("continue") or None
            if not token:
                break
        assert first is not None
        meta = {"resourceVersion": first["metadata"].get("resourceVersion", "")}
        return {"kind": first["kind"], "apiVersion": first["apiVersion"], "metadata": meta, "items": items}

    def watch(
        self,
        kind: Kind | str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        field_selector: str | None = None,
        label_selector: str | None = None,
        send_initial_events: bool = False,
    ) -> WatchStream:
        """A watch request (``async with gateway.watch(...) as stream``).

        ``send_initial_events``: a streaming list (watch-list, KEP-3157), as client-go's
        reflector asks for it (staging/src/k8s.io/client-go/tools/cache/reflector.go
        ``watchList``, v1.37.2): ``sendInitialEvents=true``, ``resourceVersionMatch=NotOlderThan``
        and bookmarks; the stream opens with the current state as ADDED events and a BOOKMARK
        annotated ``k8s.io/initial-events-end``. A server that does not serve it answers 422
        (:class:`~agent.kube.errors.BadRequest`)."""
        k = kind if isinstance(kind, Kind) else kind_for(kind)
        params: list[tuple[str, str]] = [("watch", "true")]
        if resource_version is not None:
            params.append(("resourceVersion", resource_version))
        if send_initial_events:
            params.append(("sendInitialEvents", "true"))
            params.append(("resourceVersionMatch", "NotOlderThan"))
            allow_bookmarks = True
        if allow_bookmarks:
            params.append(("allowWatchBookmarks", "true"))
        if timeout_seconds is not None:
            params.append(("timeoutSeconds", str(int(timeout_seconds))))
        if field_selector:
            params.append(("fieldSelector", field_selector))
        if label_selector:
            params.append(("labelSelector", label_selector))
        return WatchStream(self, k, k.path(namespace), params)

    # -- discovery and metrics ---------------------------------------------
    async def api_groups(self, *, refresh: bool = False) -> dict[str, list[str]]:
        """Served API groups (``/apis``) → their versions; cached for
        ``discovery_ttl`` seconds. The core group is ``""`` → ``["v1"]``."""
        now = time.monotonic()
        if refresh or self._groups is None or now - self._groups_at > self._discovery_ttl:
            doc = await self.get_json("/apis")
            groups: dict[str, list[str]] = {"": ["v1"]}
            for group in (doc or {}).get("groups") or []:
                name = group.get("name")
                if isinstance(name, str):
                    groups[name] = [v.get("version") for v in group.get("versions") or [] if v.get("version")]
            self._groups, self._groups_at = groups, now
        return dict(self._groups)

    async def api_resources(self, group: str, version: str) -> list[dict[str, Any]]:
        """Discovery of one group version (``/apis/GROUP/VERSION``; ``/api/v1`` for the core
        group): its APIResourceList's ``resources``, cached for ``discovery_ttl`` seconds."""
        now = time.monotonic()
        held = self._resources.get((group, version))
        if held is not None and now - held[0] <= self._discovery_ttl:
            return held[1]
        doc = await self.get_json(f"/apis/{group}/{version}" if group else f"/api/{version}")
        found = doc.get("resources") if isinstance(doc, dict) else None
        resources = [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []
        self._resources[(group, version)] = (now, resources)
        return resources

    async def get_scale(self, group: str, version: str, namespace: str, plural: str, name: str) -> RawObject:
        """GET a custom resource's ``/scale`` subresource (an autoscaling/v1 Scale) through
        kubernetes-asyncio's ``CustomObjectsApi.get_namespaced_custom_object_scale``."""
        api = self._api
        if api is None:
            raise RuntimeError("Gateway.open() was not awaited")
        call = k8s_client.CustomObjectsApi(api).get_namespaced_custom_object_scale(
            group,
            version,
            namespace,
            plural,
            name,
            _preload_content=False,
            _request_timeout=self._request_timeout,
        )
        return await _object_response(
            f"GET /apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}/scale", call
        )

    async def has_api(self, group: str, version: str) -> bool:
        return version in (await self.api_groups()).get(group, [])

    async def metrics_available(self) -> bool:
        """Whether metrics.k8s.io/v1beta1 is served (discovery only; the
        aggregated API may still answer 503 when metrics-server is down)."""
        return await self.has_api(METRICS_GROUP, METRICS_VERSION)

    async def list_node_metrics(self) -> RawList:
        return await self.list_page("NodeMetrics")

    async def list_pod_metrics(self, namespace: str | None = None) -> RawList:
        return await self.list_page("PodMetrics", namespace=namespace)

    async def ping(self) -> None:
        """Raise the project's error when the API server cannot be reached."""
        await self.version()
