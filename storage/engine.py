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

import asyncio
import contextlib
import inspect
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
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


class DatabaseUnavailable(Exception):
    """The database cannot be used: unreachable, it refused the credentials, it
    is not a database, or (read-only) it does not exist. The message says why,
    with the password masked."""


class DatabaseMissing(DatabaseUnavailable):
    """A SQLite file that does not exist, for a command that must not create it."""


# Query options each driver understands (anything else is a typo, refused up
# front rather than at the first connection). asyncpg: its connect()
# keywords, plus the DBAPI options SQLAlchemy's asyncpg dialect takes itself.
_SQLITE_OPTIONS = frozenset(
    {"mode", "cache", "uri", "timeout", "check_same_thread", "immutable", "nolock", "vfs", "modeof"}
)
_SQLALCHEMY_ASYNCPG_OPTIONS = frozenset({"prepared_statement_cache_size", "async_fallback"})
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _asyncpg_options() -> frozenset[str]:
    import asyncpg  # type: ignore[import-untyped]

    names = set(inspect.signature(asyncpg.connect).parameters) - {
        "dsn",
        "loop",
        "connection_class",
        "record_class",
    }
    return frozenset(names | _SQLALCHEMY_ASYNCPG_OPTIONS)


def parse_db_url(url: str) -> URL:
    """Parse and normalise a database URL to one of the two async drivers.

    ``sqlite:///x.db`` and ``postgresql://…`` (or ``postgres://…``) are accepted
    as shorthands for ``sqlite+aiosqlite`` and ``postgresql+asyncpg``. A port
    outside 1-65535, a ``%`` that is not a percent-escape, and a query option
    the driver does not know are errors here, not at the first connection."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseURLError(f"malformed database URL: {exc}") from None
    except ValueError:  # SQLAlchemy reads the port with int()
        raise DatabaseURLError("malformed database URL: the port is not a number") from None
    driver = _DRIVERS.get(parsed.drivername)
    if driver is None:
        raise DatabaseURLError(
            f"unsupported database {parsed.drivername!r}: use sqlite+aiosqlite:///PATH or postgresql+asyncpg://…"
        )
    parsed = parsed.set(drivername=driver)
    head = url.split("?", 1)[0]
    if _BAD_ESCAPE.search(head.split("://", 1)[-1].split("/", 1)[0]):
        raise DatabaseURLError("a '%' in the user, password or host is not a percent-escape (write % as %25)")
    try:
        port = parsed.port
    except ValueError:
        raise DatabaseURLError("the port is not a number") from None
    if port is not None and not 1 <= port <= 65535:
        raise DatabaseURLError(f"port {port} is outside 1-65535")
    known = _SQLITE_OPTIONS if driver.startswith("sqlite") else _asyncpg_options()
    unknown = sorted(set(parsed.query) - known)
    if unknown:
        raise DatabaseURLError(
            f"unknown option(s) {', '.join(unknown)} for {driver}; known: {', '.join(sorted(known))}"
        )
    return parsed


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for PostgreSQL, memory and ``file:`` URIs)."""
    parsed = parse_db_url(url)
    db = parsed.database
    if parsed.get_backend_name() != "sqlite" or not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


_SQLITE_HEADER = b"SQLite format 3\x00"


def check_sqlite_file(url: str, *, create: bool) -> None:
    """Raise DatabaseUnavailable when a SQLite URL's file cannot be the store: its
    folder is missing, it is a folder, or it is not a SQLite file; with
    ``create`` false (read-only commands), DatabaseMissing when it does not exist."""
    path = sqlite_file(url)
    if path is None:
        return
    if path.is_dir():
        raise DatabaseUnavailable(f"{path} is a folder, not a database file")
    if not path.exists():
        if not path.parent.is_dir():
            raise DatabaseUnavailable(f"the folder {path.parent} does not exist")
        if not create:
            raise DatabaseMissing(
                f"there is no database at {path}: nothing was recorded there yet "
                "(`unstick db upgrade`, `unstick serve` or `unstick watch` create it)"
            )
        return
    try:
        with path.open("rb") as fh:
            header = fh.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise DatabaseUnavailable(f"{path}: {exc.strerror or exc}") from None
    if header and header != _SQLITE_HEADER:
        raise DatabaseUnavailable(f"{path} is not a SQLite database")


async def check_connection(engine: AsyncEngine, url: str, *, timeout: float = 15.0) -> None:
    """Connect once and run ``SELECT 1``; DatabaseUnavailable (password masked) when that fails."""
    try:
        async with asyncio.timeout(timeout):
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
    except TimeoutError:
        raise DatabaseUnavailable(f"no answer within {timeout:g} s") from None
    except (SQLAlchemyError, OSError, ValueError, TypeError, OverflowError) as exc:
        raise DatabaseUnavailable(connection_problem(exc, url)) from None
    except Exception as exc:  # asyncpg's own errors (InvalidPasswordError, …) when not wrapped
        if type(exc).__module__.startswith("asyncpg"):
            raise DatabaseUnavailable(connection_problem(exc, url)) from None
        raise


def connection_problem(exc: BaseException, url: str) -> str:
    """One line saying why a connection failed, without the password."""
    orig = getattr(exc, "orig", None) or exc
    message = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    try:
        password = make_url(url).password
    except (ArgumentError, ValueError):
        password = None
    if password:
        message = message.replace(str(password), "***")
    return message[:300]


def redact_db_url(url: str) -> str:
    """The URL with its password masked, for logs and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "<malformed database URL>"


def _json_dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """How the engine uses a PostgreSQL server (SQLite ignores them: one file, one writer).

    The defaults hold `unstick serve` under 200 concurrent clients beside a writer
    (bench/bench_serve_load.py; docs/performance.md):

    * ``pool_size`` connections kept open, no overflow: SQLAlchemy's default (5 + 10 overflow)
      opened and closed an overflow connection per request under load, and each new
      connection paid its start-up, type-codec and prepared-statement round trips again;
    * ``pool_timeout`` seconds a request waits for a connection before it is answered
      ``503`` with ``Retry-After`` (less than a client's usual 30 s timeout);
    * ``statement_timeout`` and ``lock_timeout`` (seconds, ``None``: the database's or
      role's own setting) make a statement stuck behind a lock or a runaway query fail
      with PostgreSQL's own error instead of holding a connection forever.
    """

    pool_size: int = 20
    pool_timeout: float = 20.0
    statement_timeout: float | None = 60.0
    lock_timeout: float | None = 10.0

    def server_settings(self) -> dict[str, str]:
        out = {"timezone": "UTC", "application_name": "unstick"}
        if self.statement_timeout is not None:
            out["statement_timeout"] = f"{round(self.statement_timeout * 1000)}ms"
        if self.lock_timeout is not None:
            out["lock_timeout"] = f"{round(self.lock_timeout * 1000)}ms"
        return out


def create_engine(url: str, *, echo: bool = False, options: EngineOptions | None = None) -> AsyncEngine:
    """An async engine for ``url`` with the settings each backend wants.

    SQLite: WAL journal (readers never block the writer), ``synchronous=NORMAL``
    (durable across process crashes; a power cut may lose the last commits),
    foreign keys on, a 5 s busy timeout. PostgreSQL: :class:`EngineOptions` (pool,
    statement and lock timeouts), the session time zone UTC, the application name
    ``unstick``."""
    parsed = parse_db_url(url)
    kwargs: dict[str, Any] = {
        "echo": echo,
        "json_serializer": _json_dumps,
        "json_deserializer": orjson.loads,
    }
    if parsed.get_backend_name() == "postgresql":
        opts = options or EngineOptions()
        kwargs["pool_size"] = opts.pool_size
        kwargs["max_overflow"] = 0
        kwargs["pool_timeout"] = opts.pool_timeout
        kwargs["pool_pre_ping"] = True
        kwargs["connect_args"] = {"server_settings": opts.server_settings()}
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


def reading_sessions(sessions: async_sessionmaker[AsyncSession]) -> ReadingSessions:
    """Sessions over the same engine and pool in autocommit: each statement stands alone, so a
    request that only reads costs no ``BEGIN`` and ``ROLLBACK`` round trips. For handlers that
    only read; a read of several statements sees each statement's own snapshot.

    With a connection pool of fixed size (PostgreSQL), readers take turns first come, first
    served: a reader waits for one of ``pool_size`` slots in a FIFO queue (at most the pool's
    timeout, then ``TimeoutError``: a 503 for the API). The pool's own queue lets a newcomer
    take a connection just returned while older waiters sleep, so under sustained load some
    requests starved past the pool timeout while most were served in a few seconds."""
    bind = sessions.kw.get("bind")
    if not isinstance(bind, AsyncEngine):
        return ReadingSessions(sessions)
    options = {k: v for k, v in sessions.kw.items() if k != "bind"}
    reads = async_sessionmaker(bind.execution_options(isolation_level="AUTOCOMMIT"), **options)
    pool = bind.pool
    size, timeout = getattr(pool, "size", None), getattr(pool, "timeout", None)
    if bind.dialect.name == "postgresql" and callable(size) and callable(timeout):
        return ReadingSessions(reads, slots=int(size()), wait=float(timeout()))
    return ReadingSessions(reads)


class ReadingSessions:
    """``async with reads() as session``: a read session, handed out in arrival order when
    ``slots`` bounds how many are open at once (see :func:`reading_sessions`)."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], *, slots: int = 0, wait: float = 0.0
    ) -> None:
        self.sessions = sessions
        self.wait = wait
        self._turns = asyncio.Semaphore(slots) if slots > 0 else None  # FIFO since Python 3.11.1

    @contextlib.asynccontextmanager
    async def __call__(self) -> AsyncIterator[AsyncSession]:
        turns = self._turns
        if turns is None:
            async with self.sessions() as session:
                yield session
            return
        async with asyncio.timeout(self.wait):
            await turns.acquire()
        try:
            async with self.sessions() as session:
                yield session
        finally:
            turns.release()


def backend_name(engine: AsyncEngine) -> str:
    """``"sqlite"`` or ``"postgresql"``."""
    return engine.dialect.name
