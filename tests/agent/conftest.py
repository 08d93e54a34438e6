"""The live agent against the in-process fake Kubernetes API, through the real
kubernetes-asyncio client over HTTP, with a real SQLite database."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent.demo import SCENARIOS
from agent.fakecluster.scenario import Scenario
from agent.runner import AgentHost
from storage.models import Incident


@pytest.fixture
def gpu_scenario() -> Scenario:
    return Scenario.load(SCENARIOS / "gpu-rollout-deadlock")


def stuck_pod(scenario: Scenario) -> dict[str, Any]:
    """The pod the scenario's first step leaves Pending (unbound)."""
    return next(
        o
        for o in scenario.timeline[0].apply
        if o["kind"] == "Pod" and not o["spec"].get("nodeName") and not o["metadata"].get("deletionTimestamp")
    )


def first_of(scenario: Scenario, kind: str) -> dict[str, Any]:
    """The first object of ``kind`` the scenario's first step applies (else its initial state has)."""
    return next(o for o in (*scenario.timeline[0].apply, *scenario.objects) if o["kind"] == kind)


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[AgentHost]:
    h = await AgentHost.open(f"sqlite+aiosqlite:///{tmp_path}/agent.db")
    try:
        yield h
    finally:
        await h.close()


async def incidents(host: AgentHost) -> list[Incident]:
    async with host.sessions() as session:
        return list((await session.execute(select(Incident).order_by(Incident.id))).scalars())


async def start_unstick(
    *args: str, env: dict[str, str] | None = None
) -> tuple[asyncio.subprocess.Process, str]:
    """``python -m agent ARGS`` until it says where it serves (``… on http://…`` on stderr): the
    process and that URL."""
    import re
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent",
        *args,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    said: collections.deque[str] = collections.deque(maxlen=200)
    async with asyncio.timeout(60):
        while True:
            line = (await proc.stderr.readline()).decode()
            assert line, f"unstick {args[0]} exited before serving:\n{''.join(said)}"
            said.append(line)
            match = re.search(r"API and pages on (http://\S+)", line)
            if match:
                break
    # Keep reading what the child says: an unread pipe fills (64 KiB) and the child's
    # next log line blocks it. The last lines stay on STDERR_TAILS for a failing test.
    STDERR_TAILS[proc.pid] = said
    drain = asyncio.create_task(_drain(proc.stderr, said))
    _DRAINS.add(drain)
    drain.add_done_callback(_DRAINS.discard)
    return proc, match.group(1)


STDERR_TAILS: dict[int, collections.deque[str]] = {}
_DRAINS: set[asyncio.Task[None]] = set()


async def _drain(stream: asyncio.StreamReader, said: collections.deque[str]) -> None:
    while line := await stream.readline():
        said.append(line.decode(errors="replace"))
