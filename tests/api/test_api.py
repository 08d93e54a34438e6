"""The incident API over real HTTP (aiohttp's test server) and a migrated, seeded database."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.api.app import create_app
from agent.settings import ApiSettings
from tests.api.conftest import OTHER_TOKEN, TOKEN
from tests.api.seed import SCALE_UP_MESSAGE, seed_waiting
from tests.storage.factories import GPU_YAML

CONTRACT_KEYS = [
    "id",
    "fingerprint",
    "rule_id",
    "severity",
    "status",
    "subject",
    "title",
    "explanation",
    "evidence",
    "remedies",
    "first_seen",
    "last_seen",
    "resolved_at",
    "occurrences",
    "waiting",
    "resolution",
]
REMEDY_KEYS = ["title", "kind", "yaml", "command", "verified", "verification"]


async def get_json(
    client: TestClient, path: str, auth: dict[str, str], expect: int = 200, **params: Any
) -> Any:
    resp = await client.get(path, headers=auth, params=params)
    body = await resp.json()
    assert resp.status == expect, body
    assert resp.content_type == "application/json"
    return body


# --- authentication -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({}, None),
        ({"Authorization": "Bearer not-a-valid-token-at-all"}, "invalid_token"),
        ({"Authorization": f"Bearer {TOKEN}x"}, "invalid_token"),
        ({"Authorization": f"Basic {TOKEN}"}, "invalid_request"),
        ({"Authorization": "Bearer "}, "invalid_request"),
    ],
)
async def test_protected_routes_need_a_valid_bearer_token(
    client: TestClient, headers: dict[str, str], error: str | None
) -> None:
    for path in (
        "/api/v1/incidents",
        "/api/v1/incidents/1",
        "/api/v1/stats",
        "/api/v1/openapi.json",
        "/api/v1/incidents/1/remedies/0.yaml",
        "/api/v1/nowhere",
    ):
        resp = await client.get(path, headers=headers)
        assert resp.status == 401, path
        challenge = resp.headers["WWW-Authenticate"]
        assert challenge.startswith('Bearer realm="unstick"')
        assert (f'error="{error}"' in challenge) if error else ("error=" not in challenge)
        body = await resp.json()
        assert body["error"]["code"] == "unauthorized"


async def test_every_configured_token_works_and_open_routes_need_none(client: TestClient) -> None:
    for token in (TOKEN, OTHER_TOKEN):
        resp = await client.get("/api/v1/incidents", headers={"Authorization": f"Bearer {token}"})
        assert resp.status == 200
    for path in ("/healthz", "/readyz", "/metrics"):
        resp = await client.get(path)
        assert resp.status == 200, path


async def test_pages_ask_browsers_to_sign_in_and_the_cookie_works(client: TestClient) -> None:
    resp = await client.get("/incidents/1?x=1", headers={"Accept": "text/html"})
    assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
    html = await resp.text()
    assert 'name="token"' in html and 'value="/incidents/1?x=1"' in html

    csrf = await login_csrf(client)
    bad = await client.post(
        "/login",
        data={"token": "wrong-token-wrong-token", "next": "/incidents/1", "csrf": csrf},
        allow_redirects=False,
    )
    assert bad.status == 401 and "not valid" in await bad.text()
    assert "unstick_session" not in bad.cookies

    # An open redirect is refused: after login, only local paths.
    csrf = await login_csrf(client)
    ok = await client.post(
        "/login", data={"token": TOKEN, "next": "//evil.example/x", "csrf": csrf}, allow_redirects=False
    )
    assert ok.status == 303 and ok.headers["Location"] == "/incidents"
    cookie = ok.cookies["unstick_session"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert TOKEN not in cookie.value  # a random session id, never the token itself

    page = await client.get("/incidents/1", headers={"Accept": "text/html"})
    assert page.status == 200 and "Rollout of ml/trainer" in await page.text()
    # The cookie also opens the raw YAML link of the page.
    raw = await client.get("/api/v1/incidents/1/remedies/0.yaml")
    assert raw.status == 200

    signout = re.search(r'name="csrf" value="([^"]+)"', await page.text())
    assert signout is not None
    out = await client.post("/logout", data={"csrf": signout.group(1)}, allow_redirects=False)
    assert out.status == 303
    client.session.cookie_jar.update_cookies({"unstick_session": cookie.value})  # replayed after sign-out
    assert (await client.get("/api/v1/incidents")).status == 401


async def login_csrf(client: TestClient) -> str:
    """GET /login: the form's CSRF token (its cookie lands in the client's jar)."""
    form = await client.get("/login")
    found = re.search(r'name="csrf" value="([^"]+)"', await form.text())
    assert found is not None
    return found.group(1)


async def test_forged_cookie_is_refused(client: TestClient) -> None:
    for value in ("00" * 32, "zz", TOKEN):
        client.session.cookie_jar.update_cookies({"unstick_session": value})
        resp = await client.get("/api/v1/incidents")
        assert resp.status == 401 and 'error="invalid_token"' in resp.headers["WWW-Authenticate"]


async def test_without_auth_everything_is_open(
    sessions: async_sessionmaker[AsyncSession], open_settings: ApiSettings
) -> None:
    app = create_app(sessions=sessions, settings=open_settings)
    async with TestClient(TestServer(app)) as c:
        assert (await c.get("/api/v1/incidents")).status == 200
        doc = await (await c.get("/api/v1/openapi.json")).json()
        assert doc["security"] == []


# --- the incident contract ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "db_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_list_show_and_stats_contract(client: TestClient, auth: dict[str, str]) -> None:
    body = await get_json(client, "/api/v1/incidents", auth, limit="100")
    assert list(body) == ["items", "next_cursor"] and body["next_cursor"] is None
    items = body["items"]
    assert len(items) == 24
    for item in items:
        assert list(item) == CONTRACT_KEYS
        assert list(item["subject"]) == ["kind", "namespace", "name"]
        for r in item["remedies"]:
            assert list(r) == REMEDY_KEYS
        assert item["first_seen"].endswith("Z") and item["last_seen"].endswith("Z")
    # Newest first by last_seen.
    assert [i["last_seen"] for i in items] == sorted((i["last_seen"] for i in items), reverse=True)

    trainer = next(i for i in items if i["subject"]["name"] == "trainer")
    assert trainer == {
        **trainer,
        "rule_id": "rollout-deadlock",
        "severity": "critical",
        "status": "open",
        "subject": {"kind": "Deployment", "namespace": "ml", "name": "trainer"},
        "first_seen": "2024-05-01T12:00:00Z",
        "last_seen": "2024-05-01T15:00:00Z",
        "resolved_at": None,
        "occurrences": 3,
        "waiting": None,
    }
    assert trainer["remedies"][0]["yaml"] == GPU_YAML and trainer["remedies"][1]["kind"] == "command"

    detail = await get_json(client, f"/api/v1/incidents/{trainer['id']}", auth)
    assert {k: detail[k] for k in CONTRACT_KEYS} == trainer
    assert detail["cluster"] == "prod" and detail["pods"] == ["ml/trainer-7d9-abc"]
    assert [e["kind"] for e in detail["timeline"]] == ["opened"]
    assert detail["timeline"][0]["message"].startswith("0/10 nodes are available")

    recurring = (await get_json(client, "/api/v1/incidents", auth, rule_id="pdb-blocks-drain", sort="id"))[
        "items"
    ]
    assert [i["status"] for i in recurring] == ["resolved", "open"]
    again = await get_json(client, f"/api/v1/incidents/{recurring[1]['id']}", auth)
    assert again["previous_id"] == recurring[0]["id"]
    first = await get_json(client, f"/api/v1/incidents/{recurring[0]['id']}", auth)
    assert [e["kind"] for e in first["timeline"]] == ["opened", "resolved"]
    assert first["timeline"][1]["message"] == "Successfully assigned data/cassandra-2 to node-4"
    assert first["resolved_at"] == "2024-05-01T14:01:00Z"

    stats = await get_json(client, "/api/v1/stats", auth)
    assert (stats["total"], stats["open"], stats["resolved"]) == (24, 3, 21)
    assert stats["by_rule"][0] == {"rule_id": "insufficient-resources", "count": 21, "open": 1}
    assert {d["day"]: d["count"] for d in stats["by_day"]} == {
        "2024-05-01": 3,
        "2024-05-02": 12,
        "2024-05-03": 9,
    }
    assert stats["time_to_resolve"]["count"] == 21
    assert stats["time_to_resolve"]["max_seconds"] == pytest.approx(7200)
    batch = await get_json(client, "/api/v1/stats", auth, namespace="batch")
    assert batch["time_to_resolve"]["p50_seconds"] == pytest.approx(660) and batch["total"] == 20


async def test_filters_and_text_search(client: TestClient, auth: dict[str, str]) -> None:
    async def names(**params: str) -> list[str]:
        body = await get_json(client, "/api/v1/incidents", auth, **params)
        return [i["subject"]["name"] for i in body["items"]]

    assert await names(status="open", sort="id") == ["trainer", "frontend", "cassandra"]
    assert await names(namespace="web") == ["frontend"]
    assert await names(severity="critical") == ["trainer"]
    assert await names(kind="StatefulSet", name="cassandra", status="resolved") == ["cassandra"]
    assert await names(q="GPU") == ["trainer"]
    assert await names(q="<script>") == ["frontend"]
    assert await names(cluster="staging") == []
    # Active window: open, or resolved at/after since; first seen before until.
    assert await names(since="2024-05-02T20:00:00Z", until="2024-05-02T21:00:00Z", sort="id") == [
        "trainer",
        "frontend",
        "cassandra",
        "job-8",
    ]
    assert await names(since="2024-05-02T22:00:00+02:00", until="2024-05-02T21:00:00Z", sort="id") == [
        "trainer",
        "frontend",
        "cassandra",
        "job-8",
    ]


@pytest.mark.parametrize(
    "db_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
async def test_waiting_for_scale_up_field_and_filter(
    client: TestClient, auth: dict[str, str], sessions: async_sessionmaker[AsyncSession]
) -> None:
    inference, render = await seed_waiting(sessions)

    async def ids(**params: str) -> list[int]:
        body = await get_json(client, "/api/v1/incidents", auth, sort="id", limit="100", **params)
        return [i["id"] for i in body["items"]]

    assert await ids(waiting="true") == [render, inference]
    assert await ids(waiting="true", status="open") == [inference]
    assert await ids(waiting="true", status="resolved") == [render]
    assert await ids(waiting="false") == list(range(1, 25))  # the seed's 24, all paged as usual
    assert await ids(waiting="true", namespace="web") == []

    listed = (await get_json(client, "/api/v1/incidents", auth, waiting="true", status="open"))["items"]
    assert list(listed[0]) == CONTRACT_KEYS
    assert listed[0]["waiting"] == {"for": "scale-up", "since": "2024-05-04T11:40:00Z"}
    detail = await get_json(client, f"/api/v1/incidents/{inference}", auth)
    assert detail["waiting"] == listed[0]["waiting"] and detail["status"] == "open"
    assert [(e["kind"], e["message"], e["detail"]) for e in detail["timeline"]] == [
        ("opened", SCALE_UP_MESSAGE, {}),
        ("waiting", SCALE_UP_MESSAGE, {"for": "scale-up"}),
    ]
    quiet = await get_json(client, f"/api/v1/incidents/{render}", auth)
    assert quiet["status"] == "resolved" and quiet["waiting"] == {
        "for": "scale-up",
        "since": "2024-05-04T10:00:00Z",
    }
    assert quiet["timeline"][-1]["kind"] == "resolved" and quiet["timeline"][-1]["detail"] == {
        "waiting_for": "scale-up"
    }
    paged = await get_json(client, "/api/v1/incidents/1", auth)
    assert paged["waiting"] is None

    stats = await get_json(client, "/api/v1/stats", auth, waiting="true")
    assert (stats["total"], stats["open"], stats["resolved"]) == (2, 1, 1)
    assert stats["time_to_resolve"]["max_seconds"] == pytest.approx(1200)  # the autoscaler took 20 min
    err = await get_json(client, "/api/v1/stats", auth, expect=400, waiting="1")
    assert err["error"]["parameter"] == "waiting" and "true, false" in err["error"]["message"]


async def test_cursor_pagination(client: TestClient, auth: dict[str, str]) -> None:
    seen: list[int] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": "7", "sort": "-occurrences"} | ({"cursor": cursor} if cursor else {})
        body = await get_json(client, "/api/v1/incidents", auth, **params)
        seen += [i["id"] for i in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == 4 and sorted(seen) == list(range(1, 25))
    assert seen[0] == 1  # the trainer incident has the most events


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"status": "closed"}, "status"),
        ({"severity": "high"}, "severity"),
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "-5"}, "limit"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2024-13-01T00:00:00Z"}, "until"),
        ({"since": "2024-05-01"}, "since"),
        ({"sort": "title"}, "sort"),
        ({"cursor": "!!"}, "cursor"),
        ({"cursor": "eyJ4IjoxfQ"}, "cursor"),
        ({"namespace": "Not A Namespace"}, "namespace"),
        ({"namespace": ""}, "namespace"),
        ({"name": "x" * 300}, "name"),
        ({"q": "nul\x00byte"}, "q"),
        ({"waiting": "yes"}, "waiting"),
        ({"waiting": "True"}, "waiting"),
        ({"waiting": ""}, "waiting"),
        ({"stauts": "open"}, "stauts"),
    ],
)
async def test_bad_parameters_are_400s_naming_the_parameter(
    client: TestClient, auth: dict[str, str], params: dict[str, str], parameter: str
) -> None:
    body = await get_json(client, "/api/v1/incidents", auth, expect=400, **params)
    assert body["error"]["parameter"] == parameter and body["error"]["code"] == "invalid_parameter"
    assert body["error"]["message"]


async def test_repeated_parameter_and_stats_parameters(client: TestClient, auth: dict[str, str]) -> None:
    resp = await client.get("/api/v1/incidents?status=open&status=resolved", headers=auth)
    assert resp.status == 400 and (await resp.json())["error"]["parameter"] == "status"
    body = await get_json(client, "/api/v1/stats", auth, expect=400, limit="5")
    assert body["error"]["parameter"] == "limit"  # stats take filters only


async def test_cursor_from_another_sort_is_refused(client: TestClient, auth: dict[str, str]) -> None:
    body = await get_json(client, "/api/v1/incidents", auth, limit="2")
    err = await get_json(client, "/api/v1/incidents", auth, expect=400, cursor=body["next_cursor"], sort="id")
    assert err["error"]["parameter"] == "cursor" and "sort" in err["error"]["message"]


@pytest.mark.parametrize(
    ("path", "status", "parameter"),
    [
        ("/api/v1/incidents/999", 404, None),
        ("/api/v1/incidents/9223372036854775807", 404, None),
        ("/api/v1/incidents/9223372036854775808", 400, "id"),
        ("/api/v1/incidents/abc", 400, "id"),
        ("/api/v1/incidents/0", 400, "id"),
        ("/api/v1/incidents/1?verbose=1", 400, "verbose"),
        ("/api/v1/incidents/1/remedies/2.yaml", 404, None),
        ("/api/v1/incidents/1/remedies/1.yaml", 404, None),  # a command, no YAML
        ("/api/v1/incidents/1/remedies/x.yaml", 400, "n"),
        ("/api/v1/incidents/3/remedies/0.yaml", 404, None),
        ("/api/v1/nowhere", 404, None),
    ],
)
async def test_missing_things(
    client: TestClient, auth: dict[str, str], path: str, status: int, parameter: str | None
) -> None:
    resp = await client.get(path, headers=auth)
    assert resp.status == status
    err = (await resp.json())["error"]
    assert err.get("parameter") == parameter and err["message"]


async def test_remedy_yaml_is_raw_and_applicable(client: TestClient, auth: dict[str, str]) -> None:
    resp = await client.get("/api/v1/incidents/1/remedies/0.yaml", headers=auth)
    assert resp.status == 200 and resp.content_type == "application/yaml"
    text = await resp.text()
    assert text == GPU_YAML
    doc = yaml.safe_load(text)
    assert doc["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}


async def test_method_not_allowed_is_json(client: TestClient, auth: dict[str, str]) -> None:
    resp = await client.post("/api/v1/incidents", headers=auth)
    assert resp.status == 405 and (await resp.json())["error"]["code"] == "method_not_allowed"
    assert "GET" in resp.headers["Allow"]


async def test_request_size_limit(client: TestClient) -> None:
    resp = await client.post("/login", data={"token": "x" * 10_000})
    assert resp.status == 413
    assert (await resp.json())["error"]["code"] == "request_too_large"


async def test_no_cors_and_safe_headers(client: TestClient, auth: dict[str, str]) -> None:
    resp = await client.get("/api/v1/incidents", headers={**auth, "Origin": "https://evil.example"})
    assert resp.status == 200
    assert not any(h.lower().startswith("access-control-") for h in resp.headers)
    assert resp.headers["X-Content-Type-Options"] == "nosniff" and resp.headers["Cache-Control"] == "no-store"
    pre = await client.options(
        "/api/v1/incidents",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
    )
    assert pre.status in (401, 405) and "Access-Control-Allow-Origin" not in pre.headers


# --- health, readiness, metrics, OpenAPI -----------------------------------------------------------


async def test_readiness_follows_the_callback_and_the_database(
    sessions: async_sessionmaker[AsyncSession], api_settings: ApiSettings
) -> None:
    state = {"ready": False}

    async def ready() -> bool:
        return state["ready"]

    app = create_app(sessions=sessions, settings=api_settings, readiness=ready)
    async with TestClient(TestServer(app)) as c:
        resp = await c.get("/readyz")
        assert resp.status == 503 and (await resp.json()) == {"status": "not ready", "role": "standalone"}
        state["ready"] = True
        assert (await c.get("/readyz")).status == 200
        assert (await c.get("/healthz")).status == 200
        engine = sessions.kw["bind"]
        await engine.dispose()
        # A database that is gone makes the app unready (not dead).
        bad_path = (
            engine.url.set(database="/nonexistent/dir/x.db") if engine.dialect.name == "sqlite" else None
        )
        if bad_path is not None:
            from storage.engine import create_engine, create_sessionmaker

            broken = create_engine(bad_path.render_as_string(hide_password=False))
            app2 = create_app(sessions=create_sessionmaker(broken), settings=api_settings)
            async with TestClient(TestServer(app2)) as c2:
                resp = await c2.get("/readyz")
                assert resp.status == 503 and (await resp.json()) == {"status": "database unavailable", "role": "standalone"}
                assert (await c2.get("/healthz")).status == 200
            await broken.dispose()


async def test_metrics_count_requests_by_route_pattern(
    sessions: async_sessionmaker[AsyncSession], api_settings: ApiSettings, auth: dict[str, str]
) -> None:
    registry = CollectorRegistry()
    app = create_app(sessions=sessions, settings=api_settings, registry=registry)
    async with TestClient(TestServer(app)) as c:
        for i in (1, 2, 3):
            await c.get(f"/api/v1/incidents/{i}", headers=auth)
        await c.get("/api/v1/incidents", params={"limit": "0"}, headers=auth)
        await c.get("/api/v1/incidents")
        text = await (await c.get("/metrics")).text()
    assert 'unstick_http_requests_total{method="GET",route="/api/v1/incidents/{id}",status="200"} 3.0' in text
    assert 'unstick_http_requests_total{method="GET",route="/api/v1/incidents",status="400"} 1.0' in text
    assert 'unstick_http_requests_total{method="GET",route="/api/v1/incidents",status="401"} 1.0' in text
    assert (
        registry.get_sample_value(
            "unstick_http_request_duration_seconds_count", {"route": "/api/v1/incidents/{id}"}
        )
        == 3.0
    )


async def test_openapi_document_describes_every_route(client: TestClient, auth: dict[str, str]) -> None:
    doc = await get_json(client, "/api/v1/openapi.json", auth)
    assert doc["openapi"].startswith("3.1")
    documented = set(doc["paths"])
    served = set()
    for resource in client.app.router.resources():
        path = resource.canonical
        if path.startswith("/api/") or path in ("/healthz", "/readyz", "/metrics"):
            served.add(path)
    assert served == documented
    listing = {p["name"] for p in doc["paths"]["/api/v1/incidents"]["get"]["parameters"]}
    from agent.api.params import LIST_PARAMS

    assert listing == set(LIST_PARAMS)
    assert doc["paths"]["/healthz"]["get"]["security"] == []
    assert doc["components"]["schemas"]["Incident"]["required"] == CONTRACT_KEYS
    kinds = doc["components"]["schemas"]["TimelineEntry"]["properties"]["kind"]["enum"]
    assert {"waiting", "escalated"} <= set(kinds)
    [waiting] = [p for p in doc["paths"]["/api/v1/stats"]["get"]["parameters"] if p["name"] == "waiting"]
    assert waiting["schema"] == {"type": "string", "enum": ["true", "false"]}
