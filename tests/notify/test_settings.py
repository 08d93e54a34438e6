"""Notifier options: every misconfiguration at once, each naming its option; secrets never shown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent.notify.settings import NotifySettings
from agent.settings import SettingsError

TOKEN = "xoxb-1111-2222-abcdefabcdef"
HOOK = "https://hooks.slack.com/services/T000/B000/verysecretpart"


def write(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


async def test_a_valid_configuration_builds_the_sinks(tmp_path: Path) -> None:
    env = {
        "UNSTICK_SLACK_TOKEN_FILE": write(tmp_path, "token", TOKEN + "\n"),
        "UNSTICK_SLACK_CHANNEL": "#alerts",
        "UNSTICK_SLACK_ROUTES": "namespace:ml-*,severity:critical=#ml-oncall; pdb-blocks-eviction=C0PLATFRM",
        "UNSTICK_SLACK_WEBHOOK_URL_FILE": write(tmp_path, "hook", HOOK),
        "UNSTICK_WEBHOOK_URL": "https://a.example/hook, https://b.example/hook?token=abc",
        "UNSTICK_WEBHOOK_SECRET_FILE": write(tmp_path, "secret", "0123456789abcdef-secret"),
        "UNSTICK_WEBHOOK_HEADERS_FILE": write(tmp_path, "headers", "# relay\nAuthorization: Bearer zzz\n"),
        "UNSTICK_PUBLIC_URL": "https://unstick.example.com/",
    }
    s = NotifySettings.from_args(None, env)
    assert s.public_url == "https://unstick.example.com"
    assert [r[1] for r in s.slack_routes] == ["#ml-oncall", "C0PLATFRM"]
    from agent.notify.render import Renderer

    sinks = s.build_sinks(Renderer())
    assert [x.name for x in sinks] == ["slack-webhook", "slack", "webhook", "webhook-2"]
    shown = repr(s) + "".join(repr(x) for x in sinks)
    for secret in (TOKEN, HOOK, "token=abc", "Bearer zzz", "0123456789abcdef-secret"):
        assert secret not in shown
    assert set(s.secrets()) >= {TOKEN, HOOK, "Bearer zzz"}
    for sink in sinks:
        await sink.close()


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    env = {
        "UNSTICK_SLACK_WEBHOOK_URL_FILE": write(tmp_path, "hook", "ftp://hooks.example/secretpath"),
        "UNSTICK_SLACK_TOKEN_FILE": str(tmp_path / "missing-token"),
        "UNSTICK_SLACK_CHANNEL": "alerts",
        "UNSTICK_SLACK_ROUTES": "rule:no-such-rule=#x;severity:urgent=#y;namespace:a=General;bogus",
        "UNSTICK_SLACK_API_URL": "slack.internal",
        "UNSTICK_WEBHOOK_URL": "gopher://relay.example/secret-token-path",
        "UNSTICK_WEBHOOK_SECRET_FILE": write(tmp_path, "short", "short"),
        "UNSTICK_WEBHOOK_HEADERS_FILE": write(tmp_path, "headers", "X-Unstick-Signature: forged\nno colon here\n"),
        "UNSTICK_WEBHOOK_CA_BUNDLE": write(tmp_path, "ca.pem", "not a certificate"),
        "UNSTICK_PUBLIC_URL": "unstick.example.com",
        "UNSTICK_NOTIFY_MAX_ATTEMPTS": "0",
    }
    with pytest.raises(SettingsError) as err:
        NotifySettings.from_args(None, env)
    errors = err.value.errors
    text = "\n".join(errors)
    expected = [
        "--slack-webhook-url-file",
        "--slack-token-file",
        "--slack-channel 'alerts'",
        "unknown rule 'no-such-rule'",
        "unknown severity 'urgent'",
        "channel 'General'",
        "--slack-route 'bogus'",
        "--slack-api-url",
        "--webhook-url number 1",
        "--webhook-secret-file",
        "X-Unstick-Signature is set by unstick itself",
        "line 2: expected 'Name: value'",
        "--webhook-ca-bundle",
        "--public-url",
        "--notify-max-attempts",
    ]
    for needle in expected:
        assert needle in text, needle
    assert all("\n" not in e for e in errors)  # one line each
    for secret in ("secretpath", "secret-token-path", "forged"):
        assert secret not in text


def test_pairs_that_need_each_other(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as err:
        NotifySettings.from_args(
            None,
            {
                "UNSTICK_SLACK_TOKEN_FILE": write(tmp_path, "t", TOKEN),
                "UNSTICK_WEBHOOK_URL": "https://relay.example/hook",
            },
        )
    assert err.value.errors == [
        "--slack-token-file needs --slack-channel: the channel for incidents no route matches",
        "--webhook-url needs --webhook-secret-file: every webhook is signed",
    ]
    with pytest.raises(SettingsError, match="--slack-route needs --slack-token-file"):
        NotifySettings.from_args(None, {"UNSTICK_SLACK_ROUTES": "pdb-blocks-eviction=#platform"})


def test_the_demo_prints_to_the_console_when_no_sink_is_given() -> None:
    assert NotifySettings.from_args(None, {}, console_default=True).console
    assert not NotifySettings.from_args(None, {}).console


def test_the_cli_reports_problems_in_one_line_each_with_exit_code_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agent", "demo", "--once", "--slack-channel", "nope",
         "--webhook-url", "ftp://x/secret-in-url", "--notify-max-attempts", "x", "--db", "mysql://x"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in ("--slack-channel 'nope'", "--webhook-url number 1", "--notify-max-attempts", "--db"):
        assert needle in proc.stderr
    assert "secret-in-url" not in proc.stderr
