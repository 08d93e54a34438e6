"""``unstick silences add|list|rm``: hold back the notifications of matching incidents.

Reads and writes the database directly (``--db URL`` or ``UNSTICK_DB_URL``)
with the API's validation (``storage.silences``). A silence matches an
incident when every matcher given matches: ``--cluster``, ``--namespace``,
``--rule`` exactly, ``--subject`` as a shell glob over the workload's name.
It lasts ``--for`` (``30m``, ``2h``, ``7d``) or ``--until`` (RFC 3339);
creating one also silences the matching notifications still pending.
``--json`` prints what the API returns.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson

from agent.cli import EXIT_OK, UserError
from agent.settings import Settings, add_db_arguments

T = TypeVar("T")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("silences", help="silence notifications: add, list and remove silences")
    sub = p.add_subparsers(dest="silences_command", metavar="ACTION")
    sub.required = True

    add = sub.add_parser("add", help="add a silence", description=__doc__)
    add_db_arguments(add)
    add.add_argument("--cluster", help="only incidents of this cluster")
    add.add_argument("-n", "--namespace", help="only incidents in this namespace")
    add.add_argument("--rule", dest="rule_id", metavar="RULE_ID", help="only incidents of this rule")
    add.add_argument("--subject", metavar="GLOB", help="only workloads whose name matches (e.g. 'trainer-*')")
    add.add_argument("--reason", required=True, help="why (shown wherever a notification is held back)")
    until = add.add_mutually_exclusive_group(required=True)
    until.add_argument("--for", dest="duration", metavar="DURATION", help="how long: 30m, 2h, 1h30m, 7d")
    until.add_argument("--until", dest="expires_at", metavar="TIME", help="until an RFC 3339 time")
    add.add_argument("--by", dest="created_by", default="cli", help="who silences (default: cli)")
    add.add_argument("--json", action="store_true", help="print the API's JSON")
    add.set_defaults(func=run_add)

    ls = sub.add_parser("list", help="list silences, newest first")
    add_db_arguments(ls)
    ls.add_argument("--all", action="store_true", help="expired ones too")
    ls.add_argument("--json", action="store_true", help="print the API's JSON")
    ls.set_defaults(func=run_list)

    rm = sub.add_parser("rm", help="remove a silence (notifications it silenced stay silenced)")
    add_db_arguments(rm)
    rm.add_argument("id", help="silence id")
    rm.set_defaults(func=run_rm)


def _with_session(args: argparse.Namespace, work: Callable[[Any], Awaitable[T]]) -> T:
    from agent.commands.incidents import _check_schema
    from agent.database import open_engine
    from storage.engine import create_sessionmaker, redact_db_url
    from storage.migrate import current_revision, head_revision

    settings = Settings.from_args(args)

    async def go() -> T:
        engine = await open_engine(settings.db.url, create=False, options=settings.db.engine)  # a missing file stays missing
        try:
            await _check_schema(engine, settings.db.url)
            if await current_revision(engine) != head_revision():
                raise UserError(
                    f"{redact_db_url(settings.db.url)}: the schema predates silences: run `unstick db upgrade`"
                )
            async with create_sessionmaker(engine).begin() as session:
                return await work(session)
        finally:
            await engine.dispose()

    return asyncio.run(go())


def run_add(args: argparse.Namespace) -> int:
    from agent.api.silences import spec_from
    from storage.silences import InvalidSilence, create_silence, silence_dict

    now = datetime.now(UTC)
    body = {
        k: getattr(args, k)
        for k in (
            "cluster",
            "namespace",
            "rule_id",
            "subject",
            "reason",
            "duration",
            "expires_at",
            "created_by",
        )
    }
    flags = {"rule_id": "--rule", "duration": "--for", "expires_at": "--until", "created_by": "--by"}
    try:
        spec = spec_from(body, now=now, created_by="cli")
    except InvalidSilence as exc:
        raise UserError(f"{_flag(exc.field, flags)}: {exc.message}") from None

    async def work(session: Any) -> tuple[dict[str, Any], int]:
        try:
            silence, silenced = await create_silence(session, spec, now=now)
        except InvalidSilence as exc:
            raise UserError(f"{_flag(exc.field, flags)}: {exc.message}") from None
        return silence_dict(silence, now=now), silenced

    doc, silenced = _with_session(args, work)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps({**doc, "silenced_notifications": silenced}) + b"\n")
    else:
        print(f"silence {doc['id']} until {doc['expires_at']}: {_matchers(doc)}")
        if silenced:
            print(f"{silenced} pending notification(s) silenced")
    return EXIT_OK


def _flag(field: str, flags: dict[str, str]) -> str:
    if field == "matchers":
        return "--cluster/--namespace/--rule/--subject"
    return flags.get(field, f"--{field}")


def _matchers(doc: dict[str, Any]) -> str:
    parts = [f"{k}={doc[k]}" for k in ("cluster", "namespace", "rule_id", "subject") if doc.get(k)]
    return ", ".join(parts)


def run_list(args: argparse.Namespace) -> int:
    from storage.silences import list_silences, silence_dict

    now = datetime.now(UTC)

    async def work(session: Any) -> list[dict[str, Any]]:
        return [
            silence_dict(s, now=now) for s in await list_silences(session, now=now, include_expired=args.all)
        ]

    items = _with_session(args, work)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps({"items": items}) + b"\n")
        return EXIT_OK
    if not items:
        print("no silences" if args.all else "no active silences (--all lists expired ones too)")
        return EXIT_OK
    for s in items:
        state = "" if s["active"] else " (expired)"
        print(f"{s['id']:>5}  until {s['expires_at']}{state}  {_matchers(s)}  — {s['reason']}")
    return EXIT_OK


def run_rm(args: argparse.Namespace) -> int:
    from analyzers import bounds
    from storage.silences import delete_silence

    try:
        silence_id = bounds.count("id", args.id, minimum=1, maximum=2**63 - 1)
    except bounds.OutOfBounds as exc:
        raise UserError(str(exc)) from None

    async def work(session: Any) -> bool:
        return await delete_silence(session, silence_id)

    if not _with_session(args, work):
        raise UserError(f"id: there is no silence {args.id}")
    print(f"silence {args.id} removed")
    return EXIT_OK
