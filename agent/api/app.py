"""The aiohttp application factory and its typed state.

Everything the handlers need is built by the caller and passed in (the
composition root in ``agent/commands/serve.py``, later the live agent), then
stored under typed :class:`aiohttp.web.AppKey` s::

    app = create_app(sessions=sessions, settings=settings.api, jinja=build_jinja_env(),
                     readiness=lambda: watcher.synced)
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import jinja2
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.api import auth, errors, health, incidents, openapi, pages, silences
from agent.api.keys import (
    AUTH_FAILURES,
    CLOCK,
    FORM_KEY,
    JINJA,
    LIMITER,
    METRICS,
    OPENAPI,
    PROXIES,
    READINESS,
    READS,
    ROLE,
    SESSIONS,
    SETTINGS,
    SIGNINS,
    TOKENS,
    Clock,
    Readiness,
    Role,
)
from agent.api.metrics import HttpMetrics, metrics_middleware
from agent.settings import ApiSettings
from storage.engine import reading_sessions

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


def _size_limit(max_bytes: int) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        length = request.content_length
        if length is not None and length > max_bytes:
            raise errors.ApiError(413, f"request body larger than {max_bytes} bytes")
        response: web.StreamResponse = await handler(request)
        return response

    return middleware


def _body_within(seconds: float) -> Any:
    """Read a request's body within ``seconds`` (408 otherwise): a client trickling bytes must not
    hold a handler, its connection and its file descriptor for ever."""

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.body_exists:
            try:
                async with asyncio.timeout(seconds):
                    await request.read()  # kept by aiohttp for request.post()/json()
            except TimeoutError:
                raise errors.ApiError(408, f"request body not received within {seconds:g} s") from None
        response: web.StreamResponse = await handler(request)
        return response

    return middleware


class _NoRequestEcho(logging.Filter):
    """aiohttp logs a request it cannot parse at ERROR with the offending bytes (an oversized
    ``Authorization`` or ``Cookie`` header: the first bytes of a token). Keep the fact, drop the bytes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg = "rejected a request that could not be parsed (HTTP %s, %s); its bytes are not logged"
            record.args = (exc.code, type(exc).__name__)
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_parse_errors() -> None:
    server_log = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, _NoRequestEcho) for f in server_log.filters):
        server_log.addFilter(_NoRequestEcho())


class _NoEchoRequestHandler(RequestHandler):
    """aiohttp answers a request it cannot parse (a header too long, a control character in
    one) with the parser's message, which quotes the offending bytes (``Bearer <token
    prefix>``), and with none of the security headers. This one answers with a fixed JSON
    body and the same headers as every other response."""

    __slots__ = ()

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        super().handle_error(request, status, exc, "")  # logs (without the bytes) and checks the writer
        text = "internal error" if status >= 500 else "the request could not be parsed"
        resp = errors.error_response(status, text)
        security_headers(resp.headers, html=False)
        if request.secure:
            resp.headers["Strict-Transport-Security"] = HSTS
        resp.force_close()
        return resp


class _NoEchoServer(Server):
    def __call__(self) -> RequestHandler:
        return _NoEchoRequestHandler(self, loop=self._loop, **self._kwargs)


class _Runner(web.AppRunner):
    async def _make_server(self) -> Server:
        server = await super()._make_server()
        server.__class__ = _NoEchoServer
        return server


def app_runner(app: web.Application, settings: ApiSettings) -> web.AppRunner:
    """The runner for ``app``: no access log, and ``settings.header_timeout`` as the keep-alive
    timeout, which aiohttp also applies to a new connection until its first request is complete
    (a client holding half-open connections loses them after that long). A request that cannot
    be parsed is answered without echoing its bytes (:class:`_NoEchoRequestHandler`). On
    shutdown, requests in flight get ``SHUTDOWN_SECONDS`` to finish and as long again once
    cancelled (aiohttp waits twice its ``shutdown_timeout``; its default, 60 s, outlasts
    Kubernetes' 30 s termination grace: a saturated server did not stop in 30 s)."""
    quiet_parse_errors()
    return _Runner(
        app, access_log=None, keepalive_timeout=settings.header_timeout, shutdown_timeout=SHUTDOWN_SECONDS
    )


SHUTDOWN_SECONDS = 5.0


def _auth(settings: ApiSettings, tokens: auth.TokenSet) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        if settings.auth and not auth.is_open(request.path):
            client = request.app[PROXIES].client(request)
            wait = request.app[LIMITER].blocked(client)
            if wait > 0:
                request.app[AUTH_FAILURES]("rate_limited")
                return errors.error_response(
                    429, "too many failed sign-ins; try again later", headers={"Retry-After": f"{int(wait) + 1}"}
                )
            ok, err = auth.authenticate(request, tokens, request.app[SIGNINS])
            if not ok and err is not None:  # a credential was given and is wrong (a missing one is no attack)
                request.app[LIMITER].failed(client)
                request.app[AUTH_FAILURES](err)
                log.warning("authentication failed (%s) from %s on %s", err, client, request.path)
            if not ok:
                headers = {"WWW-Authenticate": auth.challenge(err)}
                if errors.wants_json(request):
                    message = "missing bearer token" if err is None else "invalid bearer token"
                    return errors.error_response(401, message, headers=headers)
                return pages.login_page(request, status=401, headers=headers, failed=err is not None)
        response: web.StreamResponse = await handler(request)
        return response

    return middleware


UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})


def _forms_guard() -> Any:
    """Cross-site request forgery: a state-changing request that is not carrying a bearer
    token (a browser's: a session cookie, or nothing in the ``--no-auth`` demo) must come
    from these pages. Its ``Origin`` (else its ``Referer``) must name this site, an absent
    or ``null`` one being refused; a form must also carry the CSRF token the pages put in
    every form (:func:`agent.api.auth.form_token`; the sign-in form has its own
    double-submit token). A bearer token is never sent by a browser on its own, so API
    clients (curl, scripts) need neither; an ``Origin`` they do send must still be this site."""

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method in UNSAFE_METHODS:
            bearer = "Authorization" in request.headers
            problem = auth.cross_site(request, required=not bearer)
            if problem is not None:
                request.app[AUTH_FAILURES]("cross_site")
                return _refuse(request, 403, problem)
            if not bearer and request.path != "/login" and request.content_type in FORM_TYPES:
                form = await request.post()
                field = form.get("csrf")
                if not auth.csrf_ok(auth.form_token(request), field if isinstance(field, str) else None):
                    request.app[AUTH_FAILURES]("csrf")
                    return _refuse(request, 403, "this form needs the CSRF token of a page of this site")
        response: web.StreamResponse = await handler(request)
        return response

    return middleware


def _host_guard(settings: ApiSettings) -> Any:
    """Without authentication (the demo) the ``Host`` a browser sends must be an address this
    server listens on (or the public URL's): a page on another site whose name was
    re-pointed at 127.0.0.1 (DNS rebinding) is then refused instead of reading and
    changing this one."""
    public = urlsplit(settings.public_url) if settings.public_url else None

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        if not auth.host_allowed(request.host, sock, listen_host=settings.host, public=public):
            return _refuse(request, 421, "this server does not answer to that Host")
        response: web.StreamResponse = await handler(request)
        return response

    return middleware


def _refuse(request: web.Request, status: int, message: str) -> web.Response:
    if errors.wants_json(request):
        return errors.error_response(status, message)
    return web.Response(status=status, text=message + "\n", content_type="text/plain")


@web.middleware
async def _security_headers(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
    except web.HTTPException as exc:
        response = exc
        _decorate(request, response)
        raise
    _decorate(request, response)
    return response


def _decorate(request: web.Request, response: web.StreamResponse) -> None:
    if response.prepared:
        return
    h = response.headers
    proxies = request.app.get(PROXIES)
    if request.secure or (proxies is not None and proxies.forwarded_tls(request)):
        h.setdefault("Strict-Transport-Security", HSTS)
    security_headers(h, html=(response.content_type or "").startswith("text/html"), static=request.path.startswith("/static/"))


HSTS = "max-age=31536000"
CSP = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def security_headers(h: Any, *, html: bool, static: bool = False) -> None:
    """The headers every response carries (pages, API, errors, and the answers to requests
    that could not even be parsed)."""
    h.setdefault("X-Content-Type-Options", "nosniff")
    # same-origin, not no-referrer: under no-referrer browsers send "Origin: null" on the
    # pages' own form posts (Fetch: the serialized origin of a no-referrer request), which the
    # forms guard must refuse; same-origin still gives other sites no referrer at all.
    h.setdefault("Referrer-Policy", "same-origin")
    h.setdefault("X-Frame-Options", "DENY")
    if not static:
        h.setdefault("Cache-Control", "no-store")
    if html:
        h.setdefault("Content-Security-Policy", CSP)


def create_app(
    *,
    sessions: async_sessionmaker[AsyncSession],
    settings: ApiSettings,
    jinja: jinja2.Environment | None = None,
    readiness: Readiness | None = None,
    registry: CollectorRegistry | None = None,
    clock: Clock = utcnow,
    role: Role | None = None,
) -> web.Application:
    """The API, its OpenAPI document, health/metrics and the pages, over ``sessions``.

    :param sessions: the store's session factory (the app only reads).
    :param settings: listen address, tokens, page and request size limits.
    :param jinja: the pages' environment (:func:`agent.api.pages.build_jinja_env`), built once.
    :param readiness: extra readiness check for ``/readyz`` (the live agent: caches synced);
        the database is always checked.
    :param registry: Prometheus registry for the HTTP metrics (default: a new one).
    :param clock: "now" for relative times on the pages.
    :param role: this replica's leader-election role, reported by ``/readyz``.
    """
    if not settings.pages:
        return _health_only(settings, readiness, registry, role)
    tokens = auth.TokenSet(t.reveal() for t in settings.tokens)
    if settings.auth and not len(tokens):
        log.warning("API authentication is on but no token is configured: every protected request gets 401")
    registry = registry or CollectorRegistry(auto_describe=True)
    metrics = HttpMetrics(registry)
    failures = Counter(
        "unstick_auth_failures",
        "Failed authentications (wrong token or session, rate-limited), by reason.",
        ["reason"],
        registry=registry,
    )
    app = web.Application(
        client_max_size=settings.max_request_bytes,
        middlewares=[
            metrics_middleware(metrics),
            _security_headers,
            errors.error_middleware,
            _size_limit(settings.max_request_bytes),
            _body_within(settings.body_timeout),
            *([] if settings.auth else [_host_guard(settings)]),
            _auth(settings, tokens),
            _forms_guard(),
        ],
    )
    app[SESSIONS] = sessions
    app[READS] = reading_sessions(sessions)
    app[SETTINGS] = settings
    app[TOKENS] = tokens
    app[SIGNINS] = auth.Sessions()
    app[FORM_KEY] = secrets.token_bytes(32)
    app[PROXIES] = auth.ProxyTrust(settings.trusted_proxies, any_peer=settings.trust_forwarded_headers)
    rate = settings.auth_failures_per_minute
    app[LIMITER] = auth.FailureLimiter(burst=max(1, int(rate)), per_minute=rate)
    app[AUTH_FAILURES] = lambda reason: failures.labels(reason).inc()
    app[JINJA] = jinja or pages.build_jinja_env()
    app[READINESS] = [readiness] if readiness is not None else []
    app[METRICS] = metrics
    app[CLOCK] = clock
    app[ROLE] = role or (lambda: {"role": "standalone"})
    app[OPENAPI] = openapi.document_bytes(settings)
    app.add_routes(health.routes)
    app.add_routes(incidents.routes)
    app.add_routes(silences.routes)
    app.add_routes(pages.routes)
    pages.add_static(app)
    return app


def _health_only(
    settings: ApiSettings,
    readiness: Readiness | None,
    registry: CollectorRegistry | None,
    role: Role | None,
) -> web.Application:
    """``--no-pages``: ``/healthz`` and ``/metrics`` only (a sidecar must not make its pod unready,
    so no ``/readyz`` either); everything else is 404, nothing needs a token."""
    metrics = HttpMetrics(registry or CollectorRegistry(auto_describe=True))
    app = web.Application(
        client_max_size=settings.max_request_bytes,
        middlewares=[metrics_middleware(metrics), _security_headers, errors.error_middleware],
    )
    app[SETTINGS] = settings
    app[METRICS] = metrics
    app[READINESS] = [readiness] if readiness is not None else []
    app[ROLE] = role or (lambda: {"role": "standalone"})
    app.router.add_get("/healthz", health.healthz)
    app.router.add_get("/metrics", health.metrics)
    return app
