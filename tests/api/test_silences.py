"""Silences through the API (validated, token-protected), the pages and ``/metrics``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from storage.models import Notification

HTML = {"Accept": "text/html"}


async def post(client: TestClient, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
    resp = await client.post("/api/v1/silences", json=body, headers=headers)
    return resp.status, await resp.json()


async def test_create_list_delete_and_pending_rows_get_silenced(
    client: TestClient, auth: dict[str, str], sessions: async_sessionmaker[AsyncSession]
) -> None:
    async with sessions() as s:
        pending = (await s.execute(select(Notification.status))).scalars().all()
    assert "pending" in pending  # the seed wrote an opened row for ml/trainer
    status, doc = await post(
        client,
        {"namespace": "ml", "subject": "train*", "reason": "GPU pool migration", "duration": "2h"},
        auth,
    )
    assert status == 201, doc
    assert doc["namespace"] == "ml" and doc["subject"] == "train*" and doc["cluster"] is None
    assert (
        doc["expires_at"] == "2024-05-04T14:00:00Z" and doc["active"] is True and doc["created_by"] == "api"
    )
    assert doc["silenced_notifications"] >= 1
    async with sessions() as s:
        rows = (await s.execute(select(Notification.status, Notification.last_error))).all()
    assert any(st == "silenced" and err and "GPU pool migration" in err for st, err in rows)

    resp = await client.get("/api/v1/silences", headers=auth)
    assert [s["id"] for s in (await resp.json())["items"]] == [doc["id"]]
    metrics = await (await client.get("/metrics")).text()
    assert re.search(r"^unstick_silences_active 1\.0$", metrics, re.M)
    assert re.search(r"^unstick_notifications_silenced [1-9]", metrics, re.M)

    resp = await client.delete(f"/api/v1/silences/{doc['id']}", headers=auth)
    assert resp.status == 204
    resp = await client.delete(f"/api/v1/silences/{doc['id']}", headers=auth)
    assert resp.status == 404 and (await resp.json())["error"]["code"] == "not_found"
    assert (await (await client.get("/api/v1/silences", headers=auth)).json())["items"] == []


async def test_expired_silences_are_listed_only_when_asked(client: TestClient, auth: dict[str, str]) -> None:
    status, doc = await post(
        client, {"rule_id": "x", "reason": "r", "expires_at": "2024-05-04T12:01:00Z"}, auth
    )
    assert status == 201
    assert doc["expires_at"] == "2024-05-04T12:01:00Z"
    items = (await (await client.get("/api/v1/silences?include_expired=true", headers=auth)).json())["items"]
    assert [i["id"] for i in items] == [doc["id"]]


@pytest.mark.parametrize(
    ("body", "parameter"),
    [
        ({"reason": "r", "duration": "2h"}, "matchers"),
        ({"namespace": "ml", "duration": "2h"}, "reason"),
        ({"namespace": "ml", "reason": "r"}, "duration"),
        (
            {"namespace": "ml", "reason": "r", "duration": "2h", "expires_at": "2030-01-01T00:00:00Z"},
            "duration",
        ),
        ({"namespace": "ml", "reason": "r", "duration": "forever"}, "duration"),
        ({"namespace": "ml", "reason": "r", "duration": "400d"}, "duration"),
        ({"namespace": "ml", "reason": "r", "expires_at": "yesterday"}, "expires_at"),
        ({"namespace": "ml", "reason": "r", "expires_at": "2020-01-01T00:00:00Z"}, "expires_at"),
        ({"namespace": "ml", "reason": "r", "expires_at": "2030-01-01T00:00:00"}, "expires_at"),
        ({"namespace": "ml", "reason": "r", "duration": "2h", "colour": "red"}, "colour"),
        ({"namespace": 3, "reason": "r", "duration": "2h"}, "namespace"),
        ({"namespace": "n" * 254, "reason": "r", "duration": "2h"}, "namespace"),
        (["not", "an", "object"], "body"),
    ],
)
async def test_invalid_silences_are_400s_naming_the_field(
    client: TestClient, auth: dict[str, str], body: Any, parameter: str
) -> None:
    status, doc = await post(client, body, auth)
    assert status == 400, doc
    assert doc["error"]["parameter"] == parameter and doc["error"]["code"] == "invalid_parameter"


async def test_bad_bodies_and_ids(client: TestClient, auth: dict[str, str]) -> None:
    resp = await client.post(
        "/api/v1/silences", data=b"{", headers={**auth, "Content-Type": "application/json"}
    )
    assert resp.status == 400 and (await resp.json())["error"]["parameter"] == "body"
    resp = await client.post("/api/v1/silences", data=b"namespace=ml", headers=auth)
    assert resp.status == 415
    resp = await client.delete("/api/v1/silences/abc", headers=auth)
    assert resp.status == 400 and (await resp.json())["error"]["parameter"] == "id"
    resp = await client.get("/api/v1/silences?include_expired=maybe", headers=auth)
    assert resp.status == 400


async def test_silences_need_a_token(client: TestClient) -> None:
    for method, path in (
        ("GET", "/api/v1/silences"),
        ("POST", "/api/v1/silences"),
        ("DELETE", "/api/v1/silences/1"),
    ):
        resp = await client.request(method, path, json={"namespace": "ml", "reason": "r", "duration": "1h"})
        assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
    resp = await client.post(
        "/silences", data={"namespace": "ml", "reason": "r", "duration": "1h"}, headers=HTML
    )
    assert resp.status == 401


async def test_the_page_lists_creates_and_deletes(client: TestClient, auth: dict[str, str]) -> None:
    headers = {**auth, **HTML}
    html = await (await client.get("/silences", headers=headers)).text()
    assert "No silences." in html and 'action="/silences"' in html
    resp = await client.post(
        "/silences",
        data={
            "namespace": "ml",
            "subject": "trainer",
            "reason": "maintenance",
            "duration": "90m",
            "cluster": "",
        },
        headers=headers,
        allow_redirects=False,
    )
    assert resp.status == 303 and resp.headers["Location"].startswith("/silences?created=")
    html = await (await client.get(resp.headers["Location"], headers=headers)).text()
    row = re.search(r'<tr id="silence-(\d+)" class="active created">(.*?)</tr>', html, re.S)
    assert (
        row
        and "maintenance" in row.group(2)
        and "in 1h 30m" in row.group(2)
        and "<code>trainer</code>" in row.group(2)
    )
    # A bad form comes back with the error and what was typed.
    resp = await client.post(
        "/silences", data={"namespace": "ml", "reason": "", "duration": "2h"}, headers=headers
    )
    html = await resp.text()
    assert resp.status == 400 and "reason: required" in html and 'value="ml"' in html
    # A post from another site is refused.
    resp = await client.post(
        f"/silences/{row.group(1)}/delete",
        headers={**headers, "Origin": "https://evil.example"},
        allow_redirects=False,
    )
    assert resp.status == 403
    resp = await client.post(f"/silences/{row.group(1)}/delete", headers=headers, allow_redirects=False)
    assert resp.status == 303
    assert "No silences." in await (await client.get("/silences", headers=headers)).text()


async def test_the_incident_page_shows_silenced_notifications(
    client: TestClient, auth: dict[str, str]
) -> None:
    status, _ = await post(client, {"namespace": "ml", "reason": "known issue", "duration": "1h"}, auth)
    assert status == 201
    html = await (await client.get("/incidents/1", headers={**auth, **HTML})).text()
    section = re.search(r'<section id="notifications">(.*?)</section>', html, re.S)
    assert section and "silenced" in section.group(1) and "known issue" in section.group(1)
    assert "Apply this remedy" not in html  # the demo's action exists only in the demo
