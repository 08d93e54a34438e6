"""Sidecar mode: `unstick watch --no-pages` serves /healthz and /metrics only (no API, no pages,
no /readyz that could make its host pod unready) and needs no API token."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp

from agent.commands.watch import register
from agent.fakecluster.scenario import play_step
from agent.settings import Settings
from tests.agent.conftest import start_unstick
from tests.waiting import eventually


def test_no_pages_needs_no_token() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["watch", "--no-pages", "--listen", "0.0.0.0:9090"])
    settings = Settings.from_args(args, {})  # require_tokens is set by `watch`, and no token is given
    assert settings.api.pages is False and settings.api.auth is True
    assert Settings.from_args(None, {"UNSTICK_PAGES": "false"}).api.pages is False


async def test_watch_with_no_pages_serves_health_and_metrics_only(gpu_scenario, tmp_path: Path) -> None:
    cluster = gpu_scenario.cluster()
    await cluster.start()
    try:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        play_step(cluster, gpu_scenario.timeline[0])
        proc, url = await start_unstick(
            "watch",
            "--kubeconfig",
            str(kubeconfig),
            "--cluster",
            "seed-1",
            "--db",
            f"sqlite+aiosqlite:///{tmp_path}/sidecar.db",
            "--listen",
            "127.0.0.1:0",
            "--no-pages",
            "--grace",
            "0",
        )
        async with aiohttp.ClientSession() as http:

            async def metrics() -> str | None:
                async with http.get(f"{url}/metrics") as resp:
                    text = await resp.text()
                    return (
                        text
                        if 'unstick_analysis_passes_total{cluster="seed-1",outcome="ok"}' in text
                        else None
                    )

            assert "unstick_open_incidents" in await eventually(metrics, timeout=60)
            async with http.get(f"{url}/healthz") as resp:
                assert resp.status == 200 and (await resp.json()) == {"status": "ok"}
            for path in ("/readyz", "/api/v1/incidents", "/", "/login", "/api/v1/openapi.json"):
                async with http.get(f"{url}{path}", allow_redirects=False) as resp:
                    assert resp.status == 404, path
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 40) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
        await cluster.stop()
