"""The pipeline asks the tracker for reminders: one ``reminder`` row per incident still open
after the re-notify interval, with the pipeline's clock and sinks."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import select

from agent.cache import ClusterCache
from agent.pipeline import Pipeline, PipelineConfig
from analyzers.snapshot import ClusterState
from storage.engine import create_engine, create_sessionmaker
from storage.migrate import upgrade
from storage.models import Notification
from storage.tracker import EVERY_SUBJECT, NotifyPolicy, track
from tests.storage.factories import at, finding


async def test_send_reminders_uses_the_interval_the_clock_and_the_sinks(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/p.db")
    await upgrade(engine)
    sessions = create_sessionmaker(engine)
    try:
        await track(
            sessions, cluster="c", findings=[finding()], now=at(0), evaluated=EVERY_SUBJECT, sinks=["s"]
        )
        now = [at(59).timestamp()]
        config = PipelineConfig(
            cluster="c", sinks=("s",), notify_policy=NotifyPolicy(reminder_interval=timedelta(hours=1))
        )
        pipeline = Pipeline(ClusterCache(ClusterState()), sessions, config, clock=lambda: now[0])
        assert await pipeline.send_reminders() == []
        now[0] = at(60).timestamp()
        assert await pipeline.send_reminders() == [1]
        async with sessions() as s:
            events = (await s.execute(select(Notification.event, Notification.sink))).all()
        assert [tuple(e) for e in events] == [("opened", "s"), ("reminder", "s")]
    finally:
        await engine.dispose()
