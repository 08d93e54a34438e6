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

**Batches.** :func:`apply_passes` / :func:`track_passes` apply several passes
of one cluster, in order, in one transaction, with the same outcome as one by
one: a pipeline coalescing a burst of events pays a handful of statements per
batch instead of per event (see ``bench/bench_tracker.py``).

**Waiting.** A pass may say that some of its findings *wait* for something
already under way (``waiting``: fingerprint → a short reason, ``"scale-up"``
while cluster-autoscaler or Karpenter is adding the capacity): the incident is
kept, but nobody is paged for it yet.

* A finding that **opens while waiting** is stored open with ``waiting_for`` =
  the reason and ``waiting_since`` = ``now``, a timeline entry ``waiting``
  (``{"for": reason}``) follows ``opened``, and no notification is written.
* **Still waiting** on later passes: a normal update, still no notification
  (a new reason is recorded with another ``waiting`` entry).
* **Escalate**: a waiting incident whose finding is present in a pass that no
  longer marks it waiting (the scale-up failed or took too long) gets a
  timeline entry ``escalated`` (``{"for", "since"}``), its waiting state is
  cleared, and the ``opened`` notification it did not get is written now.
* **Resolved while waiting** (the new node arrived and the pod scheduled):
  resolved as usual, the ``resolved`` entry carries ``{"waiting_for": reason}``,
  and no notification is written: nobody was paged. The waiting state is kept
  on the resolved incident, so ``waiting_for`` set means *never paged*.
* An open incident that is not waiting never starts waiting: what was paged
  stays paged. ``waiting`` keys that name no finding of the pass are ignored.

**Notifications.** When an incident opens, escalates, changes root cause or
resolves, one outbox row per sink in ``sinks`` is written in the same
transaction, due at ``now`` — only for what somebody was (or is now) paged
about. A root-cause change whose replaced incidents were all waiting is an
``opened`` notification; one whose new incidents all wait writes ``resolved``
for the replaced incidents that were paged. Pass no sinks to record without
notifying.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

import orjson
from sqlalchemy import String, and_, any_, delete, insert, literal, literal_column, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import Finding, ObjectRef, Severity
from analyzers.resolution import Resolution
from storage.models import (
    AppliedEvent,
    Incident,
    IncidentStatus,
    Notification,
    NotificationEvent,
    NotificationStatus,
    Silence,
    TimelineEntry,
    TimelineKind,
)
from storage.silences import active_silences, silenced_note, silencing
from storage.views import incident_dict, rfc3339

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
    return Trigger(f"{uid}:{int(count)}", message, pod)


@dataclass(slots=True)
class TrackResult:
    """Incident ids touched by a pass (ids of rows in ``incidents``)."""

    opened: list[int] = field(default_factory=list)
    updated: list[int] = field(default_factory=list)
    resolved: list[int] = field(default_factory=list)
    root_cause_changed: list[int] = field(default_factory=list)  # the new incidents
    waiting: list[int] = field(default_factory=list)  # opened or updated, and waiting after the pass
    escalated: list[int] = field(default_factory=list)  # stopped waiting: paged now
    announced_updates: list[int] = field(default_factory=list)  # an ``updated`` notification is owed
    digested: list[int] = field(default_factory=list)  # announced in a storm digest, not one by one
    new_triggers: int = 0
    replayed_triggers: int = 0
    notifications: int = 0  # outbox rows written (silenced ones included)
    silenced: int = 0  # of those, rows stored ``silenced``


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


async def _record_triggers(
    session: AsyncSession, cluster: str, keys: Sequence[str], now: datetime
) -> set[str]:
    """Record the keys; return those not applied before.

    One statement: insert, skipping keys already there; RETURNING yields only
    the rows inserted (executemany with RETURNING is batched into multi-row
    INSERTs by SQLAlchemy)."""
    if not keys:
        return set()
    stmt = (
        _insert_ignore(session)(AppliedEvent)
        .on_conflict_do_nothing(index_elements=["cluster", "key"])
        .returning(AppliedEvent.key)
    )
    rows = [{"cluster": cluster, "key": k, "applied_at": now} for k in keys]
    return set((await session.execute(stmt, rows)).scalars())


def _concerning(finding: Finding, triggers: Sequence[Trigger]) -> list[Trigger]:
    if not finding.pods:
        return list(triggers)
    pods = set(finding.pods)
    return [t for t in triggers if not t.pod or t.pod in pods]


async def _lock_cluster(session: AsyncSession, cluster: str) -> None:
    """Serialise the tracker's transactions per cluster (PostgreSQL; SQLite has one writer anyway).

    One transaction-scoped advisory lock instead of row locks: cheaper than
    locking every incident a batch touches, and it also covers incidents about
    to be opened. A concurrent writer for the same cluster waits, then reads
    the committed state."""
    if session.get_bind().dialect.name != "postgresql":
        return
    digest = hashlib.sha256(b"unstick-tracker\0" + cluster.encode()).digest()
    await session.execute(
        text("SELECT pg_advisory_xact_lock(:key)"), {"key": int.from_bytes(digest[:8], "big", signed=True)}
    )


async def _load_open(
    session: AsyncSession, cluster: str, names: Collection[str] | None
) -> dict[str, Incident]:
    """Open incidents of the cluster (of these subject names; all when None), by fingerprint."""
    base = select(Incident).where(Incident.cluster == cluster, _IS_OPEN)
    found: dict[str, Incident] = {}
    if names is None:
        for inc in (await session.execute(base)).scalars():
            found[inc.fingerprint] = inc
        return found
    ordered = sorted(names)
    if session.get_bind().dialect.name == "postgresql":
        # One array parameter (= ANY) plans and binds faster than an IN list of many.
        name_is = Incident.subject_name == any_(literal(ordered, ARRAY(String())))
        for inc in (await session.execute(base.where(name_is))).scalars():
            found[inc.fingerprint] = inc
        return found
    for i in range(0, len(ordered), _CHUNK):
        rows = await session.execute(base.where(Incident.subject_name.in_(ordered[i : i + _CHUNK])))
        for inc in rows.scalars():
            found[inc.fingerprint] = inc
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
            # Ids are unique and positive: ">=" or another negative default would agree.
            if inc_id > latest.get(fp, -1):  # pragma: no mutate
                latest[fp] = inc_id
    return latest


# A literal, not a bound parameter: only then can the planners use the partial indexes on open incidents.
_IS_OPEN = Incident.status == literal_column("'open'")

WAITING_REASON_MAX: Final = 32  # the width of incidents.waiting_for


def _ref(inc: Incident) -> ObjectRef:
    return ObjectRef(inc.subject_kind, inc.namespace, inc.subject_name)


def _entry(inc: Incident, kind: TimelineKind, at: datetime, message: str, **detail: Any) -> dict[str, Any]:
    return {"incident_id": inc.id, "at": at, "kind": str(kind), "message": message, "detail": detail}


POD_THRESHOLDS: Final = (2, 5, 10, 25, 50, 100, 250, 500, 1000)
"""Affected-pod counts whose first crossing (upwards, past the most pods the incident ever
had) is worth an ``updated`` notification: 1 → 2 is no longer one pod, 4 → 5 a handful, …"""


@dataclass(frozen=True, slots=True)
class NotifyPolicy:
    """When the tracker writes notifications besides open, root cause, escalation and resolve."""

    storm_threshold: int = 10  # more new incidents than this in ``storm_window``: one digest per pass
    storm_window: timedelta = timedelta(minutes=5)
    reminder_interval: timedelta = timedelta(hours=24)  # re-notify incidents still open after this
    pod_thresholds: tuple[int, ...] = POD_THRESHOLDS

    def __post_init__(self) -> None:
        if self.storm_threshold < 1:
            raise ValueError("storm_threshold must be at least 1")
        if self.storm_window <= timedelta(0) or self.reminder_interval <= timedelta(0):
            raise ValueError("storm_window and reminder_interval must be positive")


ExplainResolution = Callable[
    [ObjectRef, Sequence[str], Mapping[str, Any], Sequence[Mapping[str, Any]]], Resolution
]
"""(subject, pods, stored evidence, stored remedies) → what changed: the pipeline's view of the
healed cluster, compared with what the incident recorded while it was open."""


@dataclass(frozen=True, slots=True)
class Pass:
    """One analysis pass: what :func:`apply_pass` takes, as a value (see :func:`apply_passes`)."""

    findings: Sequence[Finding]
    now: datetime
    evaluated: Collection[ObjectRef] | _EverySubject = ()
    triggers: Sequence[Trigger] = ()
    waiting: Mapping[str, str] = field(default_factory=dict)  # fingerprint → why it waits ("scale-up")
    explain_resolution: ExplainResolution | None = None


@dataclass(slots=True)
class _Batch:
    """What the passes of one transaction share: the cluster's open incidents in memory,
    the fresh event keys, and the timeline and outbox rows to insert at the end."""

    session: AsyncSession
    cluster: str
    sinks: tuple[str, ...]
    open_by_fp: dict[str, Incident]
    latest_resolved: dict[str, int]
    fresh_keys: set[str]
    policy: NotifyPolicy = field(default_factory=NotifyPolicy)
    silences: list[Silence] = field(default_factory=list)
    recent_opens: list[datetime] = field(default_factory=list)  # first_seen of new incidents (storm window)
    entries: list[dict[str, Any]] = field(default_factory=list)
    outbox: list[dict[str, Any]] = field(default_factory=list)
    fps_by_subject: dict[ObjectRef, set[str]] = field(default_factory=lambda: defaultdict(set))

    def __post_init__(self) -> None:
        for inc in self.open_by_fp.values():
            self.fps_by_subject[_ref(inc)].add(inc.fingerprint)

    def remember(self, inc: Incident) -> None:
        self.open_by_fp[inc.fingerprint] = inc
        self.fps_by_subject[_ref(inc)].add(inc.fingerprint)

    def forget(self, inc: Incident) -> None:
        del self.open_by_fp[inc.fingerprint]
        self.fps_by_subject[_ref(inc)].discard(inc.fingerprint)

    def notify(
        self,
        result: TrackResult,
        incident_id: int,
        event: NotificationEvent,
        payload: dict[str, Any],
        now: datetime,
        silenced_by: Silence | None,
    ) -> None:
        """One outbox row per sink: ``pending``, or ``silenced`` with the silence as the reason."""
        for sink in self.sinks:
            self.outbox.append(
                {
                    "incident_id": incident_id,
                    "sink": sink,
                    "event": str(event),
                    "payload": payload,
                    "status": str(NotificationStatus.SILENCED if silenced_by else NotificationStatus.PENDING),
                    "attempts": 0,
                    "created_at": now,
                    "next_attempt_at": now,
                    "last_error": silenced_note(silenced_by) if silenced_by else None,
                    "sent_at": None,
                    "thread_ref": None,
                }
            )
            result.notifications += 1
            result.silenced += silenced_by is not None


def _describe_update(inc: Incident, what: Sequence[str], previous: Mapping[str, Any]) -> list[str]:
    """An ``updated`` notification's ``changed``: one line per change a human acts on."""
    lines: list[str] = []
    for name in what:
        if name == "severity":
            lines.append(f"severity {previous.get('severity')} → {inc.severity}")
        elif name == "remedy":
            lines.append(f"new first remedy: {(inc.remedies or [{}])[0].get('title', '')}")
        elif name == "pods":
            lines.append(f"affected pods {previous.get('pods')} → {len(inc.pods or ())}")
    return lines


def _remedy_key(raw: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(raw.get("title", "")), str(raw.get("yaml", "")), str(raw.get("command", "")))


def _new_first_remedy(stored: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> bool:
    """A first remedy that was not offered before (a remedy that merely moved up because the one
    above it was applied, or stopped applying, is nothing new to act on)."""
    return bool(new) and _remedy_key(new[0]) not in {_remedy_key(r) for r in stored}


def _validate(cluster: str, p: Pass) -> None:
    if not cluster:
        raise ValueError("cluster must be a non-empty name")
    if p.now.tzinfo is None or p.now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    for t in p.triggers:
        if not t.key:
            raise ValueError("a Trigger needs a non-empty key (event uid:count)")
    for fp, reason in p.waiting.items():
        if not isinstance(reason, str) or not 0 < len(reason) <= WAITING_REASON_MAX:
            raise ValueError(
                f"waiting reason for {fp!r} must be a non-empty string of at most {WAITING_REASON_MAX} characters"
            )


async def _apply_one(batch: _Batch, p: Pass) -> TrackResult:
    """One pass over the in-memory state; new incidents are flushed to get their ids."""
    session, cluster, now = batch.session, batch.cluster, p.now
    result = TrackResult()
    by_fp = _merge_duplicates(p.findings)
    every = isinstance(p.evaluated, _EverySubject)
    subjects: set[ObjectRef] = set() if isinstance(p.evaluated, _EverySubject) else set(p.evaluated)

    unique = list({t.key: t for t in reversed(p.triggers)}.values())[::-1]  # first of each key, in order
    fresh = [t for t in unique if t.key in batch.fresh_keys]
    batch.fresh_keys.difference_update(t.key for t in fresh)  # a key counts once per batch
    result.new_triggers, result.replayed_triggers = len(fresh), len(unique) - len(fresh)
    pass_message = fresh[-1].message if fresh else (p.triggers[-1].message if p.triggers else "")

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
    continuing = {fp: batch.open_by_fp[fp] for fp in by_fp if fp in batch.open_by_fp}

    # Open what is new. Recurrences link to the latest resolved incident of their fingerprint.
    opened: list[Incident] = []
    for fp in by_fp:
        if fp in continuing:
            continue
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
            previous_id=batch.latest_resolved.get(fp),
            waiting_for=p.waiting.get(fp),
            waiting_since=now if fp in p.waiting else None,
            notified_at=None if fp in p.waiting else now,
            peak_pods=len(f.pods),
        )
        session.add(inc)
        opened.append(inc)
    if opened:
        await session.flush()  # ids for the timeline, the outbox and later passes
    for inc in opened:
        recurrence = {"previous_id": inc.previous_id} if inc.previous_id is not None else {}
        batch.entries.append(_entry(inc, TimelineKind.OPENED, now, inc.last_message, **recurrence))
        result.opened.append(inc.id)
        if inc.waiting_for is not None:
            batch.entries.append(
                _entry(inc, TimelineKind.WAITING, now, inc.last_message, **{"for": inc.waiting_for})
            )
            result.waiting.append(inc.id)

    # Update what continues; a waiting incident either waits on or escalates (never the other way).
    escalated: list[tuple[Incident, dict[str, Any]]] = []
    updates: list[tuple[Incident, list[str], dict[str, Any]]] = []  # (incident, what changed, from what)
    for fp, inc in continuing.items():
        ob = observed[fp]
        f = ob.finding
        told = inc.notified_at is not None  # somebody has seen its diagnosis
        escalating = False
        if inc.waiting_for is not None:
            reason = p.waiting.get(fp)
            if reason is None:
                waited = {"for": inc.waiting_for, "since": rfc3339(inc.waiting_since)}
                batch.entries.append(
                    _entry(inc, TimelineKind.ESCALATED, now, ob.message or pass_message, **waited)
                )
                inc.waiting_for, inc.waiting_since = None, None
                inc.notified_at = now
                escalated.append((inc, waited))
                result.escalated.append(inc.id)
                # A waiting incident was never told (notified_at None), so ``told`` is False already.
                escalating = True  # pragma: no mutate
            else:
                if reason != inc.waiting_for:
                    batch.entries.append(
                        _entry(
                            inc,
                            TimelineKind.WAITING,
                            now,
                            ob.message,
                            **{"for": reason, "was": inc.waiting_for},
                        )
                    )
                    inc.waiting_for = reason
                result.waiting.append(inc.id)
        severity = str(f.severity)
        actionable: list[str] = []
        previous: dict[str, Any] = {}
        if severity != inc.severity:
            actionable.append("severity")
            previous["severity"] = inc.severity
            batch.entries.append(
                _entry(
                    inc,
                    TimelineKind.SEVERITY_CHANGED,
                    now,
                    ob.message,
                    **{"from": inc.severity, "to": severity},
                )
            )
            inc.severity = severity
        if _new_first_remedy(inc.remedies or (), ob.remedies):
            actionable.append("remedy")
            previous["remedy"] = (inc.remedies or [{}])[0].get("title")
        peak = max(inc.peak_pods or 0, len(inc.pods or ()))
        if any(peak < t <= len(f.pods) for t in batch.policy.pod_thresholds):
            actionable.append("pods")
            previous["pods"] = peak
        inc.peak_pods = max(peak, len(f.pods))
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
        # The stored diagnosis is what people were told: it is replaced only by a change they act
        # on (or while nobody was told yet), and never by a re-analysis of a cluster that is
        # healing: once something the incident recorded changed the way a remedy said (a node
        # uncordoned, a strategy or a budget changed), it is kept until the incident resolves.
        healing: tuple[str, ...] = ()
        if actionable and told and p.explain_resolution is not None:
            healing = p.explain_resolution(
                _ref(inc), tuple(inc.pods or ()), dict(inc.evidence or {}), list(inc.remedies or ())
            ).causes
            if healing:
                actionable = []
        replace = bool(actionable) or not told
        if changed:
            what: dict[str, Any] = {"changed": changed}
            if actionable:
                what["actionable"] = actionable
            if healing:
                what["healing"] = list(healing)
            if not replace:
                what["kept"] = [c for c in changed if c != "message"]
            batch.entries.append(_entry(inc, TimelineKind.UPDATED, now, ob.message, **what))
            if replace:
                inc.title, inc.explanation = f.title, f.explanation
                if "evidence" in changed:
                    inc.evidence = ob.evidence
                if "remedies" in changed:
                    inc.remedies = ob.remedies
            if ob.message:
                inc.last_message = ob.message
        if actionable and told and not escalating and inc.waiting_for is None:
            inc.notified_at = now
            updates.append((inc, actionable, previous))
            result.announced_updates.append(inc.id)
        if list(f.pods) != list(inc.pods or ()):
            inc.pods = list(f.pods)
        # ">=" would assign the same value.
        if now > inc.last_seen:  # pragma: no mutate
            inc.last_seen = now
        if ob.occurrences:
            inc.occurrences += ob.occurrences
        result.updated.append(inc.id)

    # Resolve what an evaluated subject no longer shows.
    resolved: list[Incident] = []
    if every:
        candidates = list(batch.open_by_fp.values())
    else:
        candidates = [batch.open_by_fp[fp] for ref in subjects for fp in batch.fps_by_subject.get(ref, ())]
    for inc in sorted(candidates, key=lambda i: i.id):
        fp = inc.fingerprint
        if fp in by_fp:
            continue
        inc.status = str(IncidentStatus.RESOLVED)
        inc.resolved_at = max(now, inc.last_seen)
        resolved.append(inc)
        result.resolved.append(inc.id)
        batch.forget(inc)
        batch.latest_resolved[fp] = inc.id
    for inc in opened:
        batch.remember(inc)

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
    new_by_id = {i.id: i for i in opened}
    for inc in resolved:
        detail: dict[str, Any] = {}
        if inc.id in replaced_by:
            detail = {"reason": "root_cause_changed", "replaced_by": replaced_by[inc.id]}
            successors = [new_by_id[i] for i in replaced_by[inc.id]]
            inc.resolution = {
                "summary": "The root cause changed: " + "; ".join(s.title for s in successors),
                "changes": [f"replaced by incident {s.id} ({s.rule_id})" for s in successors],
            }
        elif p.explain_resolution is not None:
            r = p.explain_resolution(
                _ref(inc), tuple(inc.pods or ()), dict(inc.evidence or {}), list(inc.remedies or ())
            )
            inc.resolution = {"summary": r.summary, "changes": list(r.changes)}
        else:
            inc.resolution = {
                "summary": "The analysis no longer finds this problem"
                + (f" (last event: {pass_message})" if pass_message else "."),
                "changes": [],
            }
        if inc.waiting_for is not None:
            detail["waiting_for"] = inc.waiting_for
        batch.entries.append(_entry(inc, TimelineKind.RESOLVED, now, pass_message, **detail))
    for inc in opened:
        olds = replaces.get(inc.id)
        if olds:
            batch.entries.append(
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

    # The outbox (module docstring, *Notifications*): one row per sink, only about what somebody
    # was or is now paged for (a waiting incident is not paged), silenced rows kept visible.
    if batch.sinks:
        policy = batch.policy
        events: list[tuple[Incident, NotificationEvent, dict[str, Any]]] = []
        announced_replacement: set[int] = set()  # resolved incidents a root-cause notification covers
        fresh_opened: list[Incident] = []
        for inc in opened:
            if inc.waiting_for is not None:
                continue
            olds = replaces.get(inc.id, [])
            if any(o.waiting_for is None for o in olds):
                extra = {"replaces": [incident_dict(o) for o in olds]}
                events.append((inc, NotificationEvent.ROOT_CAUSE_CHANGED, extra))
                announced_replacement.update(o.id for o in olds)
            else:
                fresh_opened.append(inc)
        # Storm protection: more than storm_threshold new incidents in the window → one digest.
        new_count = sum(1 for inc in opened if inc.waiting_for is None)
        window_start = now - policy.storm_window
        batch.recent_opens = [t for t in batch.recent_opens if t > window_start]
        storm = len(batch.recent_opens) + new_count > policy.storm_threshold
        batch.recent_opens.extend([now] * new_count)
        digest: list[Incident] = []
        for inc in fresh_opened:
            if storm and silencing(batch.silences, inc, now) is None:
                digest.append(inc)
            else:
                events.append((inc, NotificationEvent.OPENED, {}))
        for inc, waited in escalated:
            events.append((inc, NotificationEvent.ESCALATED, {"waited": waited}))
        for inc, changes, previous in updates:
            update = {"changed": _describe_update(inc, changes, previous), "previous": previous}
            events.append((inc, NotificationEvent.UPDATED, update))
        for inc in resolved:
            if inc.waiting_for is None and inc.id not in announced_replacement:
                events.append((inc, NotificationEvent.RESOLVED, {}))
        for inc, ev, extra in events:
            payload = {"event": str(ev), "cluster": cluster, "incident": incident_dict(inc), **extra}
            batch.notify(result, inc.id, ev, payload, now, silencing(batch.silences, inc, now))
        if digest:
            payload = {
                "event": str(NotificationEvent.DIGEST),
                "cluster": cluster,
                "incidents": [incident_dict(i) for i in digest],
            }
            batch.notify(result, digest[0].id, NotificationEvent.DIGEST, payload, now, None)
            result.digested.extend(i.id for i in digest)
    return result


async def apply_passes(
    session: AsyncSession,
    *,
    cluster: str,
    passes: Sequence[Pass],
    sinks: Sequence[str] = (),
    policy: NotifyPolicy | None = None,
) -> list[TrackResult]:
    """Several passes of one cluster, in order, in the caller's transaction: the same outcome
    as applying them one by one, with a handful of statements for the whole batch.

    For a pipeline that coalesces a burst of events (say, every 100 ms) into
    one transaction: event keys are recorded in one statement, the open
    incidents of every subject involved are read (and locked) in one query,
    each pass is applied in memory (a new incident costs a flush, for its id),
    then the incident updates, timeline and outbox rows are written at once.
    A trigger key repeated across the passes counts once."""
    if not passes:
        return []
    for p in passes:
        _validate(cluster, p)
    await _lock_cluster(session, cluster)
    keys = list(dict.fromkeys(t.key for p in passes for t in p.triggers))
    fresh_keys = await _record_triggers(session, cluster, keys, min(p.now for p in passes))
    if any(isinstance(p.evaluated, _EverySubject) for p in passes):
        names: set[str] | None = None
    else:
        names = set()
        for p in passes:
            names.update(f.subject.name for f in p.findings)
            if not isinstance(p.evaluated, _EverySubject):
                names.update(r.name for r in p.evaluated)
    open_by_fp = await _load_open(session, cluster, names)
    candidates = sorted({f.fingerprint for p in passes for f in p.findings} - open_by_fp.keys())
    latest = await _latest_resolved(session, cluster, candidates) if candidates else {}
    batch = _Batch(
        session,
        cluster,
        tuple(dict.fromkeys(sinks)),
        open_by_fp,
        latest,
        fresh_keys,
        policy or NotifyPolicy(),
    )
    if batch.sinks:
        first = min(p.now for p in passes)
        batch.silences = await active_silences(session, now=first, cluster=cluster)
        batch.recent_opens = await _recent_opens(session, cluster, first - batch.policy.storm_window)
    results = [await _apply_one(batch, p) for p in passes]
    await session.flush()  # incident updates
    if batch.entries:
        await session.execute(insert(TimelineEntry), batch.entries)
    if batch.outbox:
        await session.execute(insert(Notification), batch.outbox)
    return results


async def apply_pass(
    session: AsyncSession,
    *,
    cluster: str,
    findings: Iterable[Finding],
    now: datetime,
    evaluated: Iterable[ObjectRef] | _EverySubject = (),
    triggers: Sequence[Trigger] = (),
    waiting: Mapping[str, str] | None = None,
    sinks: Sequence[str] = (),
    policy: NotifyPolicy | None = None,
    explain_resolution: ExplainResolution | None = None,
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
    :param waiting: fingerprint → why the finding waits instead of paging
        (``"scale-up"``); see *Waiting* in the module's documentation.
    :param sinks: notification sink names; one outbox row per sink for each
        notification owed (module documentation, *Notifications*).
    :param policy: storm, reminder and pod-count thresholds (default :class:`NotifyPolicy`).
    :param explain_resolution: what changed, for each incident the pass resolves.
    """
    p = Pass(
        findings=list(findings),
        now=now,
        evaluated=evaluated if isinstance(evaluated, _EverySubject) else tuple(evaluated),
        triggers=tuple(triggers),
        waiting=dict(waiting or {}),
        explain_resolution=explain_resolution,
    )
    [result] = await apply_passes(session, cluster=cluster, passes=[p], sinks=sinks, policy=policy)
    return result


async def track_passes(
    sessions: async_sessionmaker[AsyncSession],
    *,
    cluster: str,
    passes: Sequence[Pass],
    sinks: Sequence[str] = (),
    attempts: int = 3,
    policy: NotifyPolicy | None = None,
) -> list[TrackResult]:
    """:func:`apply_passes` in a transaction of its own, committed.

    Passes of one cluster are expected to run one at a time (the pipeline is
    partitioned by cluster); on PostgreSQL concurrent writers of one cluster
    queue on an advisory lock. Should a race still open the same fingerprint
    twice, the unique index on open incidents rejects one, which is retried."""
    for attempt in range(1, attempts + 1):
        try:
            async with sessions.begin() as session:
                return await apply_passes(session, cluster=cluster, passes=passes, sinks=sinks, policy=policy)
        except IntegrityError:
            if attempt == attempts:
                raise
            log.info("incident pass raced another writer; retrying", extra={"cluster": cluster})
    raise AssertionError("unreachable")  # pragma: no cover


async def track(
    sessions: async_sessionmaker[AsyncSession],
    *,
    cluster: str,
    findings: Iterable[Finding],
    now: datetime,
    evaluated: Iterable[ObjectRef] | _EverySubject = (),
    triggers: Sequence[Trigger] = (),
    waiting: Mapping[str, str] | None = None,
    sinks: Sequence[str] = (),
    attempts: int = 3,
    policy: NotifyPolicy | None = None,
    explain_resolution: ExplainResolution | None = None,
) -> TrackResult:
    """:func:`apply_pass` in a transaction of its own, committed (retried on a race, see
    :func:`track_passes`)."""
    p = Pass(
        findings=list(findings),
        now=now,
        evaluated=evaluated if isinstance(evaluated, _EverySubject) else tuple(evaluated),
        triggers=tuple(triggers),
        waiting=dict(waiting or {}),
        explain_resolution=explain_resolution,
    )
    [result] = await track_passes(
        sessions, cluster=cluster, passes=[p], sinks=sinks, attempts=attempts, policy=policy
    )
    return result


async def _recent_opens(session: AsyncSession, cluster: str, since: datetime) -> list[datetime]:
    """When the cluster's incidents opened after ``since`` (not waiting ones): the storm window's count."""
    rows = await session.execute(
        select(Incident.first_seen).where(
            Incident.cluster == cluster,
            # An open at exactly ``since`` is dropped again by the window filter of _apply_one.
            Incident.first_seen > since,  # pragma: no mutate
            Incident.waiting_for.is_(None),
        )
    )
    return sorted(rows.scalars())


async def remind(
    session: AsyncSession,
    *,
    cluster: str,
    now: datetime,
    sinks: Sequence[str] = (),
    policy: NotifyPolicy | None = None,
    limit: int = 500,
) -> list[int]:
    """A ``reminder`` for each open incident of ``cluster`` nobody was told about for
    ``policy.reminder_interval`` (the clock restarts at each notification); returns their ids.

    Waiting incidents (never paged) get none. In the caller's transaction; call it
    periodically (the pipeline does, every minute)."""
    policy = policy or NotifyPolicy()
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    await _lock_cluster(session, cluster)
    rows = await session.execute(
        select(Incident)
        .where(
            Incident.cluster == cluster,
            _IS_OPEN,
            Incident.waiting_for.is_(None),
            Incident.notified_at <= now - policy.reminder_interval,
        )
        .order_by(Incident.notified_at, Incident.id)
        .limit(limit)
    )
    due = list(rows.scalars())
    if not due:
        return []
    batch = _Batch(session, cluster, tuple(dict.fromkeys(sinks)), {}, {}, set(), policy)
    if batch.sinks:
        batch.silences = await active_silences(session, now=now, cluster=cluster)
    result = TrackResult()
    for inc in due:
        since = inc.notified_at
        inc.notified_at = now
        payload = {
            "event": str(NotificationEvent.REMINDER),
            "cluster": cluster,
            "incident": incident_dict(inc),
            "last_notified": rfc3339(since),
        }
        batch.notify(
            result, inc.id, NotificationEvent.REMINDER, payload, now, silencing(batch.silences, inc, now)
        )
    await session.flush()
    if batch.outbox:
        await session.execute(insert(Notification), batch.outbox)
    return [inc.id for inc in due]


async def track_reminders(
    sessions: async_sessionmaker[AsyncSession],
    *,
    cluster: str,
    now: datetime,
    sinks: Sequence[str] = (),
    policy: NotifyPolicy | None = None,
) -> list[int]:
    """:func:`remind` in a transaction of its own, committed."""
    async with sessions.begin() as session:
        return await remind(session, cluster=cluster, now=now, sinks=sinks, policy=policy)


async def prune_applied_events(session: AsyncSession, *, before: datetime) -> int:
    """Forget idempotency keys applied before ``before`` (Kubernetes keeps events ~1 h)."""
    res = await session.execute(delete(AppliedEvent).where(AppliedEvent.applied_at < before))
    return int(getattr(res, "rowcount", 0) or 0)
