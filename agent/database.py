"""Opening the incident store for a command: every problem a user can cause
(a malformed ``--db``, a folder that does not exist, a file that is not a
database, a server that refuses the password) is one line naming ``--db``,
with the password masked."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from agent.cli import UserError
from storage.engine import (
    DatabaseMissing,
    DatabaseUnavailable,
    DatabaseURLError,
    EngineOptions,
    check_connection,
    check_sqlite_file,
    create_engine,
    redact_db_url,
)
from storage.migrate import MigrationFailed, upgrade


class NoDatabase(UserError):
    """A read-only command was pointed at a SQLite file that does not exist."""


async def open_engine(url: str, *, create: bool = True, options: EngineOptions | None = None) -> AsyncEngine:
    """An engine that has answered ``SELECT 1``. With ``create`` false (read-only
    commands) a SQLite file that does not exist is NoDatabase, never created. ``options``:
    PostgreSQL's pool and timeouts (``DbSettings.engine``)."""
    where = redact_db_url(url)
    try:
        check_sqlite_file(url, create=create)
        engine = create_engine(url, options=options)
    except DatabaseMissing as exc:
        raise NoDatabase(f"--db {where}: {exc}") from None
    except (DatabaseUnavailable, DatabaseURLError) as exc:
        raise UserError(f"--db {where}: {exc}") from None
    try:
        await check_connection(engine, url)
    except DatabaseUnavailable as exc:
        await engine.dispose()
        raise UserError(f"--db {where}: cannot use the database: {exc}") from None
    return engine


async def migrate(engine: AsyncEngine, url: str) -> None:
    """Upgrade the schema to the newest revision; a refusal is one line naming ``--db``."""
    try:
        await upgrade(engine)
    except MigrationFailed as exc:
        raise UserError(f"--db {redact_db_url(url)}: {exc}") from None
