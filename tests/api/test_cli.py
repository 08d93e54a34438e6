"""``unstick incidents``, ``unstick db`` and ``unstick serve`` as a user runs them."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import shutil
import socket
import threading
from pathlib import Path

import aiohttp
import orjson
import pytest

from agent.cli import UserError
from agent.settings import Settings
from storage.engine import create_engine, create_sessionmaker
from storage.migrate import head_revision
from storage.queries import get_incident
from storage.views import incident_detail_dict
from tests.api.conftest import TOKEN
from tests.api.seed import seed_waiting

MY_COMMANDS = ("agent.commands.serve", "agent.commands.incidents", "agent.commands.db")


def run(*argv: str) -> int:
    """Parse and run like ``agent.cli.main`` does, with only this issue's commands registered."""
    parser = argparse.ArgumentParser(prog="unstick")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in MY_COMMANDS:
        importlib.import_module(name).register(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_my_commands_are_listed_in_the_cli() -> None:
    from agent.cli import COMMANDS

    assert set(MY_COMMANDS) <= {module for _, module, _ in COMMANDS}


@pytest.fixture
def db(tmp_path: Path, seeded_sqlite: Path) -> str:
    target = tmp_path / "copy.db"
    shutil.copyfile(seeded_sqlite, target)
    return f"sqlite+aiosqlite:///{target}"


def test_incidents_list_json_is_the_api_shape(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("incidents", "list", "--db", db, "--status", "open", "--sort", "id", "--json") == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert list(doc) == ["items", "next_cursor"] and doc["next_cursor"] is None
    assert [i["id"] for i in doc["items"]] == [1, 3, 4]
    assert doc["items"][0]["subject"] == {"kind": "Deployment", "namespace": "ml", "name": "trainer"}

    assert run("incidents", "list", "--db", db, "-n", "batch", "--limit", "5", "--json") == 0
    page = orjson.loads(capsys.readouterr().out)
    assert len(page["items"]) == 5 and page["next_cursor"]
    assert (
        run(
            "incidents",
            "list",
            "--db",
            db,
            "-n",
            "batch",
            "--limit",
            "5",
            "--cursor",
            page["next_cursor"],
            "--json",
        )
        == 0
    )
    page2 = orjson.loads(capsys.readouterr().out)
    assert not {i["id"] for i in page["items"]} & {i["id"] for i in page2["items"]}


def test_incidents_list_text_and_relative_times(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("incidents", "list", "--db", db, "--rule", "rollout-deadlock") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["ID", "STATUS", "SEVERITY"]
    assert "deployment/ml/trainer" in out[1] and out[1].split()[0] == "1"
    # The seed is from 2024: nothing is active in the last hour but the open incidents.
    assert run("incidents", "list", "--db", db, "--since", "1h", "--json") == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert sorted(i["id"] for i in doc["items"]) == [1, 3, 4]


def test_incidents_list_filters_and_marks_the_waiting_ones(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def seed() -> tuple[int, int]:
        engine = create_engine(db)
        try:
            return await seed_waiting(create_sessionmaker(engine))
        finally:
            await engine.dispose()

    open_id, resolved_id = asyncio.run(seed())
    assert run("incidents", "list", "--db", db, "--waiting", "true", "--json") == 0
    assert {i["id"] for i in orjson.loads(capsys.readouterr().out)["items"]} == {open_id, resolved_id}
    assert run("incidents", "list", "--db", db, "--waiting", "false", "--json") == 0
    assert not {open_id, resolved_id} & {i["id"] for i in orjson.loads(capsys.readouterr().out)["items"]}
    assert run("incidents", "list", "--db", db, "--waiting", "true", "--status", "open") == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert len(rows) == 1 and rows[0].split()[0] == str(open_id) and "open (waiting for scale-up)" in rows[0]


def test_incidents_show_json_matches_the_api_detail(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("incidents", "show", "4", "--db", db, "--json") == 0
    shown = orjson.loads(capsys.readouterr().out)

    async def expected() -> object:
        engine = create_engine(db)
        async with create_sessionmaker(engine)() as s:
            found = await get_incident(s, 4)
        await engine.dispose()
        assert found is not None
        return orjson.loads(orjson.dumps(incident_detail_dict(*found)))

    assert shown == asyncio.run(expected())
    assert shown["previous_id"] == 2

    assert run("incidents", "show", "1", "--db", db) == 0
    text = capsys.readouterr().out
    assert text.startswith("#1 [critical] [open] Rollout of ml/trainer")
    assert "maxSurge: 0" in text and "remedy 1: Or recreate instead of rolling (not verified)" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("incidents", "show", "999"), "no incident 999"),
        (("incidents", "show", "x1"), "ID: id must be an integer from 1 to"),
        (
            ("incidents", "list", "--since", "last tuesday"),
            "--since: 'last tuesday': expected an RFC 3339 time",
        ),
        (
            ("incidents", "list", "--since", "3weeks"),
            "--since: '3weeks': expected an RFC 3339 time (2024-05-01T12:00:00Z) or a duration ago (90s, 30m, 24h, 7d, 2w)",
        ),
        (("incidents", "list", "--until", "2024-13-01T00:00:00Z"), "--until: until is not a valid date-time"),
        (("incidents", "list", "--limit", "1000"), "--limit: limit must be between 1 and 200"),
        (("incidents", "list", "-n", "Bad_NS"), "--namespace: namespace 'Bad_NS' does not match"),
        (("incidents", "list", "--cursor", "abc"), "--cursor: cursor is not valid"),
    ],
)
def test_user_errors(db: str, argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(UserError) as info:
        run(*argv, "--db", db)
    assert str(info.value).startswith(message)


def test_reading_an_empty_database_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unstick db upgrade"):
        run("incidents", "list", "--db", f"sqlite:///{tmp_path}/empty.db")


def test_db_upgrade_and_current(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    head = head_revision()
    assert run("db", "current", "--db", url) == 1
    assert f"empty (behind head {head}" in capsys.readouterr().out
    assert run("db", "upgrade", "--db", url) == 0
    assert capsys.readouterr().out.strip().endswith(f"upgraded from empty to {head}")
    assert run("db", "upgrade", "--db", url) == 0
    assert f"already at revision {head}" in capsys.readouterr().out
    assert run("db", "current", "--db", url) == 0
    assert capsys.readouterr().out.strip() == f"{head} (head)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_migrates_and_answers_over_http(tmp_path: Path) -> None:
    """`unstick serve` end to end: an empty database is migrated at start-up, tokens come from a file."""
    from agent.commands.serve import serve

    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN + "\n")
    port = _free_port()
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    importlib.import_module("agent.commands.serve").register(sub)
    args = parser.parse_args(
        [
            "serve",
            "--db",
            f"sqlite:///{tmp_path}/served.db",
            "--listen",
            f"127.0.0.1:{port}",
            "--api-token-file",
            str(tokens),
        ]
    )
    settings = Settings.from_args(args, {})

    results: dict[str, object] = {}

    async def scenario() -> None:
        started, stop = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(serve(settings, started=started, stop=stop))
        await asyncio.wait_for(started.wait(), 20)
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/readyz") as r:
                results["readyz"] = r.status
            async with http.get(f"{base}/api/v1/incidents") as r:
                results["anonymous"] = r.status
            async with http.get(
                f"{base}/api/v1/incidents", headers={"Authorization": f"Bearer {TOKEN}"}
            ) as r:
                results["list"] = (r.status, await r.json())
        stop.set()
        await asyncio.wait_for(task, 20)

    thread = threading.Thread(target=lambda: asyncio.run(scenario()))
    thread.start()
    thread.join(60)
    assert results == {"readyz": 200, "anonymous": 401, "list": (200, {"items": [], "next_cursor": None})}
