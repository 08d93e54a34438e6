"""The aiohttp application factory and its typed state.

Everything the handlers need is built by the caller and passed in (the
composition root in ``agent/commands/serve.py``, later the live agent), then
stored under typed :class:`aiohttp.web.AppKey` s::

    app = create_app(sessions=sessions, settings=settings.api, jinja=build_jinja_env(),
                     readiness=lambda: watcher.synced)
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import jinja2
from aiohttp import web
from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.api import auth, errors, health, incidents, openapi, pages, silences
from agent.api.keys import (
    CLOCK,
    JINJA,
    METRICS,
    OPENAPI,
    READINESS,
    SESSIONS,
    SETTINGS,
    TOKENS,
    Clock,
    Readiness,
)
from agent.api.metrics import HttpMetrics, metrics_middleware
from agent.settings import ApiSettings

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


def _auth(settings: ApiSettings, tokens: auth.TokenSet) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        if settings.auth and not auth.is_open(request.path):
            ok, err = auth.authenticate(request, tokens)
            if not ok:
                headers = {"WWW-Authenticate": auth.challenge(err)}
                if errors.wants_json(request):
                    message = "missing bearer token" if err is None else "invalid bearer token"
                    return errors.error_response(401, message, headers=headers)
                return pages.login_page(request, status=401, headers=headers, failed=err is not None)
        response: web.StreamResponse = await handler(request)
        return response

    return middleware


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
    h.setdefault("X-Content-Type-Options", "nosniff")
    h.setdefault("Referrer-Policy", "no-referrer")
    h.setdefault("X-Frame-Options", "DENY")
    if not request.path.startswith("/static/"):
        h.setdefault("Cache-Control", "no-store")
    if (response.content_type or "").startswith("text/html"):
        h.setdefault(
            "Content-Security-Policy",
            "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        )


def create_app(
    *,
    sessions: async_sessionmaker[AsyncSession],
    settings: ApiSettings,
    jinja: jinja2.Environment | None = None,
    readiness: Readiness | None = None,
    registry: CollectorRegistry | None = None,
    clock: Clock = utcnow,
) -> web.Application:
    """The API, its OpenAPI document, health/metrics and the pages, over ``sessions``.

    :param sessions: the store's session factory (the app only reads).
    :param settings: listen address, tokens, page and request size limits.
    :param jinja: the pages' environment (:func:`agent.api.pages.build_jinja_env`), built once.
    :param readiness: extra readiness check for ``/readyz`` (the live agent: caches synced);
        the database is always checked.
    :param registry: Prometheus registry for the HTTP metrics (default: a new one).
    :param clock: "now" for relative times on the pages.
    """
    tokens = auth.TokenSet(t.reveal() for t in settings.tokens)
    if settings.auth and not len(tokens):
        log.warning("API authentication is on but no token is configured: every protected request gets 401")
    metrics = HttpMetrics(registry or CollectorRegistry(auto_describe=True))
    app = web.Application(
        client_max_size=settings.max_request_bytes,
        middlewares=[
            metrics_middleware(metrics),
            _security_headers,
            errors.error_middleware,
            _size_limit(settings.max_request_bytes),
            _auth(settings, tokens),
        ],
    )
    app[SESSIONS] = sessions
    app[SETTINGS] = settings
    app[TOKENS] = tokens
    app[JINJA] = jinja or pages.build_jinja_env()
    app[READINESS] = [readiness] if readiness is not None else []
    app[METRICS] = metrics
    app[CLOCK] = clock
    app[OPENAPI] = openapi.document_bytes(settings)
    app.add_routes(health.routes)
    app.add_routes(incidents.routes)
    app.add_routes(silences.routes)
    app.add_routes(pages.routes)
    pages.add_static(app)
    return app
