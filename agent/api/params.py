"""Query parameters of the incident list and stats, validated once for the
API, the pages and the CLI.

Every rejection is a :class:`~agent.api.errors.ApiError` 400 naming the
parameter. The API is strict (unknown, repeated and empty parameters are
errors: a typo like ``stauts=open`` must not silently list everything); the
pages are lenient about empty values, which HTML forms submit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from multidict import MultiMapping

from agent.api.errors import bad_parameter
from storage.queries import STATUSES, IncidentFilter, Sort

SEVERITIES = ("info", "warning", "critical")
BOOLEANS = ("true", "false")
SORTS = tuple(s.value for s in Sort)

# Patterns shared with the OpenAPI document (agent/api/openapi.py).
PATTERNS: dict[str, str] = {
    # DNS-1123 subdomain: namespaces and object names.
    "namespace": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
    "name": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
    "kind": r"^[A-Za-z][A-Za-z0-9]*$",
    "rule_id": r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
    # Cluster names and free text: anything printable.
    "cluster": r"^[^\x00-\x1f\x7f]+$",
    "q": r"^[^\x00-\x1f\x7f]+$",
    "cursor": r"^[A-Za-z0-9_-]+$",
}
MAX_LENGTHS = {
    "namespace": 253,
    "name": 253,
    "kind": 100,
    "rule_id": 100,
    "cluster": 253,
    "q": 200,
    "cursor": 1000,
}
_COMPILED = {k: re.compile(v) for k, v in PATTERNS.items()}

FILTER_PARAMS = (
    "status",
    "cluster",
    "namespace",
    "rule_id",
    "severity",
    "kind",
    "name",
    "since",
    "until",
    "q",
    "waiting",
)
LIST_PARAMS = (*FILTER_PARAMS, "sort", "limit", "cursor")

_RFC3339 = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})")


def parse_time(parameter: str, raw: str) -> datetime:
    """An RFC 3339 date-time (``2024-05-01T12:00:00Z``, any offset) as UTC.

    A leap second (``:60``) is read as ``:59.999999``."""
    m = _RFC3339.fullmatch(raw)
    if not m:
        raise bad_parameter(
            parameter, f"{parameter} must be an RFC 3339 date-time such as 2024-05-01T12:00:00Z"
        )
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    frac, offset = m.group(7), m.group(8).upper()
    micro = int((frac[1:] + "000000")[:6]) if frac else 0
    if second == 60:
        second, micro = 59, 999_999
    try:
        base = datetime(year, month, day, hour, minute, second, micro)
        if offset == "Z":
            return base.replace(tzinfo=UTC)
        sign = 1 if offset[0] == "+" else -1
        oh, om = int(offset[1:3]), int(offset[4:6])
        if oh > 23 or om > 59:
            raise ValueError("offset out of range")
        aware = base.replace(tzinfo=timezone(sign * timedelta(hours=oh, minutes=om)))
        return aware.astimezone(UTC)
    except (ValueError, OverflowError):
        raise bad_parameter(parameter, f"{parameter} is not a valid date-time") from None


def _text(parameter: str, raw: str) -> str:
    if len(raw) > MAX_LENGTHS[parameter]:
        raise bad_parameter(parameter, f"{parameter} is longer than {MAX_LENGTHS[parameter]} characters")
    if not _COMPILED[parameter].fullmatch(raw):
        raise bad_parameter(parameter, f"{parameter} {raw[:60]!r} does not match {PATTERNS[parameter]}")
    return raw


def _choice(parameter: str, raw: str, choices: tuple[str, ...]) -> str:
    if raw not in choices:
        raise bad_parameter(parameter, f"{parameter} must be one of {', '.join(choices)}")
    return raw


@dataclass(frozen=True, slots=True)
class ListParams:
    filter: IncidentFilter
    sort: Sort
    limit: int
    cursor: str | None

    def query(self, **overrides: Any) -> dict[str, str]:
        """Back to query parameters (for links: next page, filters)."""
        f = self.filter
        q: dict[str, Any] = {
            "status": f.status,
            "cluster": f.cluster,
            "namespace": f.namespace,
            "rule_id": f.rule_id,
            "severity": f.severity,
            "kind": f.kind,
            "name": f.name,
            "since": f.since.isoformat().replace("+00:00", "Z") if f.since else None,
            "until": f.until.isoformat().replace("+00:00", "Z") if f.until else None,
            "q": f.text,
            "waiting": None if f.waiting is None else ("true" if f.waiting else "false"),
            "sort": self.sort.value if self.sort is not Sort.LAST_SEEN_DESC else None,
            "limit": self.limit,
            "cursor": self.cursor,
        }
        q.update(overrides)
        return {k: str(v) for k, v in q.items() if v is not None and v != ""}


def single_values(query: MultiMapping[str], allowed: tuple[str, ...], *, strict: bool) -> dict[str, str]:
    values: dict[str, str] = {}
    for key in query:
        if key not in allowed:
            if strict:
                raise bad_parameter(key, f"unknown parameter {key!r}; known: {', '.join(allowed)}")
            continue
        got = query.getall(key)
        if len(got) > 1:
            raise bad_parameter(key, f"give {key} once")
        if got[0] == "":
            if strict:
                raise bad_parameter(key, f"{key} must not be empty")
            continue
        values[key] = got[0]
    return values


def parse_filter(values: Mapping[str, str]) -> IncidentFilter:
    since = parse_time("since", values["since"]) if "since" in values else None
    until = parse_time("until", values["until"]) if "until" in values else None
    return IncidentFilter(
        status=_choice("status", values["status"], STATUSES) if "status" in values else None,
        severity=_choice("severity", values["severity"], SEVERITIES) if "severity" in values else None,
        cluster=_text("cluster", values["cluster"]) if "cluster" in values else None,
        namespace=_text("namespace", values["namespace"]) if "namespace" in values else None,
        rule_id=_text("rule_id", values["rule_id"]) if "rule_id" in values else None,
        kind=_text("kind", values["kind"]) if "kind" in values else None,
        name=_text("name", values["name"]) if "name" in values else None,
        since=since,
        until=until,
        text=_text("q", values["q"]) if "q" in values else None,
        waiting=_choice("waiting", values["waiting"], BOOLEANS) == "true" if "waiting" in values else None,
    )


def parse_list(
    query: MultiMapping[str], *, default_limit: int, max_limit: int, strict: bool = True
) -> ListParams:
    values = single_values(query, LIST_PARAMS, strict=strict)
    flt = parse_filter(values)
    sort = Sort(_choice("sort", values["sort"], SORTS)) if "sort" in values else Sort.LAST_SEEN_DESC
    limit = default_limit
    if "limit" in values:
        raw = values["limit"]
        if not re.fullmatch(r"[0-9]{1,9}", raw):
            raise bad_parameter("limit", f"limit must be an integer between 1 and {max_limit}")
        limit = int(raw)
        if not 1 <= limit <= max_limit:
            raise bad_parameter("limit", f"limit must be between 1 and {max_limit}")
    cursor = _text("cursor", values["cursor"]) if "cursor" in values else None
    return ListParams(filter=flt, sort=sort, limit=limit, cursor=cursor)


def parse_stats(query: MultiMapping[str], *, strict: bool = True) -> IncidentFilter:
    return parse_filter(single_values(query, FILTER_PARAMS, strict=strict))


MAX_ID = 2**63 - 1  # BIGINT
MAX_REMEDY = 999


def parse_id(parameter: str, raw: str, *, minimum: int = 1, maximum: int = MAX_ID) -> int:
    """An integer id in [minimum, maximum] (the OpenAPI document declares the same bounds)."""
    if not re.fullmatch(r"[0-9]{1,19}", raw) or not minimum <= int(raw) <= maximum:
        raise bad_parameter(parameter, f"{parameter} must be an integer from {minimum} to {maximum}")
    return int(raw)
