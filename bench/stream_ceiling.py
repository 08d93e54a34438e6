"""The ceiling for bench/bench_stream.py: a stateless faust agent that only counts
the records of a topic (same broker, same settings as ``unstick worker``), and
serves the count on ``/count``. Run by the benchmark as a subprocess; configured
through the environment: BROKER, TOPIC, APP_ID, WEB_PORT, PARTITIONS."""

from __future__ import annotations

import os

import faust

app = faust.App(
    os.environ["APP_ID"],
    broker=os.environ["BROKER"],
    store="memory://",
    processing_guarantee="at_least_once",
    broker_session_timeout=float(os.environ.get("UNSTICK_KAFKA_SESSION_TIMEOUT", "45")),
    broker_rebalance_timeout=float(os.environ.get("UNSTICK_KAFKA_REBALANCE_TIMEOUT", "60")),
    broker_heartbeat_interval=float(os.environ.get("UNSTICK_KAFKA_HEARTBEAT", "3")),
    web_bind="127.0.0.1",
    web_port=int(os.environ["WEB_PORT"]),
    datadir=os.environ.get("DATADIR", "/tmp/unstick-ceiling"),
)
topic = app.topic(
    os.environ["TOPIC"], key_type=bytes, value_type=bytes, value_serializer="raw",
    partitions=int(os.environ.get("PARTITIONS", "4")),
)
seen = {"records": 0}


@app.agent(topic)
async def count(stream):  # type: ignore[no-untyped-def]
    async for _ in stream.events():
        seen["records"] += 1


@app.page("/count")
async def show(view, request):  # type: ignore[no-untyped-def]
    return view.json(seen)


if __name__ == "__main__":
    faust.Worker(app, loglevel="info").execute_from_commandline()
