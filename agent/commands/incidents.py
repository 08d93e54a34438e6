"""``unstick incidents list|show``: the incident history from the command line.

Reads the database directly (``--db URL`` or ``UNSTICK_DB_URL``) with the
API's filters and validation; ``--json`` prints exactly what the API returns
(``{"items", "next_cursor"}`` for a list, the incident for ``show``).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from multidict import MultiDict

from agent.api.errors import ApiError
from agent.api.params import SEVERITIES, SORTS, parse_id, parse_list
from agent.cli import EXIT_OK, UserError
from agent.database import open_engine
from agent.settings import ApiSettings, Settings, add_db_arguments
from agent.terminal import printable
from storage.engine import create_sessionmaker, redact_db_url
from storage.migrate import current_revision
from storage.queries import STATUSES, InvalidCursor, get_incident, list_incidents
from storage.views import incident_detail_dict, incident_dict

_FLAG_OF = {"q": "--search", "rule_id": "--rule"}
_RELATIVE = re.compile(r"[0-9]{1,15}[smhdw]")
MAX_AGO = timedelta(days=100 * 365)
"""Furthest back ``--since``/``--until`` may reach as a duration ago."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("incidents", help="list and show recorded incidents")
    sub = p.add_subparsers(dest="incidents_command", metavar="ACTION")
    sub.required = True

    ls = sub.add_parser("list", help="list incidents, newest first")
    add_db_arguments(ls)
    ls.add_argument("--status", choices=STATUSES)
    ls.add_argument("--severity", choices=SEVERITIES)
    ls.add_argument(
        "--waiting",
        choices=("true", "false"),
        help="true: incidents that waited for a scale-up (nobody paged); false: the others",
    )
    ls.add_argument("--cluster")
    ls.add_argument("-n", "--namespace")
    ls.add_argument("--rule", dest="rule_id", metavar="RULE_ID")
    ls.add_argument("--kind", help="subject kind, e.g. Deployment")
    ls.add_argument("--name", help="subject name")
    ls.add_argument("--since", help="active at or after: RFC 3339 time or a duration ago (30m, 24h, 7d, 2w)")
    ls.add_argument("--until", help="first seen before: RFC 3339 time or a duration ago")
    ls.add_argument("-q", "--search", dest="q", metavar="TEXT", help="text in the title or explanation")
    ls.add_argument("--sort", choices=SORTS, default=None)
    ls.add_argument("--limit", default="50", help="page size (default 50, at most 200)")
    ls.add_argument("--cursor", help="next_cursor of a previous --json page")
    ls.add_argument("--json", action="store_true", help="print the API's JSON")
    ls.set_defaults(func=run_list)

    show = sub.add_parser("show", help="show one incident with its remedies and timeline")
    add_db_arguments(show)
    show.add_argument("id", help="incident id")
    show.add_argument("--json", action="store_true", help="print the API's JSON")
    show.set_defaults(func=run_show)


_TIME_FORMS = "an RFC 3339 time (2024-05-01T12:00:00Z) or a duration ago (90s, 30m, 24h, 7d, 2w)"


def _time_arg(flag: str, value: str | None, now: datetime) -> str | None:
    """``--since``/``--until``: RFC 3339 is passed on to the API's parser; a
    duration ago becomes the time it names. Anything else is a UserError
    naming the accepted forms."""
    if value is None:
        return None
    if _RELATIVE.fullmatch(value):
        from analyzers import bounds

        try:
            ago = bounds.duration(flag, value, minimum=timedelta(0), maximum=MAX_AGO)
        except bounds.OutOfBounds as exc:
            raise UserError(str(exc)) from None
        return (now - ago).isoformat().replace("+00:00", "Z")
    if not re.match(r"[0-9]{4}-", value):
        raise UserError(f"{flag}: {value[:40]!r}: expected {_TIME_FORMS}")
    return value


def _user_error(exc: ApiError) -> UserError:
    if exc.parameter:
        flag = _FLAG_OF.get(exc.parameter, "--" + exc.parameter.replace("_", "-"))
        return UserError(f"{flag}: {exc.message}")
    return UserError(exc.message)


async def _check_schema(engine: Any, url: str) -> None:
    try:
        rev = await current_revision(engine)
    except OSError as exc:
        raise UserError(f"cannot reach the database {redact_db_url(url)}: {exc}") from None
    if rev is None:
        raise UserError(
            f"{redact_db_url(url)} holds no unstick incidents yet (empty schema): run `unstick db upgrade` or `unstick serve`"
        )


def run_list(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    now = datetime.now(UTC)
    query: MultiDict[str] = MultiDict()
    for key in (
        "status",
        "severity",
        "waiting",
        "cluster",
        "namespace",
        "rule_id",
        "kind",
        "name",
        "q",
        "sort",
        "cursor",
    ):
        value = getattr(args, key)
        if value is not None:
            query[key] = value
    for key in ("since", "until"):
        value = _time_arg(f"--{key}", getattr(args, key), now)
        if value is not None:
            query[key] = value
    query["limit"] = str(args.limit)
    try:
        params = parse_list(query, default_limit=50, max_limit=ApiSettings().max_page_size)
    except ApiError as exc:
        raise _user_error(exc) from None

    async def go() -> tuple[list[Any], str | None]:
        engine = await open_engine(settings.db.url, create=False, options=settings.db.engine)
        try:
            await _check_schema(engine, settings.db.url)
            async with create_sessionmaker(engine)() as session:
                page = await list_incidents(
                    session, params.filter, sort=params.sort, limit=params.limit, cursor=params.cursor
                )
            return page.items, page.next_cursor
        except InvalidCursor as exc:
            raise UserError(f"--cursor: {exc}") from None
        finally:
            await engine.dispose()

    items, next_cursor = asyncio.run(go())
    if args.json:
        doc = {"items": [incident_dict(i) for i in items], "next_cursor": next_cursor}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return EXIT_OK
    if not items:
        print("no incidents match")
        return EXIT_OK
    width = shutil.get_terminal_size((120, 20)).columns
    rows = [("ID", "STATUS", "SEVERITY", "WORKLOAD", "RULE", "EVENTS", "LAST SEEN", "TITLE")]
    for i in items:
        workload = f"{i.namespace}/{i.subject_name}" if i.namespace else i.subject_name
        rows.append(
            (
                str(i.id),
                i.status if not i.waiting_for else f"{i.status} (waiting for {i.waiting_for})",
                i.severity,
                f"{i.subject_kind.lower()}/{workload}",
                i.rule_id,
                str(i.occurrences),
                i.last_seen.strftime("%Y-%m-%d %H:%M"),
                i.title,
            )
        )
    # Names, titles and messages come from the cluster: control characters shown escaped.
    rows = [tuple(printable(cell, keep_newlines=False) for cell in r) for r in rows]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]) - 1)]
    for r in rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        print(line[:width] if sys.stdout.isatty() else line)
    if next_cursor:
        print(f"\nmore: unstick incidents list --cursor {next_cursor} (same filters)")
    return EXIT_OK


def run_show(args: argparse.Namespace) -> int:
    settings = Settings.from_args(args)
    try:
        incident_id = parse_id("id", args.id)
    except ApiError as exc:
        raise UserError(f"ID: {exc.message}") from None

    async def go() -> Any:
        engine = await open_engine(settings.db.url, create=False, options=settings.db.engine)
        try:
            await _check_schema(engine, settings.db.url)
            async with create_sessionmaker(engine)() as session:
                return await get_incident(session, incident_id)
        finally:
            await engine.dispose()

    found = asyncio.run(go())
    if found is None:
        raise UserError(f"no incident {incident_id}")
    doc = incident_detail_dict(*found)
    if args.json:
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return EXIT_OK
    print(printable(_render_text(doc)))
    return EXIT_OK


def _render_text(doc: dict[str, Any]) -> str:
    s = doc["subject"]
    where = f"{s['namespace']}/{s['name']}" if s["namespace"] else s["name"]
    out = [
        f"#{doc['id']} [{doc['severity']}] [{doc['status']}] {doc['title']}",
        f"{s['kind']} {where} in cluster {doc['cluster']} · rule {doc['rule_id']}",
        f"first seen {doc['first_seen']} · last seen {doc['last_seen']}"
        + (f" · resolved {doc['resolved_at']}" if doc["resolved_at"] else "")
        + f" · {doc['occurrences']} event(s)",
    ]
    if doc["previous_id"]:
        out.append(f"recurrence of #{doc['previous_id']}")
    out += ["", doc["explanation"]]
    if doc["last_message"]:
        out += ["", "scheduler: " + doc["last_message"]]
    for n, r in enumerate(doc["remedies"]):
        mark = "verified" if r["verified"] else "not verified"
        out += ["", f"remedy {n}: {r['title']} ({mark})"]
        if r["verification"]:
            out.append(f"  {r['verification']}")
        if r["yaml"]:
            out += ["  ---"] + ["  " + line for line in r["yaml"].rstrip().splitlines()]
        if r["command"]:
            out.append(f"  $ {r['command']}")
    if doc["evidence"]:
        out += ["", "evidence:"] + [
            f"  {k}: {orjson.dumps(v).decode()}" for k, v in sorted(doc["evidence"].items())
        ]
    out += ["", "timeline:"]
    for e in doc["timeline"]:
        out.append(f"  {e['at']}  {e['kind']}" + (f"  {e['message']}" if e["message"] else ""))
    return "\n".join(out)
