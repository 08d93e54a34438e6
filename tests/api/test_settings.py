"""Settings: flags over environment over defaults, every error at once, secrets never printed."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from agent.settings import Settings, SettingsError, add_api_arguments, add_db_arguments, parse_listen


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_db_arguments(p)
    add_api_arguments(p)
    p.set_defaults(require_tokens=True)
    return p.parse_args(argv)


def test_defaults_env_and_flags(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# from the Secret\nfirst-token-0123456789\n\n second-token-0123456789 \n")
    s = Settings.from_args(args("--api-token-file", str(tokens)), {})
    assert s.db.url == "sqlite+aiosqlite:///./unstick.db" and s.db.auto_migrate
    assert (s.api.host, s.api.port) == ("127.0.0.1", 8080)
    assert [t.reveal() for t in s.api.tokens] == ["first-token-0123456789", "second-token-0123456789"]

    env = {
        "UNSTICK_DB_URL": "postgresql://u:hunter2hunter2@db/unstick",
        "UNSTICK_API_TOKEN_FILE": str(tokens),
        "UNSTICK_API_TOKENS": "env-token-0123456789abc",
        "UNSTICK_LISTEN": "0.0.0.0:9000",
        "UNSTICK_DB_AUTO_MIGRATE": "false",
    }
    s = Settings.from_args(args(), env)
    assert s.db.url.startswith("postgresql://") and not s.db.auto_migrate and s.api.port == 9000
    assert len(s.api.tokens) == 3
    s = Settings.from_args(args("--db", "sqlite:///x.db", "--listen", "[::1]:81"), env)
    assert s.db.url == "sqlite:///x.db" and (s.api.host, s.api.port) == ("::1", 81)


def test_secrets_never_in_repr(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("very-secret-token-0123456789\n")
    s = Settings.from_args(
        args("--api-token-file", str(tokens), "--db", "postgresql+asyncpg://u:hunter2hunter2@db/x"), {}
    )
    text = repr(s) + str(s.api.tokens) + repr(s.api) + repr(s.db)
    assert "very-secret-token" not in text and "hunter2" not in text
    assert "***" in repr(s.db) and "1 token" in repr(s.api)


def test_every_error_at_once(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_text("abc\n")
    env = {"UNSTICK_DB_AUTO_MIGRATE": "yes please", "UNSTICK_API_TOKENS": "tiny"}
    with pytest.raises(SettingsError) as info:
        Settings.from_args(
            args("--db", "mysql://a:b@c/d", "--listen", "host:99999", "--api-token-file", str(short)), env
        )
    errors = info.value.errors
    assert len(errors) == 4, errors
    assert any("mysql" in e for e in errors) and any("99999" in e for e in errors)
    assert any("UNSTICK_DB_AUTO_MIGRATE" in e for e in errors) and any("shorter than 16" in e for e in errors)
    assert "b@c" not in str(info.value)


def test_serving_without_tokens_needs_no_auth_explicitly() -> None:
    with pytest.raises(SettingsError, match="no API tokens"):
        Settings.from_args(args(), {})
    s = Settings.from_args(args("--no-auth"), {})
    assert s.api.auth is False


@pytest.mark.parametrize("value", ["8080", "host:", "host:65536", "host:x"])
def test_bad_listen(value: str) -> None:
    with pytest.raises(ValueError):
        parse_listen(value)
