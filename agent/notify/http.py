"""The HTTP side shared by the sinks: one client session per sink, bounded in
time, TLS verified, and error descriptions that never carry a URL.

aiohttp's own exception texts name the URL they failed on, and a Slack
incoming-webhook URL (or a webhook URL with a token in it) is a secret, so
errors are described here from their kind, never with ``str(exc)``.
"""

from __future__ import annotations

import asyncio
import email.utils
import ssl
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp

CONNECT_TIMEOUT = 5.0
TOTAL_TIMEOUT = 15.0
MAX_RESPONSE_BYTES = 64 * 1024  # what is read of a receiver's answer
USER_AGENT = "unstick-notifier/1"


def client_session(
    *,
    concurrency: int,
    ca_bundle: str | None = None,
    connect_timeout: float = CONNECT_TIMEOUT,
    total_timeout: float = TOTAL_TIMEOUT,
) -> aiohttp.ClientSession:
    """A session for one sink: ``concurrency`` connections, TLS verified (against ``ca_bundle``
    when given, else the system's trust store), connect and total timeouts."""
    context = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else ssl.create_default_context()
    connector = aiohttp.TCPConnector(ssl=context, limit=max(1, concurrency))
    timeout = aiohttp.ClientTimeout(
        total=total_timeout, sock_connect=connect_timeout, connect=connect_timeout
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        headers={"User-Agent": USER_AGENT},
        raise_for_status=False,
        trust_env=False,
    )


def post(session: aiohttp.ClientSession, url: str, **kwargs: Any) -> Any:
    """The one way the sinks send: a POST that never follows a redirect. A receiver that
    answers 3xx gets no second request, so the signed body, the token and the secret custom
    headers never reach the place it points to (aiohttp would re-send them to another host
    on a 307/308); the answer is :func:`redirect_refused`."""
    return session.post(url, allow_redirects=False, **kwargs)


def redirect_refused(status: int, headers: Mapping[str, str]) -> str | None:
    """The delivery failure a 3xx answer is (None for any other status): it names where the
    receiver pointed (scheme and host only, never a path that may hold a token)."""
    if not 300 <= status < 400:
        return None
    where = ""
    location = headers.get("Location", "")
    try:
        target = urlsplit(location)
        if target.scheme and target.hostname:
            where = f" to {target.scheme}://{target.hostname}" + (f":{target.port}" if target.port else "")
        elif location:
            where = " on the same host"
    except ValueError:
        where = ""
    return (
        f"HTTP {status}: the receiver redirects{where}; notifiers never follow redirects "
        "(configure the final URL)"
    )


def describe_transport_error(exc: BaseException) -> str:
    """What went wrong talking to a receiver, without the URL."""
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "no answer in time (the connect or total timeout passed)"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return "TLS verification failed (give the receiver's CA with the CA bundle option)"
    if isinstance(exc, aiohttp.ClientConnectorError):
        reason = getattr(exc.os_error, "strerror", None) or type(exc.os_error).__name__
        return f"cannot connect: {reason}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the receiver closed the connection"
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ClientResponseError):
        return f"malformed answer from the receiver ({type(exc).__name__})"
    if isinstance(exc, aiohttp.ClientError):
        return f"HTTP client error ({type(exc).__name__})"
    if isinstance(exc, OSError):
        return f"network error: {exc.strerror or type(exc).__name__}"
    return f"unexpected error ({type(exc).__name__})"


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP-date (RFC 9110 §10.2.3)."""
    raw = headers.get("Retry-After")
    if raw is None:
        return None
    raw = raw.strip()
    if raw.isascii() and raw.isdigit() and len(raw) <= 9:
        return float(raw)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, OSError)
