"""Silences: notifications of matching incidents are stored ``silenced``, not sent, until they expire.

A silence sets one or more matchers; an incident matches when every matcher
set matches it:

* ``cluster``, ``namespace``, ``rule_id``: exact;
* ``subject``: a shell glob (``fnmatch``, case-sensitive: ``*``, ``?``,
  ``[...]``) over the subject's name, e.g. ``storefront-*``.

A silence applies while ``now < expires_at``; an expired silence is kept (the
list shows it) but matches nothing. The tracker writes the outbox rows of a
silenced incident with status ``silenced`` and the silence in ``last_error``,
so the page and the API show what was held back and why;
:func:`create_silence` also silences the matching rows still ``pending``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any, Final

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from analyzers import bounds
from storage.models import Incident, Notification, NotificationStatus, Silence
from storage.views import rfc3339

MATCHERS: Final = ("cluster", "namespace", "rule_id", "subject")
REASON_MAX: Final = 1000
MATCHER_MAX: Final = {"cluster": 253, "namespace": 253, "rule_id": 100, "subject": 253}


MAX_DURATION: Final = timedelta(days=365)
MIN_DURATION: Final = timedelta(minutes=1)


def parse_duration(text: str, *, option: str = "duration") -> timedelta:
    """``30m``, ``2h``, ``1h30m``, ``7d`` (from a minute to 365 days), or
    :class:`~analyzers.bounds.OutOfBounds` naming ``option``."""
    return bounds.duration(option, text, minimum=MIN_DURATION, maximum=MAX_DURATION)


class InvalidSilence(ValueError):
    """A silence that cannot be stored: ``field`` names what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class SilenceSpec:
    """What a user asks to silence (validated by :func:`validate`)."""

    reason: str
    expires_at: datetime
    cluster: str | None = None
    namespace: str | None = None
    rule_id: str | None = None
    subject: str | None = None
    created_by: str = ""


def validate(spec: SilenceSpec, *, now: datetime) -> SilenceSpec:
    """The spec with blank matchers dropped, or :class:`InvalidSilence` naming the first bad field."""
    values: dict[str, str | None] = {}
    for name in MATCHERS:
        raw = getattr(spec, name)
        value = raw.strip() if isinstance(raw, str) else None
        if value and len(value) > MATCHER_MAX[name]:
            raise InvalidSilence(name, f"at most {MATCHER_MAX[name]} characters")
        values[name] = value or None
    if not any(values.values()):
        raise InvalidSilence(
            "matchers",
            "set at least one of cluster, namespace, rule_id, subject (a silence of everything is refused)",
        )
    reason = spec.reason.strip()
    if not reason:
        raise InvalidSilence("reason", "required: say why (it is shown wherever a notification is held back)")
    if len(reason) > REASON_MAX:
        raise InvalidSilence("reason", f"at most {REASON_MAX} characters")
    if spec.expires_at.tzinfo is None or spec.expires_at.utcoffset() is None:
        raise InvalidSilence("expires_at", "must carry a timezone (e.g. 2026-01-02T15:04:05Z)")
    if spec.expires_at <= now:
        raise InvalidSilence("expires_at", "must be in the future")
    if spec.expires_at > now + MAX_DURATION:
        raise InvalidSilence("expires_at", f"at most {MAX_DURATION.days} days ahead")
    return SilenceSpec(
        reason=reason,
        expires_at=spec.expires_at,
        created_by=spec.created_by.strip()[:253],
        **values,
    )


def matches(silence: Silence, *, cluster: str, namespace: str, rule_id: str, subject_name: str) -> bool:
    """Whether every matcher the silence sets matches (expiry is the caller's concern)."""
    return (
        (silence.cluster is None or silence.cluster == cluster)
        and (silence.namespace is None or silence.namespace == namespace)
        and (silence.rule_id is None or silence.rule_id == rule_id)
        and (silence.subject is None or fnmatchcase(subject_name, silence.subject))
    )


def silencing(silences: Iterable[Silence], incident: Incident, now: datetime) -> Silence | None:
    """The first active silence (oldest first) that matches the incident, if any."""
    for s in silences:
        if s.expires_at > now and matches(
            s,
            cluster=incident.cluster,
            namespace=incident.namespace,
            rule_id=incident.rule_id,
            subject_name=incident.subject_name,
        ):
            return s
    return None


def silenced_note(silence: Silence) -> str:
    """What a silenced outbox row says in ``last_error``."""
    return f"silenced by silence {silence.id} until {rfc3339(silence.expires_at)}: {silence.reason}"[:4000]


async def active_silences(
    session: AsyncSession, *, now: datetime, cluster: str | None = None
) -> list[Silence]:
    """Silences that have not expired at ``now`` (of ``cluster`` or of every cluster), oldest first."""
    stmt = select(Silence).where(Silence.expires_at > now).order_by(Silence.id)
    if cluster is not None:
        stmt = stmt.where((Silence.cluster.is_(None)) | (Silence.cluster == cluster))
    return list((await session.execute(stmt)).scalars())


async def create_silence(session: AsyncSession, spec: SilenceSpec, *, now: datetime) -> tuple[Silence, int]:
    """Store a (validated) silence and silence the matching rows still pending.

    Returns the silence and how many pending outbox rows it silenced. A digest
    row is silenced only when every incident it lists matches."""
    spec = validate(spec, now=now)
    silence = Silence(
        cluster=spec.cluster,
        namespace=spec.namespace,
        rule_id=spec.rule_id,
        subject=spec.subject,
        reason=spec.reason,
        created_by=spec.created_by or "unknown",
        created_at=now,
        expires_at=spec.expires_at,
    )
    session.add(silence)
    await session.flush()
    stmt = (
        select(Notification, Incident)
        .join(Incident, Incident.id == Notification.incident_id)
        .where(Notification.status == str(NotificationStatus.PENDING))
    )
    for name, column in (
        ("cluster", Incident.cluster),
        ("namespace", Incident.namespace),
        ("rule_id", Incident.rule_id),
    ):
        value = getattr(silence, name)
        if value is not None:
            stmt = stmt.where(column == value)
    ids: list[int] = []
    for row, incident in (await session.execute(stmt)).all():
        listed: Sequence[Any] = (row.payload or {}).get("incidents") or ()
        if listed:
            ok = all(_matches_dict(silence, row.payload.get("cluster", ""), i) for i in listed)
        else:
            ok = silencing([silence], incident, now) is not None
        if ok:
            ids.append(row.id)
    if ids:
        await session.execute(
            update(Notification)
            .where(Notification.id.in_(ids), Notification.status == str(NotificationStatus.PENDING))
            .values(status=str(NotificationStatus.SILENCED), last_error=silenced_note(silence))
        )
    return silence, len(ids)


def _matches_dict(silence: Silence, cluster: str, incident: Any) -> bool:
    subject = incident.get("subject") or {}
    return matches(
        silence,
        cluster=cluster,
        namespace=str(subject.get("namespace", "")),
        rule_id=str(incident.get("rule_id", "")),
        subject_name=str(subject.get("name", "")),
    )


async def list_silences(
    session: AsyncSession, *, now: datetime, include_expired: bool = False
) -> list[Silence]:
    """Silences, newest first; expired ones only when asked for."""
    stmt = select(Silence).order_by(Silence.id.desc())
    if not include_expired:
        stmt = stmt.where(Silence.expires_at > now)
    return list((await session.execute(stmt)).scalars())


async def delete_silence(session: AsyncSession, silence_id: int) -> bool:
    """Remove a silence (rows it already silenced stay silenced). False when there was none."""
    res = await session.execute(delete(Silence).where(Silence.id == silence_id))
    return bool(getattr(res, "rowcount", 0))


async def silence_counts(session: AsyncSession, *, now: datetime) -> tuple[int, int]:
    """(active silences, outbox rows silenced) for ``/metrics``."""
    active = await session.scalar(select(func.count()).select_from(Silence).where(Silence.expires_at > now))
    rows = await session.scalar(
        select(func.count())
        .select_from(Notification)
        .where(Notification.status == str(NotificationStatus.SILENCED))
    )
    return int(active or 0), int(rows or 0)


def silence_dict(silence: Silence, *, now: datetime) -> dict[str, Any]:
    """A silence as the API and the CLI's ``--json`` show it."""
    return {
        "id": silence.id,
        "cluster": silence.cluster,
        "namespace": silence.namespace,
        "rule_id": silence.rule_id,
        "subject": silence.subject,
        "reason": silence.reason,
        "created_by": silence.created_by,
        "created_at": rfc3339(silence.created_at),
        "expires_at": rfc3339(silence.expires_at),
        "active": silence.expires_at > now,
    }
