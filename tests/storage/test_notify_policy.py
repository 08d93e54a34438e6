"""What is said, and when: the tracker's outbox rows per event kind, thresholds, storms,
reminders, silences and resolutions (SQLite and PostgreSQL)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from analyzers.findings import Finding, Remedy, RemedyKind, Severity
from analyzers.resolution import Resolution
from storage.models import Incident, Notification
from storage.silences import (
    InvalidSilence,
    SilenceSpec,
    create_silence,
    delete_silence,
    list_silences,
    silence_counts,
)
from storage.tracker import EVERY_SUBJECT, POD_THRESHOLDS, NotifyPolicy, remind, track, track_reminders
from tests.storage.factories import at, deployment, finding, trigger

Sessions = async_sessionmaker[AsyncSession]


async def rows(sessions: Sessions) -> list[Notification]:
    async with sessions() as s:
        return list((await s.execute(select(Notification).order_by(Notification.id))).scalars())


async def events(sessions: Sessions) -> list[tuple[int, str, str]]:
    return [(n.incident_id, n.event, n.status) for n in await rows(sessions)]


async def one(sessions: Sessions) -> Incident:
    async with sessions() as s:
        [inc] = (await s.execute(select(Incident))).scalars()
        return inc


def pods(n: int) -> tuple[str, ...]:
    return tuple(f"ml/trainer-{i}" for i in range(n))


def remedy(title: str) -> Remedy:
    return Remedy(title, RemedyKind.COMMAND, None, "", f"kubectl do {title}", True, "re-simulated")


async def step(sessions: Sessions, f: Finding | list[Finding], minute: float, **kw: Any) -> Any:
    findings = f if isinstance(f, list) else [f]
    return await track(
        sessions,
        cluster="prod",
        findings=findings,
        now=at(minute),
        evaluated=EVERY_SUBJECT,
        sinks=["s"],
        **kw,
    )


async def test_occurrences_and_last_seen_never_write_rows(sessions: Sessions) -> None:
    f = finding(pods=pods(1))
    await step(sessions, f, 0, triggers=[trigger("e", 1)])
    for i in range(2, 40):
        await step(sessions, f, i, triggers=[trigger("e", i)])
    inc = await one(sessions)
    assert inc.occurrences == 39
    assert await events(sessions) == [(inc.id, "opened", "pending")]


async def test_updated_on_severity_and_on_a_new_first_remedy_only(sessions: Sessions) -> None:
    a, b, c = remedy("a"), remedy("b"), remedy("c")
    await step(sessions, finding(remedies=(a, b)), 0)
    # The first remedy gone (applied, or no longer applies): "b" moved up, nothing new to act on.
    await step(sessions, finding(remedies=(b,), explanation="now fits"), 1)
    inc = await one(sessions)
    assert [r["title"] for r in inc.remedies] == ["a", "b"]  # the diagnosis people were told is kept
    assert inc.explanation.startswith("25% of 1 replica")
    assert [e for _, e, _ in await events(sessions)] == ["opened"]
    # A remedy never offered before, first: updated, and the diagnosis replaced.
    await step(sessions, finding(remedies=(c, a)), 2)
    inc = await one(sessions)
    assert [r["title"] for r in inc.remedies] == ["c", "a"]
    # Severity moved: updated.
    await step(sessions, finding(remedies=(c, a), severity=Severity.WARNING), 3)
    ob = await rows(sessions)
    assert [n.event for n in ob] == ["opened", "updated", "updated"]
    assert ob[1].payload["changed"] == ["new first remedy: c"] and ob[1].payload["previous"] == {"remedy": "a"}
    assert ob[2].payload["changed"] == ["severity critical → warning"]
    assert ob[2].payload["previous"] == {"severity": "critical"}
    assert ob[2].payload["incident"]["severity"] == "warning"
    assert set(ob[2].payload) == {"event", "cluster", "incident", "changed", "previous"}


async def test_updated_only_when_the_pod_count_first_crosses_a_threshold(sessions: Sessions) -> None:
    assert POD_THRESHOLDS[:3] == (2, 5, 10)
    counts = [1, 1, 2, 3, 4, 4, 5, 4, 5, 6, 9, 10, 3, 10, 11]
    for minute, n in enumerate(counts):
        await step(sessions, finding(pods=pods(n)), minute)
    ob = await rows(sessions)
    assert [(n.event, n.payload.get("changed")) for n in ob] == [
        ("opened", None),
        ("updated", ["affected pods 1 → 2"]),
        ("updated", ["affected pods 4 → 5"]),  # 4 → 5 again later is no new crossing
        ("updated", ["affected pods 9 → 10"]),  # 3 → 10 later is not either
    ]
    assert (await one(sessions)).peak_pods == 11


async def test_escalation_writes_escalated_with_how_long_it_waited(sessions: Sessions) -> None:
    f = finding()
    await step(sessions, f, 0, waiting={f.fingerprint: "scale-up"})
    assert await events(sessions) == []
    await step(sessions, f, 12)
    [n] = await rows(sessions)
    assert n.event == "escalated" and n.payload["waited"] == {
        "for": "scale-up",
        "since": "2024-05-01T12:00:00Z",
    }


async def test_root_cause_change_and_resolve_rows(sessions: Sessions) -> None:
    gpu = finding(cause="gpu")
    taint = finding(rule_id="untolerated-taint", title="Pods do not tolerate gpu=true")
    await step(sessions, gpu, 0)
    await step(sessions, taint, 1)
    await step(sessions, [], 2)
    ob = await rows(sessions)
    assert [(n.incident_id, n.event) for n in ob] == [
        (1, "opened"),
        (2, "root_cause_changed"),
        (2, "resolved"),
    ]
    replaced = ob[1].payload["replaces"][0]
    assert replaced["resolution"] == {
        "summary": "The root cause changed: Pods do not tolerate gpu=true",
        "changes": ["replaced by incident 2 (untolerated-taint)"],
    }


async def test_storm_digest_at_n_plus_one_in_the_window_not_at_n(sessions: Sessions) -> None:
    policy = NotifyPolicy(storm_threshold=3, storm_window=timedelta(minutes=5))
    f = [finding(deployment(f"app-{i}"), pods=(f"ml/app-{i}-x",)) for i in range(8)]
    # Three new incidents in the window: each its own opened row.
    await step(sessions, f[:3], 0, policy=policy)
    assert [e for _, e, _ in await events(sessions)] == ["opened"] * 3
    # The fourth (N+1) and fifth within 5 minutes: one digest listing both.
    r = await step(sessions, f[:5], 1, policy=policy)
    ob = await rows(sessions)
    assert [n.event for n in ob] == ["opened"] * 3 + ["digest"]
    digest = ob[-1]
    assert digest.incident_id == 4 and r.digested == [4, 5]
    assert set(digest.payload) == {"event", "cluster", "incidents"}
    assert digest.payload["cluster"] == "prod"
    assert [i["subject"]["name"] for i in digest.payload["incidents"]] == ["app-3", "app-4"]
    # Out of the window (the first three opened 6 minutes ago): one by one again.
    await step(sessions, f[:6], 6.5, policy=policy)
    assert [n.event for n in await rows(sessions)][-1] == "opened"


async def test_storm_counts_a_single_pass_above_n(sessions: Sessions) -> None:
    policy = NotifyPolicy(storm_threshold=3)
    f = [finding(deployment(f"app-{i}")) for i in range(4)]
    await step(sessions, f, 0, policy=policy)
    assert [e for _, e, _ in await events(sessions)] == ["digest"]
    await track(
        sessions,
        cluster="other",
        findings=f[:3],
        now=at(0),
        evaluated=EVERY_SUBJECT,
        sinks=["s"],
        policy=policy,
    )
    assert [e for _, e, _ in await events(sessions)] == [
        "digest",
        "opened",
        "opened",
        "opened",
    ]  # per cluster


async def test_reminders_after_the_interval_and_not_before(sessions: Sessions) -> None:
    policy = NotifyPolicy(reminder_interval=timedelta(hours=24))
    f, waiting = finding(), finding(deployment("w"))
    await step(sessions, [f, waiting], 0, waiting={waiting.fingerprint: "scale-up"})
    assert (
        await track_reminders(sessions, cluster="prod", now=at(24 * 60 - 1), sinks=["s"], policy=policy) == []
    )
    ids = await track_reminders(sessions, cluster="prod", now=at(24 * 60), sinks=["s"], policy=policy)
    assert ids == [1]  # never the waiting incident: nobody was paged about it
    # The clock restarts at the reminder; an update owed in between restarts it too.
    assert await track_reminders(sessions, cluster="prod", now=at(47 * 60), sinks=["s"], policy=policy) == []
    await step(
        sessions,
        [replace(f, severity=Severity.WARNING), waiting],
        47 * 60,
        waiting={waiting.fingerprint: "scale-up"},
    )
    assert await track_reminders(sessions, cluster="prod", now=at(48 * 60), sinks=["s"], policy=policy) == []
    assert await track_reminders(sessions, cluster="prod", now=at(71 * 60), sinks=["s"], policy=policy) == [1]
    ob = await rows(sessions)
    assert [n.event for n in ob] == ["opened", "reminder", "updated", "reminder"]
    assert ob[1].payload["last_notified"] == "2024-05-01T12:00:00Z"
    # A resolved incident is never reminded about.
    await step(sessions, [], 72 * 60)
    async with sessions.begin() as s:
        assert await remind(s, cluster="prod", now=at(200 * 60), sinks=["s"], policy=policy) == []


async def test_silences_store_rows_silenced_and_expired_silences_stop_applying(sessions: Sessions) -> None:
    async with sessions.begin() as s:
        silence, n = await create_silence(
            s,
            SilenceSpec(reason="GPU pool migration", expires_at=at(60), namespace="ml", subject="trainer-*"),
            now=at(0),
        )
    assert n == 0
    hit = finding(deployment("trainer-a"))
    other_ns = finding(deployment("trainer-b", namespace="web"))
    miss = finding(deployment("serving"))
    await step(sessions, [hit, other_ns, miss], 1)
    ob = {n.payload["incident"]["subject"]["name"]: n for n in await rows(sessions)}
    assert ob["trainer-a"].status == "silenced"
    assert ob["trainer-a"].last_error is not None and "GPU pool migration" in ob["trainer-a"].last_error
    assert ob["trainer-a"].last_error.startswith(
        f"silenced by silence {silence.id} until 2024-05-01T13:00:00Z"
    )
    assert ob["trainer-b"].status == "pending" and ob["serving"].status == "pending"
    # Expired at 60: the resolve at 61 is sent.
    await step(sessions, [other_ns, miss], 61)
    assert [(e, st) for i, e, st in await events(sessions) if i == 1] == [
        ("opened", "silenced"),
        ("resolved", "pending"),
    ]
    async with sessions() as s:
        assert await list_silences(s, now=at(61)) == []
        assert [x.id for x in await list_silences(s, now=at(61), include_expired=True)] == [silence.id]
        assert await silence_counts(s, now=at(61)) == (0, 1)


async def test_a_new_silence_silences_matching_pending_rows(sessions: Sessions) -> None:
    await step(sessions, [finding(deployment("a")), finding(deployment("b"), rule_id="r2")], 0)
    async with sessions.begin() as s:
        silence, n = await create_silence(
            s, SilenceSpec(reason="known", expires_at=at(30), rule_id="r2", cluster="prod"), now=at(1)
        )
        assert await silence_counts(s, now=at(1)) == (1, 1)
    assert n == 1
    assert [(i, st) for i, _, st in await events(sessions)] == [(1, "pending"), (2, "silenced")]
    async with sessions.begin() as s:
        assert await delete_silence(s, silence.id) is True
        assert await delete_silence(s, silence.id) is False


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (SilenceSpec(reason="x", expires_at=at(10)), "matchers"),
        (SilenceSpec(reason=" ", expires_at=at(10), namespace="ml"), "reason"),
        (SilenceSpec(reason="x", expires_at=at(0), namespace="ml"), "expires_at"),
        (SilenceSpec(reason="x", expires_at=at(10).replace(tzinfo=None), namespace="ml"), "expires_at"),
        (SilenceSpec(reason="x" * 1001, expires_at=at(10), namespace="ml"), "reason"),
        (SilenceSpec(reason="x", expires_at=at(10), rule_id="r" * 101), "rule_id"),
    ],
)
async def test_invalid_silences_name_the_field(sessions: Sessions, spec: SilenceSpec, field: str) -> None:
    async with sessions.begin() as s:
        with pytest.raises(InvalidSilence) as err:
            await create_silence(s, spec, now=at(0))
    assert err.value.field == field


@pytest.mark.parametrize("healing", [True, False])
async def test_a_healing_cluster_never_overwrites_the_diagnosis_and_the_resolve_says_what_changed(
    sessions: Sessions, healing: bool
) -> None:
    seen: list[tuple[Any, ...]] = []

    def explain(subject: Any, pod_names: Any, evidence: Any, remedies: Any) -> Resolution:
        seen.append((subject, tuple(pod_names), dict(evidence), [r["title"] for r in remedies]))
        causes = ("node n was uncordoned",) if healing else ()
        return Resolution(
            "Pod x was scheduled on node n after node n was uncordoned.", causes, ("pod x ran",)
        )

    a, b, c = remedy("Uncordon node n"), remedy("Or add a node like m"), remedy("Or add a node like o")
    await step(
        sessions,
        finding(remedies=(a, b), pods=("ml/x",), evidence={"fits": False}),
        0,
        explain_resolution=explain,
    )
    # The re-analysis after the uncordon: the applied remedy is gone, another is first, "now fits".
    now_fits = finding(remedies=(c,), pods=("ml/x",), explanation="now fits", evidence={"fits": True})
    await step(sessions, now_fits, 1, explain_resolution=explain)
    inc = await one(sessions)
    if healing:
        # Something the incident recorded changed the way its remedy said: the diagnosis stays.
        assert inc.explanation.startswith("25% of 1 replica") and inc.evidence == {"fits": False}
        assert [r["title"] for r in inc.remedies] == ["Uncordon node n", "Or add a node like m"]
        assert [e for _, e, _ in await events(sessions)] == ["opened"]
    else:
        # A genuinely new first remedy with nothing recorded changed: a new diagnosis, announced.
        assert inc.explanation == "now fits" and [r["title"] for r in inc.remedies] == [
            "Or add a node like o"
        ]
        assert [e for _, e, _ in await events(sessions)] == ["opened", "updated"]
    await step(sessions, [], 2, explain_resolution=explain)
    resolved = (await rows(sessions))[-1]
    assert resolved.event == "resolved"
    assert seen[-1][:3] == (deployment(), ("ml/x",), {"fits": False} if healing else {"fits": True})
    assert resolved.payload["incident"]["resolution"] == {
        "summary": "Pod x was scheduled on node n after node n was uncordoned.",
        "changes": [*(["node n was uncordoned"] if healing else []), "pod x ran"],
    }
    assert resolved.payload["incident"]["explanation"] == inc.explanation
