"""The incident store's tables: incidents, their timeline, the notification
outbox, silences and the idempotency keys of the Kubernetes events already applied.

One model module, one ``MetaData`` with a naming convention (so constraint
names are the same on SQLite and PostgreSQL and migrations can refer to them),
imported by the Alembic environment in ``alembic/env.py``.

Timestamps are stored as UTC and always come back timezone-aware
(:class:`UTCDateTime`); SQLite keeps them as sortable ISO strings.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncAttrs
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from analyzers.lifecycle import IncidentStatus, NotificationEvent, TimelineKind

__all__ = [
    "AppliedEvent",
    "Base",
    "Incident",
    "IncidentStatus",
    "Notification",
    "NotificationEvent",
    "NotificationStatus",
    "Silence",
    "TimelineEntry",
    "TimelineKind",
]

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# 64-bit ids on PostgreSQL; SQLite only auto-increments an INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer(), "sqlite")
# JSONB on PostgreSQL (binary, indexable); JSON text elsewhere.
Json = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend.

    Naive datetimes are refused on the way in: a naive value is a bug in the
    caller (whose clock is it?), not something to guess about."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware value")
        value = value.astimezone(UTC)
        # SQLite has no timezone type: store the UTC wall time.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class NotificationStatus(enum.StrEnum):
    PENDING = "pending"  # due at next_attempt_at
    SENDING = "sending"  # claimed by a notifier until next_attempt_at (the lease)
    SENT = "sent"
    FAILED = "failed"  # given up: attempts exhausted or a permanent error
    SILENCED = "silenced"  # matched an active silence: stored, never sent (last_error says which)


class Base(AsyncAttrs, DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# An incident's time to resolve in seconds, per dialect; SQLite's written exactly as the
# expression index ix_incidents_resolve_seconds holds it (its planner matches the text,
# literals included).
RESOLVE_SECONDS = {
    "sqlite": "(julianday(resolved_at) - julianday(first_seen)) * 86400.0",
    "postgresql": "EXTRACT(epoch FROM (resolved_at - first_seen))",
}


def include_for_dialect(dialect: str) -> Callable[..., bool]:
    """Alembic's ``include_object`` for a comparison on ``dialect``: leaves out the schema
    objects the models create only on another dialect (``info["dialect"]``)."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        info = getattr(obj, "info", None) or {}
        return bool(info.get("dialect", dialect) == dialect)

    return include


class Incident(Base):
    """One root cause on one workload in one cluster, from open to resolved.

    At most one incident per (cluster, fingerprint) is open at a time (a
    partial unique index). A resolved incident that recurs opens a new row
    whose ``previous_id`` points at the earlier one.

    ``waiting_for`` (e.g. ``"scale-up"``) and ``waiting_since`` are set while
    the incident waits for something already under way (cluster-autoscaler or
    Karpenter adding capacity) instead of paging; both are cleared when it
    escalates. They are kept when it resolves while waiting, so a non-null
    ``waiting_for`` always means nobody was paged about the incident."""

    __tablename__ = "incidents"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(253))
    fingerprint: Mapped[str] = mapped_column(String(64))
    rule_id: Mapped[str] = mapped_column(String(100))
    cause: Mapped[str] = mapped_column(String(253))
    severity: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    subject_kind: Mapped[str] = mapped_column(String(100))
    namespace: Mapped[str] = mapped_column(String(253))
    subject_name: Mapped[str] = mapped_column(String(253))
    title: Mapped[str] = mapped_column(Text)
    explanation: Mapped[str] = mapped_column(Text)
    evidence: Mapped[dict[str, Any]] = mapped_column(Json)
    remedies: Mapped[list[dict[str, Any]]] = mapped_column(Json)
    pods: Mapped[list[str]] = mapped_column(Json)
    first_seen: Mapped[datetime] = mapped_column(UTCDateTime)
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    occurrences: Mapped[int] = mapped_column(Integer)
    last_message: Mapped[str] = mapped_column(Text)
    previous_id: Mapped[int | None] = mapped_column(BigId, ForeignKey("incidents.id"))
    waiting_for: Mapped[str | None] = mapped_column(String(32))
    waiting_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # What fixed it, set when it resolves: {"summary": str, "changes": [str, ...]}.
    resolution: Mapped[dict[str, Any] | None] = mapped_column(Json)
    # When somebody was last told about it (opened, escalated, updated, reminder, digest):
    # the re-notify interval counts from here. None while nobody was (waiting).
    notified_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The most pods it has affected: the ``updated`` pod-count thresholds compare against it.
    peak_pods: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        # The tracker's lookup, and the guarantee of one open incident per root cause.
        Index(
            "uq_incidents_open_fingerprint",
            "cluster",
            "fingerprint",
            unique=True,
            sqlite_where=text("status = 'open'"),
            postgresql_where=text("status = 'open'"),
        ),
        # Recurrence lookup (latest resolved incident of a fingerprint).
        Index("ix_incidents_fingerprint", "fingerprint", "cluster", "id"),
        # The tracker's lookup of a pass's open incidents by subject name (good plans even without ANALYZE).
        Index("ix_incidents_cluster_subject", "cluster", "subject_name", "status"),
        # Listing: newest first, optionally narrowed by the common filters.
        # first_seen and resolved_at ride along so that a since/until window is filtered in
        # the index (SQLite defers the row lookup) instead of row by row.
        Index("ix_incidents_last_seen", "last_seen", "id", "first_seen", "resolved_at"),
        Index("ix_incidents_first_seen", "first_seen", "id"),
        Index("ix_incidents_status_last_seen", "status", "last_seen", "id"),
        # status rides along: facet and stats counts per namespace/rule stay inside the index.
        Index("ix_incidents_namespace_last_seen", "namespace", "last_seen", "id", "status"),
        Index("ix_incidents_rule_last_seen", "rule_id", "last_seen", "id", "status"),
        Index("ix_incidents_name_last_seen", "subject_name", "last_seen", "id"),
        # Listing the (few) waiting incidents without walking every row: a small partial index.
        Index(
            "ix_incidents_waiting_last_seen",
            "last_seen",
            "id",
            sqlite_where=text("waiting_for IS NOT NULL"),
            postgresql_where=text("waiting_for IS NOT NULL"),
        ),
        # Time to resolve, in seconds, in order (SQLite): the whole history's stats read the
        # mean, percentiles and maximum from the index alone (LIMIT 1 OFFSET rank) instead of
        # computing and sorting every row's. PostgreSQL has no index-only scan of an
        # expression: its one scan and sort are faster there, so it has no such index.
        Index(
            "ix_incidents_resolve_seconds",
            text(RESOLVE_SECONDS["sqlite"]),
            sqlite_where=text("resolved_at IS NOT NULL"),
            info={"dialect": "sqlite"},
        ).ddl_if(dialect="sqlite"),
    )


class TimelineEntry(Base):
    """What happened to an incident, when, and the scheduler message that triggered it."""

    __tablename__ = "incident_timeline"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    incident_id: Mapped[int] = mapped_column(BigId, ForeignKey("incidents.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    kind: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text)
    detail: Mapped[dict[str, Any]] = mapped_column(Json)

    __table_args__ = (Index("ix_incident_timeline_incident", "incident_id", "at", "id"),)


class Notification(Base):
    """The notification outbox: one row per (incident event, sink).

    Written in the tracker's transaction, so a notification exists exactly when
    the incident change it announces was committed. Notifiers claim due rows
    (:func:`storage.outbox.claim_due`), send, and record the outcome."""

    __tablename__ = "notification_outbox"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    incident_id: Mapped[int] = mapped_column(BigId, ForeignKey("incidents.id", ondelete="CASCADE"))
    sink: Mapped[str] = mapped_column(String(100))
    event: Mapped[str] = mapped_column(String(32))
    payload: Mapped[dict[str, Any]] = mapped_column(Json)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The sink's handle on the message (e.g. a Slack thread ts), so that later
    # notifications of the same incident can reply in the same thread.
    thread_ref: Mapped[str | None] = mapped_column(String(255))

    __table_args__ = (
        Index("ix_notification_outbox_due", "status", "next_attempt_at", "id"),
        Index("ix_notification_outbox_incident", "incident_id", "sink"),
    )


class Silence(Base):
    """Notifications of matching incidents are stored ``silenced`` instead of sent, until ``expires_at``.

    A silence matches an incident when every matcher it sets matches: ``cluster``,
    ``namespace`` and ``rule_id`` exactly, ``subject`` as a shell glob over the
    subject's name (``storefront-*``). At least one matcher is set (see
    :mod:`storage.silences`)."""

    __tablename__ = "silences"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    cluster: Mapped[str | None] = mapped_column(String(253))
    namespace: Mapped[str | None] = mapped_column(String(253))
    rule_id: Mapped[str | None] = mapped_column(String(100))
    subject: Mapped[str | None] = mapped_column(String(253))
    reason: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(253))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_silences_expires_at", "expires_at", "id"),)


class AppliedEvent(Base):
    """Idempotency keys of the Kubernetes events the tracker has counted.

    The key is the event's uid plus its count (or series.count), so a replayed
    event (a relist after 410 Gone, a redelivered Kafka message) is recognised,
    while the same event firing again (count bumped) is a new occurrence."""

    __tablename__ = "applied_events"

    cluster: Mapped[str] = mapped_column(String(253), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    applied_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_applied_events_applied_at", "applied_at"),)


class TrackerGeneration(Base):
    """How many batches have written a cluster's incidents: the tracker's fence.

    Every transaction that writes a cluster's incidents (``storage.tracker``'s batches and
    reminders) adds one, under the cluster's lock. A writer that keeps the open incidents in
    memory between batches (``storage.tracker.HeldIncidents``) remembers the generation its
    copy is true at; when the next batch finds another number, somebody else wrote in
    between (a second agent, a leader that lost its Lease late) and the copy is read again."""

    __tablename__ = "tracker_generations"

    cluster: Mapped[str] = mapped_column(String(253), primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger)
