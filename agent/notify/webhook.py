"""Signed JSON webhooks: a versioned payload, HMAC-SHA256 over ``"<timestamp>.<body>"``.

The payload (``version`` 1)::

    {"version": 1, "event": "opened", "delivery": "<uuid>", "cluster": "prod",
     "incident": {... the API's incident JSON ...},
     "links": {"incident": URL, "remedies": [URL, ...]}, "summary": "one line"}

plus, when the event carries them, ``replaces`` (root cause changed),
``waited`` (escalated), ``changes`` and ``previous`` (updated); a ``digest`` carries
``incidents`` (a list) instead of ``incident`` and ``links.incidents``.

Headers: ``X-Unstick-Timestamp`` (Unix seconds), ``X-Unstick-Signature:
v1=<hex HMAC-SHA256 of "<timestamp>.<raw body>" with the secret>``,
``X-Unstick-Delivery`` (the outbox row's idempotency key, the same on every
redelivery) and ``X-Unstick-Event``. The timestamp is that of the attempt, so
a receiver can reject replays older than five minutes.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import orjson

from agent.notify.base import Delivery, GiveUp, RetryLater, Sent
from agent.notify.http import (
    MAX_RESPONSE_BYTES,
    TRANSPORT_ERRORS,
    client_session,
    describe_transport_error,
    post,
    redirect_refused,
    retry_after_seconds,
)
from agent.notify.render import Renderer, links_for
from agent.settings import Secret

PAYLOAD_VERSION = 1
SIGNATURE_VERSION = "v1"
RESERVED_HEADERS = frozenset(
    {"x-unstick-timestamp", "x-unstick-signature", "x-unstick-delivery", "x-unstick-event"}
    | {"content-type", "content-length", "host", "transfer-encoding", "connection"}
)
# Keys that hold a container's environment or a Secret's / ConfigMap's data: never sent.
PRIVATE_KEYS = frozenset({"env", "envFrom", "data", "stringData", "binaryData"})
RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


def sign(secret: bytes, timestamp: int, body: bytes) -> str:
    """The ``X-Unstick-Signature`` value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={mac}"


def scrub(value: Any) -> Any:
    """``value`` without environment variables and Secret/ConfigMap data, at any depth."""
    if isinstance(value, Mapping):
        return {k: scrub(v) for k, v in value.items() if k not in PRIVATE_KEYS}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def webhook_payload(renderer: Renderer, delivery: Delivery) -> dict[str, Any]:
    """The versioned JSON document for one outbox row."""
    p = delivery.payload
    event = str(p.get("event") or delivery.event)
    doc: dict[str, Any] = {"version": PAYLOAD_VERSION, "event": event, "delivery": delivery.key}
    doc["cluster"] = p.get("cluster")
    if event == "digest":
        incidents = [scrub(i) for i in p.get("incidents") or ()]
        doc["incidents"] = incidents
        doc["links"] = {"incidents": [links_for(renderer.public_url, i).incident for i in incidents]}
    else:
        incident = scrub(dict(p.get("incident") or {}))
        doc["incident"] = incident
        doc["links"] = links_for(renderer.public_url, incident).as_dict()
    for extra in ("replaces", "waited", "changes", "previous", "changed"):
        if p.get(extra):
            doc[extra] = scrub(p[extra])
    doc["summary"] = renderer.summary(p)
    return doc


class WebhookSink:
    """POSTs the signed payload to one URL."""

    def __init__(
        self,
        name: str,
        url: Secret,
        secret: Secret,
        renderer: Renderer,
        *,
        headers: Mapping[str, Secret] | None = None,
        ca_bundle: str | None = None,
        concurrency: int = 16,
        clock: Callable[[], float] = time.time,
        session_factory: Callable[[], aiohttp.ClientSession] | None = None,
    ) -> None:
        self.name = name
        self.concurrency = concurrency
        self._url = url
        self._secret = secret
        self._renderer = renderer
        self._headers = dict(headers or {})
        self._clock = clock
        self._session = (
            session_factory or (lambda: client_session(concurrency=concurrency, ca_bundle=ca_bundle))
        )()

    def __repr__(self) -> str:
        return f"WebhookSink(name={self.name!r}, url=<secret>, headers=<{len(self._headers)}>)"

    async def deliver(self, delivery: Delivery) -> Sent:
        body = orjson.dumps(webhook_payload(self._renderer, delivery))
        ts = int(self._clock())
        headers = {name: value.reveal() for name, value in self._headers.items()}
        headers.update(
            {
                "Content-Type": "application/json",
                "X-Unstick-Timestamp": str(ts),
                "X-Unstick-Signature": sign(self._secret.reveal().encode(), ts, body),
                "X-Unstick-Delivery": delivery.key,
                "X-Unstick-Event": delivery.event,
            }
        )
        try:
            async with post(self._session, self._url.reveal(), data=body, headers=headers) as resp:
                status = resp.status
                text = (await resp.content.read(MAX_RESPONSE_BYTES)).decode("utf-8", "replace")
                retry_after = retry_after_seconds(resp.headers)
        except TRANSPORT_ERRORS as exc:
            raise RetryLater(describe_transport_error(exc)) from None
        if 200 <= status < 300:
            return Sent()
        redirected = redirect_refused(status, resp.headers)
        if redirected is not None:
            raise RetryLater(redirected)
        said = " ".join(text.split())[:200]
        reason = f"HTTP {status} from the receiver" + (f": {said}" if said else "")
        if status in RETRYABLE_STATUS or status >= 500:
            raise RetryLater(reason, retry_after=retry_after, rate_limited=status == 429)
        raise GiveUp(reason)

    async def close(self) -> None:
        await self._session.close()
