"""Dead letters are visible: the API's incident view, the incident page and /metrics,
through the live agent's host (the composition root), with no secret anywhere."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from agent.notify.settings import NotifySettings
from agent.runner import AgentHost
from agent.settings import ApiSettings
from tests.notify.conftest import SECRET, open_incidents
from tests.notify.receivers import WebhookReceiver


async def test_a_dead_letter_shows_in_the_api_the_page_and_metrics(tmp_path: Path, receiver: WebhookReceiver) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET.decode())
    hook = receiver.hook_url + "?token=url-secret-value"
    notify = NotifySettings.from_args(
        None, {"UNSTICK_WEBHOOK_URL": hook, "UNSTICK_WEBHOOK_SECRET_FILE": str(secret_file)}
    )
    host = await AgentHost.open(f"sqlite+aiosqlite:///{tmp_path}/a.db")
    try:
        url = await host.serve(ApiSettings(port=0, auth=False))
        await open_incidents(host.sessions, 1, ["webhook"], resolve=True)
        receiver.plan = [410]  # gone: permanent
        worker = await host.start_notifier(notify)
        assert worker is not None
        worker.count_interval = 0.1
        assert await worker.drain(10) == 0
        await asyncio.sleep(0.3)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/api/v1/incidents/1") as resp:
                doc = await resp.json()
            async with http.get(f"{url}/incidents/1") as resp:
                page = await resp.text()
            async with http.get(f"{url}/metrics") as resp:
                metrics = await resp.text()
    finally:
        await host.close()
    notes = doc["notifications"]
    assert [(n["event"], n["status"]) for n in notes] == [("opened", "failed"), ("resolved", "sent")]
    assert notes[0]["last_error"] == "HTTP 410 from the receiver: planned 410"
    assert notes[0]["attempts"] == 1 and len(notes[0]["delivery"]) == 36
    assert "failed (dead letter)" in page and "HTTP 410 from the receiver" in page
    assert 'unstick_outbox_notifications{sink="webhook",status="failed"} 1.0' in metrics
    assert 'unstick_notifications_dead_lettered_total{sink="webhook"} 1.0' in metrics
    assert 'unstick_notifications_sent_total{sink="webhook"} 1.0' in metrics
    for text in (str(doc), page, metrics):
        assert "url-secret-value" not in text and SECRET.decode() not in text
