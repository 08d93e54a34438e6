"""``unstick db upgrade|current``: the incident store's schema."""

from __future__ import annotations

import argparse
import asyncio

from agent.cli import UserError
from agent.database import NoDatabase, migrate, open_engine
from agent.settings import Settings, add_db_arguments
from storage.engine import redact_db_url
from storage.migrate import current_revision, head_revision


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("db", help="manage the incident database schema")
    sub = p.add_subparsers(dest="db_command", metavar="ACTION")
    sub.required = True
    up = sub.add_parser("upgrade", help="upgrade the schema to the newest revision")
    add_db_arguments(up)
    up.set_defaults(func=run_upgrade)
    cur = sub.add_parser("current", help="print the schema revision of the database")
    add_db_arguments(cur)
    cur.set_defaults(func=run_current)


def run_upgrade(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)

    async def go() -> tuple[str | None, str | None]:
        engine = await open_engine(settings.db.url, options=settings.db.engine)
        try:
            before = await current_revision(engine)
            await migrate(engine, settings.db.url)
            return before, await current_revision(engine)
        except OSError as exc:
            raise UserError(f"cannot reach the database {redact_db_url(settings.db.url)}: {exc}") from None
        finally:
            await engine.dispose()

    before, after = asyncio.run(go())
    where = redact_db_url(settings.db.url)
    if before == after:
        print(f"{where}: already at revision {after} (head)")
    else:
        print(f"{where}: upgraded from {before or 'empty'} to {after}")
    return 0


def run_current(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)

    async def go() -> str | None:
        try:
            engine = await open_engine(settings.db.url, create=False, options=settings.db.engine)
        except NoDatabase:
            return None  # read-only: a file that does not exist is an empty store, and stays absent
        try:
            return await current_revision(engine)
        except OSError as exc:
            raise UserError(f"cannot reach the database {redact_db_url(settings.db.url)}: {exc}") from None
        finally:
            await engine.dispose()

    rev = asyncio.run(go())
    head = head_revision()
    state = "head" if rev == head else f"behind head {head}: run `unstick db upgrade`"
    print(f"{rev or 'empty'} ({state})")
    return 0 if rev == head else 1
