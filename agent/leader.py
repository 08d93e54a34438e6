"""Leader election on a ``coordination.k8s.io/v1`` Lease, the way client-go does it.

Follows ``staging/src/k8s.io/client-go/tools/leaderelection/leaderelection.go``
(v1.34): a candidate tries to acquire the Lease every ``retry_period`` (with
jitter factor 1.2); it may take the Lease when nobody holds it or when the
record it observed has not changed for ``lease_duration`` seconds of its *own*
clock (the holder's ``renewTime`` is never compared with the local clock, so
clock skew between nodes does not matter). The leader renews every
``retry_period`` and gives up when it could not renew for ``renew_deadline``;
``lease_duration > renew_deadline > retry_period * 1.2`` leaves a margin in
which the old leader has stopped before a follower may start. Every write is a
PUT guarded by the Lease's resourceVersion, so two candidates can never both
win one round (the loser gets 409 Conflict). On a clean shutdown the leader
releases the Lease (empty holder, ``leaseDurationSeconds: 1``) so a follower
takes over at once.

The record's fields are ``leaselock.go``'s LeaderElectionRecord ↔ LeaseSpec:
``holderIdentity``, ``leaseDurationSeconds``, ``acquireTime``, ``renewTime``
(MicroTime, RFC 3339 with microseconds) and ``leaseTransitions``.

Fencing: :meth:`LeaderElector.is_leader` is true only while the last
successful renewal (timed from when its request was sent) is younger than
``renew_deadline``, whether or not the renew loop has noticed the loss yet.
Whatever sends (the outbox worker) asks it right before each send.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent.kube.errors import Conflict, KubeError, NotFound
from agent.kube.gateway import Gateway
from agent.kube.kinds import LEASE

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2  # client-go leaderelection.JitterFactor

__all__ = ["JITTER_FACTOR", "LeaderElector", "LeaseConfig", "lead"]


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    """Where the Lease lives, who we are, and client-go's three timings (seconds)."""

    namespace: str
    identity: str
    name: str = "unstick-leader"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def problems(self) -> list[str]:
        """client-go's NewLeaderElector checks, worded with our flags."""
        found = []
        if self.lease_duration <= self.renew_deadline:
            found.append("--lease-duration must be greater than --renew-deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            found.append(f"--renew-deadline must be greater than --retry-period × {JITTER_FACTOR}")
        for flag, value in (
            ("--lease-duration", self.lease_duration),
            ("--renew-deadline", self.renew_deadline),
            ("--retry-period", self.retry_period),
        ):
            if value < 1 and flag == "--lease-duration":
                found.append(f"{flag} must be at least 1 second (the Lease stores whole seconds)")
            elif value <= 0:
                found.append(f"{flag} must be positive")
        if not self.identity:
            found.append("leader election needs an identity (POD_NAME or the host name)")
        return found


def micro_time(when: datetime) -> str:
    """metav1.MicroTime's JSON form: ``2006-01-02T15:04:05.000000Z``."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate. ``acquire`` waits to become leader, ``hold`` renews until the
    Lease is lost (or ``stop``), ``release`` gives it up; ``is_leader`` is the fence."""

    def __init__(
        self,
        gateway: Gateway,
        config: LeaseConfig,
        *,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.gateway = gateway
        self.config = config
        self._wall = wall_clock
        self._monotonic = monotonic
        self._lease: dict[str, Any] | None = None  # the last Lease read or written
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0  # monotonic time the observed record last changed
        self._renewed_at: float | None = None  # monotonic send time of our last successful write
        self.transitions = 0
        self.acquired = 0  # how many times this candidate became leader

    # -- the fence -----------------------------------------------------------------
    def is_leader(self) -> bool:
        """True only while our last renewal is younger than the renew deadline."""
        renewed = self._renewed_at
        return renewed is not None and self._monotonic() - renewed < self.config.renew_deadline

    @property
    def holder(self) -> str | None:
        """The identity in the last Lease record seen (None: unheld or not read yet)."""
        spec = self._observed_spec or {}
        return spec.get("holderIdentity") or None

    @property
    def role(self) -> str:
        return "leader" if self.is_leader() else "follower"

    # -- one round -------------------------------------------------------------------
    def _spec(self, *, keep_acquire: bool, transitions: int) -> dict[str, Any]:
        now = micro_time(self._wall())
        acquire = (self._observed_spec or {}).get("acquireTime") if keep_acquire else None
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration)),
            "acquireTime": acquire or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _observe(self, spec: dict[str, Any]) -> None:
        if spec != self._observed_spec:
            self._observed_spec = dict(spec)
            self._observed_at = self._monotonic()

    async def try_acquire_or_renew(self) -> bool:
        """client-go's tryAcquireOrRenew: one GET and at most one write."""
        cfg = self.config
        sent = self._monotonic()
        try:
            lease = await self.gateway.get(LEASE, cfg.name, cfg.namespace)
        except NotFound:
            body = {
                "apiVersion": LEASE.api_version,
                "kind": LEASE.kind,
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": self._spec(keep_acquire=False, transitions=0),
            }
            try:
                created = await self.gateway.create(LEASE, body)
            except Conflict:  # another candidate created it first
                return False
            return self._won(created, sent)
        spec = lease.get("spec") or {}
        self._lease = lease
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        mine = holder == cfg.identity
        duration = float(spec.get("leaseDurationSeconds") or 0)
        if holder and not mine and self._monotonic() < self._observed_at + duration:
            return False  # held by someone else and not expired by our clock
        transitions = int(spec.get("leaseTransitions") or 0)
        if not mine:
            transitions += 1
        update = {**lease, "spec": {**spec, **self._spec(keep_acquire=mine, transitions=transitions)}}
        try:
            written = await self.gateway.replace(LEASE, update)
        except (Conflict, NotFound):  # written or deleted by someone else since our read
            return False
        return self._won(written, sent)

    def _won(self, lease: dict[str, Any], sent: float) -> bool:
        spec = lease.get("spec") or {}
        self._lease = lease
        self._observe(spec)
        if not self.is_leader():
            self.acquired += 1
            log.info("became the leader (Lease %s/%s)", self.config.namespace, self.config.name)
        self._renewed_at = sent
        self.transitions = int(spec.get("leaseTransitions") or 0)
        return True

    async def _attempt(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                return await self.try_acquire_or_renew()
        except (KubeError, TimeoutError) as exc:
            log.warning("Lease %s/%s: %s", self.config.namespace, self.config.name, exc)
            return False

    # -- loops ---------------------------------------------------------------------------
    async def acquire(self, stop: asyncio.Event) -> bool:
        """Try every retry period (jittered) until leader (True) or ``stop`` (False)."""
        cfg = self.config
        while not stop.is_set():
            if await self._attempt(cfg.renew_deadline):
                return True
            if self.holder:
                log.debug("the leader is %s", self.holder)
            delay = cfg.retry_period * (1 + random.random() * JITTER_FACTOR)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
        return False

    async def hold(self, stop: asyncio.Event) -> bool:
        """Renew every retry period until the Lease is lost (True) or ``stop`` is set (False)."""
        cfg = self.config
        while True:
            left = self._left()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), min(cfg.retry_period, max(left, 0.0)))
            if stop.is_set():
                return False
            left = self._left()
            renewed = left > 0 and await self._attempt(left)
            taken = self.holder not in (None, cfg.identity)  # someone else's record: lost for sure
            if taken or (not renewed and not self.is_leader()):
                log.warning(
                    "lost the Lease %s/%s (%s); stopping work now",
                    cfg.namespace,
                    cfg.name,
                    f"now held by {self.holder}" if taken else f"no renewal for {cfg.renew_deadline}s",
                )
                self._renewed_at = None
                return True

    def _left(self) -> float:
        renewed = self._renewed_at
        if renewed is None:
            return 0.0
        return self.config.renew_deadline - (self._monotonic() - renewed)

    async def release(self) -> None:
        """Give the Lease up (client-go's release): an empty holder lets a follower take it at once."""
        lease, was_leader = self._lease, self.is_leader()
        self._renewed_at = None
        if lease is None or not was_leader:
            return
        now = micro_time(self._wall())
        spec = {
            **(lease.get("spec") or {}),
            "holderIdentity": None,
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
        }
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                self._lease = await self.gateway.replace(LEASE, {**lease, "spec": spec})
            log.info("released the Lease %s/%s", self.config.namespace, self.config.name)
        except (KubeError, TimeoutError) as exc:
            log.warning("could not release the Lease %s/%s: %s", self.config.namespace, self.config.name, exc)


async def lead(
    elector: LeaderElector,
    *,
    on_started: Callable[[], Awaitable[None]],
    on_stopped: Callable[[bool], Awaitable[None]],
    stop: asyncio.Event,
) -> None:
    """Run ``on_started`` each time this candidate becomes leader and ``on_stopped(lost)``
    when it stops leading: ``lost=True`` the moment the Lease is lost (stop work *now*),
    ``lost=False`` on shutdown (work may finish, then the Lease is released)."""
    while not stop.is_set():
        if not await elector.acquire(stop):
            return
        lost = True
        try:
            await on_started()
            lost = await elector.hold(stop)
        finally:
            await on_stopped(lost)
        if not lost:
            await elector.release()
            return
