"""The one interface every sink implements, and what a delivery attempt can come to.

A sink gets a :class:`Delivery` (an outbox row as a value: its payload, its
idempotency key, the incident's thread reference if any) and returns
:class:`Sent`, or raises :class:`RetryLater` (transient: the worker backs off)
or :class:`GiveUp` (permanent: the row is dead-lettered with the reason). Any
other exception is a bug or an unexpected transport error and is retried like
:class:`RetryLater`. Error texts never carry a secret (tokens, webhook URLs):
sinks build them from status codes and error names, and the worker redacts
every configured secret again before it stores one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Delivery:
    """One outbox row, as a sink sees it."""

    row_id: int
    incident_id: int
    sink: str
    event: str
    payload: Mapping[str, Any]
    attempt: int  # 1 on the first try
    key: str  # the idempotency key (X-Unstick-Delivery)
    thread_ref: str | None = None  # the sink's handle on the incident's first message, if any


@dataclass(frozen=True, slots=True)
class Sent:
    """Delivered; ``thread_ref`` is the sink's handle on the message (kept for later replies)."""

    thread_ref: str | None = None


class DeliveryError(Exception):
    """Base of the two outcomes a sink raises; ``str()`` is safe to store and show."""


class RetryLater(DeliveryError):
    """Transient: try again. ``retry_after`` (seconds) is the receiver's own wish (HTTP
    ``Retry-After``); ``rate_limited`` pauses the whole sink and does not count as an attempt."""

    def __init__(self, reason: str, *, retry_after: float | None = None, rate_limited: bool = False) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.rate_limited = rate_limited


class GiveUp(DeliveryError):
    """Permanent: retrying cannot help (bad credentials, unknown channel). Dead-letter the row."""


class Sink(Protocol):
    """A notification target. ``name`` is stored on outbox rows, so it must be stable across restarts."""

    name: str
    concurrency: int  # deliveries in flight at once for this sink
    # A sink with ``threaded = True`` gets each delivery's ``thread_ref`` (one query per claim).

    async def deliver(self, delivery: Delivery) -> Sent: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class SinkStats:
    """Counters of one sink, read by the metrics collector."""

    sent: int = 0
    retried: int = 0
    rate_limited: int = 0
    dead_lettered: int = 0
    errors_by_kind: dict[str, int] = field(default_factory=dict)
