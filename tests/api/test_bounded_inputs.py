"""Every duration, count, number and size a user gives goes through one bounded parser
(``analyzers.bounds``): huge, negative and malformed values are a 400 naming the field
(API, page form) or one line on stderr and exit 2 naming the option (flags, environment),
never a 500, an ``OverflowError`` or a traceback.

Hypothesis draws values that are wrong by construction (so no command ever starts for
real): digits far beyond any maximum, a minus sign, ``inf``/``nan``/exponents, digits
``int()`` refuses (``²``), a trailing newline, and text with a character no grammar has.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agent.notify.settings import NotifySettings
from agent.settings import AgentSettings, LeaderSettings, Settings, SettingsError, StreamSettings
from analyzers import bounds
from tests.cli import inprocess

HUGE = st.builds(
    lambda n, unit: "9" * n + unit,
    st.integers(min_value=14, max_value=40),
    st.sampled_from(["", "ms", "s", "m", "h", "d", "w", "Ki", "Mi"]),
)
NEGATIVE = st.builds(lambda v: "-" + v, st.sampled_from(["1", "5", "0.5", "1h", "30m", "7d", "9" * 20]))
SPECIAL = st.sampled_from(
    ["inf", "nan", "-inf", "1e9", "1e400", "0x10", "²", "٣", "1_000", "5\n", " 5", "5 ", "1h\n", "1.", ".5", "+5"]
)
MALFORMED = st.builds(
    lambda head, bad, tail: head + bad + tail,
    st.text(alphabet="0123456789.smhdw", max_size=8),
    st.sampled_from(["x", "\n", "\x00", " ", "-", "/", "é", "²", "e", "+", ",", "?"]),
    st.text(max_size=8),
)
INVALID = st.one_of(HUGE, NEGATIVE, SPECIAL, MALFORMED)
EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_the_grammars_accept_what_users_write() -> None:
    assert bounds.seconds("--grace", "90", minimum=0, maximum=3600) == 90.0
    assert bounds.seconds("--grace", "1m30s", minimum=0, maximum=3600) == 90.0
    assert bounds.seconds("--grace", "500ms", minimum=0, maximum=3600) == 0.5
    assert bounds.duration("--for", "1h30m", minimum=bounds.timedelta(0), maximum=bounds.timedelta(days=1)).seconds == 5400
    assert bounds.count("--partitions", "12", minimum=1, maximum=100) == 12
    assert bounds.size("X", "64Ki", minimum=1, maximum=2**20) == 65536
    assert bounds.number("--speed", "0.5", minimum=0, maximum=10, exclusive_minimum=True) == 0.5


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bounds.duration("--for", "9999999999d", minimum=bounds.timedelta(minutes=1), maximum=bounds.timedelta(days=365)), "--for: '9999999999d' is more than 365d"),
        (lambda: bounds.seconds("--grace", "inf", minimum=0, maximum=10), "--grace: 'inf' is not a duration"),
        (lambda: bounds.count("id", "²", minimum=1, maximum=10), "id: '²' is not a whole number from 1 to 10"),
        (lambda: bounds.count("N", "5\n", minimum=1, maximum=10), "N: '5\\n' is not a whole number"),
        (lambda: bounds.number("--speed", "0", minimum=0, maximum=10, exclusive_minimum=True), "--speed: '0' is not more than 0 to 10"),
        (lambda: bounds.size("B", "9" * 70, minimum=1, maximum=10), "B: '9999"),
    ],
)
def test_errors_are_one_line_naming_the_option(call: Any, message: str) -> None:
    with pytest.raises(bounds.OutOfBounds) as caught:
        call()
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


# (argv before the value, how the value is passed, the option an error must name)
def _cli_cases(db: str) -> list[tuple[list[str], str]]:
    return [
        (["silences", "add", "--db", db, "-n", "ml", "--reason", "r", "--for={}"], "--for"),
        (["silences", "rm", "--db", db, "--", "{}"], "id"),
        (["incidents", "list", "--db", db, "--since={}"], "--since"),
        (["incidents", "list", "--db", db, "--limit={}"], "--limit"),
        (["watch", "--db", db, "--no-auth", "--grace={}"], "--grace"),
        (["watch", "--db", db, "--no-auth", "--scale-up-timeout={}"], "--scale-up-timeout"),
        (["watch", "--db", db, "--no-auth", "--renotify-interval={}"], "--renotify-interval"),
        (["watch", "--db", db, "--no-auth", "--storm-threshold={}"], "--storm-threshold"),
        (["watch", "--db", db, "--no-auth", "--storm-window={}"], "--storm-window"),
        (["watch", "--db", db, "--no-auth", "--leader-elect", "--leader-elect-lease-duration={}"], "--leader-elect-lease-duration"),
        (["watch", "--db", db, "--no-auth", "--notify-max-attempts={}"], "--notify-max-attempts"),
        (["demo", "--db", db, "--once", "--speed={}"], "--speed"),
        (["demo", "--db", db, "--once", "--auto-fix-after={}"], "--auto-fix-after"),
        (["worker", "--db", db, "--broker", "kafka://127.0.0.1:1", "--partitions={}"], "--partitions"),
        (["worker", "--db", db, "--broker", "kafka://127.0.0.1:1", "--debounce={}"], "--debounce"),
    ]


@pytest.mark.parametrize("case", range(len(_cli_cases(""))))
@EXAMPLES
@given(value=INVALID)
def test_flags_refuse_bad_values_in_one_line(tmp_path: Path, case: int, value: str) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path}/never.db"
    argv, option = _cli_cases(db)[case]
    if option == "id":  # a long number is a valid id (up to 2**63 - 1)
        assume(not (re.fullmatch("[0-9]{1,19}", value) and 1 <= int(value) < 2**63))
    code, out, err = inprocess.run(*(a.replace("{}", value) for a in argv))
    assert code == 2, (value, out, err)
    assert err.count("\n") == 1 and err.startswith("unstick: error: ") and "Traceback" not in err, err
    assert option in err, err
    assert not (tmp_path / "never.db").exists()


def test_the_kubectl_plugin_refuses_a_bad_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    from agent.commands.kubectl import main

    for value in ("inf", "-1", "nan", "9" * 30, "1e3"):
        assert main([f"--request-timeout={value}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --request-timeout: ") and err.count("\n") == 1


ENV_CASES = [
    (Settings, "UNSTICK_DB_POOL_SIZE"),
    (Settings, "UNSTICK_DB_POOL_TIMEOUT"),
    (Settings, "UNSTICK_DB_STATEMENT_TIMEOUT"),
    (Settings, "UNSTICK_DB_LOCK_TIMEOUT"),
    (AgentSettings, "UNSTICK_GRACE_SECONDS"),
    (AgentSettings, "UNSTICK_SCALE_UP_TIMEOUT"),
    (AgentSettings, "UNSTICK_RENOTIFY_INTERVAL"),
    (AgentSettings, "UNSTICK_STORM_THRESHOLD"),
    (AgentSettings, "UNSTICK_STORM_WINDOW"),
    (StreamSettings, "UNSTICK_STREAM_PARTITIONS"),
    (StreamSettings, "UNSTICK_PUBLISH_BUFFER"),
    (StreamSettings, "UNSTICK_DEBOUNCE_SECONDS"),
    (StreamSettings, "UNSTICK_KAFKA_SESSION_TIMEOUT"),
    (StreamSettings, "UNSTICK_KAFKA_REBALANCE_TIMEOUT"),
    (StreamSettings, "UNSTICK_KAFKA_HEARTBEAT"),
    (StreamSettings, "UNSTICK_KAFKA_MAX_BATCH_BYTES"),
    (LeaderSettings, "UNSTICK_LEASE_DURATION"),
    (LeaderSettings, "UNSTICK_RENEW_DEADLINE"),
    (LeaderSettings, "UNSTICK_RETRY_PERIOD"),
    (NotifySettings, "UNSTICK_NOTIFY_MAX_ATTEMPTS"),
    (NotifySettings, "UNSTICK_NOTIFY_LEASE_SECONDS"),
]


@pytest.mark.parametrize(("cls", "name"), ENV_CASES)
@EXAMPLES
@given(value=INVALID)
def test_environment_refuses_bad_values_in_one_line(cls: Any, name: str, value: str) -> None:
    env = {name: value}
    with pytest.raises(SettingsError) as caught:
        if cls is LeaderSettings:
            cls.from_args(None, env, hostname="h", sa_namespace_file="/nonexistent")
        else:
            cls.from_args(None, env)
    assert len(caught.value.errors) == 1 and name in str(caught.value) and "\n" not in str(caught.value)


@EXAMPLES
@given(value=INVALID)
async def test_api_and_form_durations_are_400s(client: TestClient, auth: dict[str, str], value: str) -> None:
    resp = await client.post(
        "/api/v1/silences", json={"namespace": "ml", "reason": "r", "duration": value}, headers=auth
    )
    assert resp.status == 400, await resp.text()
    assert (await resp.json())["error"]["parameter"] == "duration"
    resp = await client.post(
        "/api/v1/silences", json={"namespace": "ml", "reason": "r", "expires_at": value}, headers=auth
    )
    assert resp.status == 400 and (await resp.json())["error"]["parameter"] == "expires_at"
    for query in ({"limit": value}, {"since": value}):
        resp = await client.get("/api/v1/incidents", params=query, headers=auth)
        assert resp.status == 400, (query, await resp.text())
    if value != value.strip():
        return  # the form trims what a browser sends ("1h\n" is 1h there)
    resp = await client.post(
        "/silences",
        data={"namespace": "ml", "reason": "r", "duration": value},
        headers={**auth, "Accept": "text/html"},
    )
    assert resp.status == 400 and "duration:" in await resp.text()
