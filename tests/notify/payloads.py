"""Outbox payloads as the tracker writes them, from the golden scenarios (one per rule).

Each rule's first golden case with a finding is analysed, tracked on a fresh
SQLite database with one sink, then healed (an empty pass over every subject):
the ``opened`` and ``resolved`` outbox rows are the payloads the notifier gets.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from analyzers.ingest import parse_time
from storage.engine import create_engine, create_sessionmaker
from storage.models import Base, Notification
from storage.tracker import EVERY_SUBJECT, track
from tests.scenarios.test_golden import CASES, analyse, load_case


def golden_cases() -> dict[str, Path]:
    """rule_id → the first golden case folder expecting a finding of it."""
    import yaml

    found: dict[str, Path] = {}
    for case in CASES:
        expected = yaml.safe_load((case / "expected.yaml").read_text())
        for f in expected.get("findings") or ():
            found.setdefault(f["rule_id"], case)
    return dict(sorted(found.items()))


async def tracked_payloads(case: Path, cluster: str = "prod-eu1") -> list[dict[str, Any]]:
    """The outbox payloads (opened for every finding, then resolved) of one golden case."""
    objects, expected = load_case(case)
    report = analyse(objects, expected)
    seconds = parse_time(expected["now"])
    assert seconds is not None
    now = datetime.fromtimestamp(seconds, UTC)
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"sqlite+aiosqlite:///{tmp}/p.db")
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            sessions = create_sessionmaker(engine)
            await track(
                sessions, cluster=cluster, findings=report.findings, now=now,
                evaluated=EVERY_SUBJECT, sinks=("slack",),
            )
            await track(
                sessions, cluster=cluster, findings=[], now=now + timedelta(minutes=42),
                evaluated=EVERY_SUBJECT, sinks=("slack",),
            )
            async with sessions() as s:
                rows = (await s.execute(select(Notification).order_by(Notification.id))).scalars()
                return [dict(r.payload) for r in rows]
        finally:
            await engine.dispose()
