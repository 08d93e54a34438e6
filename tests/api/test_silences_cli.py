"""``unstick silences add|list|rm`` as a user runs them, through ``agent.cli.main``."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from agent.cli import COMMANDS, main


@pytest.fixture
def db(tmp_path: Path, seeded_sqlite: Path) -> str:
    target = tmp_path / "copy.db"
    shutil.copyfile(seeded_sqlite, target)
    return f"sqlite+aiosqlite:///{target}"


def test_the_command_is_listed() -> None:
    assert ("silences", "agent.commands.silences") in {(n, m) for n, m, _ in COMMANDS}


def test_add_list_rm(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "silences",
                "add",
                "--db",
                db,
                "-n",
                "ml",
                "--subject",
                "train*",
                "--for",
                "2h",
                "--reason",
                "GPU move",
                "--json",
            ]
        )
        == 0
    )
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["namespace"] == "ml" and doc["subject"] == "train*" and doc["created_by"] == "cli"
    assert doc["active"] is True and doc["silenced_notifications"] >= 1

    assert (
        main(
            [
                "silences",
                "add",
                "--db",
                db,
                "--rule",
                "pdb-blocks-drain",
                "--until",
                "2999-01-01T00:00:00Z",
                "--reason",
                "x",
            ]
        )
        == 2
    )
    assert "--until: at most 365 days ahead" in capsys.readouterr().err

    assert main(["silences", "list", "--db", db]) == 0
    out = capsys.readouterr().out
    assert (
        f"{doc['id']:>5}  until {doc['expires_at']}" in out
        and "namespace=ml, subject=train*" in out
        and "GPU move" in out
    )
    assert main(["silences", "list", "--db", db, "--json"]) == 0
    assert [s["id"] for s in orjson.loads(capsys.readouterr().out)["items"]] == [doc["id"]]

    assert main(["silences", "rm", "--db", db, str(doc["id"])]) == 0
    assert capsys.readouterr().out == f"silence {doc['id']} removed\n"
    assert main(["silences", "rm", "--db", db, str(doc["id"])]) == 2
    assert f"there is no silence {doc['id']}" in capsys.readouterr().err
    assert main(["silences", "list", "--db", db]) == 0
    assert "no active silences" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--for", "2h", "--reason", "r"],
            "unstick: error: --cluster/--namespace/--rule/--subject: set at least one",
        ),
        (["-n", "ml", "--for", "soon", "--reason", "r"], "unstick: error: --for: 'soon' is not a duration"),
        (
            ["-n", "ml", "--until", "tomorrow", "--reason", "r"],
            "unstick: error: --until: 'tomorrow' is not an RFC 3339",
        ),
        (["-n", "ml", "--for", "1h", "--reason", " "], "unstick: error: --reason: required"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    db: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["silences", "add", "--db", db, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err


def test_rm_needs_an_id_and_an_upgraded_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["silences", "rm", "--db", f"sqlite+aiosqlite:///{tmp_path}/x.db", "abc"]) == 2
    assert "id: 'abc' is not a whole number from 1 to" in capsys.readouterr().err
    assert main(["silences", "rm", "--db", f"sqlite+aiosqlite:///{tmp_path}/x.db", "²"]) == 2
    assert "id: '²' is not a whole number" in capsys.readouterr().err  # isdigit() is true, int() refuses


@pytest.mark.parametrize("argv", [["list"], ["list", "--all"], ["rm", "1"], ["add", "-n", "ml", "--reason", "r", "--for", "1h"]])
def test_silences_never_create_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """Read-only commands (and a write that needs a schema) never create a file at a missing --db."""
    db = tmp_path / "missing.db"
    assert main(["silences", argv[0], "--db", f"sqlite+aiosqlite:///{db}", *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing was recorded there yet" in err and "Traceback" not in err
    assert not db.exists() and list(tmp_path.iterdir()) == []


def test_silences_on_an_empty_schema_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    assert main(["silences", "list", "--db", f"sqlite+aiosqlite:///{db}"]) == 2
    assert "empty schema" in capsys.readouterr().err
