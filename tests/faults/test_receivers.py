"""Receivers that fail: a webhook consumer and a Slack-like Web API that hang, reset the
connection, answer bytes that are not HTTP, or redirect — to another origin, or on the same
host — while the real outbox worker delivers a burst of incidents (SQLite and PostgreSQL).

What holds afterwards:

* while the receiver misbehaves nothing is recorded as sent; every failure is recorded on
  its row with its reason (a redirect says so and where to), and retried;
* nothing ever reaches the origin a redirect points to (the signed body, the bot token and
  the secret custom headers included);
* once the receiver answers again, every outbox row is delivered, exactly once per
  idempotency key (webhook) or per message (Slack), and the time to recover is printed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.notify.base import Sink
from agent.notify.http import client_session
from agent.notify.render import Renderer
from agent.notify.slack import Router, SlackBotSink, SlackWebhookSink
from agent.notify.webhook import WebhookSink
from agent.notify.worker import OutboxWorker, RetryPolicy
from agent.settings import Secret
from storage.outbox import delivery_id
from tests.faults.receivers import ChaosReceiver, Collector
from tests.notify.conftest import SECRET, open_incidents, rows
from tests.notify.receivers import BOT_TOKEN

FAULTS = ("hang", "reset", "garbage", "redirect", "redirect-same-host")
INCIDENTS = 3
FAST = RetryPolicy(max_attempts=1000, base_delay=0.05, max_delay=0.2)


def _short() -> Callable[[], object]:
    return lambda: client_session(concurrency=4, connect_timeout=1.0, total_timeout=1.0)


def _sink(kind: str, receiver: ChaosReceiver) -> Sink:
    if kind == "webhook":
        return WebhookSink(
            "webhook",
            Secret(receiver.url + "/hook"),
            Secret(SECRET.decode()),
            Renderer(),
            headers={"X-Api-Key": Secret("secret-custom-header-value")},
            session_factory=_short(),  # type: ignore[arg-type]
        )
    if kind == "slack":
        return SlackBotSink(
            Secret(BOT_TOKEN), Router("#alerts"), Renderer("https://u.example"), api_url=receiver.url + "/api",
            session_factory=_short(),  # type: ignore[arg-type]
        )
    return SlackWebhookSink(
        Secret(receiver.url + "/services/T/B/X"), Renderer(), name="slack-webhook", session_factory=_short()  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("kind", ["webhook", "slack", "slack-webhook"])
@pytest.mark.parametrize("fault", FAULTS)
async def test_a_failing_receiver_loses_and_duplicates_nothing(
    sessions: async_sessionmaker[AsyncSession], kind: str, fault: str
) -> None:
    async with Collector() as elsewhere, ChaosReceiver(redirect_to=elsewhere.port, slack=kind != "webhook") as receiver:
        sink = _sink(kind, receiver)
        await open_incidents(sessions, INCIDENTS, [sink.name], resolve=True)
        receiver.mode = fault
        worker = OutboxWorker(sessions, [sink], policy=FAST, poll_interval=0.05, lease=30.0)
        await worker.start()
        try:
            async with asyncio.timeout(30):
                while True:  # the fault has been met, recorded, and retried
                    during = await rows(sessions)
                    if receiver.requests[fault] >= 3 and sum(1 for r in during if r.attempts >= 2) >= 2:
                        break
                    await asyncio.sleep(0.05)
            assert not any(r.status == "sent" for r in during), [(r.id, r.status) for r in during]
            errors = {r.last_error for r in during if r.last_error}
            if fault.startswith("redirect"):
                assert any("redirects" in e and "never follow" in e for e in errors), errors
            if fault == "redirect":
                assert any(f"to http://127.0.0.1:{elsewhere.port}" in e for e in errors), errors
            recovered_at = time.monotonic()
            receiver.mode = "ok"
            assert await worker.drain(60) == 0
            recovery = time.monotonic() - recovered_at
        finally:
            await worker.stop()
    after = await rows(sessions)
    assert {r.status for r in after} == {"sent"}, [(r.id, r.status, r.last_error) for r in after]
    assert elsewhere.connections == 0  # nothing ever followed a redirect
    if kind == "webhook":
        assert set(receiver.accepted) == {delivery_id(r) for r in after}
        assert set(receiver.accepted.values()) == {1}, receiver.accepted  # exactly once per key
    else:
        assert receiver.accepted and set(receiver.accepted.values()) == {1}, receiver.accepted
    print(f"\n{kind} receiver {fault}: {len(after)} deliveries, all sent once; recovered in {recovery:.2f} s")
