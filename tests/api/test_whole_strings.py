"""Validation patterns match whole strings: ``re.match`` with a ``$`` anchor accepts a
trailing newline (``$`` matches before a final ``\\n``), so every validator uses
``re.fullmatch``. Each validator of user input is driven with a valid value plus ``\\n``."""

from __future__ import annotations

import argparse

import pytest

from agent.api.errors import ApiError
from agent.api.params import PATTERNS, parse_filter, parse_id, parse_time
from agent.notify.settings import _valid_channel
from agent.settings import SettingsError, StreamSettings, parse_kafka_url, parse_listen
from analyzers import bounds

VALID = {
    "namespace": "ml",
    "name": "trainer",
    "kind": "Deployment",
    "rule_id": "gpu-rollout-deadlock",
    "cluster": "prod",
    "q": "gpu",
}


@pytest.mark.parametrize("parameter", sorted(VALID))
def test_query_parameters(parameter: str) -> None:
    assert parameter in PATTERNS
    parse_filter({parameter: VALID[parameter]})
    with pytest.raises(ApiError):
        parse_filter({parameter: VALID[parameter] + "\n"})


def test_times_ids_channels_listen_brokers_topics_and_numbers() -> None:
    parse_time("since", "2024-05-01T12:00:00Z")
    for bad in ("2024-05-01T12:00:00Z\n", "٢٠٢٤-05-01T12:00:00Z"):
        with pytest.raises(ApiError):
            parse_time("since", bad)
    with pytest.raises(ApiError):
        parse_id("id", "12\n")
    assert _valid_channel("#alerts") and not _valid_channel("#alerts\n") and not _valid_channel("C0ALERTS1\n")
    assert parse_listen("127.0.0.1:8080") == ("127.0.0.1", 8080)
    for bad in ("127.0.0.1:8080\n", "127.0.0.1:²"):
        with pytest.raises(ValueError):
            parse_listen(bad)
    with pytest.raises(ValueError):
        parse_kafka_url("kafka://x:²")  # isdigit() is true, int() refuses
    with pytest.raises(SettingsError):
        StreamSettings.from_args(argparse.Namespace(topic_prefix="unstick\n"), environ={})
    for parse in (
        lambda v: bounds.count("N", v, minimum=0, maximum=10),
        lambda v: bounds.seconds("D", v, minimum=0, maximum=10),
        lambda v: bounds.size("S", v, minimum=0, maximum=10),
        lambda v: bounds.number("X", v, minimum=0, maximum=10),
    ):
        parse("5")
        with pytest.raises(bounds.OutOfBounds):
            parse("5\n")
