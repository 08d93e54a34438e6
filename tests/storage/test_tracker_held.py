"""Open incidents held in memory between batches (``HeldIncidents``), on SQLite and PostgreSQL:
the same outcome as reading them every batch, read once, and read again whenever somebody else
wrote the cluster's incidents."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from storage.engine import create_engine, create_sessionmaker
from storage.models import Base, Incident
from storage.tracker import HeldIncidents, NotifyPolicy, Pass, track, track_passes, track_reminders
from tests.storage.factories import at, deployment, finding, trigger
from tests.storage.test_tracker import _dump, _script

Sessions = async_sessionmaker[AsyncSession]


async def _rows(sessions: Sessions) -> list[tuple[int, str, str, int | None, int]]:
    async with sessions() as s:
        rows = await s.execute(
            select(
                Incident.id, Incident.cluster, Incident.status, Incident.previous_id, Incident.occurrences
            ).order_by(Incident.id)
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


async def _seen(sessions: Sessions, held: HeldIncidents | None, minute: float, **extra: object) -> None:
    """One pass of cluster "prod" that finds the gpu problem of Deployment "a" again."""
    a = deployment("a")
    await track(
        sessions,
        cluster="prod",
        findings=[finding(a, cause="gpu", pods=("ml/a-1",))],
        evaluated=[a],
        now=at(minute),
        held=held,
        **extra,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("batch", [1, 2, 9])
async def test_held_incidents_decide_as_reading_them_every_batch(
    engine: object, db_url: str, batch: int
) -> None:
    script = _script()
    reading = create_sessionmaker(engine)  # type: ignore[arg-type]
    for i in range(0, len(script), batch):
        await track_passes(reading, cluster="c", passes=script[i : i + batch], sinks=["slack"])
    expected = await _dump(reading)

    other = create_engine(db_url)
    async with other.begin() as conn:
        await conn.run_sync(Base.metadata.drop_all)
        await conn.run_sync(Base.metadata.create_all)
    sessions = create_sessionmaker(other)
    held = HeldIncidents("c")
    for i in range(0, len(script), batch):
        await track_passes(sessions, cluster="c", passes=script[i : i + batch], sinks=["slack"], held=held)
    assert await _dump(sessions) == expected
    # Read once (the first batch), then kept true by the writer: the last pass left one open.
    assert held.reloads == 1 and len(held) == 1
    await other.dispose()


async def test_a_second_writer_makes_the_holder_read_again(sessions: Sessions) -> None:
    held = HeldIncidents("prod")
    await _seen(sessions, held, 0, triggers=[trigger("e1")])
    # Another agent (no held copy) sees the workload healthy and resolves the incident.
    a = deployment("a")
    await track(sessions, cluster="prod", findings=[], evaluated=[a], now=at(1), triggers=[trigger("ok")])
    # The holder's copy still says "open": trusting it would update a resolved incident.
    await _seen(sessions, held, 2, triggers=[trigger("e2")])
    assert await _rows(sessions) == [(1, "prod", "resolved", None, 1), (2, "prod", "open", 1, 1)]
    assert held.reloads == 2
    # Writes to another cluster are no concern of this copy.
    await track(sessions, cluster="staging", findings=[finding(a)], now=at(3), triggers=[trigger("e3")])
    await _seen(sessions, held, 4, triggers=[trigger("e4")])
    assert held.reloads == 2 and (await _rows(sessions))[1] == (2, "prod", "open", 1, 2)


async def test_a_reminder_makes_the_holder_read_again(sessions: Sessions) -> None:
    policy = NotifyPolicy(reminder_interval=timedelta(hours=1))
    held = HeldIncidents("prod")
    await _seen(sessions, held, 0, sinks=["s"], policy=policy)
    assert await track_reminders(sessions, cluster="prod", now=at(61), sinks=["s"], policy=policy) == [1]
    await _seen(sessions, held, 62, sinks=["s"], policy=policy)
    assert held.reloads == 2
    # The copy read again carries the reminder's notified_at, as the database does.
    [inc] = held.of_subjects(None).values()
    assert inc.notified_at == at(61)


async def test_a_failed_batch_forgets_the_copy(sessions: Sessions) -> None:
    held = HeldIncidents("prod")
    await track(sessions, cluster="prod", findings=[finding()], now=at(0), held=held)
    assert held.generation is not None and len(held) == 1
    naive = at(1).replace(tzinfo=None)
    with pytest.raises(ValueError, match="timezone-aware"):
        await track_passes(sessions, cluster="prod", passes=[Pass([finding()], naive)], held=held)
    assert held.generation is None and len(held) == 0
    await track(sessions, cluster="prod", findings=[finding()], now=at(2), held=held)
    assert held.reloads == 2 and [r[2:] for r in await _rows(sessions)] == [("open", None, 1)]


async def test_a_copy_serves_only_its_cluster(sessions: Sessions) -> None:
    with pytest.raises(ValueError, match="incidents held for cluster 'prod', not 'staging'"):
        await track(sessions, cluster="staging", findings=[], now=at(0), held=HeldIncidents("prod"))


async def test_the_copy_keeps_what_each_diagnosis_came_from_and_learns_it_again_after_a_read(
    sessions: Sessions,
) -> None:
    """What lets a repeat take decide's fast path between batches: the held incident knows the
    finding its diagnosis came from; an incident read from the database does not."""
    held = HeldIncidents("prod")
    a = deployment("a")
    gpu = finding(a, cause="gpu", pods=("ml/a-1",))
    await track(sessions, cluster="prod", findings=[gpu], evaluated=[a], now=at(0), held=held)
    [opened] = held.of_subjects(None).values()
    assert opened.source is gpu
    # Somebody else writes: the copy is read again, without sources, and learns them on the next pass.
    await track(sessions, cluster="prod", findings=[gpu], evaluated=[a], now=at(1))
    await track(sessions, cluster="prod", findings=[gpu], evaluated=[a], now=at(2), held=held)
    assert held.reloads == 2
    [seen] = held.of_subjects(None).values()
    assert seen.source is gpu and seen.last_seen == at(2)
