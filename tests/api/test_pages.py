"""The server-rendered pages (HTML as served; the browser test drives them in Chromium)."""

from __future__ import annotations

import re

import jinja2
import pytest
import yaml
from aiohttp.test_utils import TestClient
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.api.pages import build_jinja_env
from tests.api.seed import seed_waiting
from tests.storage.factories import GPU_YAML

HTML = {"Accept": "text/html"}


@pytest.fixture
def page_auth(auth: dict[str, str]) -> dict[str, str]:
    return {**auth, **HTML}


async def test_list_shows_incidents_counts_and_filters(client: TestClient, page_auth: dict[str, str]) -> None:
    resp = await client.get("/incidents", headers=page_auth)
    assert resp.status == 200 and resp.content_type == "text/html"
    assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
    html = await resp.text()
    assert re.search(r'id="count-open">3<', html) and re.search(r'id="count-resolved">21<', html)
    assert 'href="/incidents/1"' in html and "Rollout of ml/trainer" in html
    assert '<option value="pdb-blocks-drain">' in html and '<option value="batch">' in html
    assert 'id="next-page"' not in html  # 24 rows fit the default page of 50


async def test_list_filters_and_paginates(client: TestClient, page_auth: dict[str, str]) -> None:
    html = await (await client.get("/incidents?status=open&namespace=&rule_id=&q=", headers=page_auth)).text()
    rows = re.findall(r'href="/incidents/(\d+)"', html)
    assert sorted(map(int, rows)) == [1, 3, 4]
    html = await (await client.get("/incidents?namespace=batch&limit=5", headers=page_auth)).text()
    assert len(re.findall(r'<tr class="resolved">', html)) == 5
    next_link = re.search(r'id="next-page" href="([^"]+)"', html)
    assert next_link
    html2 = await (await client.get(next_link.group(1).replace("&amp;", "&"), headers=page_auth)).text()
    first = set(re.findall(r'href="/incidents/(\d+)"', html))
    second = set(re.findall(r'href="/incidents/(\d+)"', html2))
    assert len(second) == 5 and not first & second


async def test_incident_page_has_everything_an_on_call_engineer_needs(
    client: TestClient, page_auth: dict[str, str]
) -> None:
    html = await (await client.get("/incidents/1", headers=page_auth)).text()
    assert "25% of 1 replica rounds up to a surge of 1" in html
    assert "0/10 nodes are available: 1 Insufficient nvidia.com/gpu" in html
    assert 'data-copy="cmd-0"' in html and 'data-copy="apply-0"' in html and 'data-copy="cmd-1"' in html
    pre = re.search(r'<pre id="apply-0" class="yaml" tabindex="0">(.*?)</pre>', html, re.S)
    assert pre and yaml.safe_load(pre.group(1)) == yaml.safe_load(GPU_YAML)  # the patch, as a whole object
    assert 'href="/incidents/1/remedies/0.apply.yaml" download' in html
    assert "verified" in html and "not verified" in html
    assert "gpu-node-1" in html  # nested evidence rendered
    assert re.search(r'<li class="tl-opened">', html)


async def test_markup_in_data_is_escaped(client: TestClient, page_auth: dict[str, str]) -> None:
    for path in ("/incidents/3", "/incidents"):
        html = await (await client.get(path, headers=page_auth)).text()
        assert "<script>alert(1)</script>" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


async def test_recurrence_and_resolution_are_linked(client: TestClient, page_auth: dict[str, str]) -> None:
    html = await (await client.get("/incidents/4", headers=page_auth)).text()
    assert 'Recurrence of</dt><dd><a href="/incidents/2">#2</a>' in html
    html = await (await client.get("/incidents/2", headers=page_auth)).text()
    assert (
        "Resolved</dt>" in html and "after 2h<" in html and "Successfully assigned data/cassandra-2" in html
    )


@pytest.mark.parametrize(
    ("path", "status"), [("/incidents/999", 404), ("/incidents/abc", 400), ("/incidents?status=nope", 400)]
)
async def test_page_errors_are_pages(
    client: TestClient, page_auth: dict[str, str], path: str, status: int
) -> None:
    resp = await client.get(path, headers=page_auth)
    assert resp.status == status and resp.content_type == "text/html"


async def test_static_assets_are_served_openly_with_versioned_urls(
    client: TestClient, page_auth: dict[str, str]
) -> None:
    html = await (await client.get("/incidents", headers=page_auth)).text()
    css = re.search(r'href="(/static/app\.css\?v=[^"]+)"', html)
    js = re.search(r'src="(/static/app\.js\?v=[^"]+)"', html)
    assert css and js
    assert (await client.get(css.group(1))).status == 200
    body = await (await client.get(js.group(1))).text()
    assert "navigator.clipboard" in body


def test_templates_use_strict_undefined() -> None:
    env = build_jinja_env()
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()
    assert env.from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"


async def test_active_window_shorthand(client: TestClient, page_auth: dict[str, str]) -> None:
    # The clock is 2024-05-04 12:00; in the last 24 h only the three open incidents were active.
    html = await (await client.get("/incidents?window=24h", headers=page_auth)).text()
    assert sorted(map(int, re.findall(r'href="/incidents/(\d+)"', html))) == [1, 3, 4]
    assert '<option value="24h" selected>' in html
    # In the last 7 days: everything; links keep the window, not a frozen time.
    html = await (await client.get("/incidents?window=7d&limit=5", headers=page_auth)).text()
    assert len(re.findall(r'<tr class="', html)) == 5
    assert re.search(r'id="next-page" href="[^"]*window=7d', html) and "since=" not in html


async def test_waiting_for_scale_up_badges_and_filter(
    client: TestClient, page_auth: dict[str, str], sessions: async_sessionmaker[AsyncSession]
) -> None:
    inference, render = await seed_waiting(sessions)
    html = await (await client.get("/incidents", headers=page_auth)).text()
    row = re.search(
        rf'<tr class="open">(?:(?!</tr>).)*href="/incidents/{inference}"(?:(?!</tr>).)*</tr>', html, re.S
    )
    assert row and '<span class="badge waiting"' in row.group(0)
    assert "waiting for scale-up</span>" in row.group(0) and "since 20m ago" in row.group(0)
    quiet = re.search(
        rf'<tr class="resolved">(?:(?!</tr>).)*href="/incidents/{render}"(?:(?!</tr>).)*</tr>', html, re.S
    )
    assert quiet and "while waiting for scale-up" in quiet.group(0) and "badge waiting" not in quiet.group(0)
    assert html.count("badge waiting") == 1  # the seed's other incidents were paged as usual

    html = await (await client.get("/incidents?waiting=true&status=&q=", headers=page_auth)).text()
    assert sorted(map(int, re.findall(r'href="/incidents/(\d+)"', html))) == [render, inference]
    assert '<option value="true" selected>waiting</option>' in html
    html = await (await client.get("/incidents?waiting=false&limit=100", headers=page_auth)).text()
    assert "badge waiting" not in html and len(re.findall(r'href="/incidents/(\d+)"', html)) == 24
    bad = await client.get("/incidents?waiting=maybe", headers=page_auth)
    assert bad.status == 400 and bad.content_type == "text/html"

    page = await (await client.get(f"/incidents/{inference}", headers=page_auth)).text()
    badges = re.search(r'<div class="badges">(.*?)</div>', page, re.S)
    assert badges and "waiting for scale-up</span>" in badges.group(1) and "since 20m ago" in badges.group(1)
    assert re.search(
        r'<div id="waiting"><dt>Waiting for scale-up</dt><dd[^>]*>since 2024-05-04 11:40:00 UTC', page
    )
    assert "20m, not paged yet" in page
    assert re.search(r'<li class="tl-waiting">', page) and "for scale-up" in page
    page = await (await client.get(f"/incidents/{render}", headers=page_auth)).text()
    assert "Resolved while waiting for scale-up" in page and "nobody was paged" in page
    assert "badge waiting" not in page
