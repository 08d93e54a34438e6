"""`unstick watch` as a real process: killed with SIGKILL mid-stream and
restarted, it loses no incident and duplicates none; SIGTERM stops it cleanly."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from pathlib import Path

import aiohttp
from sqlalchemy import select

from agent.fakecluster.scenario import play_step
from storage.engine import create_engine, create_sessionmaker
from storage.models import Incident
from tests.waiting import eventually


async def start_watch(kubeconfig: Path, db: str) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent",
        "watch",
        "--kubeconfig",
        str(kubeconfig),
        "--cluster",
        "seed-1",
        "--db",
        db,
        "--listen",
        "127.0.0.1:0",
        "--no-auth",
        "--grace",
        "0",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    async with asyncio.timeout(60):
        while True:
            line = (await proc.stderr.readline()).decode()
            assert line, "unstick watch exited before serving"
            match = re.search(r"API and pages on (http://\S+)", line)
            if match:
                return proc, match.group(1)


async def passes(url: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as resp:
        text = await resp.text()
    match = re.search(r'unstick_analysis_passes_total\{cluster="seed-1",outcome="ok"\} (\S+)', text)
    return float(match.group(1)) if match else 0.0


async def test_sigkill_and_restart_keep_exactly_one_incident(gpu_scenario, tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path}/watch.db"
    engine = create_engine(db)
    sessions = create_sessionmaker(engine)

    async def rows() -> list[Incident]:
        async with sessions() as session:
            return list((await session.execute(select(Incident).order_by(Incident.id))).scalars())

    cluster = gpu_scenario.cluster()
    await cluster.start()
    try:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        play_step(cluster, gpu_scenario.timeline[0])  # the rollout deadlocks before the agent starts
        proc, _ = await start_watch(kubeconfig, db)
        (first,) = await eventually(rows, timeout=60)
        occurrences = first.occurrences
        proc.kill()  # SIGKILL: no chance to clean up
        await proc.wait()

        proc, url = await start_watch(kubeconfig, db)
        await eventually(lambda: passes(url), timeout=60)
        await asyncio.sleep(0.5)
        again = await rows()
        assert [(r.id, r.status) for r in again] == [(first.id, "open")]
        assert again[0].occurrences == occurrences  # the same event replayed does not count twice

        for step in gpu_scenario.timeline[1:]:
            play_step(cluster, step)

        async def resolved() -> list[Incident] | None:
            r = await rows()
            return r if r and r[0].status == "resolved" else None

        (done,) = await eventually(resolved, timeout=60)
        assert done.id == first.id
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 40) == 0
    finally:
        await cluster.stop()
        await engine.dispose()
