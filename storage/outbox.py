"""The notification outbox: claim due rows, record how sending went.

The tracker writes rows (status ``pending``, due at the pass's time) in the
same transaction as the incident change. A notifier then, in a short
transaction of its own::

    async with sessions.begin() as s:
        batch = await claim_due(s, now=now, limit=20, lease=timedelta(seconds=60))
    for n in batch:
        ...send...
        async with sessions.begin() as s:
            await mark_sent(s, n.id, now=now, thread_ref=ts)   # or mark_failed(...)

A claim is a lease: the row turns ``sending`` with ``next_attempt_at`` moved
to ``now + lease``. If the notifier dies before recording the outcome, the row
is due again when the lease runs out (at-least-once delivery; every attempt
carries the row's :func:`delivery_id`, so a receiver can drop the repeat). On
PostgreSQL concurrent notifiers skip each other's rows (``FOR UPDATE SKIP
LOCKED``); on SQLite writers are serialised anyway.

Per incident and sink, rows go out in order: a row is not claimed while an
earlier row of the same incident and sink is still pending or being sent, so
a thread's reply never overtakes its root (and a ``resolved`` never arrives
before its ``opened``).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from storage.models import Notification, NotificationStatus
from storage.views import rfc3339

_UNFINISHED = (str(NotificationStatus.PENDING), str(NotificationStatus.SENDING))
_DELIVERY_NAMESPACE = uuid.UUID("5b8d1c64-3f0e-4f3a-9a58-0f6b1d0c2e11")


def delivery_id(row: Notification) -> str:
    """The idempotency key of an outbox row: the same on every attempt and after a restart.

    Derived from what the row is (id, incident, event, sink, creation time),
    so a redelivery after a crash carries the key of the first attempt, and a
    fresh database whose ids start again at 1 does not reuse old keys."""
    name = f"{row.id}\0{row.incident_id}\0{row.event}\0{row.sink}\0{row.created_at.isoformat()}"
    return str(uuid.uuid5(_DELIVERY_NAMESPACE, name))


async def claim_due(
    session: AsyncSession,
    *,
    now: datetime,
    limit: int = 50,
    lease: timedelta = timedelta(seconds=60),
    sinks: Collection[str] | None = None,
) -> list[Notification]:
    """Claim up to ``limit`` due rows (oldest first), counting the attempt.

    One statement on both backends: ``UPDATE … WHERE id IN (SELECT … FOR UPDATE
    SKIP LOCKED LIMIT n) RETURNING …``. A row waits while an earlier row of its
    incident and sink is unfinished (see the module's documentation)."""
    earlier = aliased(Notification)
    due = (
        select(Notification.id)
        .where(
            Notification.status.in_(_UNFINISHED),
            Notification.next_attempt_at <= now,
            ~exists().where(
                and_(
                    earlier.incident_id == Notification.incident_id,
                    earlier.sink == Notification.sink,
                    earlier.id < Notification.id,
                    earlier.status.in_(_UNFINISHED),
                )
            ),
        )
        .order_by(Notification.next_attempt_at, Notification.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if sinks is not None:
        due = due.where(Notification.sink.in_(list(sinks)))
    stmt = (
        update(Notification)
        .where(Notification.id.in_(due.scalar_subquery()))
        .values(
            status=str(NotificationStatus.SENDING),
            attempts=Notification.attempts + 1,
            next_attempt_at=now + lease,
        )
        .returning(Notification)
        .execution_options(synchronize_session=False)
    )
    rows = list((await session.execute(stmt)).scalars())
    rows.sort(key=lambda r: r.id)
    return rows


async def mark_sent(
    session: AsyncSession, notification_id: int, *, now: datetime, thread_ref: str | None = None
) -> None:
    await session.execute(
        update(Notification)
        .where(Notification.id == notification_id)
        .values(status=str(NotificationStatus.SENT), sent_at=now, last_error=None, thread_ref=thread_ref)
    )


async def mark_failed(
    session: AsyncSession,
    notification_id: int,
    *,
    now: datetime,
    error: str,
    retry_at: datetime | None,
    count_attempt: bool = True,
) -> None:
    """Record a failed attempt: due again at ``retry_at``, or given up (``failed``) when None.

    ``count_attempt=False`` gives the claim's attempt back (the receiver asked
    to slow down: rate limits do not use up the attempts)."""
    values: dict[str, object] = {"last_error": error[:4000]}
    if not count_attempt:
        values["attempts"] = case((Notification.attempts > 0, Notification.attempts - 1), else_=0)
    if retry_at is None:
        values["status"] = str(NotificationStatus.FAILED)
    else:
        values["status"] = str(NotificationStatus.PENDING)
        values["next_attempt_at"] = max(retry_at, now)
    await session.execute(update(Notification).where(Notification.id == notification_id).values(**values))


async def thread_ref_for(session: AsyncSession, incident_id: int, sink: str) -> str | None:
    """The sink's thread handle of the first sent notification of an incident (to reply in thread)."""
    row = await session.execute(
        select(Notification.thread_ref)
        .where(
            Notification.incident_id == incident_id,
            Notification.sink == sink,
            Notification.status == str(NotificationStatus.SENT),
            Notification.thread_ref.is_not(None),
        )
        .order_by(Notification.id)
        .limit(1)
    )
    return row.scalar_one_or_none()


def sent_values(notification_id: int, *, now: datetime, thread_ref: str | None = None) -> dict[str, Any]:
    """A row of :func:`record_outcomes` for a delivered notification."""
    return {
        "id": notification_id,
        "status": str(NotificationStatus.SENT),
        "sent_at": now,
        "last_error": None,
        "thread_ref": thread_ref,
    }


def failed_values(
    notification_id: int, *, now: datetime, error: str, retry_at: datetime | None, attempts: int
) -> dict[str, Any]:
    """A row of :func:`record_outcomes` for a failed attempt (``retry_at`` None: given up).
    ``attempts`` is the row's count to store (the claim's, or one less to give it back)."""
    values: dict[str, Any] = {"id": notification_id, "last_error": error[:4000], "attempts": attempts}
    if retry_at is None:
        values["status"] = str(NotificationStatus.FAILED)
    else:
        values["status"] = str(NotificationStatus.PENDING)
        values["next_attempt_at"] = max(retry_at, now)
    return values


async def record_outcomes(session: AsyncSession, outcomes: Iterable[Mapping[str, Any]]) -> int:
    """Several outcomes (:func:`sent_values`, :func:`failed_values`) in one executemany per shape."""
    by_shape: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for o in outcomes:
        by_shape.setdefault(tuple(sorted(o)), []).append(o)
    n = 0
    for rows in by_shape.values():
        await session.execute(update(Notification), list(rows))
        n += len(rows)
    return n


async def thread_refs_for(session: AsyncSession, incident_ids: Collection[int], sink: str) -> dict[int, str]:
    """:func:`thread_ref_for` of several incidents at once: incident id → its first thread handle."""
    if not incident_ids:
        return {}
    rows = await session.execute(
        select(Notification.incident_id, Notification.thread_ref)
        .where(
            Notification.incident_id.in_(list(incident_ids)),
            Notification.sink == sink,
            Notification.status == str(NotificationStatus.SENT),
            Notification.thread_ref.is_not(None),
        )
        .order_by(Notification.id)
    )
    found: dict[int, str] = {}
    for incident_id, ref in rows:
        if ref is not None:
            found.setdefault(incident_id, ref)
    return found


async def unfinished_count(session: AsyncSession, sinks: Collection[str] | None = None) -> int:
    """Rows still owed (pending or being sent), of these sinks or of all."""
    stmt = select(func.count()).select_from(Notification).where(Notification.status.in_(_UNFINISHED))
    if sinks is not None:
        stmt = stmt.where(Notification.sink.in_(list(sinks)))
    return int((await session.execute(stmt)).scalar_one())


async def outbox_counts(session: AsyncSession) -> dict[tuple[str, str], int]:
    """(sink, status) → number of rows."""
    rows = await session.execute(
        select(Notification.sink, Notification.status, func.count()).group_by(
            Notification.sink, Notification.status
        )
    )
    return {(sink, status): int(n) for sink, status, n in rows}


async def notifications_of(session: AsyncSession, incident_id: int) -> list[Notification]:
    """The outbox rows of one incident, oldest first (what was said, where, and how it went)."""
    rows = await session.execute(
        select(Notification).where(Notification.incident_id == incident_id).order_by(Notification.id)
    )
    return list(rows.scalars())


def notification_dict(row: Notification) -> dict[str, Any]:
    """An outbox row as the API shows it: what was said where, and how it went. No payload
    (the incident is right there) and nothing of the sink's configuration."""
    return {
        "sink": row.sink,
        "event": row.event,
        "status": row.status,
        "attempts": row.attempts,
        "created_at": rfc3339(row.created_at),
        "sent_at": rfc3339(row.sent_at),
        "next_attempt_at": rfc3339(row.next_attempt_at) if row.status == "pending" else None,
        "last_error": row.last_error,
        "delivery": delivery_id(row),
    }
