"""Leader election on a Lease between candidates with their own gateways, against the fake API
endpoint over HTTP: one leader at a time, takeover within the lease duration after a crash,
at once after a release, and the fence drops before anyone else may lead."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.fakecluster import FakeCluster
from agent.kube.gateway import Gateway
from agent.leader import JITTER_FACTOR, LeaderElector, LeaseConfig, lead
from agent.settings import LeaderSettings, SettingsError
from tests.waiting import eventually

TIMINGS = {"lease_duration": 2.0, "renew_deadline": 1.0, "retry_period": 0.2}


class Candidate:
    """An elector running ``lead`` with hooks that record when it started and stopped leading."""

    def __init__(self, kubeconfig: Path, identity: str) -> None:
        self.elector = LeaderElector(
            Gateway(kubeconfig, request_timeout=2, connect_timeout=1),
            LeaseConfig(namespace="unstick", identity=identity, **TIMINGS),
        )
        self.started: list[float] = []
        self.stopped: list[tuple[float, bool]] = []
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def on_started(self) -> None:
        self.started.append(time.monotonic())

    async def on_stopped(self, lost: bool) -> None:
        self.stopped.append((time.monotonic(), lost))

    async def begin(self) -> Candidate:
        await self.elector.gateway.open()
        self.task = asyncio.create_task(
            lead(self.elector, on_started=self.on_started, on_stopped=self.on_stopped, stop=self.stop)
        )
        return self

    async def crash(self) -> None:
        """Like SIGKILL: no release, the Lease stays as last written."""
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def shut_down(self) -> None:
        self.stop.set()
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            await self.crash()
        await self.elector.gateway.close()


@pytest.fixture
async def two(tmp_path: Path) -> AsyncIterator[tuple[FakeCluster, Candidate, Candidate]]:
    async with FakeCluster() as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        a, b = Candidate(kubeconfig, "unstick-a"), Candidate(kubeconfig, "unstick-b")
        try:
            await a.begin()
            await eventually(lambda: a.started, timeout=5)
            await b.begin()
            yield cluster, a, b
        finally:
            await a.close()
            await b.close()


def _holder(cluster: FakeCluster) -> str | None:
    found = cluster.get("Lease", "unstick-leader", "unstick")
    return found["spec"].get("holderIdentity") if found else None


async def test_one_leader_then_takeover_within_the_lease_duration_after_a_crash(two) -> None:
    cluster, a, b = two
    await asyncio.sleep(3 * TIMINGS["retry_period"])
    assert a.elector.is_leader() and not b.elector.is_leader() and b.started == []
    assert b.elector.holder == "unstick-a" and _holder(cluster) == "unstick-a"

    last_renewal = a.elector._renewed_at
    await a.crash()
    assert last_renewal is not None
    await eventually(lambda: b.started, timeout=10)
    took = b.started[0] - last_renewal
    # Not before the lease expired by b's clock, and no later than one jittered retry after.
    assert TIMINGS["lease_duration"] - TIMINGS["retry_period"] <= took
    assert took <= TIMINGS["lease_duration"] + TIMINGS["retry_period"] * (1 + JITTER_FACTOR) + 1.0
    lease = cluster.get("Lease", "unstick-leader", "unstick")
    assert lease is not None and lease["spec"]["holderIdentity"] == "unstick-b"
    assert lease["spec"]["leaseTransitions"] == 1 and lease["spec"]["leaseDurationSeconds"] == 2


async def test_a_release_hands_over_at_once(two) -> None:
    cluster, a, b = two
    await asyncio.sleep(2 * TIMINGS["retry_period"])
    released = time.monotonic()
    await a.shut_down()
    assert a.stopped and a.stopped[-1][1] is False  # a clean stop, not a loss
    await eventually(lambda: b.started, timeout=5)
    assert b.started[0] - released < TIMINGS["lease_duration"] - 0.3
    assert _holder(cluster) == "unstick-b"


async def test_a_leader_that_cannot_renew_is_fenced_before_anyone_else_leads(two) -> None:
    cluster, a, b = two
    await asyncio.sleep(2 * TIMINGS["retry_period"])
    last_renewal = a.elector._renewed_at
    assert last_renewal is not None
    # Every Lease request fails now (a's and b's alike): a cannot renew.
    cluster.faults.fail(503, kind="leases", times=1000)
    await eventually(lambda: a.stopped, timeout=5)
    lost_at, lost = a.stopped[0]
    assert lost is True and not a.elector.is_leader()
    assert lost_at - last_renewal <= TIMINGS["renew_deadline"] + TIMINGS["retry_period"]
    await a.crash()  # a stays away (back in time, it would find its own record and renew it)
    cluster.faults.clear()
    await eventually(lambda: b.started, timeout=10)
    # The old leader had stopped before the new one started, by the lease-duration margin.
    assert b.started[0] - lost_at >= TIMINGS["lease_duration"] - TIMINGS["renew_deadline"] - 0.1
    assert _holder(cluster) == "unstick-b" and b.elector.is_leader()


async def test_the_fence_drops_on_its_own_clock(tmp_path: Path) -> None:
    async with FakeCluster() as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        now = [100.0]
        async with Gateway(kubeconfig) as gw:
            elector = LeaderElector(
                gw, LeaseConfig(namespace="unstick", identity="x", **TIMINGS), monotonic=lambda: now[0]
            )
            assert await elector.try_acquire_or_renew() and elector.is_leader()
            now[0] += TIMINGS["renew_deadline"] - 0.01
            assert elector.is_leader()
            now[0] += 0.02  # nobody told the renew loop: the fence alone says no
            assert not elector.is_leader() and elector.role == "follower"


def test_settings_check_the_timings_and_find_the_identity(tmp_path: Path) -> None:
    ns_file = tmp_path / "namespace"
    ns_file.write_text("platform\n")
    s = LeaderSettings.from_args(
        None, {"UNSTICK_LEADER_ELECT": "true", "POD_NAME": "unstick-7d9-abc"}, sa_namespace_file=str(ns_file)
    )
    assert (s.enabled, s.identity, s.namespace, s.lease_duration) == (
        True,
        "unstick-7d9-abc",
        "platform",
        15.0,
    )
    s = LeaderSettings.from_args(
        None, {"UNSTICK_LEADER_ELECT": "1"}, hostname="laptop", sa_namespace_file="/nonexistent"
    )
    assert (s.identity, s.namespace) == ("laptop", "default")
    with pytest.raises(SettingsError) as bad:
        LeaderSettings.from_args(
            None,
            {"UNSTICK_LEADER_ELECT": "true", "UNSTICK_LEASE_DURATION": "5s", "UNSTICK_RENEW_DEADLINE": "10s"},
            hostname="h",
        )
    assert "--lease-duration must be greater than --renew-deadline" in str(bad.value)
    with pytest.raises(SettingsError) as bad:
        LeaderSettings.from_args(None, {"UNSTICK_RETRY_PERIOD": "soon"}, hostname="h")
    assert "--leader-elect-retry-period" in str(bad.value) and "'soon'" in str(bad.value)
