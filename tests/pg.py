"""A real, throw-away PostgreSQL server for the tests (and the benchmarks).

Debian's server binaries (``/usr/lib/postgresql/<version>/bin``; ``scripts/test``
installs the ``postgresql`` package when they are missing) are run directly:
``initdb`` into a fresh temporary directory, then ``postgres`` listening on a
free port on 127.0.0.1 with its unix socket in the same directory, durability
off (``fsync``, ``synchronous_commit``, ``full_page_writes``) since the data
dies with the test run. PostgreSQL refuses to run as root; when the tests run
as root the server runs as the unprivileged ``nobody`` user (the temporary
directory is handed to it), otherwise as the current user.

Several conftests share one server per test session: :func:`acquire` starts it
on first use, :func:`release` stops it and removes its directory when the last
user lets go. Each test gets a database of its own (:meth:`PostgresServer.database`).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

ENV_BINDIR = "UNSTICK_PG_BINDIR"


class PostgresNotFound(RuntimeError):
    pass


def find_bindir() -> Path:
    """The directory holding ``initdb`` and ``postgres``."""
    candidates: list[str] = []
    if os.environ.get(ENV_BINDIR):
        candidates.append(os.environ[ENV_BINDIR])
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
        reverse=True,
    )
    found = shutil.which("postgres")
    if found:
        candidates.append(str(Path(found).parent))
    for c in candidates:
        if (Path(c) / "postgres").is_file() and (Path(c) / "initdb").is_file():
            return Path(c)
    raise PostgresNotFound(
        "PostgreSQL server binaries (initdb, postgres) not found in /usr/lib/postgresql/*/bin, on PATH "
        f"or in ${ENV_BINDIR}: install Debian's 'postgresql' package (scripts/test does it) "
        "or point $UNSTICK_PG_BINDIR at the bin directory"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self, bindir: Path | None = None, *, durable: bool = False) -> None:
        """``durable=False`` (tests) turns fsync and synchronous commit off; benchmarks keep them on."""
        self.bindir = bindir or find_bindir()
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="unstick-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.user: str | None = None
        if os.geteuid() == 0:
            self.user = "nobody"
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            os.chmod(self.root, 0o700)

    def _run_as(self) -> dict[str, object]:
        if self.user is None:
            return {}
        entry = pwd.getpwnam(self.user)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def start(self, timeout: float = 30.0) -> PostgresServer:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "HOME": str(self.root)}
        subprocess.run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            env=env,
            cwd=self.root,
            **self._run_as(),  # type: ignore[call-overload]
        )
        log = self._log = open(self.root / "postgres.log", "wb")  # noqa: SIM115 - closed by stop()
        for _ in range(5):
            self.port = _free_port()
            settings = ["-c", "max_connections=200", "-c", "shared_buffers=128MB"]
            if not self.durable:
                settings += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
            self.proc = subprocess.Popen(
                [
                    str(self.bindir / "postgres"),
                    "-D",
                    str(self.data),
                    "-k",
                    str(self.root),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    *settings,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.root,
                **self._run_as(),  # type: ignore[call-overload]
            )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break  # port taken meanwhile, or a real failure: retry, then report
                if (self.root / f".s.PGSQL.{self.port}").exists() and self._accepting():
                    return self
                time.sleep(0.05)
            self._kill()
        tail = (self.root / "postgres.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"PostgreSQL did not start (bindir {self.bindir}):\n{tail}")

    def _accepting(self) -> bool:
        """True once the server accepts connections (not merely listening while it starts up)."""
        probe = subprocess.run(
            [
                str(self.bindir / "pg_isready"),
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
            ],
            capture_output=True,
            check=False,
        )
        return probe.returncode == 0

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: smart shutdown; SIGINT would be "fast"
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(2)  # SIGINT: fast shutdown, disconnects clients
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        if getattr(self, "_log", None) is not None:
            self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    async def _admin(self) -> asyncpg.Connection:
        return await asyncpg.connect(host="127.0.0.1", port=self.port, user="postgres", database="postgres")

    async def create_database(self, name: str | None = None) -> str:
        name = name or f"t_{uuid.uuid4().hex[:12]}"
        conn = await self._admin()
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return name

    async def drop_database(self, name: str) -> None:
        conn = await self._admin()
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()

    @contextlib.asynccontextmanager
    async def database(self) -> AsyncIterator[str]:
        """A fresh empty database for one test; yields its SQLAlchemy URL."""
        name = await self.create_database()
        try:
            yield self.url(name)
        finally:
            await self.drop_database(name)


_shared: PostgresServer | None = None
_users = 0


def acquire() -> PostgresServer:
    """The session's server, started on first use. Raises PostgresNotFound without binaries."""
    global _shared, _users
    if _shared is None:
        _shared = PostgresServer().start()
        atexit.register(_shared.stop)  # an interrupted run does not leave a server behind
    _users += 1
    return _shared


def release() -> None:
    global _shared, _users
    _users -= 1
    if _users <= 0 and _shared is not None:
        _shared.stop()
        _shared = None
        _users = 0


def serve() -> Iterator[PostgresServer]:
    """The body of a ``pg_server`` fixture (``yield from pg.serve()``): the shared server,
    released afterwards; a test that needs it fails (never skips) without the binaries."""
    try:
        server = acquire()
    except PostgresNotFound as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        release()
