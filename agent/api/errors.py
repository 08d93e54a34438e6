"""Errors as JSON: ``{"error": {"code", "message", "parameter"?}}``.

Handlers raise :class:`ApiError`; the middleware turns it, aiohttp's own HTTP
errors under ``/api/`` and anything unexpected (a 500, logged with a request
id) into that body. A bad query parameter is a 400 that names the parameter,
never a 500. A store that cannot answer now (its connection pool exhausted under load,
the server down or restarting, SQLite busy or full) is a 503 with ``Retry-After``.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import orjson
from aiohttp import web
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError

log = logging.getLogger(__name__)

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    408: "request_timeout",
    415: "unsupported_media_type",
    429: "too_many_requests",
    500: "internal_error",
    503: "unavailable",
}


class ApiError(Exception):
    def __init__(
        self, status: int, message: str, *, parameter: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.parameter = parameter
        self.code = code or _CODES.get(status, "error")


def bad_parameter(parameter: str, message: str) -> ApiError:
    return ApiError(400, message, parameter=parameter, code="invalid_parameter")


def json_response(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(data),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def error_response(
    status: int,
    message: str,
    *,
    code: str | None = None,
    parameter: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    err: dict[str, Any] = {"code": code or _CODES.get(status, "error"), "message": message}
    if parameter is not None:
        err["parameter"] = parameter
    return json_response({"error": err}, status=status, headers=headers)


def wants_json(request: web.Request) -> bool:
    return request.path.startswith("/api/") or "text/html" not in request.headers.get("Accept", "")


# The store cannot answer now (its pool is exhausted under load, the server is down or
# restarting, a connection was cut): the client should retry, so a 503 with Retry-After,
# not a 500 (a fault of this program).
def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the store cannot answer now (pool timeout, connection refused or
    cut, server shutting down, SQLite busy or full) rather than that this program is wrong."""
    if isinstance(exc, SQLAlchemyTimeoutError | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError):
            return True
        orig = exc.orig
        return isinstance(orig, ConnectionError | OSError) or "connection" in type(orig).__name__.lower()
    return False


@web.middleware
async def error_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ApiError as exc:
        return error_response(exc.status, exc.message, code=exc.code, parameter=exc.parameter)
    except web.HTTPException as exc:
        if exc.status < 400 or not wants_json(request):
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "www-authenticate")}
        return error_response(exc.status, exc.reason or "error", headers=headers)
    except Exception as exc:
        if unavailable(exc):
            log.warning(
                "database unavailable or saturated in %s %s: %s", request.method, request.path, type(exc).__name__
            )
            return error_response(
                503, "the database is unavailable or busy; retry shortly", headers={"Retry-After": "2"}
            )
        ref = uuid.uuid4().hex[:12]
        log.exception("unhandled error in %s %s (ref %s)", request.method, request.path, ref)
        return error_response(500, f"internal error (ref {ref})")
