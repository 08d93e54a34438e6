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
is due again when the lease runs out (at-least-once delivery). On PostgreSQL
concurrent notifiers skip each other's rows (``FOR UPDATE SKIP LOCKED``); on
SQLite writers are serialised anyway.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import Notification, NotificationStatus


async def claim_due(
    session: AsyncSession,
    *,
    now: datetime,
    limit: int = 50,
    lease: timedelta = timedelta(seconds=60),
    sinks: Collection[str] | None = None,
) -> list[Notification]:
    """Claim up to ``limit`` due rows (oldest first), counting the attempt."""
    stmt = (
        select(Notification)
        .where(
            Notification.status.in_([str(NotificationStatus.PENDING), str(NotificationStatus.SENDING)]),
            Notification.next_attempt_at <= now,
        )
        .order_by(Notification.next_attempt_at, Notification.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if sinks is not None:
        stmt = stmt.where(Notification.sink.in_(list(sinks)))
    rows = list((await session.execute(stmt)).scalars())
    for row in rows:
        row.status = str(NotificationStatus.SENDING)
        row.attempts += 1
        row.next_attempt_at = now + lease
    await session.flush()
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
) -> None:
    """Record a failed attempt: due again at ``retry_at``, or given up (``failed``) when None."""
    values: dict[str, object] = {"last_error": error[:4000]}
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
