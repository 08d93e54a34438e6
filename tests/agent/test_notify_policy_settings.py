"""The notification policy's options: flags over environment over defaults, every error at once."""

from __future__ import annotations

import argparse
from datetime import timedelta

import pytest

from agent.settings import AgentSettings, SettingsError, add_agent_arguments
from storage.tracker import NotifyPolicy


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_agent_arguments(parser)
    return parser.parse_args(argv)


def test_defaults_environment_and_flags() -> None:
    assert AgentSettings.from_args(parse(), {}).pipeline_config().notify_policy == NotifyPolicy()
    env = {"UNSTICK_RENOTIFY_INTERVAL": "2h", "UNSTICK_STORM_THRESHOLD": "3", "UNSTICK_STORM_WINDOW": "1m"}
    policy = AgentSettings.from_args(parse("--storm-threshold", "7"), env).pipeline_config().notify_policy
    assert policy == NotifyPolicy(
        storm_threshold=7, storm_window=timedelta(minutes=1), reminder_interval=timedelta(hours=2)
    )


def test_every_error_at_once() -> None:
    with pytest.raises(SettingsError) as err:
        AgentSettings.from_args(
            parse("--renotify-interval", "soon", "--storm-threshold", "0", "--storm-window", "0m"), {}
        )
    assert [e.split(":")[0] for e in err.value.errors] == [
        "--renotify-interval / UNSTICK_RENOTIFY_INTERVAL",
        "--storm-window / UNSTICK_STORM_WINDOW",
        "--storm-threshold / UNSTICK_STORM_THRESHOLD",
    ]
