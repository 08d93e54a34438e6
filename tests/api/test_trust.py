"""What an outside probe found, each fixed at its class: forwarded headers believed only from
trusted proxies and read from the right; forms guarded against cross-site posts (CSRF token,
same-origin ``Origin``/``Referer``, ``Origin: null`` refused); errors that never echo request
bytes and carry the security headers, HSTS over TLS."""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.api import auth
from agent.api.app import app_runner, create_app
from agent.settings import ApiSettings, Secret, Settings, SettingsError
from tests.api.conftest import TOKEN
from tests.api.test_exposed import make as make
from tests.api.test_exposed import sign_in

WRONG = {"Authorization": "Bearer wrong-token-" + "x" * 20}


def _request(peer: str, **headers: str) -> web.Request:
    req = make_mocked_request("GET", "/", headers=headers)
    req._transport_peername = (peer, 1234)  # type: ignore[attr-defined]
    return req


def test_forwarded_for_is_read_from_the_right() -> None:
    one = auth.ProxyTrust(any_peer=True)
    assert one.client(_request("10.0.0.5", **{"X-Forwarded-For": "6.6.6.6, 198.51.100.9"})) == "198.51.100.9"
    cidrs = auth.ProxyTrust(["10.0.0.0/8", "fd00::/8"])
    hops = "6.6.6.6, 198.51.100.9, 10.1.2.3, fd00::1"
    assert cidrs.client(_request("10.0.0.5", **{"X-Forwarded-For": hops})) == "198.51.100.9"
    # A peer outside the trusted networks is the client, whatever it writes.
    assert cidrs.client(_request("203.0.113.1", **{"X-Forwarded-For": "10.9.9.9"})) == "203.0.113.1"
    assert not cidrs.forwarded_tls(_request("203.0.113.1", **{"X-Forwarded-Proto": "https"}))
    assert cidrs.forwarded_tls(_request("10.0.0.5", **{"X-Forwarded-Proto": "http, https"}))
    # Every hop a proxy of ours: the leftmost is where it came from.
    assert cidrs.client(_request("10.0.0.5", **{"X-Forwarded-For": "10.0.0.1, 10.0.0.2"})) == "10.0.0.1"
    off = auth.ProxyTrust()
    assert off.client(_request("10.0.0.5", **{"X-Forwarded-For": "1.1.1.1"})) == "10.0.0.5"


def test_trusted_proxies_setting() -> None:
    args = argparse.Namespace(trusted_proxies=["10.0.0.0/8", "192.168.1.7"])
    settings = Settings.from_args(args, environ={})
    assert settings.api.trusted_proxies == ("10.0.0.0/8", "192.168.1.7/32")
    assert settings.api.trust_forwarded_headers
    with pytest.raises(SettingsError) as caught:
        Settings.from_args(None, environ={"UNSTICK_TRUSTED_PROXIES": "10.0.0.0/8,not-a-net"})
    assert str(caught.value) == (
        "--trusted-proxies / UNSTICK_TRUSTED_PROXIES: 'not-a-net' is not an address or CIDR network"
    )


async def _statuses(client: TestClient, n: int, xff: Any, headers: dict[str, str]) -> list[int]:
    out = []
    for i in range(n):
        resp = await client.get("/api/v1/incidents", headers={**headers, "X-Forwarded-For": xff(i)})
        out.append(resp.status)
    return out


async def test_rotating_the_leftmost_hop_does_not_escape_the_limiter(make: Any) -> None:
    client, _ = await make(trust_forwarded_headers=True)
    got = await _statuses(client, 12, lambda i: f"192.0.2.{i}, 203.0.113.7", WRONG)
    assert got[:10] == [401] * 10 and got[10:] == [429, 429]


async def test_spoofing_another_clients_address_does_not_lock_it_out(make: Any) -> None:
    client, _ = await make(trusted_proxies=("127.0.0.0/8",))
    got = await _statuses(client, 12, lambda i: "198.51.100.9, 203.0.113.66", WRONG)
    assert got[10:] == [429, 429]  # the attacker (203.0.113.66, as our proxy saw it) is limited
    victim = await client.get(
        "/api/v1/incidents", headers={"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": "198.51.100.9"}
    )
    assert victim.status == 200


async def test_forwarded_headers_from_an_untrusted_peer_are_ignored(make: Any) -> None:
    client, _ = await make(trusted_proxies=("10.0.0.0/8",))  # the test client is 127.0.0.1
    got = await _statuses(client, 11, lambda i: f"192.0.2.{i}", WRONG)
    assert got[10] == 429  # every attempt counted against the peer
    _, cookies, _ = await sign_in(*(await make(trusted_proxies=("10.0.0.0/8",)))[:1], headers={"X-Forwarded-Proto": "https"})
    assert "Secure" not in cookies[auth.COOKIE]


async def test_hsts_only_over_tls(make: Any) -> None:
    client, _ = await make(trust_forwarded_headers=True)
    for path in ("/healthz", "/api/v1/incidents", "/no-such-page"):
        over_tls = await client.get(path, headers={"X-Forwarded-Proto": "https"})
        assert over_tls.headers["Strict-Transport-Security"] == "max-age=31536000", path
        plain = await client.get(path)
        assert "Strict-Transport-Security" not in plain.headers
        assert plain.headers["X-Content-Type-Options"] == "nosniff"
        # Not no-referrer: browsers then send "Origin: null" on the pages' own form posts.
        assert plain.headers["Referrer-Policy"] == "same-origin"


async def test_signed_in_forms_need_the_csrf_token_and_this_origin(make: Any) -> None:
    client, _ = await make()
    await sign_in(client)
    html = await (await client.get("/silences", headers={"Accept": "text/html"})).text()
    tokens = set(re.findall(r'name="csrf" value="([0-9a-f]+)"', html))
    assert len(tokens) == 1  # one token, in the silence form and the sign-out form alike
    token = tokens.pop()
    form = {"namespace": "ml", "reason": "r", "duration": "1h"}
    origin = client.session.headers.pop("Origin")
    try:
        for headers, data in (
            ({"Origin": "https://evil.example"}, {**form, "csrf": token}),
            ({"Origin": "null"}, {**form, "csrf": token}),
            ({"Referer": "https://evil.example/x"}, {**form, "csrf": token}),
            ({}, {**form, "csrf": token}),
            ({"Origin": origin}, form),
            ({"Origin": origin}, {**form, "csrf": "f" * 64}),
        ):
            resp = await client.post("/silences", data=data, headers=headers, allow_redirects=False)
            assert resp.status == 403, (headers, data)
        for headers in ({"Origin": origin}, {"Referer": origin + "/silences"}):
            resp = await client.post("/silences", data={**form, "csrf": token}, headers=headers, allow_redirects=False)
            assert resp.status == 303, headers
    finally:
        client.session.headers["Origin"] = origin


@pytest.fixture
async def served(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[int]:
    api = ApiSettings(tokens=(Secret(TOKEN),), port=0)
    runner = app_runner(create_app(sessions=sessions, settings=api), api)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield port
    await runner.cleanup()


async def _raw(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return data


@pytest.mark.parametrize(
    "header",
    [
        b"Authorization: Bearer SECRET-token-prefix\x01rest",  # a control character in a header
        b"Authorization: Bearer SECRET-token-prefix" + b"a" * 9000,  # a header longer than aiohttp reads
        b"Cookie: unstick_session=SECRET-token-prefix\x7f",
    ],
)
async def test_unparsable_requests_echo_nothing_and_carry_the_headers(served: int, header: bytes) -> None:
    answer = await _raw(served, b"GET /api/v1/incidents HTTP/1.1\r\nHost: x\r\n" + header + b"\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert re.match(rb"HTTP/1\.[01] 4[0-9][0-9] ", head), answer[:200]
    assert b"SECRET" not in answer and b"token-prefix" not in answer
    assert b"X-Content-Type-Options: nosniff" in head and b"X-Frame-Options: DENY" in head
    assert b"Cache-Control: no-store" in head
    assert b'"message":"the request could not be parsed"' in body


async def test_a_saturated_store_is_a_503_with_retry_after(db_url: str) -> None:
    """Under load the connection pool runs dry (the load benchmark on PostgreSQL saw 500s):
    that is "retry shortly", not a fault of the program."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from agent.api.errors import unavailable
    from storage.engine import create_sessionmaker

    engine = create_async_engine(db_url, pool_size=1, max_overflow=0, pool_timeout=0.2)
    api = ApiSettings(tokens=(Secret(TOKEN),))
    try:
        async with engine.connect(), TestClient(TestServer(create_app(sessions=create_sessionmaker(engine), settings=api))) as client:
            resp = await client.get("/api/v1/incidents", headers={"Authorization": f"Bearer {TOKEN}"})
            assert resp.status == 503 and resp.headers["Retry-After"] == "2"
            assert (await resp.json())["error"]["code"] == "unavailable"
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
    finally:
        await engine.dispose()
    assert not unavailable(ValueError("a bug")) and not unavailable(KeyError("x"))


async def test_shutdown_does_not_wait_for_ever_on_requests_in_flight() -> None:
    """A request stuck (on a saturated database, say) must not hold a stopping server past
    Kubernetes' termination grace (30 s): in-flight requests get 5 s, and 5 s more once cancelled."""
    from agent.api.app import SHUTDOWN_SECONDS

    entered = asyncio.Event()

    async def stuck(request: web.Request) -> web.Response:
        entered.set()
        await asyncio.sleep(3600)
        return web.Response()

    app = web.Application()
    app.router.add_get("/stuck", stuck)
    runner = app_runner(app, ApiSettings())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    await asyncio.wait_for(entered.wait(), 10)
    started = time.monotonic()
    await runner.cleanup()
    took = time.monotonic() - started
    writer.close()
    assert took < 2 * SHUTDOWN_SECONDS + 3 < 20, took
