"""Real HTTP receivers for the notifier's tests: a Slack-Web-API-like server and a
webhook consumer that verifies signatures. Both run on aiohttp on 127.0.0.1.

:class:`FakeSlack` answers like Slack's Web API (``chat.postMessage``,
``chat.update``: JSON bodies with ``ok``, ``channel``, ``ts``; ``ok: false``
with an ``error`` name; HTTP 429 with ``Retry-After`` for ``ratelimited``) and
like an incoming webhook (``/services/...``: ``ok`` or an error name in plain
text). It records every message with its thread, so tests can check "one root
per incident, replies in its thread, root edited".

:class:`WebhookReceiver` verifies ``X-Unstick-Signature`` with docs/notifications.md's
example code, rejects stale timestamps, and deduplicates by
``X-Unstick-Delivery`` as a real consumer would.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BOT_TOKEN = "xoxb-test-0000000000-abcdefghijklmnop"
CHANNELS = {"#alerts": "C0ALERTS1", "#platform": "C0PLATFRM", "#ml-oncall": "C0MLONCAL"}
MAX_BLOCKS = 50


@dataclass
class SlackMessage:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]] | None
    thread_ts: str | None
    metadata: dict[str, Any] | None
    edits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def current_text(self) -> str:
        return self.edits[-1]["text"] if self.edits else self.text

    @property
    def current_blocks(self) -> list[dict[str, Any]] | None:
        return self.edits[-1].get("blocks") if self.edits else self.blocks


class Server:
    """An aiohttp app on a free local port."""

    def __init__(self) -> None:
        self.app = web.Application()
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> Server:
        self.runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=0.5)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def __aenter__(self) -> Any:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class FakeSlack(Server):
    def __init__(self, token: str = BOT_TOKEN) -> None:
        super().__init__()
        self.token = token
        self.messages: list[SlackMessage] = []
        self.webhook_posts: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.faults: list[tuple[str, str, float | None]] = []  # (method, error, retry_after), used in order
        self.refuse_blocks = False  # every call with blocks: invalid_blocks
        # chat.postMessage calls that post, then lose their answer (the connection closes):
        # what a timeout or a crash between Slack's "ok" and the outbox's "sent" leaves behind.
        self.lose_answers = 0
        self.history_error: str | None = None  # e.g. "missing_scope": history/replies refused
        self._ts = itertools.count(1)
        self.app.router.add_post("/api/chat.postMessage", self._post_message)
        self.app.router.add_post("/api/chat.update", self._update)
        self.app.router.add_post("/api/conversations.history", self._history)
        self.app.router.add_post("/api/conversations.replies", self._history)
        self.app.router.add_post("/services/{path:.*}", self._incoming_webhook)

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"

    @property
    def webhook_url(self) -> str:
        return f"{self.url}/services/T000/B000/secretwebhookpart0123"

    def fail_next(self, method: str, error: str, retry_after: float | None = None) -> None:
        self.faults.append((method, error, retry_after))

    def _fault(self, method: str) -> web.Response | None:
        for i, (m, error, retry_after) in enumerate(self.faults):
            if m == method:
                del self.faults[i]
                if error == "ratelimited":
                    return web.json_response(
                        {"ok": False, "error": "ratelimited"},
                        status=429,
                        headers={"Retry-After": str(int(retry_after or 1))},
                    )
                if error == "http500":
                    return web.Response(status=500, text="<html>oops</html>", content_type="text/html")
                return web.json_response({"ok": False, "error": error})
        return None

    async def _auth(self, request: web.Request) -> dict[str, Any] | web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"ok": False, "error": "invalid_json"})
        return body  # type: ignore[no-any-return]

    def _channel_id(self, channel: str) -> str | None:
        if channel in CHANNELS:
            return CHANNELS[channel]
        return channel if channel in CHANNELS.values() else None

    @staticmethod
    def _blocks_error(body: dict[str, Any]) -> str | None:
        blocks = body.get("blocks")
        if blocks is None:
            return None
        if len(blocks) > MAX_BLOCKS:
            return "invalid_blocks"
        for b in blocks:
            text = (b.get("text") or {}).get("text", "") if isinstance(b.get("text"), dict) else ""
            if b.get("type") == "section" and len(text) > 3000:
                return "invalid_blocks"
        return None

    async def _post_message(self, request: web.Request) -> web.Response:
        body = await self._auth(request)
        if isinstance(body, web.Response):
            return body
        self.calls.append(("chat.postMessage", body))
        fault = self._fault("chat.postMessage")
        if fault is not None:
            return fault
        channel = self._channel_id(str(body.get("channel", "")))
        if channel is None:
            return web.json_response({"ok": False, "error": "channel_not_found"})
        if "blocks" in body and (self.refuse_blocks or self._blocks_error(body)):
            return web.json_response({"ok": False, "error": "invalid_blocks"})
        if len(body.get("text") or "") > 40_000:
            return web.json_response({"ok": False, "error": "msg_too_long"})
        thread_ts = body.get("thread_ts")
        if thread_ts is not None and not any(m.ts == thread_ts and m.channel == channel for m in self.messages):
            return web.json_response({"ok": False, "error": "thread_not_found"})
        ts = f"{int(time.time())}.{next(self._ts):06d}"
        msg = SlackMessage(channel, ts, body.get("text", ""), body.get("blocks"), thread_ts, body.get("metadata"))
        self.messages.append(msg)
        if self.lose_answers > 0:
            self.lose_answers -= 1
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=200)
        return web.json_response({"ok": True, "channel": channel, "ts": ts, "message": {"text": msg.text}})

    async def _update(self, request: web.Request) -> web.Response:
        body = await self._auth(request)
        if isinstance(body, web.Response):
            return body
        self.calls.append(("chat.update", body))
        fault = self._fault("chat.update")
        if fault is not None:
            return fault
        for msg in self.messages:
            if msg.channel == body.get("channel") and msg.ts == body.get("ts"):
                if "blocks" in body and (self.refuse_blocks or self._blocks_error(body)):
                    return web.json_response({"ok": False, "error": "invalid_blocks"})
                msg.edits.append({"text": body.get("text", ""), "blocks": body.get("blocks")})
                return web.json_response({"ok": True, "channel": msg.channel, "ts": msg.ts})
        return web.json_response({"ok": False, "error": "message_not_found"})

    async def _history(self, request: web.Request) -> web.Response:
        """``conversations.history`` / ``.replies``: form-encoded arguments, a channel ID (not
        a ``#name``), newest first; ``metadata`` only with ``include_all_metadata``."""
        method = request.path.rsplit("/", 1)[-1]
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        form = await request.post()
        self.calls.append((method, dict(form)))
        if self.history_error is not None:
            return web.json_response({"ok": False, "error": self.history_error})
        channel = str(form.get("channel", ""))
        if channel not in CHANNELS.values():
            return web.json_response({"ok": False, "error": "channel_not_found"})
        if method == "conversations.replies":
            ts = str(form.get("ts", ""))
            found = [m for m in self.messages if m.channel == channel and ts in (m.ts, m.thread_ts)]
            if not found:
                return web.json_response({"ok": False, "error": "thread_not_found"})
        else:
            found = [m for m in self.messages if m.channel == channel and m.thread_ts is None]
        found = sorted(found, key=lambda m: m.ts, reverse=True)[: int(str(form.get("limit", "100")))]
        with_metadata = form.get("include_all_metadata") == "true"
        messages = [
            {"type": "message", "ts": m.ts, "text": m.current_text}
            | ({"thread_ts": m.thread_ts} if m.thread_ts else {})
            | ({"metadata": m.metadata} if with_metadata and m.metadata else {})
            for m in found
        ]
        return web.json_response({"ok": True, "messages": messages, "has_more": False})

    async def _incoming_webhook(self, request: web.Request) -> web.Response:
        body = await request.json()
        fault = self._fault("webhook")
        if fault is not None:
            # Incoming webhooks answer errors as plain text with an HTTP status.
            error = json.loads(fault.body)["error"] if fault.content_type == "application/json" else "ratelimited"  # type: ignore[arg-type]
            status = {"ratelimited": 429, "channel_not_found": 404, "invalid_token": 403}.get(error, 400)
            headers = {"Retry-After": fault.headers["Retry-After"]} if "Retry-After" in fault.headers else {}
            return web.Response(status=status, text=error, headers=headers)
        if "blocks" in body and (self.refuse_blocks or self._blocks_error(body)):
            return web.Response(status=400, text="invalid_blocks")
        self.webhook_posts.append(body)
        return web.Response(text="ok")

    # -- views for the tests --------------------------------------------------------------
    def roots(self) -> list[SlackMessage]:
        return [m for m in self.messages if m.thread_ts is None]

    def replies_to(self, root: SlackMessage) -> list[SlackMessage]:
        return [m for m in self.messages if m.thread_ts == root.ts and m.channel == root.channel]


# docs/notifications.md's receiver example is run by the tests (tests/notify/test_webhook.py);
# this is the same check, used by the receiver below.
def verify(secret: bytes, timestamp: str, body: bytes, signature: str, *, now: float | None = None) -> bool:
    import hashlib
    import hmac

    if abs((time.time() if now is None else now) - int(timestamp)) > 300:
        return False
    expected = "v1=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


class WebhookReceiver(Server):
    """Verifies signatures, answers per ``mode``, records deliveries (deduplicated by key)."""

    def __init__(self, secret: bytes, *, delay: float = 0.0) -> None:
        super().__init__()
        self.secret = secret
        self.delay = delay
        self.deliveries: dict[str, dict[str, Any]] = {}  # by X-Unstick-Delivery, first copy
        self.seen = Counter[str]()  # every copy, by key
        self.headers: list[dict[str, str]] = []
        self.rejected = 0
        self.plan: list[Any] = []  # per request, in order: an int status, "garbage", "hang", "close", (429, s)
        self.arrivals: list[float] = []
        self.app.router.add_post("/hook", self._hook)

    @property
    def hook_url(self) -> str:
        return f"{self.url}/hook"

    async def _hook(self, request: web.Request) -> web.StreamResponse:
        self.arrivals.append(time.monotonic())
        body = await request.read()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.plan:
            step = self.plan.pop(0)
            if step == "hang":
                await asyncio.sleep(3600)
            if step == "close":
                assert request.transport is not None
                request.transport.close()
                return web.Response(status=200)
            if step == "garbage":
                # A malformed HTTP answer on the raw socket.
                assert request.transport is not None
                request.transport.write(b"HTTP/1.1 2\x00\x00 garbage\r\n\r\n\xff\xfe")
                request.transport.close()
                return web.Response(status=200)
            if isinstance(step, tuple):
                status, retry_after = step
                return web.Response(status=status, headers={"Retry-After": str(retry_after)}, text="slow down")
            return web.Response(status=int(step), text=f"planned {step}")
        ts = request.headers.get("X-Unstick-Timestamp", "")
        sig = request.headers.get("X-Unstick-Signature", "")
        if not ts.isdigit() or not verify(self.secret, ts, body, sig):
            self.rejected += 1
            return web.Response(status=401, text="bad signature")
        key = request.headers["X-Unstick-Delivery"]
        self.headers.append(dict(request.headers))
        self.seen[key] += 1
        self.deliveries.setdefault(key, json.loads(body))
        return web.Response(status=204)
