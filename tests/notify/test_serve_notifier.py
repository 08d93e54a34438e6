"""``unstick serve`` with notification options drains the outbox that a fleet's
``unstick worker``s write: over real HTTP to a local receiver, on SQLite and on a
real PostgreSQL; two ``serve`` replicas on one PostgreSQL send each message once."""

from __future__ import annotations

import argparse
import asyncio
import socket
from pathlib import Path

import pytest

from agent.commands import serve as serve_command
from agent.commands.serve import serve
from agent.notify.settings import NotifySettings
from agent.settings import Settings
from storage.engine import create_engine, create_sessionmaker
from storage.migrate import upgrade
from tests import pg
from tests.notify.conftest import SECRET, open_incidents, rows
from tests.notify.receivers import WebhookReceiver


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_args(db_url: str, hook_url: str, secret_file: Path) -> tuple[Settings, NotifySettings]:
    parser = argparse.ArgumentParser()
    serve_command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "serve",
            "--db",
            db_url,
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--no-auth",
            "--webhook-url",
            hook_url,
            "--webhook-secret-file",
            str(secret_file),
        ]
    )
    return Settings.from_args(args, {}), NotifySettings.from_args(args, {})


async def wait_until_sent(db_url: str, want: int, timeout: float = 30.0) -> list[str]:
    engine = create_engine(db_url)
    sessions = create_sessionmaker(engine)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            statuses = [r.status for r in await rows(sessions)]
            if statuses.count("sent") == want or loop.time() > deadline:
                return statuses
            await asyncio.sleep(0.1)
    finally:
        await engine.dispose()


async def queue_like_a_worker(db_url: str) -> int:
    """What ``unstick worker --sink webhook`` leaves behind: incidents and their outbox rows."""
    engine = create_engine(db_url)
    try:
        await upgrade(engine)
        queued = await open_incidents(create_sessionmaker(engine), 6, ["webhook"], resolve=True)
    finally:
        await engine.dispose()
    assert {r.status for r in queued} == {"pending"}
    return len(queued)


async def run_replicas(
    db_url: str, receiver: WebhookReceiver, secret: Path, replicas: int, want: int
) -> list[str]:
    stop = asyncio.Event()
    tasks = []
    try:
        for _ in range(replicas):
            settings, notify = serve_args(db_url, receiver.hook_url, secret)
            started = asyncio.Event()
            tasks.append(asyncio.create_task(serve(settings, notify=notify, started=started, stop=stop)))
            await asyncio.wait_for(started.wait(), 20)
        return await wait_until_sent(db_url, want)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)


def assert_each_sent_once(receiver: WebhookReceiver, statuses: list[str], want: int) -> None:
    assert statuses == ["sent"] * want
    assert receiver.rejected == 0
    assert sorted(receiver.seen.values()) == [1] * want, "a message was sent twice"
    events = sorted(d["event"] for d in receiver.deliveries.values())
    assert events == ["opened"] * (want // 2) + ["resolved"] * (want // 2)


async def test_serve_sends_what_the_workers_queued(
    db_url: str, tmp_path: Path, receiver: WebhookReceiver
) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    want = await queue_like_a_worker(db_url)
    assert_each_sent_once(receiver, await run_replicas(db_url, receiver, secret, 1, want), want)


@pytest.mark.postgres
async def test_two_serve_replicas_on_one_postgresql_send_each_message_once(
    pg_server: pg.PostgresServer, tmp_path: Path, receiver: WebhookReceiver
) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    async with pg_server.database() as db_url:
        want = await queue_like_a_worker(db_url)
        assert_each_sent_once(receiver, await run_replicas(db_url, receiver, secret, 2, want), want)
