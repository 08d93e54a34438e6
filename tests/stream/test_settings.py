"""Scale-out settings: production defaults, the broker URL, and user errors as one
line with exit code 2 (never a traceback)."""

from __future__ import annotations

import argparse

import pytest

from agent.cli import main
from agent.settings import SettingsError, StreamSettings, parse_kafka_url


def test_defaults_are_production_ones() -> None:
    s = StreamSettings.from_args(argparse.Namespace(), environ={"POD_IP": "10.1.2.3"})
    assert (s.session_timeout, s.rebalance_timeout, s.heartbeat_interval) == (45.0, 60.0, 3.0)
    assert s.producer_max_batch_size == 16384  # the tests' one-record batches are not a default
    assert (s.web_host, s.web_port) == ("10.1.2.3", 6066)  # bound to the pod's IP
    assert (s.deltas_topic, s.dead_letter_topic) == ("unstick-deltas", "unstick-dead-letters")


def test_flags_and_environment() -> None:
    args = argparse.Namespace(broker="kafka://k0:9092,k1:9093", topic_prefix="fleet", sink=["slack", "slack,webhook"])
    s = StreamSettings.from_args(args, environ={"UNSTICK_KAFKA_SESSION_TIMEOUT": "3", "UNSTICK_STREAM_PARTITIONS": "6"})
    assert s.brokers == ("k0:9092", "k1:9093") and s.faust_broker == "kafka://k0:9092;kafka://k1:9093"
    assert (s.topic_prefix, s.partitions, s.session_timeout, s.sinks) == ("fleet", 6, 3.0, ("slack", "webhook"))


@pytest.mark.parametrize("url", ["http://k0:9092", "kafka://k0", "kafka://:9092", "kafka://k0:0", "kafka://k0:9092,"])
def test_bad_broker_urls(url: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_kafka_url(url)


def test_every_problem_reported_at_once() -> None:
    args = argparse.Namespace(broker="nope", topic_prefix="a b", partitions="0", web="127.0.0.1:0")
    with pytest.raises(SettingsError) as info:
        StreamSettings.from_args(args, environ={"UNSTICK_KAFKA_HEARTBEAT": "soon"})
    assert len(info.value.errors) == 5


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["worker"], "--broker: give the Kafka brokers"),
        (["worker", "--broker", "http://x:1"], "broker URL 'http://x:1'"),
        (["worker", "--broker", "kafka://x:1", "--partitions", "many"], "--partitions / UNSTICK_STREAM_PARTITIONS: 'many' is not a whole number"),
        (["watch", "--publish", "kafka://x", "--no-auth"], "broker URL 'kafka://x'"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(argv, says, capsys, tmp_path) -> None:
    assert main([*argv, "--db", f"sqlite+aiosqlite:///{tmp_path}/x.db"]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
