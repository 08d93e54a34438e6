"""The tracker at the boundaries a mutation run of ``storage/tracker.py`` found untested
(``scripts/mutation storage/tracker.py``): whose message an incident keeps, what a silenced row
counts, an upgraded row without ``peak_pods``, what the resolution callback is shown, what an
``updated`` entry says it kept, the storm window inside one batch, and, on a real PostgreSQL,
the per-cluster advisory lock and the retry after a rival writer opened the same incident."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import Finding, ObjectRef
from analyzers.resolution import Resolution
from storage.models import Incident, Notification, TimelineEntry
from storage.silences import SilenceSpec, create_silence
from storage.tracker import (
    EVERY_SUBJECT,
    NotifyPolicy,
    Pass,
    apply_pass,
    prune_applied_events,
    track,
    track_passes,
)
from tests.storage.factories import at, deployment, finding, trigger

Sessions = async_sessionmaker[AsyncSession]
postgres_only = pytest.mark.parametrize(
    "db_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


async def incidents(sessions: Sessions) -> list[Incident]:
    async with sessions() as s:
        return list((await s.execute(select(Incident).order_by(Incident.id))).scalars())


async def entries(sessions: Sessions, incident_id: int) -> list[tuple[str, str, dict[str, Any]]]:
    async with sessions() as s:
        rows = await s.execute(
            select(TimelineEntry.kind, TimelineEntry.message, TimelineEntry.detail)
            .where(TimelineEntry.incident_id == incident_id)
            .order_by(TimelineEntry.id)
        )
        return [(k, m, d) for k, m, d in rows]


async def outbox(sessions: Sessions) -> list[Notification]:
    async with sessions() as s:
        return list((await s.execute(select(Notification).order_by(Notification.id))).scalars())


def on(name: str, pod: str) -> Finding:
    return finding(deployment(name), pods=(pod,))


async def test_each_incident_keeps_the_message_of_the_event_about_its_own_pods(sessions: Sessions) -> None:
    a, b, c = on("a", "ml/a-1"), on("b", "ml/b-1"), on("c", "ml/c-1")
    await track(
        sessions,
        cluster="prod",
        findings=[a, b, c],
        now=at(0),
        triggers=[
            trigger("ea", message="about a", pod="ml/a-1"),
            trigger("eb", message="about b", pod="ml/b-1"),
        ],
    )
    got = {i.subject_name: (i.last_message, i.occurrences) for i in await incidents(sessions)}
    # c's pod has no event of its own in the pass: it takes the pass's latest message, once.
    assert got == {"a": ("about a", 1), "b": ("about b", 1), "c": ("about b", 1)}


async def test_an_escalation_is_recorded_with_the_message_about_its_own_pods(sessions: Sessions) -> None:
    a, b = on("a", "ml/a-1"), on("b", "ml/b-1")
    await track(sessions, cluster="prod", findings=[a, b], now=at(0), waiting={a.fingerprint: "scale-up"})
    await track(
        sessions,
        cluster="prod",
        findings=[a, b],
        now=at(10),
        triggers=[
            trigger("ea", message="still no node", pod="ml/a-1"),
            trigger("eb", message="b", pod="ml/b-1"),
        ],
    )
    [inc_a, _] = await incidents(sessions)
    [escalated] = [e for e in await entries(sessions, inc_a.id) if e[0] == "escalated"]
    assert escalated == ("escalated", "still no node", {"for": "scale-up", "since": "2024-05-01T12:00:00Z"})


async def test_silenced_rows_are_counted_per_sink(sessions: Sessions) -> None:
    async with sessions.begin() as s:
        await create_silence(s, SilenceSpec(reason="known", expires_at=at(60), subject="a"), now=at(0))
    r = await track(
        sessions,
        cluster="prod",
        findings=[on("a", "ml/a-1"), on("b", "ml/b-1")],
        now=at(1),
        sinks=["slack", "webhook"],
    )
    assert (r.notifications, r.silenced) == (4, 2)
    assert sorted(n.status for n in await outbox(sessions)) == ["pending", "pending", "silenced", "silenced"]


async def test_a_row_from_before_peak_pods_counts_its_stored_pods_as_the_peak(sessions: Sessions) -> None:
    pods3 = tuple(f"ml/trainer-{i}" for i in range(3))
    await track(sessions, cluster="prod", findings=[finding(pods=pods3)], now=at(0), sinks=["s"])
    async with sessions.begin() as s:  # what migration 0004 leaves on an incident opened before it
        await s.execute(update(Incident).values(peak_pods=None))
    pods5 = tuple(f"ml/trainer-{i}" for i in range(5))
    await track(sessions, cluster="prod", findings=[finding(pods=pods5)], now=at(1), sinks=["s"])
    [_, updated] = await outbox(sessions)
    assert updated.event == "updated" and updated.payload["changed"] == ["affected pods 3 → 5"]
    assert updated.payload["previous"] == {"pods": 3}
    assert [i.peak_pods for i in await incidents(sessions)] == [5]


async def test_the_resolution_callback_sees_what_the_incident_recorded(sessions: Sessions) -> None:
    seen: list[tuple[ObjectRef, tuple[str, ...], dict[str, Any], list[str]]] = []

    def explain(subject: Any, pods: Any, evidence: Any, remedies: Any) -> Resolution:
        seen.append((subject, tuple(pods), dict(evidence), [r["title"] for r in remedies]))
        return Resolution("It fits now.", (), ())

    first = finding(pods=("ml/x",), evidence={"free": 0})
    await track(
        sessions, cluster="prod", findings=[first], now=at(0), sinks=["s"], explain_resolution=explain
    )
    # An actionable change (two pods: a threshold) on a told incident asks what healed.
    second = finding(pods=("ml/x", "ml/y"), evidence={"free": 1}, explanation="other")
    await track(
        sessions, cluster="prod", findings=[second], now=at(1), sinks=["s"], explain_resolution=explain
    )
    title = first.remedies[0].title
    assert seen == [(deployment(), ("ml/x",), {"free": 0}, [title])]
    await track(
        sessions,
        cluster="prod",
        findings=[],
        now=at(2),
        evaluated=EVERY_SUBJECT,
        sinks=["s"],
        explain_resolution=explain,
    )
    assert seen[-1] == (deployment(), ("ml/x", "ml/y"), {"free": 1}, [title])


async def test_an_update_that_is_not_acted_on_says_what_it_kept(sessions: Sessions) -> None:
    f = finding()
    await track(sessions, cluster="prod", findings=[f], now=at(0), triggers=[trigger("e1")], sinks=["s"])
    reworded = finding(explanation="Reworded.")
    await track(
        sessions,
        cluster="prod",
        findings=[reworded],
        now=at(1),
        triggers=[trigger("e2", message="new message")],
        sinks=["s"],
    )
    [inc] = await incidents(sessions)
    assert inc.explanation == f.explanation and inc.last_message == "new message"
    assert (await entries(sessions, inc.id))[-1] == (
        "updated",
        "new message",
        {"changed": ["explanation", "message"], "kept": ["explanation"]},
    )
    # While nobody has been told (waiting), the stored diagnosis follows the analysis: nothing kept.
    w = finding(deployment("w"))
    await track(sessions, cluster="prod", findings=[w], now=at(2), waiting={w.fingerprint: "scale-up"})
    await track(
        sessions,
        cluster="prod",
        findings=[finding(deployment("w"), explanation="Reworded.")],
        now=at(3),
        waiting={w.fingerprint: "scale-up"},
    )
    [_, waiting] = await incidents(sessions)
    assert waiting.explanation == "Reworded."
    assert (await entries(sessions, waiting.id))[-1][2] == {"changed": ["explanation"]}


async def test_within_one_batch_an_open_exactly_one_window_earlier_no_longer_counts(
    sessions: Sessions,
) -> None:
    policy = NotifyPolicy(storm_threshold=4, storm_window=timedelta(minutes=5))
    first = [finding(deployment(f"a{i}")) for i in range(3)]
    later = [finding(deployment(f"b{i}")) for i in range(3)]
    await track_passes(
        sessions,
        cluster="prod",
        passes=[Pass(first, at(0)), Pass(later, at(5))],  # 3 + 3 > 4, but 5 minutes apart
        sinks=["s"],
        policy=policy,
    )
    assert [n.event for n in await outbox(sessions)] == ["opened"] * 6
    within = [finding(deployment(f"c{i}")) for i in range(3)]
    await track_passes(sessions, cluster="prod", passes=[Pass(within, at(9.9))], sinks=["s"], policy=policy)
    assert [n.event for n in await outbox(sessions)][6:] == ["digest"]  # 3 (at 5) + 3 > 4


async def test_pruning_nothing_forgets_nothing(sessions: Sessions) -> None:
    async with sessions.begin() as s:
        assert await prune_applied_events(s, before=at(60)) == 0


# --- PostgreSQL: concurrent writers -----------------------------------------------------------


@pytest.mark.postgres
@postgres_only
async def test_writers_of_one_cluster_queue_and_of_another_do_not(sessions: Sessions) -> None:
    async with sessions.begin() as holder:
        await apply_pass(holder, cluster="prod", findings=[on("a", "ml/a-1")], now=at(0))
        same = asyncio.create_task(track(sessions, cluster="prod", findings=[on("b", "ml/b-1")], now=at(0)))
        other = asyncio.create_task(track(sessions, cluster="dev", findings=[on("b", "ml/b-1")], now=at(0)))
        await asyncio.wait_for(other, 10)  # another cluster's lock: not held
        await asyncio.sleep(0.3)
        assert not same.done()  # waits for the holder's transaction
    r = await asyncio.wait_for(same, 10)
    assert len(r.opened) == 1
    assert sorted((i.cluster, i.subject_name) for i in await incidents(sessions)) == [
        ("dev", "b"),
        ("prod", "a"),
        ("prod", "b"),
    ]


@pytest.mark.postgres
@postgres_only
async def test_every_cluster_name_makes_a_lock_key(sessions: Sessions) -> None:
    # sha256's first byte is >= 0x80 for about half the names: their key is a negative bigint.
    names = [f"cluster-{i}" for i in range(8)]
    for name in names:
        await track(sessions, cluster=name, findings=[finding()], now=at(0))
    assert sorted(i.cluster for i in await incidents(sessions)) == sorted(names)


async def _rival_opens(sessions: Sessions, f: Finding, release: asyncio.Event) -> None:
    """Another writer (not the tracker, so without its lock) opens ``f``'s incident and commits
    once ``release`` is set."""
    async with sessions.begin() as s:
        await apply_pass(s, cluster="rival", findings=[f], now=at(0))  # a template row
        [template] = (await s.execute(select(Incident))).scalars()
        s.add(
            Incident(
                **{c.name: getattr(template, c.name) for c in Incident.__table__.columns if c.name != "id"}
                | {"cluster": "prod", "title": "opened by the rival"}
            )
        )
        await s.flush()
        await release.wait()


@pytest.mark.postgres
@postgres_only
async def test_a_pass_that_raced_a_rival_writer_is_retried_and_continues_its_incident(
    sessions: Sessions,
) -> None:
    f = finding()
    release = asyncio.Event()
    rival = asyncio.create_task(_rival_opens(sessions, f, release))
    await asyncio.sleep(0.3)
    # The tracker does not see the rival's row yet; its insert waits on the unique index.
    ours = asyncio.create_task(
        track(sessions, cluster="prod", findings=[f], now=at(1), triggers=[trigger()], attempts=2)
    )
    await asyncio.sleep(0.3)
    release.set()
    await rival
    r = await asyncio.wait_for(ours, 10)
    prod = [i for i in await incidents(sessions) if i.cluster == "prod"]
    # The retry continued the rival's incident: one more occurrence, no second incident.
    assert [(i.title, i.occurrences) for i in prod] == [("opened by the rival", 2)]
    assert r.opened == [] and r.updated == [prod[0].id] and r.new_triggers == 1


@pytest.mark.postgres
@postgres_only
async def test_with_one_attempt_the_race_is_the_callers(sessions: Sessions) -> None:
    f = finding()
    release = asyncio.Event()
    rival = asyncio.create_task(_rival_opens(sessions, f, release))
    await asyncio.sleep(0.3)
    ours = asyncio.create_task(track(sessions, cluster="prod", findings=[f], now=at(1), attempts=1))
    await asyncio.sleep(0.3)
    release.set()
    await rival
    with pytest.raises(IntegrityError):
        await asyncio.wait_for(ours, 10)
