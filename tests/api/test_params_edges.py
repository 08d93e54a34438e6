"""Crafted query parameters at the edges of the integer and the calendar:
a 400 naming the parameter on SQLite and PostgreSQL, never a 500."""

from __future__ import annotations

import base64
import json

import pytest
from aiohttp.test_utils import TestClient


def cursor(*parts: object) -> str:
    # json, not orjson: a crafted cursor may hold integers orjson refuses to write.
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).rstrip(b"=").decode()


INT64_MAX = 2**63 - 1

BAD_CURSORS = [
    ("-id", cursor("-id", 1, INT64_MAX + 1)),
    ("id", cursor("id", 1, 2**64 - 1)),
    ("-id", cursor("-id", 1, -(2**63) - 1)),
    ("-occurrences", cursor("-occurrences", INT64_MAX + 1, 1)),
    ("occurrences", cursor("occurrences", -(2**63) - 1, 1)),
    ("-id", cursor("-id", 1, 10**30)),
    ("-occurrences", cursor("-occurrences", 2**31, 1)),  # occurrences is a 32-bit INTEGER column
    ("-last_seen", cursor("-last_seen", "0001-01-01T00:00:00+01:00", 1)),
    ("last_seen", cursor("last_seen", "9999-12-31T23:59:59-01:00", 1)),
    ("-first_seen", cursor("-first_seen", "0001-01-01T00:30:00+00:59", 1)),
]


@pytest.mark.parametrize(
    "db_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
@pytest.mark.parametrize(("sort", "value"), BAD_CURSORS)
async def test_a_cursor_outside_the_databases_range_is_a_400(
    client: TestClient, auth: dict[str, str], sort: str, value: str
) -> None:
    resp = await client.get("/api/v1/incidents", params={"sort": sort, "cursor": value}, headers=auth)
    assert resp.status == 400, await resp.text()
    assert (await resp.json())["error"]["parameter"] == "cursor"


@pytest.mark.parametrize(
    "db_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
@pytest.mark.parametrize("sort", ["-last_seen", "first_seen", "-occurrences", "id"])
async def test_cursors_with_ids_past_32_bits_page_on(
    client: TestClient, auth: dict[str, str], sort: str
) -> None:
    # Ids are BIGINT: a cursor past 2^31 is a valid position (beyond every row), not a 500.
    value = {"-last_seen": "2024-05-01T00:00:00+00:00", "first_seen": "2024-05-01T00:00:00+00:00"}.get(
        sort, 1
    )
    resp = await client.get(
        "/api/v1/incidents", params={"sort": sort, "cursor": cursor(sort, value, 2**40)}, headers=auth
    )
    assert resp.status == 200, await resp.text()
    resp = await client.get(f"/api/v1/incidents/{2**40}", headers=auth)
    assert resp.status == 404, await resp.text()


EDGE_TIMES = [
    "0001-01-01T00:00:00+01:00",  # UTC is in year 0
    "9999-12-31T23:59:59-01:00",  # UTC is in year 10000
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:60Z",
]


@pytest.mark.parametrize(
    "db_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
@pytest.mark.parametrize("parameter", ["since", "until"])
@pytest.mark.parametrize("value", EDGE_TIMES)
@pytest.mark.parametrize("path", ["/api/v1/incidents", "/api/v1/stats"])
async def test_a_time_at_the_edge_of_the_calendar_is_answered_or_a_400(
    client: TestClient, auth: dict[str, str], parameter: str, value: str, path: str
) -> None:
    resp = await client.get(path, params={parameter: value}, headers=auth)
    assert resp.status in (200, 400), await resp.text()
    if resp.status == 400:
        assert (await resp.json())["error"]["parameter"] == parameter
    else:
        assert "+" not in value[19:] and "-" not in value[19:]  # only times that exist in UTC are answered
