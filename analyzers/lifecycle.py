"""The incident lifecycle as a pure decision: open incidents, findings, triggers, the clock
and the policy in; transitions, timeline entries and notifications out, as values.

:func:`decide` is what ``storage.tracker`` used to do inside its SQLAlchemy
session, without the session: it reads no clock and no database and mutates
none of its inputs. The tracker loads the open incidents of the subjects a
batch concerns, calls :func:`decide`, and writes what comes back (multi-row
inserts and updates, one transaction per batch). The rules (see
``storage/tracker.py``'s module documentation for the whole story):

* **open** a finding whose fingerprint has no open incident (linked to the
  latest resolved one of that fingerprint: a recurrence), **update** one that
  has (timeline rows for changes, never for repetitions), **resolve** an open
  incident of an evaluated subject whose fingerprint the pass did not find;
  a subject that lost causes and gained others in one pass **changed root
  cause**.
* **wait** instead of paging while an autoscaler adds capacity, **escalate**
  when the finding stays but the wait ends; never wait after paging.
* **notify** on open, escalate, root-cause change, actionable update and
  resolve, only about what somebody was (or is now) paged for; a storm of new
  incidents becomes one digest.

New incidents take their ids from ``ids`` in order (the writer reserves them:
:func:`ids_needed` says how many), so every timeline
entry and notification is complete when :func:`decide` returns.
"""

from __future__ import annotations

import enum
import operator
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

import orjson

from analyzers.findings import Finding, ObjectRef, Severity

if TYPE_CHECKING:  # analyzers.resolution imports the snapshot, which imports ingest, which imports this
    from analyzers.resolution import Resolution


class IncidentStatus(enum.StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


class TimelineKind(enum.StrEnum):
    OPENED = "opened"
    UPDATED = "updated"
    ROOT_CAUSE_CHANGED = "root_cause_changed"
    SEVERITY_CHANGED = "severity_changed"
    WAITING = "waiting"  # an autoscaler is adding the capacity it needs: nobody is paged
    ESCALATED = "escalated"  # the wait ended with the problem still there: paged now
    RESOLVED = "resolved"


class NotificationEvent(enum.StrEnum):
    """Why a notification is owed: never once per Kubernetes event."""

    OPENED = "opened"  # a new incident somebody should act on (after the grace period, not waiting)
    UPDATED = "updated"  # something a human acts on changed: severity, a new first remedy, pod count
    ROOT_CAUSE_CHANGED = "root_cause_changed"
    ESCALATED = "escalated"  # it waited for a scale-up that failed or took too long
    RESOLVED = "resolved"
    REMINDER = "reminder"  # still open after the re-notify interval
    DIGEST = "digest"  # a storm of new incidents in one cluster: one message listing them


def rfc3339(value: datetime | None) -> str | None:
    """``2024-05-01T12:00:00Z`` (fractional seconds only when present)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class _EverySubject:
    __slots__ = ()

    def __repr__(self) -> str:
        return "EVERY_SUBJECT"


EVERY_SUBJECT: Final = _EverySubject()
"""``evaluated=EVERY_SUBJECT``: the pass looked at the whole cluster."""

EverySubject = _EverySubject


@dataclass(frozen=True, slots=True)
class Trigger:
    """A Kubernetes event that triggered the pass.

    ``key`` identifies this firing of the event (uid + count), ``message`` is
    what it said (kept as the incident's last scheduler message and in the
    timeline), ``pod`` (``namespace/name``, optional) the pod it is about.
    ``analyzers.ingest.trigger_from_event`` builds one from an Event object."""

    key: str
    message: str = ""
    pod: str = ""


WAITING_REASON_MAX: Final = 32  # the width of incidents.waiting_for

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
    [ObjectRef, Sequence[str], Mapping[str, Any], Sequence[Mapping[str, Any]]], "Resolution"
]
"""(subject, pods, stored evidence, stored remedies) → what changed: the pipeline's view of the
healed cluster, compared with what the incident recorded while it was open."""


@dataclass(frozen=True, slots=True)
class Pass:
    """One analysis pass, as a value."""

    findings: Sequence[Finding]
    now: datetime
    evaluated: Collection[ObjectRef] | _EverySubject = ()
    triggers: Sequence[Trigger] = ()
    waiting: Mapping[str, str] = field(default_factory=dict)  # fingerprint → why it waits ("scale-up")
    explain_resolution: ExplainResolution | None = None


@dataclass(slots=True)
class IncidentState:
    """An incident's stored fields (the ``incidents`` row), as :func:`decide` reads and returns them.

    :func:`decide` never changes an ``IncidentState`` it was given: it works on copies."""

    id: int
    cluster: str
    fingerprint: str
    rule_id: str
    cause: str
    severity: str
    status: str
    subject_kind: str
    namespace: str
    subject_name: str
    title: str
    explanation: str
    evidence: dict[str, Any]
    remedies: list[dict[str, Any]]
    pods: list[str]
    first_seen: datetime
    last_seen: datetime
    resolved_at: datetime | None = None
    occurrences: int = 1
    last_message: str = ""
    previous_id: int | None = None
    waiting_for: str | None = None
    waiting_since: datetime | None = None
    resolution: dict[str, Any] | None = None
    notified_at: datetime | None = None
    peak_pods: int | None = None
    # Not stored: the finding this incident's diagnosis was last derived from (its severity,
    # title, explanation, evidence, remedies and pods are exactly that finding's, normalised),
    # or None when unknown (read from the database) or no longer true (a diagnosis kept). A
    # pass whose finding equals it takes the fast path of ``_Lifecycle.apply``.
    source: Finding | None = field(default=None, compare=False, repr=False)

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.subject_kind, self.namespace, self.subject_name)

    def copy(self) -> IncidentState:
        """A shallow copy (the decision replaces evidence, remedies and pods, never edits them)."""
        return IncidentState(*_incident_fields(self))


_incident_id: Final = operator.attrgetter("id")
_subject_key: Final = operator.attrgetter("subject_kind", "namespace", "subject_name")
"""An incident's subject as ``(kind, namespace, name)``."""

_INCIDENT_FIELDS: Final = tuple(IncidentState.__slots__)
_incident_fields: Final = operator.attrgetter(*_INCIDENT_FIELDS)  # every field, in __init__'s order


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
    notifications: int = 0  # outbox rows written (silenced ones included): counted by the writer
    silenced: int = 0  # of those, rows stored ``silenced``: counted by the writer


@dataclass(frozen=True, slots=True)
class TimelineRecord:
    """One row of an incident's timeline."""

    incident_id: int
    at: datetime
    kind: TimelineKind
    message: str
    detail: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Notice:
    """A notification owed, for every sink: the incident as it stood at the end of its pass.

    ``replaces`` (root-cause changes) and ``digest`` (a storm's incidents) hold the other
    incidents it is about; ``detail`` the event's own keys (``waited``, ``changed``/``previous``).
    ``silenced_by`` is what the ``silence_of`` argument of :func:`decide` returned for it."""

    pass_index: int
    incident: IncidentState
    event: NotificationEvent
    at: datetime
    detail: Mapping[str, Any] = field(default_factory=dict)
    replaces: tuple[IncidentState, ...] = ()
    digest: tuple[IncidentState, ...] = ()
    silenced_by: object | None = None


@dataclass(slots=True)
class Decision:
    """What a batch of passes decided. ``created``: incidents opened (final state, by id, in
    opening order); ``changed``: incidents that existed before the batch and changed (final
    state, by id); ``results``: one per pass; ``timeline`` and ``notices`` in order."""

    results: list[TrackResult] = field(default_factory=list)
    created: dict[int, IncidentState] = field(default_factory=dict)
    changed: dict[int, IncidentState] = field(default_factory=dict)
    timeline: list[TimelineRecord] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    recent_opens: list[datetime] = field(default_factory=list)


def validate(cluster: str, p: Pass) -> None:
    """Refuse a pass the lifecycle cannot decide about (one clear ``ValueError``)."""
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


def subject_names(passes: Sequence[Pass]) -> set[str] | None:
    """The subject names whose open incidents the passes can touch (None: every one)."""
    names: set[str] = set()
    for p in passes:
        if isinstance(p.evaluated, _EverySubject):
            return None
        names.update(f.subject.name for f in p.findings)
        names.update(r.name for r in p.evaluated)
    return names


def ids_needed(passes: Sequence[Pass], open_incidents: Iterable[IncidentState]) -> int:
    """Exactly how many incidents :func:`decide` will open for these passes (the ids the writer
    reserves): the open/resolve bookkeeping of fingerprints alone, without the rest."""
    # Subjects as (kind, namespace, name) tuples: cheaper to build and hash than ObjectRefs.
    subject_of: dict[str, tuple[str, str, str]] = {}
    by_subject: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for inc in open_incidents:
        key = (inc.subject_kind, inc.namespace, inc.subject_name)
        subject_of[inc.fingerprint] = key
        by_subject[key].add(inc.fingerprint)
    count = 0
    for p in passes:
        found = {f.fingerprint: f.subject for f in p.findings}
        new = [(fp, (r.kind, r.namespace, r.name)) for fp, r in found.items() if fp not in subject_of]
        count += len(new)
        if isinstance(p.evaluated, _EverySubject):
            candidates = list(subject_of)
        else:
            refs = {(r.kind, r.namespace, r.name) for r in p.evaluated}
            candidates = [fp for key in refs for fp in by_subject.get(key, ())]
        for fp in candidates:
            if fp not in found:
                by_subject[subject_of.pop(fp)].discard(fp)
        for fp, key in new:
            subject_of[fp] = key
            by_subject[key].add(fp)
    return count


def jsonable(value: Any) -> Any:
    """Evidence as it will read back from the database (dataclasses, tuples, enums flattened)."""
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str))


def merge_duplicates(findings: Iterable[Finding]) -> dict[str, Finding]:
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


def _concerning(finding: Finding, triggers: Sequence[Trigger]) -> list[Trigger]:
    if not finding.pods:
        return list(triggers)
    pods = set(finding.pods)
    return [t for t in triggers if not t.pod or t.pod in pods]


def _remedy_key(raw: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(raw.get("title", "")), str(raw.get("yaml", "")), str(raw.get("command", "")))


def _new_first_remedy(stored: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> bool:
    """A first remedy that was not offered before (a remedy that merely moved up because the one
    above it was applied, or stopped applying, is nothing new to act on)."""
    if not new or (stored and stored[0] == new[0]):  # the usual repeat: the same first remedy
        return False
    return _remedy_key(new[0]) not in {_remedy_key(r) for r in stored}


def _describe_update(inc: IncidentState, what: Sequence[str], previous: Mapping[str, Any]) -> list[str]:
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


@dataclass(slots=True)
class _Observed:
    finding: Finding
    evidence: dict[str, Any]
    remedies: list[dict[str, Any]]
    occurrences: int  # new triggers concerning it
    message: str  # the latest such trigger's message, "" if none


def _repeats(inc: IncidentState, f: Finding, waiting: Mapping[str, str]) -> bool:
    """Whether ``f`` is the finding ``inc``'s diagnosis came from (the same object, or an equal
    one) and its wait, if any, goes on for the same reason: the fast path decides it."""
    source = inc.source
    if source is None or (source is not f and source != f):
        return False
    return inc.waiting_for is None or waiting.get(inc.fingerprint) == inc.waiting_for


def _no_silence(_incident: IncidentState, _now: datetime) -> object | None:
    return None


class _Lifecycle:
    """The state one :func:`decide` call carries from pass to pass (private copies only)."""

    def __init__(
        self,
        cluster: str,
        open_incidents: Iterable[IncidentState],
        latest_resolved: Mapping[str, int],
        fresh_keys: Collection[str],
        recent_opens: Sequence[datetime],
        policy: NotifyPolicy,
        ids: Sequence[int],
        notify: bool,
        silence_of: Callable[[IncidentState, datetime], object | None],
        fast_path: bool = True,
    ) -> None:
        self.cluster = cluster
        self.fast_path = fast_path
        self.open_by_fp: dict[str, IncidentState] = {}
        # By subject as (kind, namespace, name): hashed and compared in C, unlike an ObjectRef.
        self.fps_by_subject: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        self.copied: set[int] = set()  # ids of given incidents already copied
        for inc in open_incidents:
            self.open_by_fp[inc.fingerprint] = inc
            self.fps_by_subject[_subject_key(inc)].add(inc.fingerprint)
        self.latest_resolved = dict(latest_resolved)
        self.fresh_keys = fresh_keys if isinstance(fresh_keys, (set, frozenset)) else set(fresh_keys)
        self.counted_keys: set[str] = set()  # fresh keys a pass of this batch counted already
        self.recent_opens = list(recent_opens)
        self.policy = policy
        self.ids = iter(ids)
        self.notify = notify
        self.silence_of = silence_of
        self.out = Decision()

    def own(self, inc: IncidentState) -> IncidentState:
        """The decision's own copy of an incident it was given (so the input stays as it was)."""
        if inc.id in self.out.created or inc.id in self.copied:
            return inc
        mine = inc.copy()
        self.copied.add(inc.id)
        self.out.changed[inc.id] = mine
        self.open_by_fp[inc.fingerprint] = mine
        return mine

    def remember(self, inc: IncidentState) -> None:
        self.open_by_fp[inc.fingerprint] = inc
        self.fps_by_subject[_subject_key(inc)].add(inc.fingerprint)

    def forget(self, inc: IncidentState) -> None:
        del self.open_by_fp[inc.fingerprint]
        self.fps_by_subject[_subject_key(inc)].discard(inc.fingerprint)

    def entry(
        self, inc: IncidentState, kind: TimelineKind, at: datetime, message: str, **detail: Any
    ) -> None:
        self.out.timeline.append(TimelineRecord(inc.id, at, kind, message, detail))

    def next_id(self) -> int:
        try:
            return next(self.ids)
        except StopIteration:
            raise ValueError(
                "decide: fewer ids than new incidents (reserve ids_needed(...) of them)"
            ) from None

    def repeat(
        self, inc: IncidentState, f: Finding, now: datetime, fresh: Sequence[Trigger], result: TrackResult
    ) -> None:
        """The fast path: what the update below does to an incident whose finding is the one its
        diagnosis came from and whose wait (if any) goes on, without normalising the finding or
        comparing the diagnosis again. Only the occurrences, ``last_seen`` and the scheduler's
        message can move (``tests/core/test_lifecycle.py`` checks it decides as the slow path)."""
        if fresh:
            concerning = _concerning(f, fresh)
            if concerning:
                message = concerning[-1].message
                if message and message != inc.last_message:
                    # The slow path's "updated" entry when only the message changed.
                    told = inc.notified_at is not None
                    what: dict[str, Any] = (
                        {"changed": ["message"], "kept": []} if told else {"changed": ["message"]}
                    )
                    self.entry(inc, TimelineKind.UPDATED, now, message, **what)
                    inc.last_message = message
                inc.occurrences += len(concerning)
        if inc.waiting_for is not None:
            result.waiting.append(inc.id)
        # peak_pods needs nothing: the finding's pods are the incident's, at most its peak.
        # ">=" would assign the same value.
        if now > inc.last_seen:  # pragma: no mutate
            inc.last_seen = now
        result.updated.append(inc.id)

    def apply(self, index: int, p: Pass) -> TrackResult:
        cluster, now = self.cluster, p.now
        result = TrackResult()
        by_fp = merge_duplicates(p.findings)
        every = isinstance(p.evaluated, _EverySubject)
        subjects = (
            set()
            if isinstance(p.evaluated, _EverySubject)
            else {(r.kind, r.namespace, r.name) for r in p.evaluated}
        )

        # The first trigger of each key, in order.
        unique = (
            list({t.key: t for t in reversed(p.triggers)}.values())[::-1]
            if len(p.triggers) > 1
            else p.triggers
        )
        fresh = [t for t in unique if t.key in self.fresh_keys and t.key not in self.counted_keys]
        self.counted_keys.update(t.key for t in fresh)  # a key counts once per batch
        result.new_triggers, result.replayed_triggers = len(fresh), len(unique) - len(fresh)
        pass_message = fresh[-1].message if fresh else (p.triggers[-1].message if p.triggers else "")

        continuing = {fp: self.own(self.open_by_fp[fp]) for fp in by_fp if fp in self.open_by_fp}
        observed: dict[str, _Observed] = {}  # every finding but the repeats the fast path takes
        for fp, f in by_fp.items():
            inc_or_none = continuing.get(fp)
            if inc_or_none is not None and self.fast_path and _repeats(inc_or_none, f, p.waiting):
                continue
            concerning = _concerning(f, fresh)
            observed[fp] = _Observed(
                finding=f,
                evidence=jsonable(dict(f.evidence)),
                remedies=jsonable([r.as_dict() for r in f.remedies]),
                occurrences=len(concerning),
                message=concerning[-1].message if concerning else "",
            )

        # Open what is new. Recurrences link to the latest resolved incident of their fingerprint.
        opened: list[IncidentState] = []
        for fp in by_fp:
            if fp in continuing:
                continue
            ob = observed[fp]
            f = ob.finding
            inc = IncidentState(
                id=self.next_id(),
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
                previous_id=self.latest_resolved.get(fp),
                waiting_for=p.waiting.get(fp),
                waiting_since=now if fp in p.waiting else None,
                notified_at=None if fp in p.waiting else now,
                peak_pods=len(f.pods),
                source=f,
            )
            self.out.created[inc.id] = inc
            opened.append(inc)
        for inc in opened:
            recurrence = {"previous_id": inc.previous_id} if inc.previous_id is not None else {}
            self.entry(inc, TimelineKind.OPENED, now, inc.last_message, **recurrence)
            result.opened.append(inc.id)
            if inc.waiting_for is not None:
                self.entry(inc, TimelineKind.WAITING, now, inc.last_message, **{"for": inc.waiting_for})
                result.waiting.append(inc.id)

        # Update what continues; a waiting incident either waits on or escalates (never the other way).
        escalated: list[tuple[IncidentState, dict[str, Any]]] = []
        updates: list[
            tuple[IncidentState, list[str], dict[str, Any]]
        ] = []  # (incident, what changed, from what)
        for fp, inc in continuing.items():
            ob_or_none = observed.get(fp)
            if ob_or_none is None:
                self.repeat(inc, by_fp[fp], now, fresh, result)
                continue
            ob = ob_or_none
            f = ob.finding
            told = inc.notified_at is not None  # somebody has seen its diagnosis
            escalating = False
            if inc.waiting_for is not None:
                reason = p.waiting.get(fp)
                if reason is None:
                    waited = {"for": inc.waiting_for, "since": rfc3339(inc.waiting_since)}
                    self.entry(inc, TimelineKind.ESCALATED, now, ob.message or pass_message, **waited)
                    inc.waiting_for, inc.waiting_since = None, None
                    inc.notified_at = now
                    escalated.append((inc, waited))
                    result.escalated.append(inc.id)
                    # A waiting incident was never told (notified_at None), so ``told`` is False already.
                    escalating = True  # pragma: no mutate
                else:
                    if reason != inc.waiting_for:
                        self.entry(
                            inc,
                            TimelineKind.WAITING,
                            now,
                            ob.message,
                            **{"for": reason, "was": inc.waiting_for},
                        )
                        inc.waiting_for = reason
                    result.waiting.append(inc.id)
            severity = str(f.severity)
            actionable: list[str] = []
            previous: dict[str, Any] = {}
            if severity != inc.severity:
                actionable.append("severity")
                previous["severity"] = inc.severity
                self.entry(
                    inc,
                    TimelineKind.SEVERITY_CHANGED,
                    now,
                    ob.message,
                    **{"from": inc.severity, "to": severity},
                )
                inc.severity = severity
            if _new_first_remedy(inc.remedies or (), ob.remedies):
                actionable.append("remedy")
                previous["remedy"] = (inc.remedies or [{}])[0].get("title")
            peak = max(inc.peak_pods or 0, len(inc.pods or ()))
            if len(f.pods) > peak and any(peak < t <= len(f.pods) for t in self.policy.pod_thresholds):
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
                    inc.ref, tuple(inc.pods or ()), dict(inc.evidence or {}), list(inc.remedies or ())
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
                self.entry(inc, TimelineKind.UPDATED, now, ob.message, **what)
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
            # Severity and pods are the finding's now; the rest too unless a change was kept.
            inc.source = f if replace or all(c == "message" for c in changed) else None
            result.updated.append(inc.id)

        # Resolve what an evaluated subject no longer shows.
        resolved: list[IncidentState] = []
        if every:
            candidates = list(self.open_by_fp.values())
        else:
            candidates = [self.open_by_fp[fp] for ref in subjects for fp in self.fps_by_subject.get(ref, ())]
        if len(candidates) > 1:
            candidates.sort(key=_incident_id)
        for candidate in candidates:
            fp = candidate.fingerprint
            if fp in by_fp:
                continue
            inc = self.own(candidate)
            inc.status = str(IncidentStatus.RESOLVED)
            inc.resolved_at = max(now, inc.last_seen)
            resolved.append(inc)
            result.resolved.append(inc.id)
            self.forget(inc)
            self.latest_resolved[fp] = inc.id
        for inc in opened:
            self.remember(inc)

        replaces: dict[int, list[IncidentState]] = {}
        if resolved:
            self.resolutions(p, now, pass_message, opened, resolved, replaces, result)
        if self.notify:
            self.notices(index, p, result, opened, replaces, escalated, updates, resolved)
        return result

    def resolutions(
        self,
        p: Pass,
        now: datetime,
        pass_message: str,
        opened: list[IncidentState],
        resolved: list[IncidentState],
        replaces: dict[int, list[IncidentState]],
        result: TrackResult,
    ) -> None:
        """What fixed each incident the pass resolved (``replaces`` takes, per new incident, the
        ones it replaced): a subject that lost causes and gained others in the same pass changed
        root cause."""
        opened_by_subject: dict[ObjectRef, list[IncidentState]] = defaultdict(list)
        for inc in opened:
            opened_by_subject[inc.ref].append(inc)
        replaced_by: dict[int, list[int]] = {}
        for inc in resolved:
            successors = opened_by_subject.get(inc.ref)
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
                    inc.ref, tuple(inc.pods or ()), dict(inc.evidence or {}), list(inc.remedies or ())
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
            self.entry(inc, TimelineKind.RESOLVED, now, pass_message, **detail)
        for inc in opened:
            olds = replaces.get(inc.id)
            if olds:
                self.entry(
                    inc,
                    TimelineKind.ROOT_CAUSE_CHANGED,
                    now,
                    inc.last_message,
                    replaces=[o.id for o in olds],
                    previous_causes=[
                        {"id": o.id, "rule_id": o.rule_id, "cause": o.cause, "title": o.title} for o in olds
                    ],
                )
                result.root_cause_changed.append(inc.id)

    def notices(
        self,
        index: int,
        p: Pass,
        result: TrackResult,
        opened: list[IncidentState],
        replaces: dict[int, list[IncidentState]],
        escalated: list[tuple[IncidentState, dict[str, Any]]],
        updates: list[tuple[IncidentState, list[str], dict[str, Any]]],
        resolved: list[IncidentState],
    ) -> None:
        """One notice about what somebody was or is now paged for (a waiting incident is not
        paged), silenced ones kept visible; a storm of new incidents becomes one digest."""
        now = p.now
        if not (opened or escalated or updates or resolved):
            # Nothing to tell: only the storm window moves on (as below, with no new opens).
            window_start = now - self.policy.storm_window
            if self.recent_opens:
                self.recent_opens = [t for t in self.recent_opens if t > window_start]
            return
        snap = IncidentState.copy  # the incident as it stands at the end of this pass
        owed: list[Notice] = []
        announced_replacement: set[int] = set()  # resolved incidents a root-cause notice covers
        fresh_opened: list[IncidentState] = []
        for inc in opened:
            if inc.waiting_for is not None:
                continue
            olds = replaces.get(inc.id, [])
            if any(o.waiting_for is None for o in olds):
                owed.append(
                    Notice(
                        index,
                        snap(inc),
                        NotificationEvent.ROOT_CAUSE_CHANGED,
                        now,
                        replaces=tuple(map(snap, olds)),
                    )
                )
                announced_replacement.update(o.id for o in olds)
            else:
                fresh_opened.append(inc)
        # Storm protection: more than storm_threshold new incidents in the window → one digest.
        new_count = sum(1 for inc in opened if inc.waiting_for is None)
        window_start = now - self.policy.storm_window
        self.recent_opens = [t for t in self.recent_opens if t > window_start]
        storm = len(self.recent_opens) + new_count > self.policy.storm_threshold
        self.recent_opens.extend([now] * new_count)
        digest: list[IncidentState] = []
        for inc in fresh_opened:
            if storm and self.silence_of(inc, now) is None:
                digest.append(inc)
            else:
                owed.append(Notice(index, snap(inc), NotificationEvent.OPENED, now))
        for inc, waited in escalated:
            owed.append(Notice(index, snap(inc), NotificationEvent.ESCALATED, now, {"waited": waited}))
        for inc, changes, previous in updates:
            update = {"changed": _describe_update(inc, changes, previous), "previous": previous}
            owed.append(Notice(index, snap(inc), NotificationEvent.UPDATED, now, update))
        for inc in resolved:
            if inc.waiting_for is None and inc.id not in announced_replacement:
                owed.append(Notice(index, snap(inc), NotificationEvent.RESOLVED, now))
        for n in owed:
            silenced_by = self.silence_of(n.incident, now)
            self.out.notices.append(n if silenced_by is None else _with_silence(n, silenced_by))
        if digest:
            first = snap(digest[0])
            self.out.notices.append(
                Notice(index, first, NotificationEvent.DIGEST, now, digest=tuple(map(snap, digest)))
            )
            result.digested.extend(i.id for i in digest)


def _with_silence(n: Notice, silenced_by: object) -> Notice:
    return Notice(n.pass_index, n.incident, n.event, n.at, n.detail, n.replaces, n.digest, silenced_by)


def decide(
    *,
    cluster: str,
    open_incidents: Iterable[IncidentState],
    passes: Sequence[Pass],
    latest_resolved: Mapping[str, int] | None = None,
    fresh_keys: Collection[str] = (),
    ids: Sequence[int] = (),
    policy: NotifyPolicy | None = None,
    notify: bool = True,
    recent_opens: Sequence[datetime] = (),
    silence_of: Callable[[IncidentState, datetime], object | None] = _no_silence,
    fast_path: bool = True,
) -> Decision:
    """Decide a batch of passes of one cluster, in order.

    :param open_incidents: the cluster's open incidents of every subject the passes concern
        (:func:`subject_names`); not modified.
    :param latest_resolved: fingerprint → id of its latest resolved incident (recurrences link to it).
    :param fresh_keys: trigger keys never applied before (the rest are replays: no occurrence).
    :param ids: ids for new incidents, used in order (:func:`ids_needed` of them).
    :param notify: whether notices are owed at all (no sinks: nothing is sent, no storm is counted).
    :param recent_opens: when the cluster's paged incidents opened within the storm window.
    :param silence_of: the silence that matches an incident at a pass's ``now``, if any (a silenced notice is still
        owed, marked; a silenced incident is never folded into a storm digest).
    :param fast_path: decide a finding equal to the one its open incident's diagnosis came from
        (``IncidentState.source``) without normalising and comparing it again (False: every
        finding the long way; both decide alike, the tests check it).
    """
    for p in passes:
        validate(cluster, p)
    state = _Lifecycle(
        cluster,
        open_incidents,
        latest_resolved or {},
        fresh_keys,
        recent_opens,
        policy or NotifyPolicy(),
        ids,
        notify,
        silence_of,
        fast_path,
    )
    for index, p in enumerate(passes):
        state.out.results.append(state.apply(index, p))
    state.out.recent_opens = state.recent_opens
    return state.out
