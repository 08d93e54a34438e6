"""``unstick demo`` (interactive) keeps each incident open until its fix is applied from the
incident page, then it resolves saying what changed. The real command in a subprocess, the
page and the API over real HTTP."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from pathlib import Path

import aiohttp

from agent.demo import SCENARIOS
from agent.fakecluster.scenario import Scenario
from tests.agent.conftest import stuck_pod

# The drain's evicted pod's replacement, Pending until node-1 is uncordoned (as recorded).
REPLACEMENT = stuck_pod(Scenario.load(SCENARIOS / "pdb-blocked-drain"))["metadata"]["name"]


async def _start(tmp_path: Path, *extra: str) -> tuple[asyncio.subprocess.Process, str, list[str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent", "demo", "--scenario", "pdb-blocked-drain", "--speed", "4",
        "--listen", "127.0.0.1:0", "--db", f"sqlite+aiosqlite:///{tmp_path}/d.db", *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    lines: list[str] = []
    assert proc.stdout is not None
    async with asyncio.timeout(60):
        while True:
            line = (await proc.stdout.readline()).decode()
            assert line, "\n".join(lines)
            lines.append(line)
            if "stays open until its fix is applied" in line:
                break
    banner = next(ln for ln in lines if "unstick demo: open " in ln)
    assert "no sign-in needed in the demo" in banner
    url = re.search(r"open (http://127\.0\.0\.1:\d+)/incidents", banner)
    assert url
    return proc, url.group(1), lines


async def _stop(proc: asyncio.subprocess.Process) -> str:
    proc.send_signal(signal.SIGINT)
    assert proc.stdout is not None
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    return out.decode()


async def _incident(http: aiohttp.ClientSession, base: str) -> dict:
    async with http.get(f"{base}/api/v1/incidents/1") as resp:
        assert resp.status == 200
        doc: dict = await resp.json()
        return doc


async def test_an_incident_stays_open_until_its_remedy_is_applied_from_the_page(tmp_path: Path) -> None:
    proc, base, _ = await _start(tmp_path)
    try:
        async with aiohttp.ClientSession() as http:
            # The whole recorded timeline would be over by now (12 s at speed 4): still open.
            await asyncio.sleep(6)
            assert (await _incident(http, base))["status"] == "open"
            async with http.get(f"{base}/incidents/1") as resp:
                html = await resp.text()
            assert html.count('action="/demo/incidents/1/apply"') == len(
                (await _incident(http, base))["remedies"]
            )
            assert "Uncordon node-1".lower() in html.lower()
            csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
            assert csrf is not None
            # The no-auth demo is still no open door: another site's form (its Origin, an opaque
            # Origin: null, none at all, or no CSRF token) applies nothing, and a page reached
            # through another name (DNS rebinding: Host is not this server) is refused.
            for headers, data in (
                ({"Origin": "https://evil.example"}, {"remedy": "0", "csrf": csrf.group(1)}),
                ({"Origin": "null"}, {"remedy": "0", "csrf": csrf.group(1)}),
                ({}, {"remedy": "0", "csrf": csrf.group(1)}),
                ({"Origin": base}, {"remedy": "0"}),
                ({"Origin": base}, {"remedy": "0", "csrf": "0" * 64}),
            ):
                async with http.post(
                    f"{base}/demo/incidents/1/apply", data=data, headers=headers, allow_redirects=False
                ) as resp:
                    assert resp.status == 403, (headers, data)
            port = base.rsplit(":", 1)[1]
            async with http.get(f"{base}/incidents/1", headers={"Host": f"rebound.example:{port}"}) as resp:
                assert resp.status == 421
            assert (await _incident(http, base))["status"] == "open"
            async with http.post(
                f"{base}/demo/incidents/1/apply",
                data={"remedy": "0", "csrf": csrf.group(1)},
                headers={"Origin": base},
                allow_redirects=False,
            ) as resp:
                assert resp.status == 303 and resp.headers["Location"] == "/incidents/1"
            async with asyncio.timeout(30):
                while (doc := await _incident(http, base))["status"] != "resolved":
                    await asyncio.sleep(0.2)
            assert doc["resolution"]["changes"][0] == "node node-1 was uncordoned"
            assert f"pod {REPLACEMENT} was scheduled on node node-1" in doc["resolution"]["changes"]
            # The diagnosis is the one from while it was open: uncordon node-1 is still the first remedy.
            assert "uncordon node-1" in doc["remedies"][0]["title"]
            async with http.get(f"{base}/incidents/1") as resp:
                html = await resp.text()
            assert 'id="resolution"' in html and "node node-1 was uncordoned" in html
            assert "/demo/incidents/1/apply" not in html  # nothing left to apply
            async with http.post(
                f"{base}/demo/incidents/9/apply",
                data={"remedy": "0", "csrf": csrf.group(1)},
                headers={"Origin": base},
            ) as resp:
                assert resp.status == 404
    finally:
        out = await _stop(proc)
    assert 'APPLIED #1 remedy 1 "Make room for the replacement: uncordon node-1' in out
    # The resolved message goes out after the fix (the console sink prints it), saying what changed.
    after = out.split("APPLIED #1", 1)[1]
    assert "RESOLVED" in after.upper()
    assert "node node-1 was uncordoned" in after and f"{REPLACEMENT} was scheduled on node node-1" in after


async def test_auto_fix_after_applies_the_first_verified_remedy(tmp_path: Path) -> None:
    proc, base, _ = await _start(tmp_path, "--auto-fix-after", "1")
    try:
        async with aiohttp.ClientSession() as http, asyncio.timeout(30):
            while (doc := await _incident(http, base))["status"] != "resolved":
                await asyncio.sleep(0.2)
        assert doc["resolution"]["changes"][0] == "node node-1 was uncordoned"
    finally:
        out = await _stop(proc)
    assert "APPLIED #1 remedy 1" in out
