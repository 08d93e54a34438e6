"""Questions about the past: list incidents, read one, count them.

Listing is keyset-paginated: the cursor carries the sort, the last row's sort
value and id, so a page costs an index range scan whatever its depth, and rows
inserted meanwhile neither repeat nor vanish.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import ColumnElement, Select, case, func, literal, literal_column, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from storage.models import RESOLVE_SECONDS, Incident, IncidentStatus, TimelineEntry


class InvalidCursor(ValueError):
    """The cursor is not one this API handed out (or was made for another sort)."""


class Sort(enum.StrEnum):
    LAST_SEEN_DESC = "-last_seen"
    LAST_SEEN = "last_seen"
    FIRST_SEEN_DESC = "-first_seen"
    FIRST_SEEN = "first_seen"
    OCCURRENCES_DESC = "-occurrences"
    OCCURRENCES = "occurrences"
    ID_DESC = "-id"
    ID = "id"

    @property
    def column(self) -> InstrumentedAttribute[Any]:
        return _SORT_COLUMNS[self.value.lstrip("-")]

    @property
    def descending(self) -> bool:
        return self.value.startswith("-")


_SORT_COLUMNS: dict[str, InstrumentedAttribute[Any]] = {
    "last_seen": Incident.last_seen,
    "first_seen": Incident.first_seen,
    "occurrences": Incident.occurrences,
    "id": Incident.id,
}

STATUSES = tuple(s.value for s in IncidentStatus)


@dataclass(frozen=True, slots=True)
class IncidentFilter:
    """Narrowing shared by the list, the stats, the pages and the CLI. ``None`` means any.

    ``since``/``until`` select incidents *active* in the window: still open or
    resolved at or after ``since``, and first seen before ``until``. ``text`` matches a
    case-insensitive substring of the title or the explanation. ``waiting`` selects
    incidents with (True) or without (False) a waiting state: open ones waiting for an
    autoscaler, and resolved ones that resolved while waiting (never paged)."""

    status: str | None = None
    cluster: str | None = None
    namespace: str | None = None
    rule_id: str | None = None
    severity: str | None = None
    kind: str | None = None
    name: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None
    waiting: bool | None = None

    def where(self) -> list[ColumnElement[bool]]:
        conds: list[ColumnElement[bool]] = []
        for col, value in (
            (Incident.status, self.status),
            (Incident.cluster, self.cluster),
            (Incident.namespace, self.namespace),
            (Incident.rule_id, self.rule_id),
            (Incident.severity, self.severity),
            (Incident.subject_kind, self.kind),
            (Incident.subject_name, self.name),
        ):
            if value is not None:
                conds.append(col == value)
        if self.since is not None:
            conds.append(Incident.resolved_at.is_(None) | (Incident.resolved_at >= self.since))
        if self.until is not None:
            conds.append(Incident.first_seen < self.until)
        if self.waiting is not None:
            # IS NOT NULL exactly as the partial index ix_incidents_waiting_last_seen says it.
            conds.append(
                Incident.waiting_for.is_not(None) if self.waiting else Incident.waiting_for.is_(None)
            )
        if self.text:
            pattern = "%" + _escape_like(self.text) + "%"
            conds.append(
                Incident.title.ilike(pattern, escape="\\") | Incident.explanation.ilike(pattern, escape="\\")
            )
        return conds


def _escape_like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@dataclass(slots=True)
class Page:
    items: list[Incident]
    next_cursor: str | None


def _encode_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return value


def encode_cursor(sort: Sort, row: Incident) -> str:
    raw = orjson.dumps([sort.value, _encode_value(getattr(row, sort.column.key)), row.id])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# The ranges of the columns a cursor may carry (BIGINT ids, INTEGER occurrences).
_INT64 = (-(2**63), 2**63 - 1)
_INT32 = (-(2**31), 2**31 - 1)


def decode_cursor(sort: Sort, cursor: str) -> tuple[Any, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        doc = orjson.loads(raw)
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        raise InvalidCursor("cursor is not valid") from None
    if not (
        isinstance(doc, list)
        and len(doc) == 3
        and isinstance(doc[2], int)
        and not isinstance(doc[2], bool)
        and _INT64[0] <= doc[2] <= _INT64[1]
    ):
        raise InvalidCursor("cursor is not valid")
    if doc[0] != sort.value:
        raise InvalidCursor(f"cursor was made for sort {doc[0]!r}, not {sort.value!r}")
    value = doc[1]
    if sort.column.key in ("last_seen", "first_seen"):
        try:
            value = datetime.fromisoformat(value)
            if value.tzinfo is None:
                raise InvalidCursor("cursor is not valid")
            value = value.astimezone(
                UTC
            )  # a time that is not in years 1-9999 once in UTC is no cursor of ours
        except (TypeError, ValueError, OverflowError):
            raise InvalidCursor("cursor is not valid") from None
    else:
        low, high = _INT32 if sort.column.key == "occurrences" else _INT64
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise InvalidCursor("cursor is not valid")
    return value, doc[2]


def list_statement(
    flt: IncidentFilter, sort: Sort, limit: int, cursor: str | None = None
) -> Select[Incident]:
    col = sort.column
    stmt = select(Incident).where(*flt.where())
    if cursor is not None:
        value, last_id = decode_cursor(sort, cursor)
        if col.key == "id":
            stmt = stmt.where(Incident.id < last_id if sort.descending else Incident.id > last_id)
        else:
            key = tuple_(col, Incident.id)
            # Typed as the columns (an untyped int would be cast to a 32-bit INTEGER on PostgreSQL).
            after = tuple_(literal(value, col.type), literal(last_id, Incident.id.type))
            stmt = stmt.where(key < after if sort.descending else key > after)
    if col.key == "id":
        order = [Incident.id.desc() if sort.descending else Incident.id.asc()]
    elif sort.descending:
        order = [col.desc(), Incident.id.desc()]
    else:
        order = [col.asc(), Incident.id.asc()]
    return stmt.order_by(*order).limit(limit + 1)


async def list_incidents(
    session: AsyncSession,
    flt: IncidentFilter = IncidentFilter(),
    *,
    sort: Sort = Sort.LAST_SEEN_DESC,
    limit: int = 50,
    cursor: str | None = None,
) -> Page:
    """One page of incidents; ``next_cursor`` is None on the last page."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    rows = list((await session.execute(list_statement(flt, sort, limit, cursor))).scalars())
    if len(rows) > limit:
        rows = rows[:limit]
        return Page(rows, encode_cursor(sort, rows[-1]))
    return Page(rows, None)


async def get_incident(
    session: AsyncSession, incident_id: int
) -> tuple[Incident, list[TimelineEntry]] | None:
    """An incident and its timeline (oldest first), or None."""
    incident = await session.get(Incident, incident_id)
    if incident is None:
        return None
    timeline = (
        await session.execute(
            select(TimelineEntry)
            .where(TimelineEntry.incident_id == incident_id)
            .order_by(TimelineEntry.at, TimelineEntry.id)
        )
    ).scalars()
    return incident, list(timeline)


@dataclass(slots=True)
class Stats:
    total: int = 0
    open: int = 0
    resolved: int = 0
    by_rule: list[dict[str, Any]] = field(default_factory=list)
    by_namespace: list[dict[str, Any]] = field(default_factory=list)
    by_day: list[dict[str, Any]] = field(default_factory=list)
    time_to_resolve: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "open": self.open,
            "resolved": self.resolved,
            "by_rule": self.by_rule,
            "by_namespace": self.by_namespace,
            "by_day": self.by_day,
            "time_to_resolve": self.time_to_resolve,
        }


def _duration_seconds(dialect: str) -> ColumnElement[Any]:
    """The time to resolve; SQLite's written as ix_incidents_resolve_seconds indexes it."""
    return literal_column(RESOLVE_SECONDS["postgresql" if dialect == "postgresql" else "sqlite"])


def _resolved(dialect: str, *, by_index: bool) -> ColumnElement[bool]:
    """``resolved_at IS NOT NULL``: as written, SQLite may read the partial index
    ix_incidents_resolve_seconds for it; ``by_index=False`` keeps SQLite's planner off that
    index (a unary plus), so a filter uses its own index or the covering last_seen one."""
    if by_index or dialect != "sqlite":
        return Incident.resolved_at.is_not(None)
    return literal_column("+resolved_at").is_not(None)


def _day(dialect: str) -> ColumnElement[str]:
    if dialect == "postgresql":
        return func.to_char(Incident.first_seen, "YYYY-MM-DD")
    return func.substr(Incident.first_seen, 1, 10)


async def incident_stats(
    session: AsyncSession, flt: IncidentFilter = IncidentFilter(), *, top: int = 50
) -> Stats:
    """Counts per rule, namespace and day (of opening), and the time to resolve.

    ``time_to_resolve`` covers resolved incidents: count, mean, median (p50),
    p90 and max, in seconds (``null`` without any)."""
    dialect = session.get_bind().dialect.name
    where = flt.where()
    is_open = case((Incident.status == IncidentStatus.OPEN.value, 1), else_=0)
    stats = Stats()

    row = (
        await session.execute(select(func.count(), func.coalesce(func.sum(is_open), 0)).where(*where))
    ).one()
    stats.total, stats.open = int(row[0]), int(row[1])
    stats.resolved = stats.total - stats.open

    async def grouped(col: InstrumentedAttribute[str], name: str) -> list[dict[str, Any]]:
        count = func.count().label("n")
        res = await session.execute(
            select(col, count, func.coalesce(func.sum(is_open), 0))
            .where(*where)
            .group_by(col)
            .order_by(count.desc(), col)
            .limit(top)
        )
        return [{name: key, "count": int(n), "open": int(o)} for key, n, o in res]

    stats.by_rule = await grouped(Incident.rule_id, "rule_id")
    stats.by_namespace = await grouped(Incident.namespace, "namespace")
    day = _day(dialect).label("day")
    res = await session.execute(select(day, func.count()).where(*where).group_by(day).order_by(day))
    stats.by_day = [{"day": d, "count": int(n)} for d, n in res]

    duration = _duration_seconds(dialect)
    # resolved_at is set exactly when an incident resolves. SQLite reads the whole history's
    # durations from the partial index ix_incidents_resolve_seconds alone; a filter reads its
    # rows anyway (one scan, one sort), and PostgreSQL has no such index.
    from_index = not where and dialect == "sqlite"
    resolved_where = [*where, _resolved(dialect, by_index=from_index)]
    if not from_index:
        # One scan for count, mean and maximum.
        agg = (
            await session.execute(
                select(func.count(), func.avg(duration), func.max(duration)).where(*resolved_where)
            )
        ).one()
    else:
        # The whole history: the mean from one walk of the index (no row is read), the
        # maximum from its last entry.
        in_order = select(duration.label("d")).where(*resolved_where).order_by(duration).subquery()
        longest = select(duration).where(*resolved_where).order_by(duration.desc()).limit(1)
        agg = (
            await session.execute(select(func.count(), func.avg(in_order.c.d), longest.scalar_subquery()))
        ).one()
    n = int(agg[0])
    ttr: dict[str, Any] = {
        "count": n,
        "mean_seconds": None,
        "p50_seconds": None,
        "p90_seconds": None,
        "max_seconds": None,
    }
    if n:
        ttr["mean_seconds"] = round(float(agg[1]), 3)
        ttr["max_seconds"] = round(float(agg[2]), 3)
        # Nearest rank: p = the value at rank round(q * (n - 1)) + 1.
        ranks = {
            key: min(n, int(q * (n - 1) + 0.5) + 1) for key, q in (("p50_seconds", 0.5), ("p90_seconds", 0.9))
        }
        by_rank: dict[int, float] = {}
        if not from_index:
            # Both percentiles from one sort of the rows.
            ranked = (
                select(duration.label("d"), func.row_number().over(order_by=duration).label("rn"))
                .where(*resolved_where)
                .subquery()
            )
            rows = await session.execute(
                select(ranked.c.rn, ranked.c.d).where(ranked.c.rn.in_(sorted(set(ranks.values()))))
            )
            by_rank = {int(rn): float(d) for rn, d in rows}
        else:
            # Each percentile is one index lookup: LIMIT 1 OFFSET rank - 1.
            for rank in sorted(set(ranks.values())):
                q = select(duration).where(*resolved_where).order_by(duration).offset(rank - 1).limit(1)
                by_rank[rank] = float((await session.execute(q)).scalar_one())
        for key, rank in ranks.items():
            ttr[key] = round(by_rank[rank], 3)
    stats.time_to_resolve = ttr
    return stats


@dataclass(slots=True)
class Facets:
    """Counts for the list page: by status (ignoring the status filter), namespace and rule."""

    status: dict[str, int]
    namespace: list[tuple[str, int]]
    rule_id: list[tuple[str, int]]


async def facets(session: AsyncSession, flt: IncidentFilter = IncidentFilter(), *, top: int = 12) -> Facets:
    unfiltered_status = replace(flt, status=None).where()
    res = await session.execute(
        select(Incident.status, func.count()).where(*unfiltered_status).group_by(Incident.status)
    )
    status = {s: 0 for s in STATUSES} | {st: int(n) for st, n in res}
    where = flt.where()
    out: dict[str, list[tuple[str, int]]] = {}
    for name, col in (("namespace", Incident.namespace), ("rule_id", Incident.rule_id)):
        count = func.count().label("n")
        rows = await session.execute(
            select(col, count).where(*where).group_by(col).order_by(count.desc(), col).limit(top)
        )
        out[name] = [(str(k), int(n)) for k, n in rows]
    return Facets(status=status, namespace=out["namespace"], rule_id=out["rule_id"])


async def distinct_values(session: AsyncSession, column: str, *, limit: int = 200) -> Sequence[str]:
    """Distinct values of ``namespace``, ``rule_id`` or ``cluster`` (for filter menus)."""
    col = {"namespace": Incident.namespace, "rule_id": Incident.rule_id, "cluster": Incident.cluster}[column]
    res = await session.execute(select(col).distinct().order_by(col).limit(limit))
    return list(res.scalars())
