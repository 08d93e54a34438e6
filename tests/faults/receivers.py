"""A receiver that misbehaves on purpose, over real TCP: it hangs, resets the connection,
answers bytes that are not HTTP, redirects to another origin, or answers like a webhook
consumer or Slack's Web API. Its mode is switched while a notifier sends to it."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import struct
from collections import Counter
from typing import Any
from urllib.parse import parse_qs

MODES = ("ok", "hang", "reset", "garbage", "redirect", "redirect-same-host")


class Collector:
    """Another origin a redirect points to: it must never see a byte."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.close()

    async def __aenter__(self) -> Collector:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


class ChaosReceiver:
    """HTTP/1.1 by hand, so that a fault is exactly the fault asked for."""

    def __init__(self, *, redirect_to: int, slack: bool = False) -> None:
        self.mode = "ok"
        self.slack = slack
        self.redirect_to = redirect_to
        self.accepted: Counter[str] = Counter()  # idempotency key (or Slack method+text) → 2xx answers
        self.requests: Counter[str] = Counter()  # mode → requests seen
        self._ts = itertools.count(1)
        self.server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> ChaosReceiver:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _read(self, reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes] | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return lines[0], headers, body

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                got = await self._read(reader)
                if got is None:
                    return
                request_line, headers, body = got
                mode = self.mode
                self.requests[mode] += 1
                if mode == "hang":
                    await asyncio.sleep(3600)
                if mode == "reset":
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()  # an RST, not a FIN
                    return
                if mode == "garbage":
                    writer.write(b"\x00\xff\xfe this is not HTTP \r\n\r\n{{{")
                    await writer.drain()
                    writer.close()
                    return
                if mode == "redirect":
                    where = f"http://127.0.0.1:{self.redirect_to}/steal"
                    writer.write(self._answer(307, b"", location=where))
                elif mode == "redirect-same-host":
                    writer.write(self._answer(308, b"", location="/elsewhere"))
                else:
                    writer.write(self._ok(request_line, headers, body))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            writer.close()

    def _ok(self, request_line: str, headers: dict[str, str], body: bytes) -> bytes:
        if not self.slack:
            self.accepted[headers.get("x-unstick-delivery", "?")] += 1
            return self._answer(204, b"")
        path = request_line.split()[1]
        method = path.rsplit("/", 1)[-1]
        if path.startswith("/services/"):  # an incoming webhook: "ok" in plain text
            self.accepted["webhook:" + json.loads(body).get("text", "")] += 1
            return self._answer(200, b"ok")
        if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            doc: dict[str, Any] = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        else:
            doc = json.loads(body or b"{}")
        if not method.startswith("chat."):  # conversations.history and the like: nothing there yet
            return self._answer(200, b'{"ok":true,"messages":[],"has_more":false}', content_type="application/json")
        key = f"{method}:{doc.get('channel')}:{doc.get('thread_ts') or doc.get('ts') or ''}:{doc.get('text')}"
        self.accepted[key] += 1
        ts = doc.get("ts") or f"1700000000.{next(self._ts):06d}"
        answer = {"ok": True, "channel": "C0ALERTS1", "ts": ts, "message": {"ts": ts}}
        return self._answer(200, json.dumps(answer).encode(), content_type="application/json")

    @staticmethod
    def _answer(status: int, body: bytes, *, location: str = "", content_type: str = "text/plain") -> bytes:
        reason = {200: "OK", 204: "No Content", 307: "Temporary Redirect", 308: "Permanent Redirect"}[status]
        head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\nContent-Type: {content_type}\r\n"
        if location:
            head += f"Location: {location}\r\n"
        return head.encode() + b"\r\n" + body
