"""The outbox worker: sends what the tracker wrote, at least once, never twice
on purpose, and never lets one sink hold up another.

Each sink has a lane of its own: a loop that claims due rows of that sink
(``storage.outbox.claim_due``, a lease with ``FOR UPDATE SKIP LOCKED``) only
as fast as it has free delivery slots (``Sink.concurrency``), and sends them
concurrently. A slow or hanging receiver fills its own lane's slots; other
lanes go on. Outcomes are written back in batches by one recorder task.

* **Retries**: a transient failure is retried after an exponential backoff
  with jitter (``base · 2^(attempt-1)``, capped, drawn from its upper half), or
  after the receiver's ``Retry-After`` when it gave one. A rate limit pauses
  the whole lane and does not use up an attempt.
* **Dead letter**: a permanent failure, or the last of ``max_attempts``,
  leaves the row ``failed`` with the reason in ``last_error`` (shown on the
  incident's page and API view, counted in ``/metrics``).
* **Crash safety**: a row being sent when the process dies is due again when
  its lease runs out, and is sent with the same idempotency key
  (``storage.outbox.delivery_id``); a shutdown gives unfinished claims back.
* **Order**: per incident and sink, rows go out one after another in id order
  (the claim skips a row while an earlier one is unfinished), so a reply never
  overtakes its thread's root.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.notify.base import Delivery, GiveUp, RetryLater, Sink, SinkStats
from agent.notify.http import describe_transport_error
from storage.outbox import (
    claim_due,
    delivery_id,
    failed_values,
    outbox_counts,
    record_outcomes,
    sent_values,
    thread_refs_for,
    unfinished_count,
)

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 8
    base_delay: float = 2.0
    max_delay: float = 600.0

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based): exponential, jittered."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** max(0, attempt - 1))
        return ceiling / 2 + rng.uniform(0, ceiling / 2)


@dataclass
class _Lane:
    sink: Sink
    stats: SinkStats = field(default_factory=SinkStats)
    inflight: set[asyncio.Task[None]] = field(default_factory=set)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    paused_until: float = 0.0  # loop time; a rate limit pauses the lane
    task: asyncio.Task[None] | None = None


class OutboxWorker:
    """Drains the outbox into ``sinks``. Build once, :meth:`start`, :meth:`stop`."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        sinks: Sequence[Sink],
        *,
        policy: RetryPolicy | None = None,
        lease: float = 60.0,
        poll_interval: float = 1.0,
        secrets: Iterable[str] = (),
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
        count_interval: float = 5.0,
        fence: Callable[[], bool] | None = None,
    ) -> None:
        names = [s.name for s in sinks]
        if len(set(names)) != len(names):
            raise ValueError(f"sink names must be unique: {names}")
        self.sessions = sessions
        self.policy = policy or RetryPolicy()
        self.lease = lease
        self.poll_interval = poll_interval
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._clock = clock
        self._rng = rng or random.Random()
        self.count_interval = count_interval
        # Asked right before each send (HA: "do I still hold the Lease?"); a fenced
        # worker hands the claim back instead of sending.
        self._fence = fence
        self._lanes = {s.name: _Lane(s) for s in sinks}
        self._outcomes: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._recorder: asyncio.Task[None] | None = None
        self._counter: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.counts: dict[tuple[str, str], int] = {}  # (sink, status) → rows, refreshed every few seconds
        self.delivery_seconds: list[float] = []  # recent delivery durations (bounded)

    @property
    def sink_names(self) -> tuple[str, ...]:
        return tuple(self._lanes)

    def stats(self) -> dict[str, SinkStats]:
        return {name: lane.stats for name, lane in self._lanes.items()}

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "<redacted>")
        return text

    def wake(self) -> None:
        """Look for due rows now (the tracker just wrote some) instead of at the next poll."""
        for lane in self._lanes.values():
            lane.wake.set()

    # -- life cycle ------------------------------------------------------------------------
    async def start(self) -> None:
        await self._report_orphans()
        self._stopping.clear()
        self._recorder = asyncio.create_task(self._record_loop(), name="notify:recorder")
        self._counter = asyncio.create_task(self._count_loop(), name="notify:counts")
        for name, lane in self._lanes.items():
            lane.task = asyncio.create_task(self._lane_loop(lane), name=f"notify:{name}")

    async def stop(self, *, grace: float = 20.0) -> None:
        """Stop claiming, give in-flight deliveries ``grace`` seconds, record every outcome,
        close the sinks. Deliveries cut short are due again at once (same idempotency key)."""
        self._stopping.set()
        self.wake()
        lanes = [lane.task for lane in self._lanes.values() if lane.task is not None]
        for t in lanes:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        inflight = [t for lane in self._lanes.values() for t in lane.inflight]
        if inflight:
            _, pending = await asyncio.wait(inflight, timeout=grace)
            for t in pending:
                t.cancel()
            for t in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
        if self._counter is not None:
            self._counter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._counter
        if self._recorder is not None:
            self._outcomes.put_nowait(None)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._recorder, timeout=10)
        for lane in self._lanes.values():
            with contextlib.suppress(Exception):
                await lane.sink.close()

    async def drain(self, timeout: float = 60.0) -> int:
        """Wait until no row of these sinks is pending or being sent; the number left at ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            self.wake()
            async with self.sessions() as session:
                left = await unfinished_count(session, self.sink_names)
            if left == 0 and self._outcomes.empty():
                return 0
            if loop.time() >= deadline:
                return left
            await asyncio.sleep(0.05)

    async def _report_orphans(self) -> None:
        try:
            async with self.sessions() as session:
                counts = await outbox_counts(session)
        except Exception as exc:
            log.warning("could not read the outbox (%s)", type(exc).__name__)
            return
        self.counts = counts
        owed: dict[str, int] = {}
        for (sink, status), n in counts.items():
            if sink not in self._lanes and status in ("pending", "sending"):
                owed[sink] = owed.get(sink, 0) + n
        if owed:
            log.warning(
                "%d notification(s) are owed to sinks not configured now (%s); they stay in the outbox",
                sum(owed.values()),
                ", ".join(sorted(owed)),
            )

    # -- one lane per sink ------------------------------------------------------------------
    async def _lane_loop(self, lane: _Lane) -> None:
        loop = asyncio.get_running_loop()
        sink = lane.sink
        while not self._stopping.is_set():
            if lane.paused_until > loop.time():
                await self._wait(lane, lane.paused_until - loop.time(), wake=False)
                continue
            free = sink.concurrency - len(lane.inflight)
            # Claim in batches: with deliveries in flight, wait until half the slots are free
            # (one claim transaction per batch, not per row).
            if free <= 0 or (lane.inflight and free < max(1, sink.concurrency // 2)):
                stopper = self._stop_waiter()
                await asyncio.wait(set(lane.inflight) | {stopper}, return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
                continue
            lane.wake.clear()
            try:
                deliveries = await self._claim(sink, free)
            except Exception as exc:
                log.warning(
                    "notify %s: cannot claim from the outbox (%s); retrying", sink.name, type(exc).__name__
                )
                await self._wait(lane, self.poll_interval)
                continue
            if not deliveries:
                await self._wait(lane, self.poll_interval)
                continue
            for d in deliveries:
                task = asyncio.create_task(self._deliver(lane, d), name=f"notify:{sink.name}:{d.row_id}")
                lane.inflight.add(task)
                task.add_done_callback(lane.inflight.discard)

    def _stop_waiter(self) -> asyncio.Task[bool]:
        return asyncio.ensure_future(self._stopping.wait())

    async def _wait(self, lane: _Lane, seconds: float, *, wake: bool = True) -> None:
        waiters = {self._stop_waiter()}
        if wake:
            waiters.add(asyncio.ensure_future(lane.wake.wait()))
        try:
            await asyncio.wait(waiters, timeout=max(0.0, seconds), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    async def _claim(self, sink: Sink, limit: int) -> list[Delivery]:
        async with self.sessions.begin() as session:
            rows = await claim_due(
                session,
                now=self._clock(),
                limit=limit,
                lease=timedelta(seconds=self.lease),
                sinks=[sink.name],
            )
            if not rows:
                return []
            refs = {}
            if getattr(sink, "threaded", False):  # only a sink that replies in threads needs them
                refs = await thread_refs_for(session, {r.incident_id for r in rows}, sink.name)
            return [
                Delivery(
                    row_id=r.id,
                    incident_id=r.incident_id,
                    sink=r.sink,
                    event=r.event,
                    payload=dict(r.payload or {}),
                    attempt=r.attempts,
                    key=delivery_id(r),
                    thread_ref=refs.get(r.incident_id),
                )
                for r in rows
            ]

    async def _deliver(self, lane: _Lane, d: Delivery) -> None:
        sink, stats = lane.sink, lane.stats
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        if self._fence is not None and not self._fence():
            log.warning("notify %s: not the leader any more; row %d handed back unsent", sink.name, d.row_id)
            self._outcomes.put_nowait(
                failed_values(
                    d.row_id,
                    now=self._clock(),
                    error="handed back unsent: this replica lost the leader Lease",
                    retry_at=self._clock(),
                    attempts=max(0, d.attempt - 1),
                )
            )
            return
        try:
            try:
                # Never outlive the lease: past it another worker may claim the row.
                sent = await asyncio.wait_for(sink.deliver(d), timeout=max(1.0, self.lease * 0.75))
            except TimeoutError:
                raise RetryLater("the delivery did not finish within the lease") from None
        except GiveUp as exc:
            outcome = self._dead_letter(lane, d, str(exc))
        except RetryLater as exc:
            outcome = self._retry(lane, d, str(exc), exc.retry_after, exc.rate_limited, loop.time())
        except asyncio.CancelledError:
            # Shutdown: give the claim back, due at once; the next attempt reuses the key.
            self._outcomes.put_nowait(
                failed_values(
                    d.row_id,
                    now=self._clock(),
                    error="interrupted by shutdown",
                    retry_at=self._clock(),
                    attempts=max(0, d.attempt - 1),
                )
            )
            raise
        except Exception as exc:  # a sink bug or an unexpected transport error: retry, never crash
            log.error(
                "notify %s: delivery of row %d failed: %s", sink.name, d.row_id, describe_transport_error(exc)
            )
            outcome = self._retry(lane, d, describe_transport_error(exc), None, False, loop.time())
        else:
            stats.sent += 1
            outcome = sent_values(d.row_id, now=self._clock(), thread_ref=sent.thread_ref)
        if len(self.delivery_seconds) < 10_000:
            self.delivery_seconds.append(time.perf_counter() - started)
        self._outcomes.put_nowait(outcome)

    def _dead_letter(self, lane: _Lane, d: Delivery, reason: str) -> dict[str, Any]:
        reason = self.redact(reason)
        lane.stats.dead_lettered += 1
        log.error(
            "notify %s: gave up on %s notification of incident %d: %s",
            lane.sink.name,
            d.event,
            d.incident_id,
            reason,
            extra={"incident_id": d.incident_id, "sink": lane.sink.name},
        )
        return failed_values(d.row_id, now=self._clock(), error=reason, retry_at=None, attempts=d.attempt)

    def _retry(
        self,
        lane: _Lane,
        d: Delivery,
        reason: str,
        retry_after: float | None,
        rate_limited: bool,
        loop_now: float,
    ) -> dict[str, Any]:
        reason = self.redact(reason)
        kind = reason.split(":")[0][:60]
        lane.stats.errors_by_kind[kind] = lane.stats.errors_by_kind.get(kind, 0) + 1
        attempts = d.attempt
        if rate_limited:
            lane.stats.rate_limited += 1
            delay = (retry_after if retry_after is not None else 1.0) * (1 + self._rng.uniform(0, 0.1))
            lane.paused_until = max(lane.paused_until, loop_now + delay)
            attempts = max(0, d.attempt - 1)  # a rate limit does not use up an attempt
        elif d.attempt >= self.policy.max_attempts:
            return self._dead_letter(lane, d, f"gave up after {d.attempt} attempts: {reason}")
        else:
            delay = self.policy.backoff(d.attempt, self._rng)
            if retry_after is not None:
                delay = retry_after * (1 + self._rng.uniform(0, 0.1))
        lane.stats.retried += 1
        log.warning(
            "notify %s: %s notification of incident %d not delivered (%s); retrying in %.1fs",
            lane.sink.name,
            d.event,
            d.incident_id,
            reason,
            delay,
        )
        now = self._clock()
        return failed_values(
            d.row_id, now=now, error=reason, retry_at=now + timedelta(seconds=delay), attempts=attempts
        )

    # -- writing outcomes back ------------------------------------------------------------
    async def _record_loop(self) -> None:
        done = False
        while not done:
            first = await self._outcomes.get()
            batch = [] if first is None else [first]
            done = first is None
            while not self._outcomes.empty() and len(batch) < 1000:
                item = self._outcomes.get_nowait()
                if item is None:
                    done = True
                else:
                    batch.append(item)
            while batch:
                try:
                    async with self.sessions.begin() as session:
                        await record_outcomes(session, batch)
                    break
                except Exception as exc:  # the database is away: keep the outcomes, try again
                    log.warning(
                        "notify: cannot record %d outcome(s) (%s); retrying", len(batch), type(exc).__name__
                    )
                    if done:
                        return
                    await asyncio.sleep(1.0)
            self.wake()  # rows queued behind these (same incident) may be due now

    async def _count_loop(self) -> None:
        while True:
            await asyncio.sleep(self.count_interval)
            with contextlib.suppress(Exception):
                async with self.sessions() as session:
                    self.counts = await outbox_counts(session)
