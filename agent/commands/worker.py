"""``unstick worker``: analyse a fleet of clusters from Kafka (faust-streaming).

Reads the deltas that ``unstick watch --publish`` agents send, keeps each
cluster's state, runs the same analysis pipeline as ``watch`` and records
incidents (and notification outbox rows) in the shared database. Run several:
the clusters' partitions are shared among them, and a worker that leaves or
dies hands its clusters over without a relist. Serves /healthz, /readyz
(assigned partitions recovered), /metrics and /status on ``--web``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile

from agent.settings import DbSettings, Settings, StreamSettings, add_db_arguments, add_stream_arguments

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "worker",
        help="analyse a fleet of clusters from Kafka (faust-streaming; watch --publish feeds it)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_stream_arguments(p, url_flag="--broker")
    add_db_arguments(p)
    p.add_argument("--no-migrate", action="store_true", help="do not upgrade the database schema at start-up")
    p.add_argument("--grace", metavar="SECONDS", help="pending time before a pod becomes an incident (60)")
    p.add_argument("--debounce", metavar="SECONDS", help="wait after a change before a pass (0.5)")
    p.add_argument(
        "--sink",
        action="append",
        metavar="NAME",
        help="notification sink to queue outbox rows for (repeatable)",
    )
    p.add_argument(
        "--web",
        metavar="HOST:PORT",
        help="health, readiness and metrics (env UNSTICK_WORKER_WEB; $POD_IP:6066)",
    )
    p.add_argument("--datadir", metavar="PATH", help="faust's data folder (default: a temporary one)")
    p.add_argument(
        "--app-id", metavar="ID", help="consumer group and changelog prefix (default PREFIX-worker)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agent.cli import UserError

    settings = Settings.from_args(args)
    stream = StreamSettings.from_args(args)
    if not stream.brokers:
        raise UserError(
            "--broker: give the Kafka brokers as kafka://HOST:PORT[,HOST:PORT…] (or UNSTICK_KAFKA_BROKERS)"
        )
    asyncio.run(_check_database(settings.db))
    with tempfile.TemporaryDirectory(prefix="unstick-worker-") as tmp:
        if stream.datadir is None:
            import dataclasses

            stream = dataclasses.replace(stream, datadir=tmp)
        return _work(settings, stream, args)


async def _check_database(db: DbSettings) -> None:
    """Fail at start-up, in one line naming ``--db``, on a database that cannot be
    used; upgrade its schema unless ``--no-migrate``."""
    from agent.database import migrate, open_engine

    engine = await open_engine(db.url, options=db.engine)
    try:
        if db.auto_migrate:
            await migrate(engine, db.url)
    finally:
        await engine.dispose()


def _work(settings: Settings, stream: StreamSettings, args: argparse.Namespace) -> int:
    from agent.pipeline import PipelineConfig
    from agent.stream.app import StreamWorker, faust_worker
    from agent.stream.publisher import ensure_topics
    from storage.engine import create_engine, create_sessionmaker

    # The source topic is not created by faust: create it with its partition count.
    asyncio.run(
        ensure_topics(
            stream.bootstrap, [(stream.deltas_topic, stream.partitions), (stream.dead_letter_topic, 1)]
        )
    )
    engine = create_engine(settings.db.url, options=settings.db.engine)
    config = PipelineConfig(grace=stream.grace, debounce=stream.debounce, sinks=stream.sinks)
    worker = StreamWorker(stream, create_sessionmaker(engine), config, app_id=args.app_id)
    level = logging.getLevelName(logging.getLogger().level).lower()
    loglevel = {"warning": "warn", "critical": "crit", "notset": "info"}.get(level, level)
    faust_worker(worker.app, loglevel).execute_from_commandline()
    return 0  # pragma: no cover - execute_from_commandline exits
