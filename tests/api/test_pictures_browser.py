"""The pictures in a real Chromium: present, labelled, and the numbers the API's.

Against ``unstick demo`` (every seed incident open, as recorded from a real
control plane): each incident page is screenshotted (under UNSTICK_SCREENSHOTS,
not committed); each grid's rows and cells and each capacity bar are read from
the DOM and compared with ``/api/v1/incidents/{id}``. Then axe-core, inside the
same Chromium, audits the list, an incident, the silences and the sign-in pages
of an authenticated server: no WCAG 2.1 A/AA violation.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.api.test_browser import CHROMIUM_ARGS, SCREENSHOTS, base_url, chromium_path  # noqa: F401

pytestmark = pytest.mark.browser

AXE_VERSION = "4.11.0"
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def axe_path() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    for candidate in (
        os.environ.get("UNSTICK_AXE"),
        cache / "unstick" / f"axe-core-{AXE_VERSION}" / "node_modules" / "axe-core" / "axe.min.js",
    ):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    pytest.fail(f"axe-core {AXE_VERSION} is not installed (scripts/test installs it with npm)", pytrace=False)


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent", "demo", "--speed", "4", "--listen", "127.0.0.1:0",
        "--db", f"sqlite+aiosqlite:///{tmp_path}/d.db",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    async with asyncio.timeout(90):
        while True:
            line = (await proc.stdout.readline()).decode()
            assert line, "".join(lines)
            lines.append(line)
            if "stays open until its fix is applied" in line:
                break
    url = re.search(r"open (http://127\.0\.0\.1:\d+)/incidents", "".join(lines))
    assert url
    base = url.group(1)
    drain = asyncio.create_task(proc.stdout.read())
    try:
        async with aiohttp.ClientSession() as http, asyncio.timeout(90):
            while True:  # every seed incident open
                async with http.get(f"{base}/api/v1/incidents?status=open") as resp:
                    if len((await resp.json())["items"]) >= 4:
                        break
                await asyncio.sleep(0.5)
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 60)
        drain.cancel()


async def axe_violations(page: Any, script: str) -> list[str]:
    """axe-core's WCAG 2.1 A/AA violations of the page, one line each."""
    await page.add_script_tag(content=script)
    result = await page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", AXE_TAGS
    )
    return [f"{v['id']}: {v['help']} — {[n['target'] for n in v['nodes']][:5]}" for v in result["violations"]]


async def _dom_grids(page: Any) -> list[dict[str, Any]]:
    return list(
        await page.evaluate(
            """() => [...document.querySelectorAll('figure.grid')].map(f => ({
                total: +f.dataset.totalNodes, feasible: +f.dataset.feasibleNodes,
                plugins: [...f.querySelectorAll('thead th.plugin')].map(th => th.textContent.trim()),
                rows: [...f.querySelectorAll('tr.grid-row')].map(tr => ({
                    count: +tr.dataset.count, failing: +tr.dataset.failing,
                    states: [...tr.querySelectorAll('td[data-state]')].map(td => td.dataset.state),
                    preemption: tr.querySelector('td.preemption').dataset.preemption,
                    text: tr.querySelector('th.nodes').textContent.replace(/\\s+/g, ' ').trim(),
                })),
                bars: [...f.querySelectorAll('tr.capacity-row')].map(tr => ({
                    node: tr.dataset.node, resource: tr.dataset.resource,
                    allocatable: +tr.dataset.allocatable, requested_by_others: +tr.dataset.requestedByOthers,
                    request: +tr.dataset.request,
                    title: tr.querySelector('svg title').textContent,
                    desc: tr.querySelector('svg desc').textContent,
                    labelled: tr.querySelector('svg').getAttribute('aria-labelledby'),
                    role: tr.querySelector('svg').getAttribute('role'),
                })),
            }))"""
        )
    )


async def _check_placement(page: Any, doc: dict[str, Any], shot: Path) -> int:
    """The placement picture (requests-missing-load-skew): each node's bars and CPU gauge, as
    Chromium lays them out, carry the evidence's numbers; the figure is screenshotted."""
    want = doc["evidence"].get("predicted_placement")
    got = await page.evaluate(
        """() => [...document.querySelectorAll('figure.placement g.placement-row')].map(g => ({
            node: g.dataset.node, before: +g.dataset.before, after: g.dataset.after === undefined ? null : +g.dataset.after,
            cpu: g.dataset.cpuPercent === undefined ? null : +g.dataset.cpuPercent,
            w_before: g.querySelector('rect.pl-before').getBBox().width,
            w_after: g.querySelector('rect.pl-after') ? g.querySelector('rect.pl-after').getBBox().width : null,
            w_cpu: g.querySelector('rect.pl-cpu') ? g.querySelector('rect.pl-cpu').getBBox().width : null,
            text: g.textContent.replace(/\\s+/g, ' ').trim(),
        }))"""
    )
    if not want or not want.get("before"):
        assert got == []
        return 0
    after = want.get("after") or {}
    assert {r["node"] for r in got} == set(want["before"]) | set(after)
    top = max([*want["before"].values(), *after.values(), 1])
    for r in got:
        n = r["node"]
        assert r["before"] == want["before"].get(n, 0) and r["after"] == (after.get(n, 0) if after else None)
        assert abs(r["w_before"] - 300 * r["before"] / top) < 0.2  # the drawn length is the number
        assert f"{r['before']:g} today" in r["text"]
        cpu = (want.get("cpu_use") or {}).get(n)
        assert r["cpu"] == (cpu["percent"] if cpu else None)
        if cpu:
            assert (
                abs(r["w_cpu"] - 120 * min(100, cpu["percent"]) / 100) < 0.2
                and f"{cpu['percent']}%" in r["text"]
            )
    await page.locator("figure.placement").screenshot(path=str(shot))
    return 1


async def _check_devices(page: Any, doc: dict[str, Any], shot: Path) -> int:
    """DRA devices per node and DeviceClass: as Chromium lays them out, one square per device in
    the state the evidence gives (allocated, tainted, free); the figure is screenshotted."""
    want = [d for g in doc["evidence"].get("scheduling_grid") or [] for d in g.get("devices") or []]
    got = await page.evaluate(
        """() => [...document.querySelectorAll('tr.device-row')].map(tr => ({
            node: tr.dataset.node, cls: tr.dataset.deviceClass,
            squares: [...tr.querySelectorAll('svg [data-state]')].map(e => [e.dataset.device, e.dataset.state, e.getBBox().width]),
            desc: tr.querySelector('svg desc').textContent,
        }))"""
    )
    assert [(r["node"], r["cls"]) for r in got] == [(d["node"], d["device_class"]) for d in want]
    for r, d in zip(got, want, strict=True):
        assert [(n, st) for n, st, _ in r["squares"]] == [
            (x["device"], st) for st in ("allocated", "tainted", "free") for x in d[st]
        ]
        assert all(w == 16 for _, _, w in r["squares"])  # drawn, not just present
        assert r["desc"].startswith(f"{d['total']} device") and f"{len(d['free'])} free" in r["desc"]
    if got:
        await page.locator("div.devices").first.screenshot(path=str(shot))
    return len(got)


async def test_every_rules_incident_page_shows_the_apis_numbers(demo: str) -> None:
    from playwright.async_api import async_playwright

    async with aiohttp.ClientSession() as http:
        async with http.get(f"{demo}/api/v1/incidents?status=open") as resp:
            items = (await resp.json())["items"]
        docs = []
        for item in items:
            async with http.get(f"{demo}/api/v1/incidents/{item['id']}") as resp:
                docs.append(await resp.json())
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    script = axe_path().read_text()
    grids_seen = 0
    violations: dict[str, list[str]] = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        try:
            page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
            audited = await (
                await browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
            ).new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            for doc in docs:
                await page.goto(f"{demo}/incidents/{doc['id']}")
                shot = SCREENSHOTS / f"incident-{doc['rule_id']}.png"
                await page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 10_000
                want = doc["evidence"].get("scheduling_grid") or []
                got = await _dom_grids(page)
                assert len(got) == len(want), doc["rule_id"]
                for g, w in zip(got, want, strict=True):
                    grids_seen += 1
                    assert (g["total"], g["feasible"]) == (w["total_nodes"], w["feasible_nodes"])
                    assert g["plugins"] == w["plugins"]
                    assert [(r["count"], r["failing"], r["states"], r["preemption"]) for r in g["rows"]] == [
                        (r["count"], r["failing"], [c["state"] for c in r["cells"]], r["preemption"])
                        for r in w["rows"]
                    ]
                    for r, wr in zip(g["rows"], w["rows"], strict=True):
                        assert (
                            (wr["nodes"][0] in r["text"])
                            if wr["count"] == 1
                            else (f"{wr['count']} nodes" in r["text"])
                        )
                    assert [
                        (b["node"], b["resource"], b["allocatable"], b["requested_by_others"], b["request"])
                        for b in g["bars"]
                    ] == [
                        (b["node"], b["resource"], b["allocatable"], b["requested_by_others"], b["request"])
                        for b in w["capacity"]
                    ]
                    for b, wb in zip(g["bars"], w["capacity"], strict=True):
                        assert b["role"] == "img" and b["labelled"]
                        assert b["title"] == f"{wb['resource']} on {wb['node']}"
                        assert f"allocatable {wb['allocatable_text']}" in b["desc"]
                        assert f"this pod requests {wb['request_text']}" in b["desc"]
                await audited.goto(f"{demo}/incidents/{doc['id']}")
                violations[doc["rule_id"]] = await axe_violations(audited, script)
            assert errors == []  # no CSP violation or script error on the real pages
        finally:
            await browser.close()
    assert violations == {doc["rule_id"]: [] for doc in docs}
    assert grids_seen >= 2  # the GPU deadlock and the selector typo at least


async def test_axe_finds_no_wcag_21_aa_violation(base_url: str) -> None:  # noqa: F811
    from playwright.async_api import async_playwright

    from tests.api.conftest import TOKEN

    script = axe_path().read_text()
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        try:
            # axe is injected as a script, which the pages' CSP would refuse: bypass it for the audit only.
            context = await browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
            page = await context.new_page()
            found: dict[str, list[str]] = {}

            async def audit(name: str) -> None:
                await page.add_script_tag(content=script)
                result = await page.evaluate(
                    "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", AXE_TAGS
                )
                found[name] = [
                    f"{v['id']}: {v['help']} — {[n['target'] for n in v['nodes']][:5]}"
                    for v in result["violations"]
                ]

            await page.goto(f"{base_url}/login")
            await audit("sign-in")
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            await page.wait_for_selector("form.signout")
            await page.goto(f"{base_url}/incidents")
            await audit("list")
            await page.goto(f"{base_url}/incidents/1")
            await audit("incident")
            await page.goto(f"{base_url}/silences")
            await audit("silences")
            await page.goto(f"{base_url}/trends")
            await audit("trends")
            assert found == {"sign-in": [], "list": [], "incident": [], "silences": [], "trends": []}
        finally:
            await browser.close()


async def test_every_golden_rules_incident_page(
    sessions: Any,
    base_url: str,  # noqa: F811
) -> None:
    """Every finding of every golden scenario, stored as an incident: its page is screenshotted
    (one file per rule and case), its grids and bars equal the API's, and one page per rule
    passes axe."""
    from datetime import UTC, datetime

    from playwright.async_api import async_playwright

    from storage.tracker import track
    from tests.api.conftest import TOKEN
    from tests.scenarios.test_golden import CASES
    from tests.simulator.test_grid import report_of

    stored: dict[str, list[str]] = {}
    for case in CASES:
        findings = list(report_of(case).findings)
        if not findings:
            continue
        cluster = f"{case.parent.name}.{case.name}"[:253]
        await track(sessions, cluster=cluster, findings=findings, now=datetime(2024, 5, 4, 11, tzinfo=UTC))
        stored.setdefault(case.parent.name, []).append(cluster)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        docs = []
        for cluster in (c for clusters in stored.values() for c in clusters):
            async with http.get(
                f"{base_url}/api/v1/incidents", params={"cluster": cluster, "limit": "100"}
            ) as resp:
                for item in (await resp.json())["items"]:
                    async with http.get(f"{base_url}/api/v1/incidents/{item['id']}") as one:
                        docs.append(await one.json())
    rules = {d["rule_id"] for d in docs}
    assert len(rules) >= 10, rules  # every rule with a golden finding
    out = SCREENSHOTS / "rules"
    out.mkdir(parents=True, exist_ok=True)
    script = axe_path().read_text()
    audited: set[str] = set()
    violations: dict[str, list[str]] = {}
    grids_seen = placements_seen = devices_seen = 0
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
            page = await context.new_page()
            await page.goto(f"{base_url}/login")
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            await page.wait_for_selector("form.signout")
            for doc in docs:
                await page.goto(f"{base_url}/incidents/{doc['id']}")
                await page.screenshot(path=str(out / f"{doc['cluster']}-{doc['id']}.png"), full_page=True)
                want = doc["evidence"].get("scheduling_grid") or []
                got = await _dom_grids(page)
                assert [(g["total"], g["feasible"], [r["count"] for r in g["rows"]]) for g in got] == [
                    (w["total_nodes"], w["feasible_nodes"], [r["count"] for r in w["rows"]]) for w in want
                ], doc["cluster"]
                assert [[(b["node"], b["allocatable"], b["request"]) for b in g["bars"]] for g in got] == [
                    [(b["node"], b["allocatable"], b["request"]) for b in w["capacity"]] for w in want
                ]
                grids_seen += len(got)
                devices_seen += await _check_devices(
                    page, doc, out / f"{doc['cluster']}-{doc['id']}-devices.png"
                )
                placements_seen += await _check_placement(
                    page, doc, out / f"{doc['cluster']}-{doc['id']}-placement.png"
                )
                if doc["rule_id"] not in audited:
                    audited.add(doc["rule_id"])
                    violations[doc["rule_id"]] = await axe_violations(page, script)
        finally:
            await browser.close()
    assert violations == {rule: [] for rule in audited}
    assert grids_seen >= 10
    assert placements_seen >= 1  # seed 003
    assert devices_seen >= 2  # held-and-tainted: gpu-a's allocated GPUs, gpu-b's tainted one
