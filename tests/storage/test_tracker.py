"""The incident tracker on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import Severity
from analyzers.ingest import trigger_from_event
from storage.models import AppliedEvent, Incident, Notification, TimelineEntry
from storage.tracker import (
    EVERY_SUBJECT,
    Pass,
    Trigger,
    apply_pass,
    prune_applied_events,
    track,
    track_passes,
)
from tests.storage.factories import MESSAGE, at, deployment, finding, trigger

Sessions = async_sessionmaker[AsyncSession]


async def incidents(sessions: Sessions) -> list[Incident]:
    async with sessions() as s:
        return list((await s.execute(select(Incident).order_by(Incident.id))).scalars())


async def timeline(sessions: Sessions, incident_id: int) -> list[tuple[str, str, datetime]]:
    async with sessions() as s:
        rows = await s.execute(
            select(TimelineEntry.kind, TimelineEntry.message, TimelineEntry.at)
            .where(TimelineEntry.incident_id == incident_id)
            .order_by(TimelineEntry.id)
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


async def outbox(sessions: Sessions) -> list[tuple[int, str, str]]:
    async with sessions() as s:
        rows = await s.execute(
            select(Notification.incident_id, Notification.sink, Notification.event).order_by(Notification.id)
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


async def test_first_pass_opens_an_incident_with_timeline_and_outbox(sessions: Sessions) -> None:
    f = finding(pods=("ml/trainer-7d9-abc",))
    result = await track(
        sessions, cluster="prod", findings=[f], now=at(0), triggers=[trigger()], sinks=["slack", "webhook"]
    )

    [inc] = await incidents(sessions)
    assert result.opened == [inc.id] and result.updated == [] and result.resolved == []
    assert inc.fingerprint == f.fingerprint and inc.cluster == "prod"
    assert (inc.subject_kind, inc.namespace, inc.subject_name) == ("Deployment", "ml", "trainer")
    assert inc.status == "open" and inc.severity == "critical" and inc.occurrences == 1
    assert inc.first_seen == at(0) and inc.last_seen == at(0) and inc.resolved_at is None
    assert inc.last_message == MESSAGE
    assert inc.evidence == {"gpus_free": 0, "nodes": 10}
    assert inc.remedies[0]["yaml"].startswith("apiVersion: apps/v1") and inc.remedies[0]["verified"] is True
    assert inc.pods == ["ml/trainer-7d9-abc"] and inc.previous_id is None
    assert await timeline(sessions, inc.id) == [("opened", MESSAGE, at(0))]
    assert await outbox(sessions) == [(inc.id, "slack", "opened"), (inc.id, "webhook", "opened")]
    assert result.notifications == 2


async def test_repeats_count_occurrences_without_timeline_noise(sessions: Sessions) -> None:
    f = finding()
    await track(
        sessions, cluster="prod", findings=[f], now=at(0), triggers=[trigger(count=1)], sinks=["slack"]
    )
    for n in (2, 3, 4):
        result = await track(
            sessions, cluster="prod", findings=[f], now=at(n), triggers=[trigger(count=n)], sinks=["slack"]
        )
    [inc] = await incidents(sessions)
    assert result.updated == [inc.id] and result.opened == []
    assert inc.occurrences == 4 and inc.last_seen == at(4) and inc.first_seen == at(0)
    # Same message, same content: no "updated" rows and no extra notifications.
    assert [k for k, _, _ in await timeline(sessions, inc.id)] == ["opened"]
    assert await outbox(sessions) == [(inc.id, "slack", "opened")]


async def test_the_same_event_applied_twice_counts_once(sessions: Sessions) -> None:
    f = finding()
    t = trigger(uid="ev-9", count=3)
    first = await track(sessions, cluster="prod", findings=[f], now=at(0), triggers=[t])
    again = await track(sessions, cluster="prod", findings=[f], now=at(0), triggers=[t])
    assert (first.new_triggers, again.new_triggers, again.replayed_triggers) == (1, 0, 1)
    [inc] = await incidents(sessions)
    assert inc.occurrences == 1
    # Two distinct events in one pass count two; a duplicate key inside a pass counts once.
    await track(
        sessions,
        cluster="prod",
        findings=[f],
        now=at(1),
        triggers=[trigger(uid="ev-9", count=4), trigger(uid="ev-10"), trigger(uid="ev-10")],
    )
    [inc] = await incidents(sessions)
    assert inc.occurrences == 3
    # Keys are per cluster: the same uid in another cluster is another event.
    await track(sessions, cluster="staging", findings=[f], now=at(2), triggers=[t])
    rows = await incidents(sessions)
    assert [(i.cluster, i.occurrences) for i in rows] == [("prod", 3), ("staging", 1)]


async def test_a_trigger_counts_only_for_findings_about_its_pod(sessions: Sessions) -> None:
    a = finding(deployment("a"), pods=("ml/a-1",))
    b = finding(deployment("b"), pods=("ml/b-1",))
    await track(sessions, cluster="c", findings=[a, b], now=at(0))
    await track(sessions, cluster="c", findings=[a, b], now=at(1), triggers=[trigger("e1", pod="ml/a-1")])
    by_name = {i.subject_name: i.occurrences for i in await incidents(sessions)}
    assert by_name == {"a": 2, "b": 1}


async def test_changed_message_and_content_write_updated_and_severity_changed(sessions: Sessions) -> None:
    await track(
        sessions, cluster="prod", findings=[finding()], now=at(0), triggers=[trigger()], sinks=["slack"]
    )
    other = "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) had untolerated taint {gpu: true}."
    await track(
        sessions,
        cluster="prod",
        findings=[finding(severity=Severity.WARNING, evidence={"gpus_free": 0, "nodes": 11})],
        now=at(5),
        triggers=[trigger("ev-2", message=other)],
        sinks=["slack"],
    )
    [inc] = await incidents(sessions)
    assert inc.severity == "warning" and inc.evidence == {"gpus_free": 0, "nodes": 11}
    assert inc.last_message == other and inc.occurrences == 2
    entries = await timeline(sessions, inc.id)
    assert [(k, m) for k, m, _ in entries] == [
        ("opened", MESSAGE),
        ("severity_changed", other),
        ("updated", other),
    ]
    async with sessions() as s:
        details = list(
            (
                await s.execute(
                    select(TimelineEntry.detail)
                    .where(TimelineEntry.incident_id == inc.id)
                    .order_by(TimelineEntry.id)
                )
            ).scalars()
        )
    assert details[1] == {"from": "critical", "to": "warning"}
    assert set(details[2]["changed"]) == {"evidence", "message"}
    # A severity change is something a human acts on: one ``updated`` row saying so.
    assert await outbox(sessions) == [(inc.id, "slack", "opened"), (inc.id, "slack", "updated")]


async def test_resolves_when_an_evaluated_subject_no_longer_shows_the_finding(sessions: Sessions) -> None:
    await track(
        sessions, cluster="prod", findings=[finding()], now=at(0), triggers=[trigger()], sinks=["slack"]
    )
    scheduled = "Successfully assigned ml/trainer-7d9-xyz to gpu-node-1"
    result = await track(
        sessions,
        cluster="prod",
        findings=[],
        evaluated=[deployment()],
        now=at(30),
        triggers=[Trigger("ev-s:1", scheduled)],
        sinks=["slack"],
    )
    [inc] = await incidents(sessions)
    assert result.resolved == [inc.id]
    assert inc.status == "resolved" and inc.resolved_at == at(30) and inc.last_seen == at(0)
    assert (await timeline(sessions, inc.id))[-1] == ("resolved", scheduled, at(30))
    assert await outbox(sessions) == [(inc.id, "slack", "opened"), (inc.id, "slack", "resolved")]
    # Resolving is idempotent: a later pass has nothing left to resolve.
    again = await track(
        sessions, cluster="prod", findings=[], evaluated=[deployment()], now=at(31), sinks=["slack"]
    )
    assert again.resolved == [] and len(await outbox(sessions)) == 2


async def test_subjects_not_evaluated_stay_open(sessions: Sessions) -> None:
    a, b = finding(deployment("a")), finding(deployment("b"))
    await track(sessions, cluster="prod", findings=[a, b], now=at(0))
    # The pass looked at "b" only (and found nothing), and at "a" in another cluster.
    await track(sessions, cluster="prod", findings=[], evaluated=[deployment("b")], now=at(1))
    await track(sessions, cluster="other", findings=[], evaluated=[deployment("a")], now=at(1))
    # Findings do not imply evaluation: a finding of another rule on "a" resolves nothing.
    await track(
        sessions, cluster="prod", findings=[finding(deployment("a"), rule_id="pdb-blocks-drain")], now=at(2)
    )
    status = {(i.subject_name, i.rule_id): i.status for i in await incidents(sessions)}
    assert status == {
        ("a", "rollout-deadlock"): "open",
        ("b", "rollout-deadlock"): "resolved",
        ("a", "pdb-blocks-drain"): "open",
    }


async def test_a_pass_over_every_subject_resolves_whatever_it_did_not_find(sessions: Sessions) -> None:
    a, b, c = finding(deployment("a")), finding(deployment("b")), finding(deployment("c"))
    await track(sessions, cluster="prod", findings=[a, b, c], now=at(0))
    await track(sessions, cluster="elsewhere", findings=[a], now=at(0))
    result = await track(sessions, cluster="prod", findings=[b], evaluated=EVERY_SUBJECT, now=at(1))
    assert len(result.resolved) == 2 and len(result.updated) == 1
    status = {(i.cluster, i.subject_name): i.status for i in await incidents(sessions)}
    assert status == {
        ("prod", "a"): "resolved",
        ("prod", "b"): "open",
        ("prod", "c"): "resolved",
        ("elsewhere", "a"): "open",
    }


async def test_a_resolved_incident_that_recurs_opens_a_new_linked_incident(sessions: Sessions) -> None:
    f = finding()
    await track(sessions, cluster="prod", findings=[f], now=at(0), triggers=[trigger("e1")])
    await track(sessions, cluster="prod", findings=[], evaluated=[f.subject], now=at(10))
    await track(sessions, cluster="prod", findings=[f], now=at(20), triggers=[trigger("e2")], sinks=["slack"])
    await track(sessions, cluster="prod", findings=[], evaluated=[f.subject], now=at(30))
    await track(sessions, cluster="prod", findings=[f], now=at(40), triggers=[trigger("e3")], sinks=["slack"])
    first, second, third = await incidents(sessions)
    assert [i.status for i in (first, second, third)] == ["resolved", "resolved", "open"]
    assert first.previous_id is None and second.previous_id == first.id and third.previous_id == second.id
    assert second.first_seen == at(20) and second.occurrences == 1 and third.first_seen == at(40)
    async with sessions() as s:
        detail = (
            await s.execute(select(TimelineEntry.detail).where(TimelineEntry.incident_id == third.id))
        ).scalar_one()
    assert detail == {"previous_id": second.id}
    assert [e for _, _, e in await outbox(sessions)] == ["opened", "opened"]


async def test_a_new_cause_on_the_same_subject_is_a_root_cause_change(sessions: Sessions) -> None:
    gpu = finding(cause="nvidia.com/gpu", rule_id="insufficient-resources")
    taint = finding(
        cause="gpu=true:NoSchedule", rule_id="untolerated-taint", title="Pods do not tolerate gpu=true"
    )
    await track(
        sessions, cluster="prod", findings=[gpu], now=at(0), triggers=[trigger()], sinks=["slack", "hook"]
    )
    result = await track(
        sessions,
        cluster="prod",
        findings=[taint],
        evaluated=[gpu.subject],
        now=at(5),
        triggers=[
            trigger("e2", message="0/10 nodes are available: 10 node(s) had untolerated taint {gpu: true}.")
        ],
        sinks=["slack", "hook"],
    )
    old, new = await incidents(sessions)
    assert result.resolved == [old.id] and result.opened == [new.id] and result.root_cause_changed == [new.id]
    assert old.status == "resolved" and new.status == "open" and new.rule_id == "untolerated-taint"
    assert [k for k, _, _ in await timeline(sessions, new.id)] == ["opened", "root_cause_changed"]
    async with sessions() as s:
        details = {
            (i, k): d
            for i, k, d in await s.execute(
                select(TimelineEntry.incident_id, TimelineEntry.kind, TimelineEntry.detail)
            )
        }
    assert details[(old.id, "resolved")] == {"reason": "root_cause_changed", "replaced_by": [new.id]}
    assert details[(new.id, "root_cause_changed")]["replaces"] == [old.id]
    # One notification per sink for the change; none for the resolve or the open it stands for.
    assert await outbox(sessions) == [
        (old.id, "slack", "opened"),
        (old.id, "hook", "opened"),
        (new.id, "slack", "root_cause_changed"),
        (new.id, "hook", "root_cause_changed"),
    ]
    async with sessions() as s:
        payload = (
            await s.execute(select(Notification.payload).order_by(Notification.id.desc()).limit(1))
        ).scalar_one()
    assert payload["event"] == "root_cause_changed" and payload["incident"]["id"] == new.id
    assert payload["replaces"][0]["id"] == old.id and payload["replaces"][0]["status"] == "resolved"


async def test_duplicate_findings_in_a_pass_merge_most_severe_wins(sessions: Sessions) -> None:
    low = finding(severity=Severity.WARNING, pods=("ml/p1",))
    high = finding(severity=Severity.CRITICAL, pods=("ml/p2",))
    await track(sessions, cluster="prod", findings=[low, high], now=at(0))
    [inc] = await incidents(sessions)
    assert inc.severity == "critical" and inc.pods == ["ml/p1", "ml/p2"]


async def test_apply_pass_is_one_transaction(sessions: Sessions) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with sessions.begin() as s:
            await apply_pass(
                s, cluster="prod", findings=[finding()], now=at(0), triggers=[trigger()], sinks=["x"]
            )
            raise Boom
    async with sessions() as s:
        counts = [
            (await s.execute(select(func.count()).select_from(m))).scalar_one()
            for m in (Incident, TimelineEntry, Notification, AppliedEvent)
        ]
    assert counts == [0, 0, 0, 0]
    # And the event was not consumed: it counts when the pass is retried.
    r = await track(sessions, cluster="prod", findings=[finding()], now=at(0), triggers=[trigger()])
    assert r.new_triggers == 1


async def test_rejects_naive_time_and_empty_keys(sessions: Sessions) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        await track(sessions, cluster="prod", findings=[finding()], now=datetime(2024, 5, 1))
    with pytest.raises(ValueError, match="non-empty key"):
        await track(sessions, cluster="prod", findings=[finding()], now=at(0), triggers=[Trigger("")])


async def test_prune_forgets_old_event_keys(sessions: Sessions) -> None:
    await track(sessions, cluster="prod", findings=[finding()], now=at(0), triggers=[trigger("old")])
    await track(sessions, cluster="prod", findings=[finding()], now=at(120), triggers=[trigger("new")])
    async with sessions.begin() as s:
        assert await prune_applied_events(s, before=at(60)) == 1
    async with sessions() as s:
        assert list((await s.execute(select(AppliedEvent.key))).scalars()) == ["new:1"]


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
async def test_racing_passes_open_one_incident(sessions: Sessions) -> None:
    f = finding()
    results = await asyncio.gather(
        *(
            track(sessions, cluster="prod", findings=[f], now=at(0), triggers=[trigger(f"e{i}")])
            for i in range(4)
        )
    )
    [inc] = await incidents(sessions)
    assert inc.status == "open" and inc.occurrences == 4
    assert sum(len(r.opened) for r in results) == 1


def test_trigger_from_core_and_events_v1_events() -> None:
    core = {
        "metadata": {"uid": "u-1"},
        "count": 7,
        "message": MESSAGE,
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "trainer-abc"},
    }
    assert trigger_from_event(core) == Trigger("u-1:7", MESSAGE, "ml/trainer-abc")
    series = {
        "metadata": {"uid": "u-2"},
        "series": {"count": 12},
        "deprecatedCount": 1,
        "note": "x",
        "regarding": {"kind": "Node", "name": "n1"},
    }
    assert trigger_from_event(series) == Trigger("u-2:12", "x", "")
    assert trigger_from_event({"metadata": {"uid": "u-3"}}).key == "u-3:1"
    with pytest.raises(ValueError):
        trigger_from_event({"metadata": {}})


def _script() -> list[Pass]:
    """A day in the life: opens, repeats, a replay, a severity change, a root-cause change,
    a resolve, a recurrence and a whole-cluster pass."""
    a, b = deployment("a"), deployment("b")
    gpu = finding(a, cause="gpu", rule_id="insufficient-resources")
    taint = finding(a, cause="taint", rule_id="untolerated-taint")
    drain = finding(b, rule_id="pdb-blocks-drain", severity=Severity.WARNING)
    return [
        Pass([gpu, drain], at(0), (a, b), (trigger("e1"), trigger("e2"))),
        Pass([gpu, drain], at(1), (a, b), (trigger("e1", 2),)),
        Pass([gpu, drain], at(2), (a, b), (trigger("e1", 2),)),  # replay
        Pass(
            [gpu, finding(b, rule_id="pdb-blocks-drain", severity=Severity.CRITICAL)],
            at(3),
            (b,),
            (trigger("e3"),),
        ),
        Pass([taint], at(4), (a,), (trigger("e4", message="taint"),)),  # root cause changed on a
        Pass([], at(5), (b,), (trigger("ok", message="Scheduled"),)),  # b resolves
        Pass([drain], at(6), (b,), (trigger("e5"),)),  # b recurs
        Pass([], at(7), EVERY_SUBJECT, ()),  # everything resolves
        Pass([gpu], at(8), (), (trigger("e1", 2), trigger("e6"))),  # gpu recurs; e1:2 is a replay
    ]


async def _dump(sessions: Sessions) -> list[object]:
    async with sessions() as s:
        incs = [
            (
                i.id,
                i.fingerprint,
                i.status,
                i.severity,
                i.occurrences,
                i.first_seen,
                i.last_seen,
                i.resolved_at,
                i.previous_id,
                i.last_message,
            )
            for i in (await s.execute(select(Incident).order_by(Incident.id))).scalars()
        ]
        tl = [
            tuple(r)
            for r in await s.execute(
                select(
                    TimelineEntry.incident_id,
                    TimelineEntry.kind,
                    TimelineEntry.at,
                    TimelineEntry.message,
                    TimelineEntry.detail,
                ).order_by(TimelineEntry.id)
            )
        ]
        ob = [
            tuple(r)
            for r in await s.execute(
                select(Notification.incident_id, Notification.sink, Notification.event).order_by(
                    Notification.id
                )
            )
        ]
    return [incs, tl, ob]


@pytest.mark.parametrize("batch", [2, 9])
async def test_batched_passes_equal_passes_one_by_one(engine: object, db_url: str, batch: int) -> None:
    from storage.engine import create_engine, create_sessionmaker
    from storage.models import Base

    script = _script()
    one = create_sessionmaker(engine)  # type: ignore[arg-type]
    for p in script:
        await track(
            one,
            cluster="c",
            findings=p.findings,
            now=p.now,
            evaluated=p.evaluated,
            triggers=p.triggers,
            sinks=["slack"],
        )
    expected = await _dump(one)
    assert [row[2] for row in expected[0]] == ["resolved", "resolved", "resolved", "resolved", "open"]

    # The same script, in batches, on a second, empty schema.
    other = create_engine(db_url)
    async with other.begin() as conn:
        await conn.run_sync(Base.metadata.drop_all)
        await conn.run_sync(Base.metadata.create_all)
    sessions = create_sessionmaker(other)
    results = []
    for i in range(0, len(script), batch):
        results += await track_passes(sessions, cluster="c", passes=script[i : i + batch], sinks=["slack"])
    assert await _dump(sessions) == expected
    assert [r.replayed_triggers for r in results] == [0, 0, 1, 0, 0, 0, 0, 0, 1]
    await other.dispose()
