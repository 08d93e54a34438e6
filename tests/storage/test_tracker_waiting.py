"""Incidents waiting for scale-up, on SQLite and on a real PostgreSQL: stored, never paged
while waiting, paged when the wait ends with the problem still there, and resolved quietly
when the autoscaler's capacity fixes them."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from storage.engine import create_engine, create_sessionmaker
from storage.models import Base, Incident, Notification, TimelineEntry
from storage.tracker import EVERY_SUBJECT, Pass, apply_pass, track, track_passes
from tests.storage.factories import MESSAGE, at, deployment, finding, trigger

Sessions = async_sessionmaker[AsyncSession]

SCALE_UP = "scale-up"
TRIGGERED = "pod triggered scale-up: [{gpu-pool 1->2 (max: 4)}]"
FAILED = "Node group gpu-pool increase failed: InsufficientInstanceCapacity"
SCHEDULED = "Successfully assigned ml/trainer-7d9-abc to gpu-node-2"
POD = "ml/trainer-7d9-abc"


async def incidents(sessions: Sessions) -> list[Incident]:
    async with sessions() as s:
        return list((await s.execute(select(Incident).order_by(Incident.id))).scalars())


async def timeline(sessions: Sessions, incident_id: int) -> list[tuple[str, str, dict[str, Any]]]:
    async with sessions() as s:
        rows = await s.execute(
            select(TimelineEntry.kind, TimelineEntry.message, TimelineEntry.detail)
            .where(TimelineEntry.incident_id == incident_id)
            .order_by(TimelineEntry.id)
        )
        return [(k, m, d) for k, m, d in rows]


async def outbox(sessions: Sessions) -> list[tuple[int, str, str]]:
    async with sessions() as s:
        rows = await s.execute(
            select(Notification.incident_id, Notification.sink, Notification.event).order_by(Notification.id)
        )
        return [(i, sink, ev) for i, sink, ev in rows]


async def payloads(sessions: Sessions) -> list[dict[str, Any]]:
    async with sessions() as s:
        return list((await s.execute(select(Notification.payload).order_by(Notification.id))).scalars())


def gpu() -> Any:
    return finding(pods=(POD,))


async def open_waiting(sessions: Sessions, *, sinks: tuple[str, ...] = ("slack", "hook")) -> Incident:
    f = gpu()
    await track(
        sessions,
        cluster="prod",
        findings=[f],
        now=at(0),
        triggers=[trigger("ca-1", message=TRIGGERED, pod=POD)],
        waiting={f.fingerprint: SCALE_UP},
        sinks=sinks,
    )
    [inc] = await incidents(sessions)
    return inc


async def test_a_finding_that_opens_while_waiting_is_stored_without_paging(sessions: Sessions) -> None:
    f = gpu()
    result = await track(
        sessions,
        cluster="prod",
        findings=[f],
        now=at(0),
        triggers=[trigger("ca-1", message=TRIGGERED, pod=POD)],
        waiting={f.fingerprint: SCALE_UP},
        sinks=["slack", "hook"],
    )
    [inc] = await incidents(sessions)
    assert result.opened == [inc.id] and result.waiting == [inc.id] and result.notifications == 0
    assert inc.status == "open" and inc.waiting_for == SCALE_UP and inc.waiting_since == at(0)
    assert await timeline(sessions, inc.id) == [
        ("opened", TRIGGERED, {}),
        ("waiting", TRIGGERED, {"for": SCALE_UP}),
    ]
    assert await outbox(sessions) == []


async def test_still_waiting_is_a_normal_update_without_notification(sessions: Sessions) -> None:
    inc = await open_waiting(sessions)
    f = gpu()
    for n, message in ((2, TRIGGERED), (3, MESSAGE)):
        result = await track(
            sessions,
            cluster="prod",
            findings=[f],
            now=at(n),
            triggers=[trigger("ca-1", count=n, message=message, pod=POD)],
            waiting={f.fingerprint: SCALE_UP},
            sinks=["slack", "hook"],
        )
        assert result.updated == [inc.id] and result.waiting == [inc.id] and result.notifications == 0
    [inc] = await incidents(sessions)
    assert inc.occurrences == 3 and inc.last_seen == at(3) and inc.last_message == MESSAGE
    assert (inc.waiting_for, inc.waiting_since) == (SCALE_UP, at(0))  # waiting since the first pass
    assert [k for k, _, _ in await timeline(sessions, inc.id)] == ["opened", "waiting", "updated"]
    assert await outbox(sessions) == []


async def test_waiting_that_ends_while_the_finding_is_present_escalates_and_pages(sessions: Sessions) -> None:
    inc = await open_waiting(sessions)
    f = gpu()
    failed = Pass([f], at(12), EVERY_SUBJECT, (trigger("ca-2", message=FAILED, pod=POD),))
    [result] = await track_passes(sessions, cluster="prod", passes=[failed], sinks=["slack", "hook"])
    assert result.escalated == [inc.id] and result.waiting == [] and result.notifications == 2
    [inc] = await incidents(sessions)
    assert inc.status == "open" and inc.waiting_for is None and inc.waiting_since is None
    entries = await timeline(sessions, inc.id)
    assert [k for k, _, _ in entries] == ["opened", "waiting", "escalated", "updated"]  # + the new message
    assert entries[2] == ("escalated", FAILED, {"for": SCALE_UP, "since": "2024-05-01T12:00:00Z"})
    # The page the user would have had at the start, now that waiting did not help.
    assert await outbox(sessions) == [(inc.id, "slack", "escalated"), (inc.id, "hook", "escalated")]
    payload = (await payloads(sessions))[0]
    assert payload["event"] == "escalated" and payload["incident"]["id"] == inc.id
    assert payload["waited"] == {"for": SCALE_UP, "since": "2024-05-01T12:00:00Z"}
    assert payload["incident"]["waiting"] is None
    assert payload["waited"] == {"for": SCALE_UP, "since": "2024-05-01T12:00:00Z"}

    # The same pass again (a retry) pages nobody twice, and the incident now resolves loudly.
    [again] = await track_passes(sessions, cluster="prod", passes=[failed], sinks=["slack", "hook"])
    assert again.escalated == [] and again.notifications == 0
    resolved = await track(
        sessions,
        cluster="prod",
        findings=[],
        evaluated=EVERY_SUBJECT,
        now=at(30),
        triggers=[trigger("ok", message=SCHEDULED, pod=POD)],
        sinks=["slack", "hook"],
    )
    assert resolved.resolved == [inc.id]
    assert [e for _, _, e in await outbox(sessions)] == ["escalated", "escalated", "resolved", "resolved"]
    assert (await timeline(sessions, inc.id))[-1] == ("resolved", SCHEDULED, {})


async def test_a_scale_up_that_times_out_escalates_on_a_pass_without_triggers(sessions: Sessions) -> None:
    inc = await open_waiting(sessions, sinks=("slack",))
    result = await track(sessions, cluster="prod", findings=[gpu()], now=at(11), sinks=["slack"])
    assert result.escalated == [inc.id]
    assert (await timeline(sessions, inc.id))[-1] == (
        "escalated",
        "",
        {"for": SCALE_UP, "since": "2024-05-01T12:00:00Z"},
    )
    assert await outbox(sessions) == [(inc.id, "slack", "escalated")]


async def test_resolved_while_waiting_is_resolved_without_a_notification(sessions: Sessions) -> None:
    inc = await open_waiting(sessions)
    result = await track(
        sessions,
        cluster="prod",
        findings=[],
        evaluated=[deployment()],
        now=at(4),
        triggers=[trigger("ok", message=SCHEDULED, pod=POD)],
        sinks=["slack", "hook"],
    )
    [inc] = await incidents(sessions)
    assert result.resolved == [inc.id] and result.notifications == 0
    assert inc.status == "resolved" and inc.resolved_at == at(4)
    # The waiting state stays on the record: nobody was ever paged about this incident.
    assert (inc.waiting_for, inc.waiting_since) == (SCALE_UP, at(0))
    assert (await timeline(sessions, inc.id))[-1] == ("resolved", SCHEDULED, {"waiting_for": SCALE_UP})
    assert await outbox(sessions) == []

    # It recurs later without an autoscaler: a new incident, paged as usual.
    f = gpu()
    await track(sessions, cluster="prod", findings=[f], now=at(60), triggers=[trigger("e9")], sinks=["slack"])
    first, second = await incidents(sessions)
    assert second.previous_id == first.id and second.waiting_for is None
    assert await outbox(sessions) == [(second.id, "slack", "opened")]


async def test_an_incident_already_paged_never_starts_waiting(sessions: Sessions) -> None:
    f = gpu()
    await track(sessions, cluster="prod", findings=[f], now=at(0), triggers=[trigger()], sinks=["slack"])
    result = await track(
        sessions,
        cluster="prod",
        findings=[f],
        now=at(1),
        triggers=[trigger("ca-1", message=TRIGGERED, pod=POD)],
        waiting={f.fingerprint: SCALE_UP},
        sinks=["slack"],
    )
    [inc] = await incidents(sessions)
    assert result.waiting == [] and inc.waiting_for is None and inc.waiting_since is None
    assert [k for k, _, _ in await timeline(sessions, inc.id)] == ["opened", "updated"]
    # Paged, so its resolution is news too, even if the autoscaler fixed it.
    await track(
        sessions,
        cluster="prod",
        findings=[],
        evaluated=EVERY_SUBJECT,
        now=at(5),
        waiting={f.fingerprint: SCALE_UP},
        sinks=["slack"],
    )
    assert await outbox(sessions) == [(inc.id, "slack", "opened"), (inc.id, "slack", "resolved")]


async def test_a_new_reason_to_wait_is_recorded(sessions: Sessions) -> None:
    inc = await open_waiting(sessions)
    f = gpu()
    await track(
        sessions, cluster="prod", findings=[f], now=at(1), waiting={f.fingerprint: "node-provisioning"}
    )
    [inc] = await incidents(sessions)
    assert (inc.waiting_for, inc.waiting_since) == ("node-provisioning", at(0))
    assert (await timeline(sessions, inc.id))[-1][::2] == (
        "waiting",
        {"for": "node-provisioning", "was": SCALE_UP},
    )


async def test_root_cause_changes_page_only_about_what_was_paged(sessions: Sessions) -> None:
    gpu_cause = finding(rule_id="insufficient-resources", cause="nvidia.com/gpu", pods=(POD,))
    taint = finding(rule_id="untolerated-taint", cause="gpu=true:NoSchedule", pods=(POD,))
    # A waiting incident replaced by a cause nobody waits for: the user hears "opened", nothing else.
    await track(
        sessions,
        cluster="prod",
        findings=[gpu_cause],
        now=at(0),
        waiting={gpu_cause.fingerprint: SCALE_UP},
        sinks=["s"],
    )
    r = await track(
        sessions, cluster="prod", findings=[taint], evaluated=EVERY_SUBJECT, now=at(1), sinks=["s"]
    )
    old, new = await incidents(sessions)
    assert r.root_cause_changed == [new.id] and old.status == "resolved"
    assert await outbox(sessions) == [(new.id, "s", "opened")]
    assert (await timeline(sessions, old.id))[-1][2] == {
        "reason": "root_cause_changed",
        "replaced_by": [new.id],
        "waiting_for": SCALE_UP,
    }

    # A paged incident replaced by one that waits: the page is closed ("resolved"), the new cause waits.
    r = await track(
        sessions,
        cluster="prod",
        findings=[gpu_cause],
        evaluated=EVERY_SUBJECT,
        now=at(2),
        waiting={gpu_cause.fingerprint: SCALE_UP},
        sinks=["s"],
    )
    _, paged, waiting = await incidents(sessions)
    assert paged.id == new.id and paged.status == "resolved" and r.root_cause_changed == [waiting.id]
    assert waiting.waiting_for == SCALE_UP and waiting.previous_id == old.id
    assert [k for k, _, _ in await timeline(sessions, waiting.id)] == [
        "opened",
        "waiting",
        "root_cause_changed",
    ]
    assert (await outbox(sessions))[1:] == [(paged.id, "s", "resolved")]


async def test_waiting_reasons_are_checked_and_strangers_ignored(sessions: Sessions) -> None:
    f = gpu()
    for bad in ("", "x" * 33):
        with pytest.raises(ValueError, match="waiting reason"):
            await track(sessions, cluster="prod", findings=[f], now=at(0), waiting={f.fingerprint: bad})
    r = await track(sessions, cluster="prod", findings=[f], now=at(0), waiting={"not-a-finding": SCALE_UP})
    [inc] = await incidents(sessions)
    assert r.waiting == [] and inc.waiting_for is None


async def test_apply_pass_takes_waiting_in_the_callers_transaction(sessions: Sessions) -> None:
    f = gpu()
    async with sessions.begin() as s:
        r = await apply_pass(
            s, cluster="prod", findings=[f], now=at(0), waiting={f.fingerprint: SCALE_UP}, sinks=["x"]
        )
    [inc] = await incidents(sessions)
    assert r.waiting == [inc.id] and inc.waiting_for == SCALE_UP and await outbox(sessions) == []


def _script() -> list[Pass]:
    """Every waiting transition, twice over, with replays: open waiting, wait on, escalate,
    resolve; open waiting, resolve quietly; root-cause changes both ways; a paged incident
    that is told to wait."""
    a, b, c = deployment("a"), deployment("b"), deployment("c")
    fa = finding(a, pods=("ml/a-1",))
    fb = finding(b, pods=("ml/b-1",))
    fc_gpu = finding(c, rule_id="insufficient-resources", cause="gpu", pods=("ml/c-1",))
    fc_taint = finding(c, rule_id="untolerated-taint", cause="taint", pods=("ml/c-1",))
    up = {f.fingerprint: SCALE_UP for f in (fa, fb, fc_gpu)}
    t = trigger
    return [
        Pass([fa, fb], at(0), EVERY_SUBJECT, (t("a1", pod="ml/a-1"), t("b1", pod="ml/b-1")), up),
        Pass([fa, fb], at(1), EVERY_SUBJECT, (t("a1", 2, pod="ml/a-1"),), up),
        Pass([fa, fb], at(1), EVERY_SUBJECT, (t("a1", 2, pod="ml/a-1"),), up),  # replay
        Pass(
            [fa, fb, fc_gpu],
            at(2),
            EVERY_SUBJECT,
            (t("fail", message=FAILED, pod="ml/a-1"),),
            {fb.fingerprint: SCALE_UP, fc_gpu.fingerprint: SCALE_UP},
        ),
        Pass(
            [fa, fc_gpu], at(3), EVERY_SUBJECT, (t("ok", message=SCHEDULED, pod="ml/b-1"),), up
        ),  # b quietly
        Pass([fa, fc_taint], at(4), EVERY_SUBJECT, (), up),  # c: waiting gpu → taint (opened)
        Pass([fa, fc_gpu], at(5), EVERY_SUBJECT, (), up),  # c: paged taint → waiting gpu (resolved)
        Pass([fa, fc_gpu], at(6), EVERY_SUBJECT, (), {}),  # c escalates; a was paged already
        Pass([], at(7), EVERY_SUBJECT, (t("ok2", message=SCHEDULED),), up),
        Pass([fb], at(8), (b,), (t("b2", pod="ml/b-1"),), up),  # b recurs waiting
        Pass([fb], at(9), (b,), (t("b2", pod="ml/b-1"),), {}),  # and escalates on a replayed trigger
    ]


async def _dump(sessions: Sessions) -> list[object]:
    async with sessions() as s:
        incs = [
            (
                i.id,
                i.fingerprint,
                i.status,
                i.occurrences,
                i.first_seen,
                i.last_seen,
                i.resolved_at,
                i.previous_id,
                i.last_message,
                i.waiting_for,
                i.waiting_since,
            )
            for i in (await s.execute(select(Incident).order_by(Incident.id))).scalars()
        ]
        tl = [
            (r.incident_id, r.kind, r.at, r.message, r.detail)
            for r in (await s.execute(select(TimelineEntry).order_by(TimelineEntry.id))).scalars()
        ]
        ob = [
            (r.incident_id, r.sink, r.event, r.payload)
            for r in (await s.execute(select(Notification).order_by(Notification.id))).scalars()
        ]
    return [incs, tl, ob]


async def _fresh(db_url: str) -> AsyncEngine:
    eng = create_engine(db_url)
    async with eng.begin() as conn:
        await conn.run_sync(Base.metadata.drop_all)
        await conn.run_sync(Base.metadata.create_all)
    return eng


@pytest.mark.parametrize("batch", [1, 3, 11])
async def test_batches_and_replays_equal_passes_one_by_one(
    sessions: Sessions, db_url: str, batch: int
) -> None:
    script = _script()
    for p in script:
        await track(
            sessions,
            cluster="c",
            findings=p.findings,
            now=p.now,
            evaluated=p.evaluated,
            triggers=p.triggers,
            waiting=p.waiting,
            sinks=["slack"],
        )
    expected = await _dump(sessions)
    incs, _, ob = expected
    by_name = {row[0]: row for row in incs}
    assert [(row[2], row[9]) for row in incs] == [
        ("resolved", None),  # a: escalated at 2, then resolved
        ("resolved", SCALE_UP),  # b: resolved while waiting
        ("resolved", SCALE_UP),  # c gpu: resolved (replaced) while waiting
        ("resolved", None),  # c taint: paged
        ("resolved", None),  # c gpu again: escalated at 6
        ("open", None),  # b again: escalated at 9
    ]
    assert [(i, e) for i, _, e, _ in ob] == [
        (1, "escalated"),  # a escalates
        (4, "opened"),  # c: the taint replaces a waiting incident: an open, not a change
        (4, "resolved"),  # c: the paged taint replaced by a waiting cause
        (5, "escalated"),  # c escalates
        (1, "resolved"),
        (5, "resolved"),
        (6, "escalated"),  # b's recurrence escalates
    ]
    assert by_name[6][3] == 1  # the replayed trigger counted once

    # The same script in batches, on a second, empty schema; and once more on top (all replays).
    other = await _fresh(db_url)
    batched = create_sessionmaker(other)
    try:
        for i in range(0, len(script), batch):
            await track_passes(batched, cluster="c", passes=script[i : i + batch], sinks=["slack"])
        assert await _dump(batched) == expected
    finally:
        await other.dispose()


async def test_the_same_waiting_pass_twice_leaves_the_same_state(sessions: Sessions) -> None:
    f = gpu()
    p = Pass(
        [f], at(0), EVERY_SUBJECT, (trigger("ca-1", message=TRIGGERED, pod=POD),), {f.fingerprint: SCALE_UP}
    )
    await track_passes(sessions, cluster="prod", passes=[p], sinks=["slack"])
    once = await _dump(sessions)
    await track_passes(sessions, cluster="prod", passes=[p], sinks=["slack"])
    assert await _dump(sessions) == once
