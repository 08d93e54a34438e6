"""The project's own Kubernetes errors.

The gateway (``agent.kube.gateway``) is the only place that sees
kubernetes-asyncio's ``ApiException`` and aiohttp's client errors; it turns
them into these classes with ``raise ... from exc`` so callers can decide what
to do from the class alone:

- ``TransientKubeError``: retry with backoff (the API server is overloaded,
  restarting, unreachable, or asked us to come back later).
- ``PermanentKubeError``: retrying the same request will not help (bad
  credentials, missing RBAC, an API group that does not exist); record it and
  move on.

``Gone`` (HTTP 410) is its own branch: for a watch or a paginated list it
means "relist", which the watcher does at once, without backoff.

The status classes follow the API server's ``metav1.Status`` reasons
(``staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go``: ``NewGone``,
``NewResourceExpired``, ``NewTooManyRequests``, ``NewInternalError``, ...), the
way kopf's ``_cogs/clients/errors.py`` maps status codes to classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import orjson

__all__ = [
    "BadRequest",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "Gone",
    "KubeError",
    "MethodNotAllowed",
    "NotFound",
    "PermanentKubeError",
    "ProtocolError",
    "ServerError",
    "Throttled",
    "Timeout",
    "TransientKubeError",
    "Unauthorized",
    "Unavailable",
    "error_from_response",
    "error_from_status",
]


class KubeError(Exception):
    """Any failure talking to the Kubernetes API.

    ``status`` is the HTTP code (``None`` when no response was received),
    ``reason`` the ``metav1.Status`` reason (``Expired``, ``Forbidden``, ...),
    ``body`` the decoded ``Status`` object when the server sent one.
    """

    transient: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str | None = None,
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.body = dict(body) if body is not None else None
        self.retry_after = retry_after

    def __str__(self) -> str:
        head = f"{self.status} {self.reason}" if self.status is not None else (self.reason or "")
        return f"{head}: {self.message}" if head else self.message


class TransientKubeError(KubeError):
    """Retry with backoff; the same request may succeed later."""

    transient: ClassVar[bool] = True


class PermanentKubeError(KubeError):
    """Retrying the same request will not help."""


class Gone(KubeError):
    """HTTP 410: the resourceVersion or continue token is older than the
    server's history (etcd compaction, watch-cache window). Relist."""


class Throttled(TransientKubeError):
    """HTTP 429 (API Priority and Fairness, max-inflight). ``retry_after``
    carries the server's ``Retry-After`` in seconds when it sent one."""


class ServerError(TransientKubeError):
    """HTTP 5xx."""


class Unavailable(TransientKubeError):
    """No usable response: connection refused or reset, the stream cut short."""


class Timeout(Unavailable):
    """Connecting or reading took longer than allowed (a stalled server)."""


class ProtocolError(TransientKubeError):
    """The server answered with something that is not the API's JSON
    (a proxy's HTML error page, a truncated list body)."""


class BadRequest(PermanentKubeError):
    """HTTP 400/422: a selector or parameter the server rejects."""


class Unauthorized(PermanentKubeError):
    """HTTP 401: the credentials are missing or no longer valid."""


class Forbidden(PermanentKubeError):
    """HTTP 403: RBAC does not allow this verb on this resource."""


class NotFound(PermanentKubeError):
    """HTTP 404: the object, or the whole API group, does not exist."""


class MethodNotAllowed(PermanentKubeError):
    """HTTP 405: e.g. watching a resource that only supports list."""


class Conflict(PermanentKubeError):
    """HTTP 409."""


class ConfigError(PermanentKubeError):
    """No usable kubeconfig or in-cluster service account."""


_BY_STATUS: dict[int, type[KubeError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    422: BadRequest,
    429: Throttled,
}


def _parse_retry_after(value: str | None) -> float | None:
    # Retry-After is delay-seconds in every API server response
    # (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go);
    # an HTTP-date form is not used by Kubernetes and is ignored here.
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return max(seconds, 0.0)


def error_from_status(
    status: int,
    body: Mapping[str, Any] | None,
    *,
    retry_after: float | None = None,
    fallback_message: str = "",
) -> KubeError:
    """Build the error for an HTTP status and an optional ``metav1.Status``
    body (also what a watch ``ERROR`` event carries as its object)."""
    reason: str | None = None
    message = fallback_message
    if body:
        reason = body.get("reason") or None
        message = body.get("message") or message
        details = body.get("details")
        if retry_after is None and isinstance(details, Mapping):
            seconds = details.get("retryAfterSeconds")
            if isinstance(seconds, int | float) and seconds > 0:
                retry_after = float(seconds)
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else PermanentKubeError
    return cls(message or f"HTTP {status}", status=status, reason=reason, body=body, retry_after=retry_after)


def error_from_response(status: int, payload: bytes, headers: Mapping[str, str]) -> KubeError:
    """Translate a non-2xx HTTP response (status, raw body, headers)."""
    body: dict[str, Any] | None = None
    text = ""
    if payload:
        try:
            decoded = orjson.loads(payload)
        except orjson.JSONDecodeError:
            text = payload[:200].decode("utf-8", "replace")
        else:
            if isinstance(decoded, dict):
                body = decoded
    return error_from_status(
        status,
        body,
        retry_after=_parse_retry_after(headers.get("Retry-After")),
        fallback_message=text,
    )
