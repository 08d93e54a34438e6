"""Engines and sessions for the incident store.

Two backends: a SQLite file through aiosqlite (the zero-set-up default) and
PostgreSQL through asyncpg (production, a fleet of clusters). Build the engine
and the session factory once, at start-up, and pass them down::

    engine = create_engine(url)
    sessions = create_sessionmaker(engine)
    await upgrade(engine)            # storage.migrate: schema to the latest revision
    async with sessions.begin() as session:
        ...
    await engine.dispose()
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

DEFAULT_DB_URL = "sqlite+aiosqlite:///./unstick.db"

_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgres": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
}


class DatabaseURLError(ValueError):
    """The database URL cannot be used (unknown backend or malformed)."""


def parse_db_url(url: str) -> URL:
    """Parse and normalise a database URL to one of the two async drivers.

    ``sqlite:///x.db`` and ``postgresql://…`` (or ``postgres://…``) are accepted
    as shorthands for ``sqlite+aiosqlite`` and ``postgresql+asyncpg``."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseURLError(f"malformed database URL: {exc}") from None
    driver = _DRIVERS.get(parsed.drivername)
    if driver is None:
        raise DatabaseURLError(
            f"unsupported database {parsed.drivername!r}: use sqlite+aiosqlite:///PATH or postgresql+asyncpg://…"
        )
    return parsed.set(drivername=driver)


def redact_db_url(url: str) -> str:
    """The URL with its password masked, for logs and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<malformed database URL>"


def _json_dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()


def create_engine(url: str, *, echo: bool = False, pool_size: int = 5) -> AsyncEngine:
    """An async engine for ``url`` with the settings each backend wants.

    SQLite: WAL journal (readers never block the writer), ``synchronous=NORMAL``
    (durable across process crashes; a power cut may lose the last commits),
    foreign keys on, a 5 s busy timeout. PostgreSQL: the session time zone is
    UTC and the application name is ``unstick``."""
    parsed = parse_db_url(url)
    kwargs: dict[str, Any] = {
        "echo": echo,
        "json_serializer": _json_dumps,
        "json_deserializer": orjson.loads,
    }
    if parsed.get_backend_name() == "postgresql":
        kwargs["pool_size"] = pool_size
        kwargs["pool_pre_ping"] = True
        kwargs["connect_args"] = {"server_settings": {"timezone": "UTC", "application_name": "unstick"}}
        return create_async_engine(parsed, **kwargs)

    engine = create_async_engine(parsed, **kwargs)
    memory = parsed.database in (None, "", ":memory:")

    @event.listens_for(engine.sync_engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if not memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=5000")
        cursor.close()

    return engine


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """The session factory: objects stay usable after commit (no lazy reloads in async code)."""
    return async_sessionmaker(engine, expire_on_commit=False)


def backend_name(engine: AsyncEngine) -> str:
    """``"sqlite"`` or ``"postgresql"``."""
    return engine.dialect.name
