"""The outbox worker over real HTTP: delivery, retries, dead letters, per-sink lanes,
and two workers on one PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.notify.base import Delivery, GiveUp, Sent
from agent.notify.http import client_session
from agent.notify.render import Renderer
from agent.notify.webhook import WebhookSink
from agent.notify.worker import OutboxWorker, RetryPolicy
from agent.settings import Secret
from storage.engine import create_engine, create_sessionmaker
from storage.outbox import delivery_id
from tests.notify.conftest import SECRET, open_incidents, rows
from tests.notify.receivers import WebhookReceiver

FAST = RetryPolicy(max_attempts=4, base_delay=0.05, max_delay=0.2)


def webhook(receiver: WebhookReceiver, name: str = "webhook", **kw: Any) -> WebhookSink:
    return WebhookSink(name, Secret(receiver.hook_url), Secret(SECRET.decode()), Renderer("https://u.example"), **kw)


async def run_until_drained(worker: OutboxWorker, timeout: float = 30.0) -> int:
    await worker.start()
    try:
        return await worker.drain(timeout)
    finally:
        await worker.stop()


async def test_every_row_is_delivered_once_with_its_stable_key(
    sessions: async_sessionmaker[AsyncSession], receiver: WebhookReceiver
) -> None:
    outbox = await open_incidents(sessions, 25, ["webhook"], resolve=True)
    assert len(outbox) == 50
    worker = OutboxWorker(sessions, [webhook(receiver)], policy=FAST)
    assert await run_until_drained(worker) == 0
    assert set(receiver.deliveries) == {delivery_id(r) for r in outbox}
    assert set(receiver.seen.values()) == {1}
    assert {r.status for r in await rows(sessions)} == {"sent"}
    # Per incident, opened went out before resolved.
    order = [(h["X-Unstick-Event"], receiver.deliveries[h["X-Unstick-Delivery"]]["incident"]["id"]) for h in receiver.headers]
    for incident_id in {i for _, i in order}:
        assert [e for e, i in order if i == incident_id] == ["opened", "resolved"]


async def test_transient_errors_back_off_and_retry_after_is_honoured(
    sessions: async_sessionmaker[AsyncSession], receiver: WebhookReceiver
) -> None:
    await open_incidents(sessions, 1, ["webhook"])
    receiver.plan = [503, (503, 1)]
    worker = OutboxWorker(sessions, [webhook(receiver)], policy=FAST)
    assert await run_until_drained(worker) == 0
    [row] = await rows(sessions)
    assert row.status == "sent" and row.attempts == 3
    assert len(receiver.deliveries) == 1
    gaps = [b - a for a, b in zip(receiver.arrivals, receiver.arrivals[1:], strict=False)]
    assert gaps[0] < 0.9  # the backoff (0.05-0.1 s)
    assert gaps[1] >= 0.95  # Retry-After: 1


async def test_a_rate_limit_pauses_the_sink_without_using_an_attempt(
    sessions: async_sessionmaker[AsyncSession], receiver: WebhookReceiver
) -> None:
    await open_incidents(sessions, 1, ["webhook"])
    receiver.plan = [(429, 1), (429, 1)]
    worker = OutboxWorker(sessions, [webhook(receiver)], policy=RetryPolicy(max_attempts=1, base_delay=0.01))
    assert await run_until_drained(worker) == 0
    [row] = await rows(sessions)
    assert row.status == "sent" and row.attempts == 1  # two 429s, then the one attempt
    assert worker.stats()["webhook"].rate_limited == 2


async def test_attempts_run_out_into_a_dead_letter(
    sessions: async_sessionmaker[AsyncSession], receiver: WebhookReceiver
) -> None:
    await open_incidents(sessions, 1, ["webhook"])
    receiver.plan = [500, 502, 500]
    worker = OutboxWorker(sessions, [webhook(receiver)], policy=RetryPolicy(max_attempts=3, base_delay=0.01))
    assert await run_until_drained(worker) == 0
    [row] = await rows(sessions)
    assert row.status == "failed" and row.attempts == 3
    assert row.last_error == "gave up after 3 attempts: HTTP 500 from the receiver: planned 500"
    assert worker.stats()["webhook"].dead_lettered == 1


async def test_a_permanent_error_is_dead_lettered_at_once(
    sessions: async_sessionmaker[AsyncSession], receiver: WebhookReceiver
) -> None:
    await open_incidents(sessions, 1, ["webhook"])
    receiver.plan = [404]
    worker = OutboxWorker(sessions, [webhook(receiver)], policy=FAST)
    assert await run_until_drained(worker) == 0
    [row] = await rows(sessions)
    assert (row.status, row.attempts, row.last_error) == ("failed", 1, "HTTP 404 from the receiver: planned 404")


@pytest.mark.parametrize("fault", ["garbage", "close", "hang"])
async def test_garbage_a_closed_connection_or_a_hang_is_a_retry(
    sessions: async_sessionmaker[AsyncSession], receiver: WebhookReceiver, fault: str
) -> None:
    await open_incidents(sessions, 1, ["webhook"])
    receiver.plan = [fault]
    sink = webhook(receiver, session_factory=lambda: client_session(concurrency=2, total_timeout=0.5))
    worker = OutboxWorker(sessions, [sink], policy=FAST)
    assert await run_until_drained(worker) == 0
    [row] = await rows(sessions)
    assert row.status == "sent" and row.attempts == 2
    errors = worker.stats()["webhook"].errors_by_kind
    assert sum(errors.values()) == 1
    assert not any("127.0.0.1" in kind or "/hook" in kind for kind in errors)


class SecretLeakingSink:
    """A sink whose error names its own credential: the worker must not store it."""

    name = "leaky"
    concurrency = 1

    async def deliver(self, delivery: Delivery) -> Sent:
        raise GiveUp("refused https://hooks.example/T0/B0/s3cr3t-token-value for xoxb-very-secret")

    async def close(self) -> None:
        return None


async def test_stored_errors_are_redacted(sessions: async_sessionmaker[AsyncSession]) -> None:
    await open_incidents(sessions, 1, ["leaky"])
    worker = OutboxWorker(
        sessions,
        [SecretLeakingSink()],
        secrets=["https://hooks.example/T0/B0/s3cr3t-token-value", "xoxb-very-secret"],
    )
    await run_until_drained(worker)
    [row] = await rows(sessions)
    assert row.status == "failed"
    assert row.last_error == "refused <redacted> for <redacted>"


async def test_a_slow_sink_does_not_delay_another(sessions: async_sessionmaker[AsyncSession]) -> None:
    async with WebhookReceiver(SECRET, delay=2.0) as slow, WebhookReceiver(SECRET) as fast:
        await open_incidents(sessions, 20, ["slow", "fast"])
        worker = OutboxWorker(sessions, [webhook(slow, "slow", concurrency=2), webhook(fast, "fast")], policy=FAST)
        started = time.monotonic()
        await worker.start()
        try:
            while len(fast.deliveries) < 20:
                await asyncio.sleep(0.02)
            fast_done = time.monotonic() - started
            assert fast_done < 1.5, fast_done
            assert len(slow.deliveries) <= 2  # the slow one is still on its first requests
        finally:
            await worker.stop(grace=0.1)
    # What the slow sink did not get to is owed, not lost: given back, due again.
    pending = [r for r in await rows(sessions) if r.sink == "slow" and r.status != "sent"]
    assert pending and {r.status for r in pending} == {"pending"}


async def test_shutdown_gives_unfinished_claims_back(
    sessions: async_sessionmaker[AsyncSession], receiver: WebhookReceiver
) -> None:
    await open_incidents(sessions, 1, ["webhook"])
    receiver.plan = ["hang"]
    worker = OutboxWorker(sessions, [webhook(receiver)], policy=FAST)
    await worker.start()
    while not receiver.arrivals:
        await asyncio.sleep(0.02)
    await worker.stop(grace=0.1)
    [row] = await rows(sessions)
    assert (row.status, row.attempts, row.last_error) == ("pending", 0, "interrupted by shutdown")


async def test_a_fenced_worker_sends_nothing_and_hands_its_claims_back(
    sessions: async_sessionmaker[AsyncSession], receiver: WebhookReceiver
) -> None:
    """HA: a replica that lost the leader Lease never sends, even a row it had claimed."""
    outbox = await open_incidents(sessions, 3, ["webhook"])
    leader = False
    worker = OutboxWorker(sessions, [webhook(receiver)], policy=FAST, fence=lambda: leader)
    await worker.start()
    try:
        await asyncio.sleep(1.5)  # several claim rounds while fenced
        assert receiver.arrivals == []
        assert all(r.status in ("pending", "sending") and r.attempts <= 1 for r in await rows(sessions))
        leader = True  # the Lease is (re)gained: everything goes out, once
        assert await worker.drain(30.0) == 0
    finally:
        await worker.stop()
    assert set(receiver.deliveries) == {delivery_id(r) for r in outbox}
    assert set(receiver.seen.values()) == {1}


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_two_workers_on_postgresql_never_send_a_row_twice(
    db_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    async with WebhookReceiver(SECRET, delay=0.005) as receiver:
        outbox = await open_incidents(sessions, 150, ["webhook"], resolve=True)
        other = create_engine(db_url)
        try:
            workers = [
                OutboxWorker(s, [webhook(receiver)], policy=FAST)
                for s in (sessions, create_sessionmaker(other))
            ]
            for w in workers:
                await w.start()
            try:
                assert await workers[0].drain(60) == 0
            finally:
                for w in workers:
                    await w.stop()
        finally:
            await other.dispose()
    assert len(outbox) == 300
    assert set(receiver.seen) == {delivery_id(r) for r in outbox}
    assert max(receiver.seen.values()) == 1, "a row was sent twice"
    shares = [w.stats()["webhook"].sent for w in workers]
    assert sum(shares) == 300 and min(shares) > 0, shares  # both took part


