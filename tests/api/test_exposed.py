"""The pages exposed on a cluster network: server-side sessions, Secure cookies behind TLS,
CSRF on sign-in and sign-out, same-site `next=`, failed sign-ins counted and rate-limited."""

from __future__ import annotations

import asyncio
import logging
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.api import auth
from agent.api.app import create_app
from agent.settings import ApiSettings, Secret
from tests.api.conftest import TOKEN, as_browser
from tests.api.test_api import login_csrf


@pytest.fixture
async def make(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator:
    clients: list[TestClient] = []

    async def build(**settings: object) -> tuple[TestClient, CollectorRegistry]:
        registry = CollectorRegistry()
        api = replace(ApiSettings(tokens=(Secret(TOKEN),)), **settings)  # type: ignore[arg-type]
        client = TestClient(TestServer(create_app(sessions=sessions, settings=api, registry=registry)))
        await client.start_server()
        as_browser(client)
        clients.append(client)
        return client, registry

    yield build
    for c in clients:
        await c.close()


async def sign_in(
    client: TestClient, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    csrf = await login_csrf(client)
    # A Secure CSRF cookie (https public URL) is not sent back over this test's plain HTTP: add it.
    client.session.cookie_jar.update_cookies({auth.CSRF_COOKIE: csrf})
    resp = await client.post(
        "/login",
        data={"token": TOKEN, "csrf": csrf, "next": "/incidents"},
        headers=headers,
        allow_redirects=False,
    )
    return (
        resp.status,
        {k: v.OutputString() for k, v in resp.cookies.items()},
        resp.cookies.get(auth.COOKIE).value if auth.COOKIE in resp.cookies else "",
    )


def test_next_accepts_only_same_site_paths() -> None:
    for bad in (
        "//evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
        "/\r/evil",
        "/\\evil.example",
        "\\\\evil",
        "https://evil.example/",
        "/ /evil",
        "javascript:alert(1)",
        "",
        "/%0a",
        "/x\x00",
    ):
        assert auth.safe_next(bad) in ("/incidents", bad) and not auth.safe_next(bad).startswith("//")
        if (
            any(c in bad for c in "\t\n\r\\ \x00")
            or bad.startswith(("//", "https:", "javascript:"))
            or not bad
        ):
            assert auth.safe_next(bad) == "/incidents", repr(bad)
    for good in ("/incidents/1?x=1", "/incidents?status=open&q=a%20b", "/"):
        assert auth.safe_next(good) == good


async def test_sessions_are_server_side_and_end_at_sign_out(make) -> None:
    client, _ = await make()
    status, cookies, session = await sign_in(client)
    assert status == 303 and session and TOKEN not in session and len(session) >= 40
    assert "Secure" not in cookies[auth.COOKIE]  # plain HTTP, no proxy trusted
    assert (await client.get("/api/v1/incidents")).status == 200
    page = await (await client.get("/incidents", headers={"Accept": "text/html"})).text()
    csrf = re.search(r'action="/logout".*?name="csrf" value="([^"]+)"', page, re.S)
    assert csrf is not None
    # Sign-out is a POST with the session's CSRF token; a GET or a forged POST does nothing.
    assert (await client.get("/logout", allow_redirects=False)).status == 405
    assert (await client.post("/logout", data={"csrf": "forged"}, allow_redirects=False)).status == 403
    assert (await client.get("/api/v1/incidents")).status == 200
    assert (await client.post("/logout", data={"csrf": csrf.group(1)}, allow_redirects=False)).status == 303
    client.session.cookie_jar.update_cookies({auth.COOKIE: session})  # the old cookie, replayed
    assert (await client.get("/api/v1/incidents")).status == 401


def test_sessions_expire_and_die_with_their_token_set() -> None:
    now = [0.0]
    sessions = auth.Sessions(ttl=60, clock=lambda: now[0])
    tokens = auth.TokenSet([TOKEN])
    sid = sessions.start(tokens)
    assert sessions.valid(sid, tokens)
    assert not sessions.valid(sid, auth.TokenSet([TOKEN, "another-token-0123456789"]))  # the set changed
    sid = sessions.start(tokens)
    now[0] = 61
    assert not sessions.valid(sid, tokens) and len(sessions) == 0
    assert sessions.start(tokens) != sessions.start(tokens)


async def test_secure_cookie_behind_tls(make) -> None:
    plain, _ = await make()
    _, cookies, _ = await sign_in(plain, headers={"X-Forwarded-Proto": "https"})
    assert "Secure" not in cookies[auth.COOKIE]  # a header anyone can send, not trusted by default
    proxied, _ = await make(trust_forwarded_headers=True)
    _, cookies, _ = await sign_in(proxied, headers={"X-Forwarded-Proto": "https"})
    assert "Secure" in cookies[auth.COOKIE] and "HttpOnly" in cookies[auth.COOKIE]
    public, _ = await make(public_url="https://unstick.example.com")
    _, cookies, _ = await sign_in(public)
    assert "Secure" in cookies[auth.COOKIE]


async def test_sign_in_needs_its_csrf_token(make) -> None:
    client, registry = await make()
    resp = await client.post("/login", data={"token": TOKEN, "next": "/incidents"}, allow_redirects=False)
    assert resp.status == 403 and auth.COOKIE not in resp.cookies
    await login_csrf(client)  # the cookie alone, without the form's copy, is not enough
    resp = await client.post("/login", data={"token": TOKEN, "csrf": "guess"}, allow_redirects=False)
    assert resp.status == 403
    assert 'unstick_auth_failures_total{reason="csrf"} 2.0' in generate_latest(registry).decode()


async def test_failed_auth_is_counted_and_rate_limited_per_client(
    make, caplog: pytest.LogCaptureFixture
) -> None:
    client, registry = await make()
    wrong = "wrong-token-" + "x" * 20
    statuses = []
    for _ in range(12):
        statuses.append(
            (await client.get("/api/v1/incidents", headers={"Authorization": f"Bearer {wrong}"})).status
        )
    assert statuses[:10] == [401] * 10 and statuses[10:] == [429, 429]
    limited = await client.get("/api/v1/incidents", headers={"Authorization": f"Bearer {TOKEN}"})
    assert limited.status == 429 and int(limited.headers["Retry-After"]) >= 1  # even a good token waits
    metrics = generate_latest(registry).decode()
    assert 'unstick_auth_failures_total{reason="invalid_token"} 10.0' in metrics
    assert 'unstick_auth_failures_total{reason="rate_limited"}' in metrics
    assert wrong not in caplog.text and "authentication failed (invalid_token)" in caplog.text
    assert (await client.get("/healthz")).status == 200  # open paths are never limited


async def test_sign_in_page_never_offers_sign_out_to_a_signed_out_user(make) -> None:
    client, _ = await make()
    page = await (await client.get("/login")).text()
    assert "Sign out" not in page and 'action="/logout"' not in page
    page = await (await client.get("/incidents", headers={"Accept": "text/html"})).text()
    assert "Sign out" not in page
    await sign_in(client)
    page = await (await client.get("/incidents", headers={"Accept": "text/html"})).text()
    assert "Sign out" in page


@pytest.fixture
async def served(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator:
    """The app behind the runner the agent uses (app_runner), on a real socket."""
    from agent.api.app import app_runner

    runners = []

    async def start(**settings: object) -> int:
        api = replace(ApiSettings(tokens=(Secret(TOKEN),)), **settings)  # type: ignore[arg-type]
        runner = app_runner(create_app(sessions=sessions, settings=api, registry=CollectorRegistry()), api)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return int(runner.addresses[0][1])

    yield start
    for r in runners:
        await r.cleanup()


async def test_oversized_headers_are_refused_without_echo_in_the_log(
    served, caplog: pytest.LogCaptureFixture
) -> None:
    port = await served()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    secret = "SECRET-TOKEN-PREFIX-0123456789"
    writer.write(
        f"GET /api/v1/incidents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {secret}{'A' * 9000}\r\n\r\n".encode()
    )
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(200), 10)
    writer.close()
    assert answer.startswith(b"HTTP/1.") and b" 400 " in answer.split(b"\r\n")[0]
    assert "could not be parsed" in caplog.text and secret not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_half_open_connections_and_slow_bodies_time_out(served) -> None:
    port = await served(header_timeout=1.0, body_timeout=0.5)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # the head never completes
    await writer.drain()
    started = asyncio.get_running_loop().time()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the server
    assert asyncio.get_running_loop().time() - started < 5
    writer.close()

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: 100\r\n\r\ntoken=abc"
    )  # 9 of 100 bytes, then nothing
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(100), 10)
    assert b" 408 " in answer.split(b"\r\n")[0]
    writer.close()


def test_the_demo_refuses_to_serve_beyond_loopback_without_tokens(tmp_path: Path) -> None:
    unstick = str(Path(sys.executable).with_name("unstick"))
    done = subprocess.run(
        [unstick, "demo", "--once", "--listen", "0.0.0.0:0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "not a loopback address" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run(
        [unstick, "demo", "--once", "--listen", "0.0.0.0:0", "--no-auth"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--api-token-file" in done.stderr
