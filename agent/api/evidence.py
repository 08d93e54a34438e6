"""Evidence as people read it: sentences, lists and tables, never a JSON dump.

An incident's ``evidence`` is whatever its rule recorded (``Finding.evidence``):
scalars, lists of names, lists of records (per pod, per node, per budget),
maps of names to records. :func:`present` turns any such value into blocks the
incident page renders as a sentence, a list, a key/value table or a table with
one row per record and one column per field; values nested deeper are written
inline (``cpu: 1900m, memory: 6.2Gi``). The raw JSON stays on the page, one
click away. Nothing here reads the clock or the database: it is a view of the
stored incident.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Rows of a table (items of a list) shown on the page; the rest are counted, and the
# API's document has them all (a rule may record thousands of nodes).
MAX_ROWS = 100

# Words kept as written when a key becomes a label (``pdbs`` → ``PDBs``).
_WORDS = {
    "pdb": "PDB",
    "pdbs": "PDBs",
    "pvc": "PVC",
    "pvcs": "PVCs",
    "pv": "PV",
    "cpu": "CPU",
    "gpu": "GPU",
    "gpus": "GPUs",
    "id": "ID",
    "ids": "IDs",
    "dra": "DRA",
    "mig": "MIG",
}


_FIELD_NAME = re.compile(r"[a-z]+(?:_[a-z0-9]+)*")


def label(key: str) -> str:
    """``blocked_pods`` → ``Blocked pods``; ``drain_retry_seconds`` → ``Drain retry seconds``.

    Only a field name (lower-case words joined by ``_``) becomes words; a key that is
    data — a node name (``gpu-a``, ``node1``), an attribute value (``A100-80GB``), a
    resource (``nvidia.com/gpu``) — is shown exactly as written."""
    key = str(key)
    if not _FIELD_NAME.fullmatch(key) or ("_" not in key and any(ch.isdigit() for ch in key)):
        return key
    words = [_WORDS.get(w, w) for w in str(key).replace("-", "_").split("_") if w]
    if not words:
        return str(key)
    first = words[0]
    return " ".join([first[:1].upper() + first[1:], *words[1:]])


def inline(value: Any) -> str:
    """One value written on one line: nested maps as ``k: v``, lists joined with commas."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, Mapping):
        if not value:
            return "—"
        return ", ".join(f"{k}: {inline(v)}" for k, v in value.items())
    if isinstance(value, Sequence):
        if not value:
            return "none"
        parts = [inline(v) for v in value]
        if all(isinstance(v, Mapping) for v in value):
            return "; ".join(f"({p})" for p in parts)
        return ", ".join(parts)
    return str(value)


@dataclass(frozen=True, slots=True)
class Block:
    """One evidence value, ready to render.

    ``kind`` is ``text`` (``text``), ``list`` (``items``), ``pairs``
    (``rows`` of two cells: label, value) or ``table`` (``columns`` and
    ``rows``; ``numeric`` marks the columns whose every cell is a number)."""

    key: str
    label: str
    kind: str
    text: str = ""
    items: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    numeric: tuple[bool, ...] = field(default=())
    total: int = 0  # rows or items the value has; more than shown when cut at MAX_ROWS


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _numeric(cells: Sequence[Any]) -> bool:
    present = [c for c in cells if c is not None]
    return bool(present) and all(isinstance(c, int | float) and not isinstance(c, bool) for c in present)


def _table(
    key: str, records: Sequence[Mapping[str, Any]], first: tuple[str, list[str]] | None = None
) -> Block:
    total = len(records)
    records = records[:MAX_ROWS]
    if first is not None:
        first = (first[0], first[1][:MAX_ROWS])
    columns: list[str] = []
    for record in records:
        for name in record:
            if name not in columns:
                columns.append(name)
    raw = [[record.get(name) for name in columns] for record in records]
    headers = [label(c) for c in columns]
    numeric = [_numeric([row[i] for row in raw]) for i in range(len(columns))]
    rows = [[inline(v) for v in row] for row in raw]
    if first is not None:
        headers.insert(0, first[0])
        numeric.insert(0, False)
        for row, name in zip(rows, first[1], strict=True):
            row.insert(0, name)
    return Block(
        key=key,
        label=label(key),
        kind="table",
        columns=tuple(headers),
        rows=tuple(tuple(r) for r in rows),
        numeric=tuple(numeric),
        total=total,
    )


def present_value(key: str, value: Any) -> Block:
    if _is_scalar(value):
        return Block(key=key, label=label(key), kind="text", text=inline(value))
    if isinstance(value, Mapping):
        if value and all(isinstance(v, Mapping) for v in value.values()):
            return _table(key, list(value.values()), first=("Name", [label(k) for k in value]))
        pairs = list(value.items())
        return Block(
            key=key,
            label=label(key),
            kind="pairs",
            rows=tuple((str(k), inline(v)) for k, v in pairs[:MAX_ROWS]),
            total=len(pairs),
        )
    if isinstance(value, Sequence):
        if not value:
            return Block(key=key, label=label(key), kind="text", text="none")
        if all(isinstance(v, Mapping) for v in value):
            return _table(key, value)
        return Block(
            key=key,
            label=label(key),
            kind="list",
            items=tuple(inline(v) for v in value[:MAX_ROWS]),
            total=len(value),
        )
    return Block(key=key, label=label(key), kind="text", text=str(value))


def present(evidence: Mapping[str, Any] | None) -> list[Block]:
    """Every evidence value, in the order the rule recorded them."""
    return [present_value(str(key), value) for key, value in (evidence or {}).items()]


def raw_preview(evidence: Mapping[str, Any] | None, leave_out: str) -> tuple[Any, bool]:
    """The evidence for the page's raw view: ``leave_out`` (drawn elsewhere) left out and
    lists longer than :data:`MAX_ROWS` cut there; and whether anything was cut."""
    cut = False

    def shorten(value: Any) -> Any:
        nonlocal cut
        if isinstance(value, Mapping):
            return {k: shorten(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            if len(value) > MAX_ROWS:
                cut = True
            return [shorten(v) for v in value[:MAX_ROWS]]
        return value

    return {k: shorten(v) for k, v in (evidence or {}).items() if k != leave_out}, cut
