"""The incident tracker: the Findings of one analysis pass in, incidents out.

An incident is one root cause (a Finding's fingerprint: workload + rule +
cause) in one cluster, from the first pass that found it to the first pass
that evaluated its workload and did not. :func:`apply_pass` does one pass's
bookkeeping inside the caller's transaction; :func:`track` wraps it in a
transaction of its own and commits.

What a pass does, per finding (by ``(cluster, fingerprint)``):

* **open** when no incident of that fingerprint is open: a new incident,
  ``occurrences`` = the pass's new triggers concerning it (at least 1), a
  timeline entry ``opened``. If an earlier incident of the same fingerprint was
  resolved, the new one links to the latest of them (``previous_id``): the
  problem *recurred*.
* **update** when one is open: ``last_seen`` moves to ``now``, ``occurrences``
  grows by the pass's *new* triggers concerning it, and the current title,
  explanation, evidence, remedies and pods replace the stored ones. The
  timeline records changes, not repetitions: ``severity_changed`` when the
  severity moved, ``updated`` when the content or the scheduler's message
  changed; an event that fires 500 times with the same message is one
  incident with ``occurrences`` = 500 and no extra timeline rows.

and per open incident *not* among the findings:

* **resolve** when the pass *evaluated* its subject: ``evaluated`` names the
  workloads the analysis looked at with all its rules (or :data:`EVERY_SUBJECT`
  for a pass over the whole cluster). An incident whose fingerprint is absent
  from the findings of a pass that evaluated its subject is resolved at
  ``now`` with the pass's trigger message (e.g. the ``Scheduled`` event).
  Subjects are *not* inferred from the findings: a pass that ran only the
  scheduling rules on a Deployment must not resolve its drain incident, so the
  caller says what it evaluated. Incidents of subjects not evaluated are left
  alone.

* **root cause changed**: when, in one pass, a subject has incidents resolved
  *and* incidents opened, the cause moved (e.g. from "Insufficient
  nvidia.com/gpu" to an untolerated taint). The new incident's timeline gets
  ``root_cause_changed`` naming the incidents it replaces, the old ones are
  resolved with ``{"reason": "root_cause_changed", "replaced_by": […]}``, and
  one ``root_cause_changed`` notification is written instead of a resolve and
  an open.

**Idempotency.** Each Kubernetes event that triggered the pass comes as a
:class:`Trigger` whose ``key`` is the event's uid plus its count (or
``series.count``): :func:`trigger_from_event` builds it. Keys are remembered
per cluster (``applied_events``); a trigger whose key was applied before adds
no occurrence. Applying the same pass twice therefore leaves the same state
(with the same ``now``), while the event firing again (count + 1) counts.
A trigger may name the pod it is about (``pod="namespace/name"``); it then
counts only for findings that list that pod (findings without pods take every
trigger).

**Notifications.** When an incident opens, changes root cause or resolves,
one outbox row per sink in ``sinks`` is written in the same transaction, due
at ``now``. Pass no sinks to record without notifying (e.g. while
cluster-autoscaler is already adding the capacity).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import orjson
from sqlalchemy import and_, delete, or_, select, tuple_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import Finding, ObjectRef, Severity
from storage.models import (
    AppliedEvent,
    Incident,
    IncidentStatus,
    Notification,
    NotificationEvent,
    NotificationStatus,
    TimelineEntry,
    TimelineKind,
)
from storage.views import incident_dict

log = logging.getLogger(__name__)

# Bind-parameter budget per IN list (SQLite allows 32766, asyncpg 32767).
_CHUNK = 500


class _EverySubject:
    __slots__ = ()

    def __repr__(self) -> str:
        return "EVERY_SUBJECT"


EVERY_SUBJECT: Final = _EverySubject()
"""``evaluated=EVERY_SUBJECT``: the pass looked at the whole cluster."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """A Kubernetes event that triggered the pass.

    ``key`` identifies this firing of the event (uid + count), ``message`` is
    what it said (kept as the incident's last scheduler message and in the
    timeline), ``pod`` (``namespace/name``, optional) the pod it is about."""

    key: str
    message: str = ""
    pod: str = ""


def trigger_from_event(event: Mapping[str, Any]) -> Trigger:
    """A :class:`Trigger` from a Kubernetes Event as the API returns it (core/v1 or events.k8s.io/v1).

    The key is ``uid:count``, where the count is ``series.count`` when the
    event recorder aggregated the event into a series, else ``count``
    (``deprecatedCount`` in events.k8s.io/v1), else 1."""
    meta = event.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    if not uid:
        raise ValueError("event has no metadata.uid")
    series = event.get("series") or {}
    count = series.get("count") or event.get("count") or event.get("deprecatedCount") or 1
    involved = event.get("involvedObject") or event.get("regarding") or {}
    pod = ""
    if involved.get("kind") == "Pod" and involved.get("name"):
        pod = f"{involved.get('namespace') or ''}/{involved['name']}"
    message = str(event.get("message") or event.get("note") or "")
    return Trigger(key=f"{uid}:{int(count)}", message=message, pod=pod)


@dataclass(slots=True)
class TrackResult:
    """Incident ids touched by a pass (ids of rows in ``incidents``)."""

    opened: list[int] = field(default_factory=list)
    updated: list[int] = field(default_factory=list)
    resolved: list[int] = field(default_factory=list)
    root_cause_changed: list[int] = field(default_factory=list)  # the new incidents
    new_triggers: int = 0
    replayed_triggers: int = 0
    notifications: int = 0


def _jsonable(value: Any) -> Any:
    """Evidence as it will read back from the database (dataclasses, tuples, enums flattened)."""
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str))


@dataclass(slots=True)
class _Observed:
    finding: Finding
    evidence: dict[str, Any]
    remedies: list[dict[str, Any]]
    occurrences: int  # new triggers concerning it
    message: str  # the latest such trigger's message, "" if none


def _merge_duplicates(findings: Iterable[Finding]) -> dict[str, Finding]:
    """One finding per fingerprint: the most severe wins, pods are pooled."""
    by_fp: dict[str, Finding] = {}
    for f in findings:
        fp = f.fingerprint
        seen = by_fp.get(fp)
        if seen is None:
            by_fp[fp] = f
            continue
        keep = f if Severity(f.severity).rank > Severity(seen.severity).rank else seen
        pods = tuple(dict.fromkeys((*seen.pods, *f.pods)))
        by_fp[fp] = Finding(
            rule_id=keep.rule_id,
            severity=keep.severity,
            subject=keep.subject,
            title=keep.title,
            explanation=keep.explanation,
            evidence=keep.evidence,
            remedies=keep.remedies,
            cause=keep.cause,
            pods=pods,
        )
    return by_fp


def _insert_ignore(session: AsyncSession) -> Any:
    name = session.get_bind().dialect.name
    return pg_insert if name == "postgresql" else sqlite_insert


async def _new_triggers(
    session: AsyncSession, cluster: str, triggers: Sequence[Trigger], now: datetime
) -> tuple[list[Trigger], int]:
    """The triggers not applied before (recording them), and how many were replays."""
    unique: dict[str, Trigger] = {}
    for t in triggers:
        if not t.key:
            raise ValueError("a Trigger needs a non-empty key (event uid:count)")
        unique.setdefault(t.key, t)
    if not unique:
        return [], 0
    keys = list(unique)
    seen: set[str] = set()
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i : i + _CHUNK]
        rows = await session.execute(
            select(AppliedEvent.key).where(AppliedEvent.cluster == cluster, AppliedEvent.key.in_(chunk))
        )
        seen.update(rows.scalars())
    fresh = [t for k, t in unique.items() if k not in seen]
    if fresh:
        insert = _insert_ignore(session)
        for i in range(0, len(fresh), _CHUNK):
            stmt = insert(AppliedEvent).values(
                [{"cluster": cluster, "key": t.key, "applied_at": now} for t in fresh[i : i + _CHUNK]]
            )
            await session.execute(stmt.on_conflict_do_nothing(index_elements=["cluster", "key"]))
    return fresh, len(unique) - len(fresh)


def _concerning(finding: Finding, triggers: Sequence[Trigger]) -> list[Trigger]:
    if not finding.pods:
        return list(triggers)
    pods = set(finding.pods)
    return [t for t in triggers if not t.pod or t.pod in pods]


async def _open_incidents(
    session: AsyncSession,
    cluster: str,
    fingerprints: Collection[str],
    subjects: Collection[ObjectRef] | _EverySubject,
) -> dict[int, Incident]:
    # Row locks (PostgreSQL; SQLite serialises writers anyway): a concurrent pass
    # on the same incidents waits and then reads the committed counts.
    base = (
        select(Incident)
        .where(Incident.cluster == cluster, Incident.status == IncidentStatus.OPEN)
        .with_for_update()
    )
    found: dict[int, Incident] = {}
    if isinstance(subjects, _EverySubject):
        for inc in (await session.execute(base)).scalars():
            found[inc.id] = inc
        return found
    fps = list(fingerprints)
    refs = list(subjects)
    # The two lists are chunked together: one query per chunk pair.
    for i in range(0, max(len(fps), len(refs)), _CHUNK):
        conds = []
        fp_chunk = fps[i : i + _CHUNK]
        ref_chunk = refs[i : i + _CHUNK]
        if fp_chunk:
            conds.append(Incident.fingerprint.in_(fp_chunk))
        if ref_chunk:
            conds.append(
                tuple_(Incident.subject_kind, Incident.namespace, Incident.subject_name).in_(
                    [(r.kind, r.namespace, r.name) for r in ref_chunk]
                )
            )
        for inc in (await session.execute(base.where(or_(*conds)))).scalars():
            found[inc.id] = inc
    return found


async def _latest_resolved(
    session: AsyncSession, cluster: str, fingerprints: Sequence[str]
) -> dict[str, int]:
    """fingerprint → id of its most recent resolved incident, for the fingerprints given."""
    latest: dict[str, int] = {}
    for i in range(0, len(fingerprints), _CHUNK):
        chunk = fingerprints[i : i + _CHUNK]
        rows = await session.execute(
            select(Incident.fingerprint, Incident.id).where(
                and_(
                    Incident.cluster == cluster,
                    Incident.fingerprint.in_(chunk),
                    Incident.status == IncidentStatus.RESOLVED,
                )
            )
        )
        for fp, inc_id in rows:
            if inc_id > latest.get(fp, -1):
                latest[fp] = inc_id
    return latest


def _ref(inc: Incident) -> ObjectRef:
    return ObjectRef(inc.subject_kind, inc.namespace, inc.subject_name)


def _entry(inc: Incident, kind: TimelineKind, at: datetime, message: str, **detail: Any) -> TimelineEntry:
    return TimelineEntry(incident_id=inc.id, at=at, kind=str(kind), message=message, detail=detail)


async def apply_pass(
    session: AsyncSession,
    *,
    cluster: str,
    findings: Iterable[Finding],
    now: datetime,
    evaluated: Iterable[ObjectRef] | _EverySubject = (),
    triggers: Sequence[Trigger] = (),
    sinks: Sequence[str] = (),
) -> TrackResult:
    """Open, update and resolve ``cluster``'s incidents from one analysis pass.

    Runs in the caller's transaction and does not commit (see :func:`track`).

    :param findings: every Finding of the pass (duplicates of one fingerprint
        are merged, the most severe wins).
    :param now: the pass's time (timezone-aware); the tracker reads no clock.
    :param evaluated: the subjects (workloads) the pass evaluated with all its
        rules, or :data:`EVERY_SUBJECT`. An open incident of an evaluated
        subject whose fingerprint is absent from ``findings`` resolves. Not
        inferred from the findings' subjects.
    :param triggers: the events that triggered the pass, with idempotency
        keys; replays (keys seen before) add no occurrences.
    :param sinks: notification sink names; one outbox row per sink for each
        open, root-cause change and resolve.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    if not cluster:
        raise ValueError("cluster must be a non-empty name")
    result = TrackResult()
    by_fp = _merge_duplicates(findings)
    every = isinstance(evaluated, _EverySubject)
    subjects: set[ObjectRef] = set() if isinstance(evaluated, _EverySubject) else set(evaluated)

    fresh, replayed = await _new_triggers(session, cluster, triggers, now)
    result.new_triggers, result.replayed_triggers = len(fresh), replayed
    pass_message = fresh[-1].message if fresh else (triggers[-1].message if triggers else "")

    open_by_id = await _open_incidents(session, cluster, by_fp.keys(), EVERY_SUBJECT if every else subjects)
    open_by_fp = {inc.fingerprint: inc for inc in open_by_id.values()}

    observed: dict[str, _Observed] = {}
    for fp, f in by_fp.items():
        concerning = _concerning(f, fresh)
        observed[fp] = _Observed(
            finding=f,
            evidence=_jsonable(dict(f.evidence)),
            remedies=_jsonable([r.as_dict() for r in f.remedies]),
            occurrences=len(concerning),
            message=concerning[-1].message if concerning else "",
        )

    entries: list[TimelineEntry] = []
    opened: list[Incident] = []

    # Open what is new. Recurrences link to the latest resolved incident of their fingerprint.
    to_open = [fp for fp in by_fp if fp not in open_by_fp]
    previous = await _latest_resolved(session, cluster, to_open) if to_open else {}
    for fp in to_open:
        ob = observed[fp]
        f = ob.finding
        inc = Incident(
            cluster=cluster,
            fingerprint=fp,
            rule_id=f.rule_id,
            cause=f.cause,
            severity=str(f.severity),
            status=str(IncidentStatus.OPEN),
            subject_kind=f.subject.kind,
            namespace=f.subject.namespace,
            subject_name=f.subject.name,
            title=f.title,
            explanation=f.explanation,
            evidence=ob.evidence,
            remedies=ob.remedies,
            pods=list(f.pods),
            first_seen=now,
            last_seen=now,
            resolved_at=None,
            occurrences=max(1, ob.occurrences),
            last_message=ob.message or pass_message,
            previous_id=previous.get(fp),
        )
        session.add(inc)
        opened.append(inc)
    if opened:
        await session.flush()  # ids for the timeline and the outbox
    for inc in opened:
        recurrence = {"previous_id": inc.previous_id} if inc.previous_id is not None else {}
        entries.append(_entry(inc, TimelineKind.OPENED, now, inc.last_message, **recurrence))
        result.opened.append(inc.id)

    # Update what continues.
    for fp, inc in open_by_fp.items():
        ob_or_none = observed.get(fp)
        if ob_or_none is None:
            continue
        ob = ob_or_none
        f = ob.finding
        severity = str(f.severity)
        if severity != inc.severity:
            entries.append(
                _entry(
                    inc,
                    TimelineKind.SEVERITY_CHANGED,
                    now,
                    ob.message,
                    **{"from": inc.severity, "to": severity},
                )
            )
            inc.severity = severity
        changed = [
            name
            for name, old, new in (
                ("title", inc.title, f.title),
                ("explanation", inc.explanation, f.explanation),
                ("evidence", inc.evidence, ob.evidence),
                ("remedies", inc.remedies, ob.remedies),
                ("message", inc.last_message, ob.message or inc.last_message),
            )
            if old != new
        ]
        if changed:
            entries.append(_entry(inc, TimelineKind.UPDATED, now, ob.message, changed=changed))
            inc.title, inc.explanation = f.title, f.explanation
            if "evidence" in changed:
                inc.evidence = ob.evidence
            if "remedies" in changed:
                inc.remedies = ob.remedies
            if ob.message:
                inc.last_message = ob.message
        if list(f.pods) != list(inc.pods or ()):
            inc.pods = list(f.pods)
        if now > inc.last_seen:
            inc.last_seen = now
        if ob.occurrences:
            inc.occurrences += ob.occurrences
        result.updated.append(inc.id)

    # Resolve what an evaluated subject no longer shows.
    resolved: list[Incident] = []
    for inc in open_by_id.values():
        if inc.fingerprint in by_fp:
            continue
        if every or _ref(inc) in subjects:
            inc.status = str(IncidentStatus.RESOLVED)
            inc.resolved_at = max(now, inc.last_seen)
            resolved.append(inc)
            result.resolved.append(inc.id)

    # A subject that lost causes and gained others in the same pass changed root cause.
    opened_by_subject: dict[ObjectRef, list[Incident]] = defaultdict(list)
    for inc in opened:
        opened_by_subject[_ref(inc)].append(inc)
    replaced_by: dict[int, list[int]] = {}
    replaces: dict[int, list[Incident]] = {}
    for inc in resolved:
        successors = opened_by_subject.get(_ref(inc))
        if successors:
            replaced_by[inc.id] = [s.id for s in successors]
            for s in successors:
                replaces.setdefault(s.id, []).append(inc)
    for inc in resolved:
        detail: dict[str, Any] = {}
        if inc.id in replaced_by:
            detail = {"reason": "root_cause_changed", "replaced_by": replaced_by[inc.id]}
        entries.append(_entry(inc, TimelineKind.RESOLVED, now, pass_message, **detail))
    for inc in opened:
        olds = replaces.get(inc.id)
        if olds:
            entries.append(
                _entry(
                    inc,
                    TimelineKind.ROOT_CAUSE_CHANGED,
                    now,
                    inc.last_message,
                    replaces=[o.id for o in olds],
                    previous_causes=[
                        {"id": o.id, "rule_id": o.rule_id, "cause": o.cause, "title": o.title} for o in olds
                    ],
                )
            )
            result.root_cause_changed.append(inc.id)

    # The outbox: open, root cause changed, resolve; one row per sink.
    if sinks:
        events: list[tuple[Incident, NotificationEvent, dict[str, Any]]] = []
        for inc in opened:
            if inc.id in replaces:
                extra = {"replaces": [incident_dict(o) for o in replaces[inc.id]]}
                events.append((inc, NotificationEvent.ROOT_CAUSE_CHANGED, extra))
            else:
                events.append((inc, NotificationEvent.OPENED, {}))
        for inc in resolved:
            if inc.id not in replaced_by:
                events.append((inc, NotificationEvent.RESOLVED, {}))
        for inc, ev, extra in events:
            payload = {"event": str(ev), "cluster": cluster, "incident": incident_dict(inc), **extra}
            for sink in dict.fromkeys(sinks):
                session.add(
                    Notification(
                        incident_id=inc.id,
                        sink=sink,
                        event=str(ev),
                        payload=payload,
                        status=str(NotificationStatus.PENDING),
                        attempts=0,
                        created_at=now,
                        next_attempt_at=now,
                        last_error=None,
                        sent_at=None,
                        thread_ref=None,
                    )
                )
                result.notifications += 1

    session.add_all(entries)
    await session.flush()
    return result


async def track(
    sessions: async_sessionmaker[AsyncSession],
    *,
    cluster: str,
    findings: Iterable[Finding],
    now: datetime,
    evaluated: Iterable[ObjectRef] | _EverySubject = (),
    triggers: Sequence[Trigger] = (),
    sinks: Sequence[str] = (),
    attempts: int = 3,
) -> TrackResult:
    """:func:`apply_pass` in a transaction of its own, committed.

    Passes of one cluster are expected to run one at a time (the pipeline is
    partitioned by cluster); should two race to open the same fingerprint, the
    unique index on open incidents rejects one, which is retried."""
    findings = list(findings)
    evaluated = evaluated if isinstance(evaluated, _EverySubject) else list(evaluated)
    for attempt in range(1, attempts + 1):
        try:
            async with sessions.begin() as session:
                return await apply_pass(
                    session,
                    cluster=cluster,
                    findings=findings,
                    now=now,
                    evaluated=evaluated,
                    triggers=triggers,
                    sinks=sinks,
                )
        except IntegrityError:
            if attempt == attempts:
                raise
            log.info("incident pass raced another writer; retrying", extra={"cluster": cluster})
    raise AssertionError("unreachable")  # pragma: no cover


async def prune_applied_events(session: AsyncSession, *, before: datetime) -> int:
    """Forget idempotency keys applied before ``before`` (Kubernetes keeps events ~1 h)."""
    res = await session.execute(delete(AppliedEvent).where(AppliedEvent.applied_at < before))
    return int(getattr(res, "rowcount", 0) or 0)
