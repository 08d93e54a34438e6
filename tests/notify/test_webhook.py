"""Signed webhooks over real HTTP(S), and the receiver example of docs/notifications.md."""

from __future__ import annotations

import re
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.notify.base import Delivery
from agent.notify.render import Renderer
from agent.notify.webhook import WebhookSink, scrub, sign, webhook_payload
from agent.notify.worker import OutboxWorker, RetryPolicy
from agent.settings import Secret
from storage.outbox import delivery_id
from tests.notify.conftest import SECRET, open_incidents, rows
from tests.notify.receivers import Server, WebhookReceiver

NOTIFICATIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "notifications.md"


def documented_verify() -> Any:
    """The ``verify`` function of docs/notifications.md's Python example, executed as written."""
    text = NOTIFICATIONS_PAGE.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    [example] = [b for b in blocks if "def verify(" in b and "X-Unstick-Signature" in b]
    assert len(example.strip().splitlines()) <= 10
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs/notifications.md", "exec"), namespace)
    return namespace["verify"]


async def test_the_documented_example_verifies_real_deliveries_and_rejects_forgeries(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    verify = documented_verify()
    got: list[tuple[dict[str, str], bytes]] = []

    async def hook(request: web.Request) -> web.Response:
        got.append((dict(request.headers), await request.read()))
        return web.Response(status=204)

    server = Server()
    server.app.router.add_post("/hook", hook)
    async with server:
        await open_incidents(sessions, 2, ["webhook"], resolve=True)
        sink = WebhookSink("webhook", Secret(server.url + "/hook"), Secret(SECRET.decode()), Renderer())
        worker = OutboxWorker(sessions, [sink])
        await worker.start()
        assert await worker.drain(10) == 0
        await worker.stop()
    assert len(got) == 4
    for headers, body in got:
        assert verify(SECRET, headers, body)
        assert not verify(b"another-secret-0123456789", headers, body)
        assert not verify(SECRET, headers, body + b" ")
        stale = {**headers, "X-Unstick-Timestamp": str(int(headers["X-Unstick-Timestamp"]) - 301)}
        stale["X-Unstick-Signature"] = sign(SECRET, int(stale["X-Unstick-Timestamp"]), body)
        assert not verify(SECRET, stale, body)  # a replay older than five minutes


async def test_payload_headers_and_keys(
    sessions: async_sessionmaker[AsyncSession], receiver: WebhookReceiver, tmp_path: Path
) -> None:
    outbox = await open_incidents(sessions, 1, ["webhook"], resolve=True)
    sink = WebhookSink(
        "webhook",
        Secret(receiver.hook_url),
        Secret(SECRET.decode()),
        Renderer("https://unstick.example.com/"),
        headers={"Authorization": Secret("Bearer relay-token-123")},
    )
    assert "relay-token" not in repr(sink) and receiver.hook_url not in repr(sink)
    worker = OutboxWorker(sessions, [sink])
    await worker.start()
    assert await worker.drain(10) == 0
    await worker.stop()
    assert receiver.rejected == 0
    first = receiver.headers[0]
    assert first["Authorization"] == "Bearer relay-token-123"
    assert first["X-Unstick-Event"] == "opened" and first["Content-Type"] == "application/json"
    doc = receiver.deliveries[delivery_id(outbox[0])]
    assert doc["version"] == 1 and doc["event"] == "opened" and doc["cluster"] == "prod"
    assert doc["delivery"] == first["X-Unstick-Delivery"]
    inc = doc["incident"]
    assert set(inc) >= {"id", "rule_id", "severity", "status", "subject", "title", "explanation", "remedies"}
    assert doc["links"] == {
        "incident": f"https://unstick.example.com/incidents/{inc['id']}",
        "remedies": [f"https://unstick.example.com/api/v1/incidents/{inc['id']}/remedies/0.yaml"],
    }
    assert doc["summary"].startswith(":red_circle: CRITICAL · Rollout of ml/trainer")
    resolved = receiver.deliveries[delivery_id(outbox[1])]
    assert resolved["event"] == "resolved" and resolved["incident"]["status"] == "resolved"


def test_private_values_are_never_sent() -> None:
    payload = {
        "event": "opened",
        "cluster": "c",
        "incident": {
            "id": 1,
            "evidence": {
                "container": {"name": "app", "env": [{"name": "DB_PASSWORD", "value": "hunter2"}]},
                "secret": {"data": {"token": "c2VjcmV0"}, "stringData": {"k": "v"}},
                "configmap": {"binaryData": {"b": "AA=="}, "name": "cfg"},
                "envFrom": [{"secretRef": {"name": "x"}}],
            },
        },
    }
    d = Delivery(1, 1, "webhook", "opened", payload, 1, "k")
    body = orjson.dumps(webhook_payload(Renderer(), d)).decode()
    for private in ("hunter2", "c2VjcmV0", "AA==", "stringData", "envFrom"):
        assert private not in body
    assert scrub({"a": [{"env": 1, "b": 2}]}) == {"a": [{"b": 2}]}


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    key, cert = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return key, cert


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
async def test_tls_is_verified_and_a_ca_bundle_trusts_a_private_ca(
    sessions: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    key, cert = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    receiver = WebhookReceiver(SECRET)
    runner = web.AppRunner(receiver.app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    url = f"https://127.0.0.1:{port}/hook"
    try:
        await open_incidents(sessions, 1, ["untrusted", "trusted"])
        untrusted = WebhookSink("untrusted", Secret(url), Secret(SECRET.decode()), Renderer())
        trusted = WebhookSink("trusted", Secret(url), Secret(SECRET.decode()), Renderer(), ca_bundle=str(cert))
        worker = OutboxWorker(sessions, [untrusted, trusted], policy=RetryPolicy(max_attempts=1))
        await worker.start()
        await worker.drain(10)
        await worker.stop()
    finally:
        await runner.cleanup()
    by_sink = {r.sink: r for r in await rows(sessions)}
    assert by_sink["trusted"].status == "sent"
    assert by_sink["untrusted"].status == "failed"
    assert "TLS verification failed" in (by_sink["untrusted"].last_error or "")
    assert len(receiver.deliveries) == 1
