"""The incident tracker: the Findings of one analysis pass in, incidents out.

An incident is one root cause (a Finding's fingerprint: workload + rule +
cause) in one cluster, from the first pass that found it to the first pass
that evaluated its workload and did not. :func:`apply_pass` does one pass's
bookkeeping inside the caller's transaction; :func:`track` wraps it in a
transaction of its own and commits.

**Decision and write.** What the rules below decide is decided by
:func:`analyzers.lifecycle.decide`, a pure function of the open incidents, the
passes, the clock in each pass and the policy; this module reads what it needs,
reserves the new incidents' ids, calls it, and writes its result with one
multi-row statement per table (see ``docs/performance.md``).

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
``series.count``): :func:`analyzers.ingest.trigger_from_event` builds it. Keys are remembered
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
import operator
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import orjson
from sqlalchemy import (
    String,
    Table,
    and_,
    any_,
    delete,
    func,
    insert,
    literal,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import Finding, ObjectRef
from analyzers.lifecycle import (
    EVERY_SUBJECT,
    POD_THRESHOLDS,
    WAITING_REASON_MAX,
    Decision,
    EverySubject,
    ExplainResolution,
    IncidentState,
    Notice,
    NotifyPolicy,
    Pass,
    TrackResult,
    Trigger,
    decide,
    ids_needed,
    subject_names,
    validate,
)
from storage.models import (
    AppliedEvent,
    Incident,
    IncidentStatus,
    Notification,
    NotificationEvent,
    NotificationStatus,
    Silence,
    TimelineEntry,
    TrackerGeneration,
    UTCDateTime,
)
from storage.silences import active_silences, matches, silenced_note, silencing
from storage.views import incident_dict, rfc3339

__all__ = [
    "EVERY_SUBJECT",
    "POD_THRESHOLDS",
    "WAITING_REASON_MAX",
    "ExplainResolution",
    "HeldIncidents",
    "NotifyPolicy",
    "Pass",
    "TrackResult",
    "Trigger",
    "apply_pass",
    "apply_passes",
    "prune_applied_events",
    "remind",
    "track",
    "track_passes",
    "track_reminders",
]

log = logging.getLogger(__name__)

# Bind-parameter budget per IN list (SQLite allows 32766, asyncpg 32767).
_CHUNK = 500

_INCIDENTS = cast(Table, Incident.__table__)
_APPLIED = cast(Table, AppliedEvent.__table__)
_GENERATIONS = cast(Table, TrackerGeneration.__table__)
_TIMELINE = cast(Table, TimelineEntry.__table__)
_OUTBOX = cast(Table, Notification.__table__)
_COLUMNS = tuple(_INCIDENTS.c)
# What a pass can change on an incident that exists (everything else is fixed when it opens).
_MUTABLE: tuple[str, ...] = (
    "severity",
    "status",
    "title",
    "explanation",
    "evidence",
    "remedies",
    "pods",
    "last_seen",
    "resolved_at",
    "occurrences",
    "last_message",
    "waiting_for",
    "waiting_since",
    "resolution",
    "notified_at",
    "peak_pods",
)
_mutable_of = operator.attrgetter(*_MUTABLE)
_UPDATES: dict[tuple[str, str, tuple[str, ...]], tuple[str, tuple[Any, ...]]] = {}


def _update_statement(dialect: Any, columns: tuple[str, ...]) -> tuple[str, tuple[Any, ...]]:
    """The driver's SQL that sets ``columns`` of the incidents a batch changed, built once per
    set of columns, and, for the id and each column, the bind processor that turns a value
    into what the column's type sends (None: as it is).

    * PostgreSQL: ``UPDATE incidents SET c = v.c … FROM unnest($1::bigint[], $2::…[], …) AS
      v(…) WHERE incidents.id = v.b_id``: every row in one statement with one array parameter
      per column (the same text whatever the number of rows, so asyncpg prepares it once).
    * SQLite: ``UPDATE incidents SET c = ? … WHERE id = ?``, run for every row by sqlite3's
      ``executemany`` (one prepared statement, no round trip per row)."""
    key = (dialect.name, dialect.paramstyle, columns)
    built = _UPDATES.get(key)
    if built is None:
        cols = [_INCIDENTS.c.id, *(_INCIDENTS.c[name] for name in columns)]
        processors = tuple(_bind_processor(col, dialect) for col in cols)
        if dialect.name == "postgresql":
            names = ["b_id", *columns]
            arrays = ", ".join(
                f"${i}::{col.type.compile(dialect=dialect)}[]" for i, col in enumerate(cols, start=1)
            )
            assignments = ", ".join(f"{name} = v.{name}" for name in columns)
            sql = (
                f"UPDATE incidents SET {assignments} FROM unnest({arrays}) AS v({', '.join(names)})"
                " WHERE incidents.id = v.b_id"
            )
        else:
            sql = f"UPDATE incidents SET {', '.join(f'{name} = ?' for name in columns)} WHERE id = ?"
        built = _UPDATES[key] = (sql, processors)
    return built


def _bind_processor(column: Any, dialect: Any) -> Any:
    """What turns a value of ``column`` into what the driver takes (None: nothing to do).

    The column type's own, except a timestamp on SQLite: ``UTCDateTime`` then the SQLite
    dialect's DATETIME make the UTC wall time text ``YYYY-MM-DD HH:MM:SS.ffffff`` in two
    Python functions and a dict; ``datetime.isoformat`` writes the same text in one C call
    (``tests/storage/test_tracker_binds.py`` checks that they agree). Naive values still go
    through the type's processor, which refuses them."""
    process = column.type.dialect_impl(dialect).bind_processor(dialect)
    if process is None or dialect.name != "sqlite" or not isinstance(column.type, UTCDateTime):
        return process

    def sqlite_timestamp(value: datetime | None) -> Any:
        if value is None or value.tzinfo is None or value.utcoffset() is None:
            return process(value)
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")

    return sqlite_timestamp


class _Binds:
    """Values as the driver takes them, each converted once per batch: the rows of one pass
    share its ``now``, and SQLite stores a timestamp as text (``UTCDateTime``'s processor)."""

    __slots__ = ("_done",)

    def __init__(self) -> None:
        self._done: dict[tuple[Any, Any], Any] = {}

    def column(self, process: Any, values: list[Any], timestamps: bool) -> list[Any]:
        """``values`` of one column through its bind processor (None: as they are); timestamps
        (hashable, and few distinct ones per batch) are converted once each."""
        if process is None:
            return values
        if not timestamps:
            return [process(v) for v in values]
        done = self._done
        out = []
        for v in values:
            key = (process, v)
            converted = done.get(key, _MISSING)
            if converted is _MISSING:
                converted = done[key] = process(v)
            out.append(converted)
        return out


_MISSING = object()
_TIMESTAMPS = frozenset(c.name for c in _COLUMNS if isinstance(c.type, UTCDateTime))


async def _update_rows(
    session: AsyncSession, binds: _Binds, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
) -> None:
    """Write ``columns`` of the incidents ``rows`` name (each row: the id, then the values in
    the order of ``columns``): one statement per batch (:func:`_update_statement`)."""
    conn = await session.connection()
    dialect = conn.dialect
    sql, processors = _update_statement(dialect, columns)
    arrays = [
        binds.column(process, list(values), name in _TIMESTAMPS)
        for name, process, values in zip(("b_id", *columns), processors, zip(*rows, strict=True), strict=True)
    ]
    if dialect.name == "postgresql":
        await conn.exec_driver_sql(sql, tuple(arrays))
    else:
        ids, *values = arrays
        await conn.exec_driver_sql(sql, list(zip(*values, ids, strict=True)))


def _insert_ignore(session: AsyncSession) -> Any:
    name = session.get_bind().dialect.name
    return pg_insert if name == "postgresql" else sqlite_insert


async def _execute(session: AsyncSession, stmt: Any, params: Any = None) -> Any:
    """A Core statement on the session's connection: no ORM bookkeeping on the hot path."""
    conn = await session.connection()
    return await conn.execute(stmt, params)


_RECORD_TRIGGERS = {
    # One array parameter for every key: the same text whatever their number.
    "postgresql": "INSERT INTO applied_events (cluster, key, applied_at) SELECT $1, k, $2 FROM unnest($3::varchar[]) AS k"
    " ON CONFLICT (cluster, key) DO NOTHING RETURNING key",
    # json_each is SQLite's unnest; "WHERE true" tells its parser the ON CONFLICT is the upsert's.
    "sqlite": "INSERT INTO applied_events (cluster, key, applied_at) SELECT ?, value, ? FROM json_each(?) WHERE true"
    " ON CONFLICT (cluster, key) DO NOTHING RETURNING key",
}


async def _record_triggers(
    session: AsyncSession, cluster: str, keys: Sequence[str], now: datetime
) -> set[str]:
    """Record the keys; return those not applied before.

    One statement whatever the number of keys (the keys as one array, or one JSON array on
    SQLite): insert, skipping keys already there; RETURNING yields only the rows inserted."""
    if not keys:
        return set()
    conn = await session.connection()
    dialect = conn.dialect
    process = _bind_processor(_APPLIED.c.applied_at, dialect)
    applied_at = process(now) if process is not None else now
    batch: Any = list(keys) if dialect.name == "postgresql" else orjson.dumps(list(keys)).decode()
    result = await conn.exec_driver_sql(_RECORD_TRIGGERS[dialect.name], (cluster, applied_at, batch))
    return set(result.scalars())


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


async def _next_generation(session: AsyncSession, cluster: str) -> int:
    """Count this transaction as one more write of the cluster's incidents; return its number.

    One upsert of the cluster's ``tracker_generations`` row, after the cluster's lock (on
    SQLite it also takes the database's write lock first, so the reads that follow see what
    the transaction will be applied to)."""
    stmt = (
        _insert_ignore(session)(_GENERATIONS)
        .values(cluster=cluster, generation=1)
        .on_conflict_do_update(index_elements=["cluster"], set_={"generation": _GENERATIONS.c.generation + 1})
        .returning(_GENERATIONS.c.generation)
    )
    return int((await _execute(session, stmt)).scalar_one())


class HeldIncidents:
    """One cluster's open incidents, kept in memory between batches by the writer that wrote them.

    :func:`track_passes` reads them from the database once (every open incident of the
    cluster), then keeps the copy true itself: after each committed batch it takes the
    decision's new and changed incidents in and drops the resolved ones. A batch no longer
    reads incidents at all, only the ones :func:`decide` needs are handed to it.

    The copy is only trusted while nobody else writes. Every writing transaction counts one
    more *generation* of the cluster (``tracker_generations``, under the cluster's lock); a
    batch that finds a generation other than the one after the copy's (another agent, a
    leader that lost its Lease and wrote once more, a reminder written without this object)
    reads every open incident again before deciding. A failed or ambiguous commit forgets the
    copy. The decision is the same as without the copy: what is held is what would be read.

    Not shared between clusters or between concurrent batches (one pipeline per cluster)."""

    __slots__ = ("_by_fp", "_by_name", "cluster", "generation", "reloads")

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.generation: int | None = None  # the generation the copy is true at; None: not held
        self.reloads = 0  # times the copy was read from the database (the first included)
        self._by_fp: dict[str, IncidentState] = {}
        self._by_name: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self._by_fp)

    def forget(self) -> None:
        """Drop the copy: the next batch reads the open incidents again."""
        self.generation = None
        self._by_fp.clear()
        self._by_name.clear()

    def current(self, generation: int) -> bool:
        """Whether the copy is true for the transaction that counted ``generation``."""
        return self.generation is not None and generation == self.generation + 1

    def of_subjects(self, names: Collection[str] | None) -> dict[str, IncidentState]:
        """The held incidents of these subject names (all when None), by fingerprint."""
        if names is None:
            return dict(self._by_fp)
        found: dict[str, IncidentState] = {}
        for name in names:
            for fp in self._by_name.get(name, ()):
                found[fp] = self._by_fp[fp]
        return found

    def _hold(self, inc: IncidentState) -> None:
        if inc.status == IncidentStatus.OPEN:
            self._by_fp[inc.fingerprint] = inc
            self._by_name.setdefault(inc.subject_name, set()).add(inc.fingerprint)
            return
        held = self._by_fp.get(inc.fingerprint)
        if held is not None and held.id == inc.id:
            del self._by_fp[inc.fingerprint]
            names = self._by_name[inc.subject_name]
            names.discard(inc.fingerprint)
            if not names:
                del self._by_name[inc.subject_name]

    def committed(
        self, generation: int, decision: Decision, read: Mapping[str, IncidentState] | None
    ) -> None:
        """After the batch's commit: ``read`` (every open incident, when the batch read them)
        replaces the copy, then the decision's incidents are taken in."""
        if read is not None:
            self.forget()
            self.reloads += 1
            for inc in read.values():
                self._hold(inc)
        for inc in decision.changed.values():
            self._hold(inc)
        for inc in decision.created.values():
            self._hold(inc)
        self.generation = generation


# A literal, not a bound parameter: only then can the planners use the partial indexes on open incidents.
_IS_OPEN = Incident.status == literal_column("'open'")


async def _load_open(
    session: AsyncSession, cluster: str, names: Collection[str] | None
) -> dict[str, IncidentState]:
    """Open incidents of the cluster (of these subject names; all when None), by fingerprint.

    Read as rows, not ORM objects: the lifecycle decides on plain values."""
    base = select(*_COLUMNS).where(_INCIDENTS.c.cluster == cluster, _IS_OPEN)
    found: dict[str, IncidentState] = {}

    async def read(stmt: Any) -> None:
        for row in (await _execute(session, stmt)).mappings():
            found[row["fingerprint"]] = IncidentState(**row)

    if names is None:
        await read(base)
        return found
    ordered = sorted(names)
    if session.get_bind().dialect.name == "postgresql":
        # One array parameter (= ANY) plans and binds faster than an IN list of many.
        await read(base.where(_INCIDENTS.c.subject_name == any_(literal(ordered, ARRAY(String())))))
        return found
    for i in range(0, len(ordered), _CHUNK):
        await read(base.where(_INCIDENTS.c.subject_name.in_(ordered[i : i + _CHUNK])))
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


async def _reserve_ids(session: AsyncSession, count: int) -> list[int]:
    """``count`` ids for new incidents, ascending.

    PostgreSQL: from the column's own sequence (what an INSERT would take). SQLite: after the
    largest id, as SQLite itself numbers an INTEGER PRIMARY KEY; the transaction writes before
    anyone else can, and a racing writer would fail on the primary key and be retried."""
    if count <= 0:
        return []
    if session.get_bind().dialect.name == "postgresql":
        rows = await session.execute(
            text("SELECT nextval(pg_get_serial_sequence('incidents', 'id')) FROM generate_series(1, :n)"),
            {"n": count},
        )
        return sorted(int(v) for v in rows.scalars())
    top = (await session.execute(select(func.max(_INCIDENTS.c.id)))).scalar()
    start = int(top or 0) + 1
    return list(range(start, start + count))


def _silence_of(silences: Sequence[Silence]) -> Any:
    """The lifecycle's ``silence_of`` over the active silences loaded for the batch."""
    if not silences:
        return lambda _inc, _now: None

    def silence_of(inc: IncidentState, now: datetime) -> Silence | None:
        for s in silences:
            if s.expires_at > now and matches(
                s,
                cluster=inc.cluster,
                namespace=inc.namespace,
                rule_id=inc.rule_id,
                subject_name=inc.subject_name,
            ):
                return s
        return None

    return silence_of


def _outbox_rows(
    sinks: Sequence[str],
    incident_id: int,
    event: NotificationEvent,
    payload: dict[str, Any],
    now: datetime,
    silenced_by: Silence | None,
) -> list[dict[str, Any]]:
    """One outbox row per sink: ``pending``, or ``silenced`` with the silence as the reason."""
    status = str(NotificationStatus.SILENCED if silenced_by else NotificationStatus.PENDING)
    note = silenced_note(silenced_by) if silenced_by else None
    return [
        {
            "incident_id": incident_id,
            "sink": sink,
            "event": str(event),
            "payload": payload,
            "status": status,
            "attempts": 0,
            "created_at": now,
            "next_attempt_at": now,
            "last_error": note,
            "sent_at": None,
            "thread_ref": None,
        }
        for sink in sinks
    ]


def _payload(cluster: str, n: Notice) -> dict[str, Any]:
    """What a notice says, as the sinks render it (``storage.views``' incident shape)."""
    if n.event == NotificationEvent.DIGEST:
        return {"event": str(n.event), "cluster": cluster, "incidents": [incident_dict(i) for i in n.digest]}
    payload: dict[str, Any] = {
        "event": str(n.event),
        "cluster": cluster,
        "incident": incident_dict(n.incident),
    }
    if n.replaces:
        payload["replaces"] = [incident_dict(o) for o in n.replaces]
    payload.update(n.detail)
    return payload


def _row(inc: IncidentState) -> dict[str, Any]:
    return {c.name: getattr(inc, c.name) for c in _COLUMNS}


async def _write(
    session: AsyncSession,
    cluster: str,
    sinks: Sequence[str],
    decision: Decision,
    loaded: Mapping[int, IncidentState],
) -> None:
    """Persist a decision: a handful of multi-row statements, whatever the number of passes
    (``loaded``: the incidents as read, by id, to update only what changed)."""
    if decision.created:
        await _execute(session, insert(_INCIDENTS), [_row(i) for i in decision.created.values()])
    if decision.changed:
        # Only the columns a batch changed, grouped by which: a repeated event moves
        # occurrences and last_seen, and the JSON columns are not serialised again for it.
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for inc in decision.changed.values():
            after: tuple[Any, ...] = _mutable_of(inc)
            before = loaded.get(inc.id)
            changed: tuple[Any, ...]
            columns: tuple[str, ...]
            if before is None:
                changed = after
                columns = _MUTABLE
            else:
                old = _mutable_of(before)
                which = [i for i, (a, b) in enumerate(zip(after, old, strict=True)) if a is not b and a != b]
                if not which:
                    continue
                changed = tuple(after[i] for i in which)
                columns = tuple(_MUTABLE[i] for i in which)
            groups.setdefault(columns, []).append((inc.id, *changed))
        binds = _Binds()
        for columns, rows in groups.items():
            await _update_rows(session, binds, columns, rows)
    if decision.timeline:
        await _execute(
            session,
            insert(_TIMELINE),
            [
                {
                    "incident_id": e.incident_id,
                    "at": e.at,
                    "kind": str(e.kind),
                    "message": e.message,
                    "detail": dict(e.detail),
                }
                for e in decision.timeline
            ],
        )
    if sinks and decision.notices:
        outbox: list[dict[str, Any]] = []
        for n in decision.notices:
            silenced_by = cast(Silence | None, n.silenced_by)
            outbox.extend(
                _outbox_rows(sinks, n.incident.id, n.event, _payload(cluster, n), n.at, silenced_by)
            )
            result = decision.results[n.pass_index]
            result.notifications += len(sinks)
            result.silenced += len(sinks) if silenced_by is not None else 0
        await _execute(session, insert(_OUTBOX), outbox)


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
    one transaction: the cluster is locked, event keys are recorded in one
    statement, the open incidents of every subject involved are read in one
    query, :func:`analyzers.lifecycle.decide` decides every pass in memory, then
    new incidents, incident updates, timeline and outbox rows are written with
    one multi-row statement each. A trigger key repeated across the passes
    counts once."""
    results, _ = await _apply(session, cluster, passes, sinks, policy, None)
    return results


async def _apply(
    session: AsyncSession,
    cluster: str,
    passes: Sequence[Pass],
    sinks: Sequence[str],
    policy: NotifyPolicy | None,
    held: HeldIncidents | None,
) -> tuple[list[TrackResult], Any]:
    """:func:`apply_passes`, reading the open incidents from ``held`` when its copy is current.

    Returns the results and what ``held`` takes in once the transaction has committed
    (a callable; nothing to do without ``held``)."""
    if not passes:
        return [], lambda: None
    for p in passes:
        validate(cluster, p)
    await _lock_cluster(session, cluster)
    generation = await _next_generation(session, cluster)
    keys = list(dict.fromkeys(t.key for p in passes for t in p.triggers))
    fresh_keys = await _record_triggers(session, cluster, keys, min(p.now for p in passes))
    names = subject_names(passes)
    read: dict[str, IncidentState] | None = None
    if held is None:
        open_by_fp = await _load_open(session, cluster, names)
    elif held.current(generation):
        open_by_fp = held.of_subjects(names)
    else:
        read = await _load_open(session, cluster, None)
        open_by_fp = read if names is None else {fp: i for fp, i in read.items() if i.subject_name in names}
    candidates = sorted({f.fingerprint for p in passes for f in p.findings} - open_by_fp.keys())
    latest = await _latest_resolved(session, cluster, candidates) if candidates else {}
    sinks = tuple(dict.fromkeys(sinks))
    policy = policy or NotifyPolicy()
    silences: list[Silence] = []
    recent: list[datetime] = []
    if sinks:
        first = min(p.now for p in passes)
        silences = await active_silences(session, now=first, cluster=cluster)
        recent = await _recent_opens(session, cluster, first - policy.storm_window)
    ids = await _reserve_ids(session, ids_needed(passes, open_by_fp.values()))
    decision = decide(
        cluster=cluster,
        open_incidents=open_by_fp.values(),
        passes=passes,
        latest_resolved=latest,
        fresh_keys=fresh_keys,
        ids=ids,
        policy=policy,
        notify=bool(sinks),
        recent_opens=recent,
        silence_of=_silence_of(silences),
    )
    await _write(session, cluster, sinks, decision, {i.id: i for i in open_by_fp.values()})
    if held is None:
        return decision.results, lambda: None
    return decision.results, lambda: held.committed(generation, decision, read)


async def apply_pass(
    session: AsyncSession,
    *,
    cluster: str,
    findings: Iterable[Finding],
    now: datetime,
    evaluated: Iterable[ObjectRef] | EverySubject = (),
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
        evaluated=evaluated if isinstance(evaluated, EverySubject) else tuple(evaluated),
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
    held: HeldIncidents | None = None,
) -> list[TrackResult]:
    """:func:`apply_passes` in a transaction of its own, committed.

    Passes of one cluster are expected to run one at a time (the pipeline is
    partitioned by cluster); on PostgreSQL concurrent writers of one cluster
    queue on an advisory lock. Should a race still open the same fingerprint
    twice (or, on SQLite, take the same new id), a unique index rejects one,
    which is retried.

    ``held``: the cluster's open incidents kept in memory between calls (see
    :class:`HeldIncidents`); the batch then reads no incident unless somebody else wrote."""
    if held is not None and held.cluster != cluster:
        raise ValueError(f"incidents held for cluster {held.cluster!r}, not {cluster!r}")
    for attempt in range(1, attempts + 1):
        try:
            async with sessions.begin() as session:
                results, after_commit = await _apply(session, cluster, passes, sinks, policy, held)
        except IntegrityError:
            if held is not None:
                held.forget()
            if attempt == attempts:
                raise
            log.info("incident pass raced another writer; retrying", extra={"cluster": cluster})
            continue
        except BaseException:
            # The commit may or may not have happened: what is held is no longer known to be true.
            if held is not None:
                held.forget()
            raise
        after_commit()
        return results
    raise AssertionError("unreachable")  # pragma: no cover


async def track(
    sessions: async_sessionmaker[AsyncSession],
    *,
    cluster: str,
    findings: Iterable[Finding],
    now: datetime,
    evaluated: Iterable[ObjectRef] | EverySubject = (),
    triggers: Sequence[Trigger] = (),
    waiting: Mapping[str, str] | None = None,
    sinks: Sequence[str] = (),
    attempts: int = 3,
    policy: NotifyPolicy | None = None,
    explain_resolution: ExplainResolution | None = None,
    held: HeldIncidents | None = None,
) -> TrackResult:
    """:func:`apply_pass` in a transaction of its own, committed (retried on a race, see
    :func:`track_passes`; ``held`` as there)."""
    p = Pass(
        findings=list(findings),
        now=now,
        evaluated=evaluated if isinstance(evaluated, EverySubject) else tuple(evaluated),
        triggers=tuple(triggers),
        waiting=dict(waiting or {}),
        explain_resolution=explain_resolution,
    )
    [result] = await track_passes(
        sessions, cluster=cluster, passes=[p], sinks=sinks, attempts=attempts, policy=policy, held=held
    )
    return result


async def _recent_opens(session: AsyncSession, cluster: str, since: datetime) -> list[datetime]:
    """When the cluster's incidents opened after ``since`` (not waiting ones): the storm window's count."""
    rows = await session.execute(
        select(Incident.first_seen).where(
            Incident.cluster == cluster,
            # An open at exactly ``since`` is dropped again by the storm window of analyzers.lifecycle.
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
    await _next_generation(session, cluster)  # notified_at moves: a held copy is no longer true
    sinks = tuple(dict.fromkeys(sinks))
    silences = await active_silences(session, now=now, cluster=cluster) if sinks else []
    outbox: list[dict[str, Any]] = []
    for inc in due:
        since = inc.notified_at
        inc.notified_at = now
        payload = {
            "event": str(NotificationEvent.REMINDER),
            "cluster": cluster,
            "incident": incident_dict(inc),
            "last_notified": rfc3339(since),
        }
        outbox.extend(
            _outbox_rows(
                sinks, inc.id, NotificationEvent.REMINDER, payload, now, silencing(silences, inc, now)
            )
        )
    await session.flush()
    if outbox:
        await session.execute(insert(Notification), outbox)
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
