"""Positions for the pages' SVG pictures: the incident's timeline on one time axis and the
list page's trends. Numbers in, coordinates out; the templates draw them.

Nothing here reads the clock or the database: ``now`` and the rows are passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

AXIS_WIDTH = 1000  # SVG user units of the time axis

# Marker shape per timeline kind and notification outcome (shapes and words, not colour alone).
SHAPES = {
    "opened": "circle",
    "updated": "dot",
    "root_cause_changed": "diamond",
    "severity_changed": "diamond",
    "waiting": "ring",
    "escalated": "triangle",
    "resolved": "check",
    "delivered": "square",
    "dead-lettered": "cross",
    "pending": "ring",
    "silenced": "bar",
}


@dataclass(frozen=True, slots=True)
class Marker:
    x: float
    lane: str  # "incident" or "notifications"
    kind: str  # a timeline kind or a notification outcome
    shape: str
    label: str
    at: datetime


def _parse(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _outcome(n: dict[str, Any]) -> tuple[str, datetime | None]:
    status = n["status"]
    if status == "sent":
        return "delivered", _parse(n["sent_at"])
    if status == "failed":
        return "dead-lettered", _parse(n["created_at"])
    if status == "silenced":
        return "silenced", _parse(n["created_at"])
    return "pending", _parse(n["created_at"])


def timeline_axis(
    first_seen: datetime, end: datetime, entries: list[Any], notifications: list[dict[str, Any]]
) -> dict[str, Any]:
    """Markers for every timeline entry (opened, updates, root-cause changes, waiting,
    escalation, resolve) and every notification (delivered, dead-lettered, pending,
    silenced, per sink) on one axis from ``first_seen`` to ``end``."""
    times = [first_seen, end] + [e.at for e in entries]
    start, stop = min(times), max(times)
    span = max((stop - start).total_seconds(), 1.0)

    def x(at: datetime) -> float:
        return round(AXIS_WIDTH * (at - start).total_seconds() / span, 1)

    markers = [
        Marker(x(e.at), "incident", e.kind, SHAPES.get(e.kind, "dot"), e.kind.replace("_", " "), e.at)
        for e in entries
    ]
    for n in notifications:
        outcome, at = _outcome(n)
        if at is None:
            continue
        at = min(max(at, start), stop)
        label = f"{n['event'].replace('_', ' ')} → {n['sink']}: {outcome}"
        markers.append(Marker(x(at), "notifications", outcome, SHAPES[outcome], label, at))
    return {"start": start, "stop": stop, "span_seconds": span, "markers": markers, "width": AXIS_WIDTH}


def day_columns(by_day: list[dict[str, Any]], today: date, days: int = 30) -> dict[str, Any]:
    """Incidents opened per day for the ``days`` days up to ``today`` (missing days are 0)."""
    counts = {str(d["day"]): int(d["count"]) for d in by_day}
    columns = []
    top = 0
    for i in range(days):
        day = today - timedelta(days=days - 1 - i)
        n = counts.get(day.isoformat(), 0)
        top = max(top, n)
        columns.append({"day": day.isoformat(), "count": n})
    scale = max(top, 1)
    for i, c in enumerate(columns):
        c["x"] = i * 20
        c["h"] = round(80 * c["count"] / scale, 1)
        c["y"] = round(90 - c["h"], 1)
    return {"columns": columns, "max": top, "width": days * 20}


def share(rows: list[dict[str, Any]], key: str = "count") -> list[dict[str, Any]]:
    """Each row with ``width``: its ``key`` as a share (0–100) of the largest."""
    top = max((int(r[key]) for r in rows), default=0) or 1
    return [{**r, "width": round(100 * int(r[key]) / top, 1)} for r in rows]


PLACEMENT_BAR = 300  # SVG units of the longest replicas bar
CPU_GAUGE = 120  # SVG units of a 0–100 % CPU use gauge
PLACEMENT_ROW = 44  # SVG units per node


def placement_rows(placement: dict[str, Any]) -> dict[str, Any]:
    """The ``predicted_placement`` evidence of requests-missing-load-skew as rows to draw:
    per node the replicas predicted today and after the proposed requests (one scale for
    both) and the node's real CPU use (0–100 % of allocatable), hot nodes first."""
    before = {str(k): float(v) for k, v in (placement.get("before") or {}).items()}
    after_raw = placement.get("after")
    after = {str(k): float(v) for k, v in after_raw.items()} if isinstance(after_raw, dict) else None
    hot = set(placement.get("hot_nodes") or ())
    cpu = placement.get("cpu_use") or {}
    nodes = sorted({*before, *(after or {}), *hot}, key=lambda n: (n not in hot, -before.get(n, 0.0), n))
    top = max([*before.values(), *(after or {}).values(), 1.0])
    rows = []
    for i, node in enumerate(nodes):
        use = cpu.get(node)
        b, a = before.get(node, 0.0), (after.get(node, 0.0) if after is not None else None)
        rows.append(
            {
                "node": node,
                "hot": node in hot,
                "before": b,
                "after": a,
                "y": 24 + i * PLACEMENT_ROW,
                "w_before": round(PLACEMENT_BAR * b / top, 1),
                "w_after": round(PLACEMENT_BAR * a / top, 1) if a is not None else None,
                "cpu": use,
                "w_cpu": round(CPU_GAUGE * min(100, int(use["percent"])) / 100, 1) if use else None,
            }
        )
    return {
        "rows": rows,
        "replicas": int(placement.get("replicas") or 0),
        "has_after": after is not None,
        "height": 30 + len(rows) * PLACEMENT_ROW,
        "on_hot_before": placement.get("on_hot_nodes_before"),
        "on_hot_after": placement.get("on_hot_nodes_after"),
        "method": placement.get("method", ""),
        "bar": PLACEMENT_BAR,
        "gauge": CPU_GAUGE,
    }
