"""Schemathesis, stateful: sequences of calls that follow the OpenAPI document's links
(create a silence → list the silences → delete it → list again; list incidents → one incident
→ its remedy's YAML), on the running API (real HTTP) over SQLite and over PostgreSQL.

Each step is validated like the per-operation run (tests/api/test_fuzz.py: no 5xx, status,
body and headers as documented, and schemathesis' stateful checks, e.g. a deleted resource is
gone); beside them the state machine keeps its own ledger of the silences it created and
deleted, and at the end of every scenario the list must hold each one created and not deleted,
and none deleted.

CI runs a fixed seed (``derandomize``), a bounded number of scenarios (< 60 s per database).
Exploring by hand, random scenarios and many more of them::

    UNSTICK_FUZZ_EXPLORE=500 .venv/bin/pytest tests/api/test_fuzz_stateful.py -q -s -p no:randomly

(the number is how many scenarios; a failure prints the shortest sequence of calls that shows it).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from agent.api.openapi import build_document
from tests import pg
from tests.api.conftest import _migrate_and_seed
from tests.api.test_fuzz import API, AUTH, ServerThread, _without_cursor

SCHEMA = schemathesis.openapi.from_dict(build_document(API))
# Positive data only: a step's data is drawn from what earlier responses held (the server's
# state), so Hypothesis cannot replay a mixed positive/negative choice sequence against a
# store that has moved on. Negative data is the per-operation run's (tests/api/test_fuzz.py).
SCHEMA.config.generation.update(modes=[GenerationMode.POSITIVE])
SCHEMA.config.phases.stateful.generation.update(modes=[GenerationMode.POSITIVE])
# The document's own links only (agent/api/openapi.py): schemathesis would otherwise infer more
# from the schemas (a silence id from any list), drawing from lists whose length the store decides.
SCHEMA.config.phases.stateful.inference.algorithms = []
EXPLORE = int(os.environ.get("UNSTICK_FUZZ_EXPLORE", "0") or 0)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def stateful_url(
    request: pytest.FixtureRequest, seeded_sqlite: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "sqlite":
        db = tmp_path_factory.mktemp("stateful") / "fuzz.db"
        shutil.copyfile(seeded_sqlite, db)
        with ServerThread(f"sqlite+aiosqlite:///{db}", API) as url:
            yield url
        return
    server: pg.PostgresServer = request.getfixturevalue("pg_server")
    database = asyncio.run(_seeded_postgres(server))
    with ServerThread(server.url(database), API) as url:
        yield url


async def _seeded_postgres(server: pg.PostgresServer) -> str:
    name = await server.create_database("fuzzstate")
    await _migrate_and_seed(server.url(name))
    return name


def _silence_ids(base_url: str, http: requests.Session) -> set[int]:
    resp = http.get(f"{base_url}/api/v1/silences", params={"include_expired": "true"}, headers=AUTH, timeout=30)
    assert resp.status_code == 200, resp.text
    return {int(item["id"]) for item in resp.json()["items"]}


def test_create_list_delete_sequences_keep_the_store_consistent(stateful_url: str) -> None:
    base = SCHEMA.as_state_machine()
    http = requests.Session()
    ledger: dict[str, Any] = {"created": set(), "deleted": set(), "scenarios": 0, "steps": 0, "links": set()}

    class Workflow(base):  # type: ignore[misc,valid-type]
        def setup(self) -> None:
            self.created: set[int] = set()
            self.deleted: set[int] = set()
            ledger["scenarios"] += 1

        def before_call(self, case: schemathesis.Case) -> None:
            _without_cursor(case)  # an invented cursor is a documented 400 (as in test_fuzz.py)

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"base_url": stateful_url, "headers": AUTH, "session": http}

        def after_call(self, response: Any, case: schemathesis.Case) -> None:
            super().after_call(response, case)
            ledger["steps"] += 1
            ledger["links"].add(case.operation.label)
            label = case.operation.label
            if label == "POST /api/v1/silences" and response.status_code == 201:
                self.created.add(int(response.json()["id"]))
            elif label == "DELETE /api/v1/silences/{id}" and response.status_code == 204:
                self.deleted.add(int(case.path_parameters["id"]))

        def validate_response(self, response: Any, case: schemathesis.Case, **kwargs: Any) -> None:
            # As in the per-operation run: a schema-valid silence may be a documented 400 (a
            # past expiry, a duration under a minute); every other check applies.
            excluded = [positive_data_acceptance] if case.operation.label == "POST /api/v1/silences" else []
            case.validate_response(response, excluded_checks=excluded, transport_kwargs=kwargs or None)

        def teardown(self) -> None:
            listed = _silence_ids(stateful_url, http)
            missing = (self.created - self.deleted) - listed
            assert not missing, f"silences created, never deleted, not listed: {sorted(missing)}"
            assert not (self.deleted & listed), f"deleted yet listed: {sorted(self.deleted & listed)}"
            ledger["created"] |= self.created
            ledger["deleted"] |= self.deleted

    Workflow.run(
        settings=settings(
            max_examples=EXPLORE or 40,
            stateful_step_count=6,
            derandomize=not EXPLORE,  # CI: one fixed sequence of scenarios
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate] if not EXPLORE else list(Phase),
        )
    )
    http.close()
    # The run followed the links: silences were created and deleted through them.
    assert ledger["created"] and ledger["deleted"] & ledger["created"], ledger
    print(
        f"\nstateful: {ledger['scenarios']} scenarios, {ledger['steps']} calls over "
        f"{len(ledger['links'])} operations; {len(ledger['created'])} silences created, "
        f"{len(ledger['deleted'] & ledger['created'])} of them deleted through the link"
    )
