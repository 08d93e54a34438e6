"""The boundaries of authentication: the shortest token accepted, and the
``Bearer`` scheme matched case-insensitively (RFC 9110 §11.1: auth schemes
are case-insensitive)."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient

from agent.settings import MIN_TOKEN_LENGTH, Settings, SettingsError
from tests.api.conftest import TOKEN


def test_the_minimum_token_length_is_sixteen() -> None:
    assert MIN_TOKEN_LENGTH == 16


@pytest.mark.parametrize(("length", "accepted"), [(15, False), (16, True), (17, True)])
def test_tokens_shorter_than_sixteen_characters_are_refused(
    tmp_path: Path, length: int, accepted: bool
) -> None:
    token = "k" * length
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text(f"# a comment\n{token}\n\n")
    for environ in ({"UNSTICK_API_TOKENS": token}, {"UNSTICK_API_TOKEN_FILE": str(tokens_file)}):
        if accepted:
            settings = Settings.from_args(environ=environ)
            assert [t.reveal() for t in settings.api.tokens] == [token]
        else:
            with pytest.raises(SettingsError, match="shorter than 16 characters") as info:
                Settings.from_args(environ=environ)
            assert token not in str(info.value)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
async def test_the_bearer_scheme_is_case_insensitive(client: TestClient, scheme: str) -> None:
    resp = await client.get("/api/v1/incidents", headers={"Authorization": f"{scheme} {TOKEN}"})
    assert resp.status == 200, await resp.text()


@pytest.mark.parametrize(
    "header",
    [f"Basic {TOKEN}", f"Bearer {TOKEN[:-1]}", f"Bearer{TOKEN}", "Bearer ", f"Token {TOKEN}"],
)
async def test_other_schemes_and_near_tokens_are_refused(client: TestClient, header: str) -> None:
    resp = await client.get("/api/v1/incidents", headers={"Authorization": header})
    assert resp.status == 401
