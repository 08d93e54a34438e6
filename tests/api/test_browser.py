"""The pages in a real headless Chromium (Debian's ``chromium`` package, driven by Playwright).

Signs in with a token, loads the list, filters it, opens an incident, reads
the remedy's YAML, copies it with the button and fetches the raw YAML link.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.api.app import create_app
from agent.api.pages import build_jinja_env
from agent.settings import ApiSettings
from tests.api.conftest import TOKEN
from tests.api.seed import NOW
from tests.storage.factories import GPU_YAML

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(os.environ.get("UNSTICK_SCREENSHOTS", "/tmp/unstick-screenshots"))


def chromium_path() -> str:
    for candidate in (os.environ.get("UNSTICK_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.fail(
        "Debian's chromium is not installed (apt-get install chromium; scripts/test does it)", pytrace=False
    )


@pytest.fixture
async def base_url(
    sessions: async_sessionmaker[AsyncSession], api_settings: ApiSettings
) -> AsyncIterator[str]:
    app = create_app(sessions=sessions, settings=api_settings, jinja=build_jinja_env(), clock=lambda: NOW)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_on_call_flow_in_chromium(base_url: str) -> None:
    from playwright.async_api import async_playwright, expect

    executable = chromium_path()
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
            page = await context.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

            # A Slack link to an incident: sign in first, then land on it.
            resp = await page.goto(f"{base_url}/incidents/1")
            assert resp is not None and resp.status == 401
            await page.fill("#token", TOKEN)
            await page.click("button[type=submit]")
            errors.clear()  # the 401 of the sign-in page itself is expected
            await expect(page.locator("h1#title")).to_have_text(
                "Rollout of ml/trainer cannot progress: maxSurge 1 needs a second GPU"
            )

            # The list, with counts.
            await page.goto(f"{base_url}/incidents")
            await expect(page.locator("#count-open")).to_have_text("3")
            await expect(page.locator("#incidents tbody tr")).to_have_count(24)

            # Filter: the status menu applies at once; the search on submit.
            await page.select_option("select[name=status]", "open")
            await page.wait_for_url("**status=open**")
            await expect(page.locator("#incidents tbody tr")).to_have_count(3)
            await page.fill("input[name=q]", "gpu")
            await page.click("form.filters button[type=submit]")
            await page.wait_for_url("**q=gpu**")
            rows = page.locator("#incidents tbody tr")
            await expect(rows).to_have_count(1)

            # Open the incident and read the fix.
            await rows.first.locator("td.title a").click()
            await page.wait_for_url("**/incidents/1")
            await expect(page.locator("#explanation")).to_contain_text("25% of 1 replica rounds up")
            # The patch remedy: the kubectl patch command and the complete server-side apply manifest.
            manifest = await page.locator("#apply-0").inner_text()
            assert yaml.safe_load(manifest) == yaml.safe_load(GPU_YAML)
            await page.click("button[data-copy=apply-0]")
            await expect(page.locator("button[data-copy=apply-0]")).to_have_text("Copied")
            copied = await page.evaluate("navigator.clipboard.readText()")
            assert yaml.safe_load(copied) == yaml.safe_load(GPU_YAML)

            # The download link serves the same manifest, with the session cookie.
            href = await page.locator("#remedy-0 a", has_text="download").get_attribute("href")
            raw = await page.request.get(f"{base_url}{href}")
            assert raw.status == 200 and yaml.safe_load(await raw.text()) == yaml.safe_load(GPU_YAML)

            # Evidence: tables, the raw JSON folded until asked for.
            await expect(page.locator("#evidence-node table caption")).to_have_text("Node")
            await expect(page.locator("#evidence-raw pre")).to_be_hidden()
            await page.click("#evidence-raw summary")
            await expect(page.locator("#evidence-raw pre")).to_be_visible()

            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shot = SCREENSHOTS / "incident.png"
            await page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            await page.goto(f"{base_url}/incidents")
            await page.screenshot(path=str(SCREENSHOTS / "list.png"), full_page=False)

            # The pages' own state-changing forms pass the forms guard in a real browser (the
            # Origin it sends, the form's CSRF token): a silence is created, deleted, then sign-out.
            await page.goto(f"{base_url}/silences")
            form = page.locator('form[action="/silences"]')
            await form.locator("[name=namespace]").fill("ml")
            await form.locator("[name=duration]").fill("1h")
            await form.locator("[name=reason]").fill("set from chromium")
            await form.locator("button[type=submit]").click()
            await page.wait_for_url("**/silences?created=**")
            row = page.locator("tr.created")
            await expect(row).to_contain_text("set from chromium")
            await row.locator("button[type=submit]").click()
            await page.wait_for_url(f"{base_url}/silences")
            await expect(page.locator("tr", has_text="set from chromium")).to_have_count(0)
            await page.click("form.signout button[type=submit]")
            await page.wait_for_url("**/login**")
            assert errors == []  # no CSP violations or script errors
        finally:
            await browser.close()
