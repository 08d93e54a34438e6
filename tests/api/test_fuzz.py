"""Schemathesis fuzzes the running API (real HTTP on localhost) against its own OpenAPI 3.1 document.

Over a copy of the seeded database (plus incidents waiting for scale-up, so the
``waiting`` object is checked too): no 5xx, every response (200s and errors
alike) matches the documented schema, status code, content type and headers.
Bounded: at most 30 examples per operation.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance
from schemathesis.schemas import APIOperation

from agent.api.app import create_app
from agent.api.openapi import build_document
from agent.api.pages import build_jinja_env
from agent.settings import ApiSettings, Secret
from storage.engine import create_engine, create_sessionmaker
from tests.api.conftest import TOKEN
from tests.api.seed import seed_waiting

AUTH = {"Authorization": f"Bearer {TOKEN}"}


class ServerThread:
    """The app on 127.0.0.1:<free port>, in a thread with its own event loop (schemathesis calls are sync)."""

    def __init__(self, db_url: str, api: ApiSettings) -> None:
        self.db_url, self.api = db_url, api
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        self.ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self._stop())
        self.loop.close()

    async def _start(self) -> None:
        self.engine = create_engine(self.db_url)
        app = create_app(
            sessions=create_sessionmaker(self.engine), settings=self.api, jinja=build_jinja_env()
        )
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        await self.runner.cleanup()
        await self.engine.dispose()

    def __enter__(self) -> str:
        self.thread.start()
        assert self.ready.wait(30), "API server did not start"
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


@pytest.fixture(scope="module")
def base_url(seeded_sqlite: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    shutil.copyfile(seeded_sqlite, db)
    asyncio.run(_add_waiting(f"sqlite+aiosqlite:///{db}"))
    with ServerThread(f"sqlite+aiosqlite:///{db}", API) as url:
        yield url


async def _add_waiting(url: str) -> None:
    engine = create_engine(url)
    try:
        await seed_waiting(create_sessionmaker(engine))
    finally:
        await engine.dispose()


# The fuzzer sends wrong tokens on purpose: a limit it never reaches (the limiter has its own tests).
API = ApiSettings(tokens=(Secret(TOKEN),), max_page_size=100, auth_failures_per_minute=1_000_000)
# The document the server serves (checked below), loaded without a server so tests can be parametrized.
SCHEMA = schemathesis.openapi.from_dict(build_document(API))
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


def test_the_fuzzed_document_is_the_served_one(base_url: str) -> None:
    served = requests.get(f"{base_url}/api/v1/openapi.json", headers=AUTH, timeout=10).json()
    assert served == build_document(API)
    assert len(OPERATIONS) == 11


def _without_cursor(case: schemathesis.Case) -> schemathesis.Case:
    # A cursor is opaque: a schema-valid string is not a cursor the API handed out (that is a
    # documented 400). Positive cases leave it out; negative cases and the pagination tests cover it.
    if case.query:
        case.query.pop("cursor", None)
    return case


# Negative data needs something to break: operations without parameters are fuzzed positively only.
CASES = [
    (op, mode)
    for op in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or op.definition.raw.get("parameters")
]


@pytest.mark.parametrize(("operation", "mode"), CASES, ids=[f"{op.label} {mode.value}" for op, mode in CASES])
def test_api_conforms_to_its_openapi_document(
    base_url: str, operation: APIOperation, mode: GenerationMode
) -> None:
    strategy = operation.as_strategy(generation_mode=mode)
    if mode is GenerationMode.POSITIVE:
        strategy = strategy.map(_without_cursor)
    with requests.Session() as http:

        @given(case=strategy)
        @settings(
            max_examples=30,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
        )
        def fuzz(case: schemathesis.Case) -> None:
            case.call_and_validate(base_url=base_url, session=http, headers=AUTH, excluded_checks=excluded)

        # A silence's validity depends on the clock (expires_at in the future) and on bounds a
        # JSON schema cannot say (a duration of at least a minute): a schema-valid body may be a
        # documented 400. Every other check (no 5xx, documented status and body) still applies.
        excluded = [positive_data_acceptance] if operation.label == "POST /api/v1/silences" else []

        fuzz()


@pytest.mark.parametrize("query", [{"waiting": "true"}, {"waiting": "true", "status": "resolved"}])
def test_waiting_incidents_conform_to_the_document(base_url: str, query: dict[str, str]) -> None:
    case = SCHEMA["/api/v1/incidents"]["GET"].Case(query=query)
    response = case.call_and_validate(base_url=base_url, headers=AUTH)
    items = response.json()["items"]
    assert items and all(i["waiting"]["for"] == "scale-up" for i in items)
    detail = SCHEMA["/api/v1/incidents/{id}"]["GET"].Case(path_parameters={"id": items[0]["id"]})
    body = detail.call_and_validate(base_url=base_url, headers=AUTH).json()
    assert body["waiting"] == items[0]["waiting"] and "waiting" in {e["kind"] for e in body["timeline"]}
