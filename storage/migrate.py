"""Run the store's Alembic migrations from code.

``unstick db upgrade`` and the automatic upgrade at start-up call
:func:`upgrade`; it runs on the application's own async engine (Alembic gets
the live connection, see ``alembic/env.py``), so it works from an installed
wheel without ``alembic.ini``. On PostgreSQL a transaction-scoped advisory lock
serialises replicas that start together.

The migrations live in the top-level ``alembic/`` folder of the source tree (no
``__init__.py``: it must not shadow the Alembic library). A wheel carries the
same folder as ``storage/alembic/`` (the package-dir mapping in
``pyproject.toml``); :func:`script_location` finds either.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from storage.models import Base

_HERE = Path(__file__).resolve().parent
# An installed wheel first (storage/alembic), then the source tree (./alembic).
# Never the bare site-packages/alembic: that is the library itself.
_CANDIDATES = (_HERE / "alembic", _HERE.parent / "alembic")
# Arbitrary, fixed: "unstick" in ASCII, as a bigint advisory lock key.
_ADVISORY_LOCK_KEY = 0x756E737469636B


def script_location() -> Path:
    """The folder holding ``env.py``, ``script.py.mako`` and ``versions/``."""
    for candidate in _CANDIDATES:
        if (candidate / "env.py").is_file() and (candidate / "versions").is_dir():
            return candidate
    raise RuntimeError(  # pragma: no cover - a broken install
        "the Alembic migrations are missing: looked in " + ", ".join(map(str, _CANDIDATES))
    )


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(script_location()))
    return cfg


def head_revision() -> str:
    """The newest revision the code knows."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships a revision
        raise RuntimeError(f"no migrations found in {script_location()}")
    return head


class MigrationFailed(Exception):
    """The schema could not be brought to a revision; the message is one line for the user."""


def _upgrade(connection: Connection, revision: str) -> None:
    # The lock first: a second process migrating the same empty database at the same time
    # waits here, then finds the first one's migration record. Taken after the check, it could
    # read "no record" before the first committed and "unstick's tables" after.
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_LOCK_KEY})
    if _current(connection) is None:
        ours = sorted(set(inspect(connection).get_table_names()) & set(Base.metadata.tables))
        if ours:
            raise MigrationFailed(
                f"the database holds unstick's tables ({', '.join(ours[:3])}{', …' if len(ours) > 3 else ''}) "
                "but no migration record (alembic_version): it was not created by unstick's migrations; "
                "use an empty database"
            )
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, revision)


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` (default: the newest), in one transaction.
    Raises MigrationFailed (one line) when the database refuses it."""
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade, revision)
    except DBAPIError as exc:
        first = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else type(exc).__name__
        raise MigrationFailed(f"migrating the schema to {revision} failed: {first}") from None


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def current_revision(engine: AsyncEngine) -> str | None:
    """The database's revision, None for an empty database."""
    async with engine.connect() as conn:
        return await conn.run_sync(_current)


async def is_up_to_date(engine: AsyncEngine) -> bool:
    return await current_revision(engine) == head_revision()
