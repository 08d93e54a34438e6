"""SIGKILL in the middle of a burst, then a restart: nothing lost, and nothing delivered
under a new idempotency key (a receiver deduplicating by X-Unstick-Delivery sees only
the keys of the outbox rows)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from storage.outbox import delivery_id
from tests.notify.conftest import SECRET, open_incidents, rows
from tests.notify.receivers import WebhookReceiver

ROOT = Path(__file__).resolve().parents[2]


async def start_agent(db_url: str, hook: str, secret_file: Path) -> asyncio.subprocess.Process:
    env = {**os.environ, "UNSTICK_NOTIFY_LEASE_SECONDS": "2"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.notify.outbox_agent", "--db", db_url,
        "--webhook-url", hook, "--webhook-secret-file", str(secret_file),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert line.strip() == b"draining", (line, await proc.stderr.read() if proc.stderr else b"")
    return proc


@pytest.mark.slow
async def test_kill_9_mid_burst_then_restart_loses_nothing_and_reuses_keys(
    db_url: str, sessions: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET.decode())
    outbox = await open_incidents(sessions, 300, ["webhook"], resolve=True)
    expected = {delivery_id(r) for r in outbox}
    async with WebhookReceiver(SECRET, delay=0.01) as receiver:
        first = await start_agent(db_url, receiver.hook_url, secret_file)
        try:
            async with asyncio.timeout(90):  # generous: CI machines can be loaded
                while sum(receiver.seen.values()) < 150:
                    await asyncio.sleep(0.005)
        finally:
            first.send_signal(signal.SIGKILL)
            await first.wait()
        assert first.returncode == -signal.SIGKILL
        await asyncio.sleep(0.5)  # requests that reached the receiver before the kill finish there
        before = dict(receiver.seen)
        assert 0 < len(before) < len(expected), "the kill did not land mid-burst"
        in_flight = [r for r in await rows(sessions) if r.status == "sending"]
        second = await start_agent(db_url, receiver.hook_url, secret_file)
        try:
            async with asyncio.timeout(180):
                while {r.status for r in await rows(sessions)} != {"sent"}:
                    await asyncio.sleep(0.1)
        finally:
            second.send_signal(signal.SIGTERM)
            await second.wait()
    assert set(receiver.seen) == expected  # nothing lost, no key that is not a row's key
    repeated = {k for k, n in receiver.seen.items() if n > 1}
    # Only what was in flight at the kill was sent again, and under its old key.
    assert repeated <= set(before)
    assert len(repeated) <= len(in_flight) + 16
    assert len(receiver.deliveries) == len(expected)
