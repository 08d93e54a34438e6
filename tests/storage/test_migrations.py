"""Migrations from an empty database produce exactly the models' schema, on SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from storage.engine import create_engine, create_sessionmaker
from storage.migrate import current_revision, head_revision, is_up_to_date, upgrade
from storage.models import Base, include_for_dialect
from storage.tracker import track
from tests import pg
from tests.storage.factories import at, finding


@pytest.fixture
async def empty(db_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(db_url)
    yield eng
    await eng.dispose()


@contextlib.asynccontextmanager
async def second_database(request: pytest.FixtureRequest, db_url: str) -> AsyncIterator[str]:
    if db_url.startswith("sqlite"):
        yield db_url.replace("unstick.db", "reference.db")
        return
    server: pg.PostgresServer = request.getfixturevalue("pg_server")
    async with server.database() as url:
        yield url


def _diff(conn: Connection) -> list[Any]:
    ctx = MigrationContext.configure(
        conn,
        opts={
            "compare_type": True,
            "compare_server_default": True,
            "include_object": include_for_dialect(conn.dialect.name),
        },
    )
    return list(compare_metadata(ctx, Base.metadata))


def _schema(conn: Connection) -> dict[str, Any]:
    """Tables → columns (name, type class, nullable) and indexes (name, columns, unique, partial clause)."""
    insp = inspect(conn)
    out: dict[str, Any] = {}

    def where(index: Any) -> str:
        clause = index.get("dialect_options", {}).get(f"{conn.dialect.name}_where")
        return "" if clause is None else str(clause).strip("()").lower()

    for table in sorted(insp.get_table_names()):
        if table == "alembic_version":
            continue
        cols = [(c["name"], type(c["type"]).__name__, c["nullable"]) for c in insp.get_columns(table)]
        idx = sorted(
            (i["name"], tuple(i["column_names"]), bool(i["unique"]), where(i))
            for i in insp.get_indexes(table)
        )
        fks = sorted(
            (fk["name"], tuple(fk["constrained_columns"]), fk["referred_table"])
            for fk in insp.get_foreign_keys(table)
        )
        out[table] = {"columns": cols, "indexes": idx, "fks": fks}
    return out


async def test_upgrade_from_empty_matches_the_models(
    empty: AsyncEngine, db_url: str, request: pytest.FixtureRequest
) -> None:
    assert await current_revision(empty) is None
    await upgrade(empty)
    assert await current_revision(empty) == head_revision() and await is_up_to_date(empty)
    async with empty.connect() as conn:
        assert await conn.run_sync(_diff) == []
        migrated = await conn.run_sync(_schema)

    # The same schema, built straight from the models in another database, reflects identically
    # (alembic's comparison ignores partial-index clauses; this does not).
    async with second_database(request, db_url) as reference_url:
        ref = create_engine(reference_url)
        async with ref.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        async with ref.connect() as conn:
            reference = await conn.run_sync(_schema)
        await ref.dispose()
    assert migrated == reference
    partial = {
        name: (cols, unique, clause) for name, cols, unique, clause in migrated["incidents"]["indexes"]
    }
    cols, unique, clause = partial["uq_incidents_open_fingerprint"]
    assert cols == ("cluster", "fingerprint") and unique and "status" in clause and "open" in clause
    cols, unique, clause = partial["ix_incidents_waiting_last_seen"]
    assert cols == ("last_seen", "id") and not unique and "waiting_for is not null" in clause
    assert ("waiting_for", "VARCHAR", True) in migrated["incidents"]["columns"]

    # Upgrading again is a no-op, and the tracker works on the migrated schema.
    await upgrade(empty)
    r = await track(create_sessionmaker(empty), cluster="c", findings=[finding()], now=at(0), sinks=["s"])
    assert len(r.opened) == 1 and r.notifications == 1


async def test_0003_adds_the_waiting_state_to_existing_incidents_and_downgrades(empty: AsyncEngine) -> None:
    await upgrade(empty, "0002")
    t = at(0).replace(tzinfo=None)  # raw SQL on 0002: SQLite keeps naive UTC text, PostgreSQL reads it as UTC
    async with empty.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO incidents (cluster, fingerprint, rule_id, cause, severity, status, subject_kind,"
                " namespace, subject_name, title, explanation, evidence, remedies, pods, first_seen, last_seen,"
                " occurrences, last_message) VALUES ('c', :fp, 'rollout-deadlock', '', 'critical', 'open',"
                " 'Deployment', 'ml', 'trainer', 'old', 'old', '{}', '[]', '[]', :t, :t, 1, '')"
            ),
            {"fp": finding().fingerprint, "t": t},
        )
    await upgrade(empty)
    sessions = create_sessionmaker(empty)
    # The incident from before is open and was paged: it does not start waiting.
    f = finding()
    r = await track(sessions, cluster="c", findings=[f], now=at(1), waiting={f.fingerprint: "scale-up"})
    assert len(r.updated) == 1 and r.waiting == []
    await track(
        sessions,
        cluster="c",
        findings=[finding(rule_id="other")],
        now=at(2),
        waiting={finding(rule_id="other").fingerprint: "scale-up"},
    )
    async with empty.connect() as conn:
        rows = (await conn.execute(text("SELECT id, waiting_for FROM incidents ORDER BY id"))).all()
    assert [tuple(r) for r in rows] == [(1, None), (2, "scale-up")]

    await upgrade_to(empty, "0002")
    async with empty.connect() as conn:
        columns = await conn.run_sync(lambda c: [col["name"] for col in inspect(c).get_columns("incidents")])
        indexes = await conn.run_sync(lambda c: [i["name"] for i in inspect(c).get_indexes("incidents")])
        count = (await conn.execute(text("SELECT count(*) FROM incidents"))).scalar_one()
    assert "waiting_for" not in columns and "waiting_since" not in columns
    assert "ix_incidents_waiting_last_seen" not in indexes and count == 2
    await upgrade(empty)
    assert await is_up_to_date(empty)


async def test_the_comparison_notices_drift(empty: AsyncEngine) -> None:
    await upgrade(empty)
    async with empty.begin() as conn:
        await conn.execute(text("DROP INDEX ix_incidents_rule_last_seen"))
    async with empty.connect() as conn:
        diff = await conn.run_sync(_diff)
    assert [(d[0], d[1].name) for d in diff] == [("add_index", "ix_incidents_rule_last_seen")]


async def test_downgrade_to_base_and_back(empty: AsyncEngine) -> None:
    await upgrade(empty)
    await upgrade_to(empty, "base")
    assert await current_revision(empty) is None
    async with empty.connect() as conn:
        assert (
            await conn.run_sync(lambda c: [t for t in inspect(c).get_table_names() if t != "alembic_version"])
            == []
        )
    await upgrade(empty)
    assert await is_up_to_date(empty)


async def upgrade_to(engine: AsyncEngine, revision: str) -> None:
    from alembic import command

    from storage.migrate import alembic_config

    def run(conn: Connection) -> None:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)

    async with engine.begin() as conn:
        await conn.run_sync(run)


async def test_0004_adds_silences_and_the_notification_state_and_downgrades(empty: AsyncEngine) -> None:
    await upgrade(empty, "0003")
    t = at(0).replace(tzinfo=None)
    async with empty.begin() as conn:
        for fp, status, waiting in (("a", "open", None), ("b", "open", "scale-up"), ("c", "resolved", None)):
            await conn.execute(
                text(
                    "INSERT INTO incidents (cluster, fingerprint, rule_id, cause, severity, status, subject_kind,"
                    " namespace, subject_name, title, explanation, evidence, remedies, pods, first_seen,"
                    " last_seen, occurrences, last_message, waiting_for) VALUES ('c', :fp, 'r', '', 'critical',"
                    " :status, 'Deployment', 'ml', :fp, 't', 'e', '{}', '[]', '[]', :t, :t, 1, '', :waiting)"
                ),
                {"fp": fp, "status": status, "t": t, "waiting": waiting},
            )
    await upgrade(empty)
    async with empty.connect() as conn:
        rows = (await conn.execute(text("SELECT fingerprint, notified_at FROM incidents ORDER BY id"))).all()
        tables = await conn.run_sync(lambda c: inspect(c).get_table_names())
    # Only the open incident somebody was paged about counts as notified (at its opening).
    assert [(fp, n is not None) for fp, n in rows] == [("a", True), ("b", False), ("c", False)]
    assert "silences" in tables
    # Reminders work on the migrated rows: "a" opened at 0 is owed one a day later.
    from storage.tracker import track_reminders

    ids = await track_reminders(create_sessionmaker(empty), cluster="c", now=at(24 * 60), sinks=["s"])
    assert ids == [1]

    await upgrade_to(empty, "0003")
    async with empty.connect() as conn:
        columns = await conn.run_sync(lambda c: [col["name"] for col in inspect(c).get_columns("incidents")])
        tables = await conn.run_sync(lambda c: inspect(c).get_table_names())
    assert not {"resolution", "notified_at", "peak_pods"} & set(columns) and "silences" not in tables
    await upgrade(empty)
    assert await is_up_to_date(empty)


async def test_processes_migrating_one_empty_database_at_once_all_succeed(pg_server: pg.PostgresServer) -> None:
    """Two workers started together against a fresh PostgreSQL database both migrate it (SQLite
    is one process's file: the agent and its API share it, workers use PostgreSQL): the second waits
    for the first's lock and then finds its record (it used to read "no record" before the
    first committed and "unstick's tables" after, and exit 2)."""
    import asyncio

    async with pg_server.database() as url:
        engines = [create_engine(url) for _ in range(4)]
        try:
            await asyncio.gather(*(upgrade(e) for e in engines))
            assert await current_revision(engines[0]) == head_revision()
        finally:
            for e in engines:
                await e.dispose()
