"""Every command, with a bad option or environment, is one line naming what
is wrong and exit code 2 — never a traceback — and read-only commands leave
no database file behind. Runs ``agent.cli.main`` in-process: an exception
escaping it fails the test."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from tests import pg
from tests.cli.inprocess import run


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("unstick: error: ") and err.count("\n") == 1, err
    return err


READ_ONLY = (("incidents", "list"), ("incidents", "show", "1"), ("db", "current"))
ALL_DB = (*READ_ONLY, ("db", "upgrade"))


@pytest.mark.parametrize("argv", ALL_DB)
def test_a_sqlite_path_in_a_missing_folder_is_named(tmp_path: Path, argv: tuple[str, ...]) -> None:
    url = f"sqlite:///{tmp_path}/no/such/folder/unstick.db"
    err = one_line_error(*run(*argv, "--db", url)[::2])
    assert f"--db {url}: the folder {tmp_path}/no/such/folder does not exist" in err
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("argv", ALL_DB)
def test_a_file_that_is_not_a_database_is_named(tmp_path: Path, argv: tuple[str, ...]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my shopping list\n")
    err = one_line_error(*run(*argv, "--db", f"sqlite:///{notes}")[::2])
    assert f"{notes} is not a SQLite database" in err
    assert notes.read_text() == "my shopping list\n"
    err = one_line_error(*run(*argv, "--db", f"sqlite:///{tmp_path}")[::2])
    assert f"{tmp_path} is a folder, not a database file" in err


@pytest.mark.parametrize("argv", READ_ONLY)
def test_read_only_commands_never_create_the_database(tmp_path: Path, argv: tuple[str, ...]) -> None:
    url = f"sqlite:///{tmp_path}/unstick.db"
    code, out, err = run(*argv, "--db", url)
    if argv == ("db", "current"):
        assert code == 1 and out.startswith("empty (behind head"), (out, err)
    else:
        assert "there is no database at" in one_line_error(code, err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://unstick:s3cret-pw@127.0.0.1:99999/db", "port 99999 is outside 1-65535"),
        ("postgresql://unstick:s3cret%zz@127.0.0.1/db", "is not a percent-escape"),
        ("postgresql://unstick:s3cret-pw@127.0.0.1/db?sslmod=require", "unknown option(s) sslmod"),
        ("postgresql://unstick:s3cret-pw@127.0.0.1:notaport/db", "malformed database URL"),
        ("mysql://unstick:s3cret-pw@127.0.0.1/db", "unsupported database 'mysql'"),
        ("sqlite:///x.db?journal=wal", "unknown option(s) journal"),
    ],
)
@pytest.mark.parametrize(
    "argv",
    [
        ("db", "current"),
        ("incidents", "list"),
        ("serve", "--no-auth"),
        ("worker", "--broker", "kafka://127.0.0.1:9"),
    ],
)
def test_a_malformed_database_url_is_one_line_naming_db_with_the_password_masked(
    argv: tuple[str, ...], url: str, says: str
) -> None:
    err = one_line_error(*run(*argv, "--db", url)[::2])
    assert "--db" in err and says in err
    assert "s3cret" not in err


@pytest.mark.postgres
def test_a_server_that_refuses_the_login_is_one_line_with_the_password_masked(tmp_path: Path) -> None:
    try:
        server = pg.acquire()
    except pg.PostgresNotFound as exc:
        pytest.fail(str(exc), pytrace=False)
    try:

        async def make_role() -> None:
            conn = await server._admin()
            try:
                await conn.execute("DROP ROLE IF EXISTS locked_out")
                await conn.execute("CREATE ROLE locked_out NOLOGIN PASSWORD 'pa55word-never-shown'")
            finally:
                await conn.close()

        asyncio.run(make_role())
        # The test server trusts local logins, so it refuses by role (NOLOGIN), not by password;
        # both are the server turning the credentials down at start-up.
        url = f"postgresql://locked_out:pa55word-never-shown@127.0.0.1:{server.port}/postgres"
        for argv in (
            ("db", "upgrade"),
            ("incidents", "list"),
            ("serve", "--no-auth", "--listen", "127.0.0.1:0"),
        ):
            err = one_line_error(*run(*argv, "--db", url)[::2])
            assert "--db postgresql://locked_out:***@127.0.0.1" in err
            assert 'role "locked_out" is not permitted to log in' in err
            assert "pa55word" not in err
        missing = f"postgresql://nobody_here:pa55word-never-shown@127.0.0.1:{server.port}/postgres"
        err = one_line_error(*run("db", "current", "--db", missing)[::2])
        assert 'role "nobody_here" does not exist' in err and "pa55word" not in err
    finally:
        pg.release()


def test_a_busy_listen_port_for_serve_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = run(
            "serve", "--no-auth", "--db", f"sqlite:///{tmp_path}/u.db", "--listen", f"127.0.0.1:{port}"
        )
    err = one_line_error(code, err)
    assert f"--listen 127.0.0.1:{port}: cannot listen there" in err


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "no such file"),
        ("clusters: [\n", "not valid YAML at line 2"),
        ("- just a list\n", "not a kubeconfig (expected a map with clusters, contexts and users)"),
        (
            "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\ncurrent-context: prod\n",
            "Expected object with name prod",
        ),
    ],
)
def test_an_unusable_kubeconfig_names_the_file_and_the_problem(
    tmp_path: Path, content: str | None, says: str
) -> None:
    kubeconfig = tmp_path / "config"
    if content is not None:
        kubeconfig.write_text(content)
    code, _, err = run(
        "watch",
        "--kubeconfig",
        str(kubeconfig),
        "--no-auth",
        "--db",
        f"sqlite:///{tmp_path}/u.db",
        "--listen",
        "127.0.0.1:0",
    )
    err = one_line_error(code, err)
    assert f"kubeconfig {kubeconfig}" in err and says in err


def test_incidents_show_terminal_escapes_from_the_cluster_escaped(tmp_path: Path) -> None:
    from analyzers.findings import ObjectRef
    from storage.engine import create_engine, create_sessionmaker
    from storage.migrate import upgrade
    from storage.tracker import track
    from tests.storage.factories import T0, finding, trigger

    url = f"sqlite:///{tmp_path}/u.db"

    async def record() -> None:
        engine = create_engine(url)
        try:
            await upgrade(engine)
            evil = finding(
                ObjectRef("Deployment", "ml", "evil\x1b]0;pwned\x07"),
                title="Rollout of evil\x1b[2J cannot progress",
            )
            await track(
                create_sessionmaker(engine),
                cluster="prod",
                findings=[evil],
                now=T0,
                triggers=[trigger("e", 1, "0/3 nodes are available: 3 Insufficient cpu.\x1b[31m\x9b2J")],
            )
        finally:
            await engine.dispose()

    asyncio.run(record())
    for argv in (("incidents", "list"), ("incidents", "show", "1")):
        code, out, err = run(*argv, "--db", url)
        assert code == 0, err
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
        assert "evil\\x1b]0;pwned\\x07" in out or "evil\\x1b[2J" in out
    assert "Insufficient cpu.\\x1b[31m\\x9b2J" in out


@pytest.mark.parametrize("bad", ["9.9", "1.17", "one"])
def test_watch_refuses_a_kube_version_outside_the_supported_range(tmp_path: Path, bad: str) -> None:
    code, _, err = run("watch", "--kube-version", bad, "--no-auth", "--db", f"sqlite:///{tmp_path}/u.db")
    assert "--kube-version" in one_line_error(code, err)


def test_python_dash_m_agent_cli_reports_user_errors_in_one_line() -> None:
    """Run as ``python -m agent.cli`` the file is ``__main__``: a command's
    ``agent.cli.UserError`` must still be caught as the one-line error."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "demo", "--once", "--scenario", "no-such-scenario"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    err = one_line_error(done.returncode, done.stderr)
    assert "--scenario: unknown no-such-scenario" in err


def test_a_database_with_our_tables_but_no_migration_record_is_named(tmp_path: Path) -> None:
    """A store made outside the migrations (metadata.create_all, a copy of its tables):
    upgrading would fail on the first CREATE TABLE; it is one line instead."""
    from storage.engine import create_engine
    from storage.models import Base

    url = f"sqlite+aiosqlite:///{tmp_path}/made-elsewhere.db"

    async def make() -> None:
        engine = create_engine(url)
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        await engine.dispose()

    asyncio.run(make())
    err = one_line_error(*run("db", "upgrade", "--db", url)[::2])
    assert "holds unstick's tables" in err and "no migration record" in err
