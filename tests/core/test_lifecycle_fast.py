"""decide's fast path: a finding identical to the one its open incident's diagnosis came from
is decided without normalising it again, and exactly as the long way decides it."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analyzers.lifecycle as lifecycle
from analyzers.findings import Severity
from analyzers.lifecycle import Decision, IncidentState, Pass, TimelineKind, Trigger
from tests.core.test_lifecycle import POLICY, SUBJECTS, T0, Store, finding, fixed, passes_st

MESSAGES = ("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", "0/4 nodes are available", "")


@st.composite
def repeating_passes(draw: st.DrawFn) -> list[Pass]:
    """Passes that mostly repeat earlier findings, with triggers whose messages change (or not),
    about a pod of the finding or another one."""
    found = draw(st.lists(passes_st(), min_size=1, max_size=2))
    pool = [f for passes in found for p in passes for f in p.findings] or [
        finding(0, 0, Severity.WARNING, 1, "a")
    ]
    out: list[Pass] = [p for passes in found for p in passes]
    for n in range(draw(st.integers(1, 12))):
        picked = [
            # Reworded or with other evidence now and then: nothing to act on, so a told
            # incident keeps its diagnosis (and is no longer the finding's).
            dataclasses.replace(f, explanation="reworded")
            if draw(st.integers(0, 4)) == 0
            else dataclasses.replace(f, evidence={**f.evidence, "seen": 2})
            if draw(st.integers(0, 4)) == 0
            else f
            for f in draw(st.lists(st.sampled_from(pool), max_size=3))
        ]
        triggers = tuple(
            Trigger(
                f"r-{draw(st.integers(0, 5))}:{draw(st.integers(1, 3))}",
                draw(st.sampled_from(MESSAGES)),
                draw(st.sampled_from(["", "ml/trainer-0", "web/api-1", "web/other"])),
            )
            for _ in range(draw(st.integers(0, 3)))
        )
        out.append(
            Pass(
                findings=picked,
                now=T0 + timedelta(hours=1, minutes=n * draw(st.sampled_from([0, 1]))),
                evaluated=tuple({f.subject for f in picked}) if draw(st.booleans()) else (),
                triggers=triggers,
                waiting={f.fingerprint: "scale-up" for f in picked if draw(st.booleans())},
                explain_resolution=fixed,
            )
        )
    return out


def _as_read(store: Store) -> None:
    """What reading the incidents from the database gives: no source known."""
    store.incidents = {i: dataclasses.replace(inc, source=None) for i, inc in store.incidents.items()}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(repeating_passes(), st.integers(1, 4), st.booleans(), st.lists(st.booleans(), max_size=20))
def test_the_fast_path_decides_exactly_as_the_long_way(
    passes: list[Pass], batch: int, notify: bool, reads: list[bool]
) -> None:
    fast, slow = Store(), Store(fast_path=False)
    for n, i in enumerate(range(0, len(passes), batch)):
        if n < len(reads) and reads[n]:
            _as_read(fast)  # the tracker read them again (another writer, a restart)
        chunk = passes[i : i + batch]
        got, want = fast.apply(chunk, POLICY, notify), slow.apply(chunk, POLICY, notify)
        assert got == want
        # The timeline's messages and times too (Store keeps only kinds and details).
        assert got.timeline == want.timeline
    assert fast.incidents == slow.incidents


def test_a_repeat_normalises_nothing_and_moves_only_count_time_and_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = Store()
    gpu = finding(0, 0, Severity.CRITICAL, 2, "a")
    store.apply([Pass([gpu], T0, evaluated=[SUBJECTS[0]], triggers=[Trigger("e:1", "0/3 nodes")])], POLICY)
    normalised: list[object] = []
    real = lifecycle.jsonable

    def counting(value: object) -> object:
        normalised.append(value)
        return real(value)

    monkeypatch.setattr(lifecycle, "jsonable", counting)
    before = store.incidents[1]
    again = dataclasses.replace(gpu)  # an equal finding, not the same object
    d = store.apply(
        [
            Pass(
                [again],
                T0 + timedelta(minutes=1),
                evaluated=[SUBJECTS[0]],
                triggers=[Trigger("e:2", "0/4 nodes", "ml/trainer-1")],
            )
        ],
        POLICY,
    )
    assert normalised == []
    after = d.changed[1]
    moved = {
        f.name for f in dataclasses.fields(IncidentState) if getattr(after, f.name) != getattr(before, f.name)
    }
    assert moved == {"occurrences", "last_seen", "last_message"}
    assert (after.occurrences, after.last_message) == (2, "0/4 nodes")
    assert [(e.kind, dict(e.detail)) for e in d.timeline] == [
        (TimelineKind.UPDATED, {"changed": ["message"], "kept": []})
    ]
    # A different finding takes the long way again.
    store.apply([Pass([finding(0, 0, Severity.WARNING, 2, "a")], T0 + timedelta(minutes=2))], POLICY)
    assert normalised


def test_without_a_known_source_the_long_way_runs_and_learns_it() -> None:
    gpu = finding(0, 0, Severity.CRITICAL, 1, "a")
    opened: Decision = lifecycle.decide(cluster="c", open_incidents=(), passes=[Pass([gpu], T0)], ids=[7])
    assert opened.created[7].source is gpu
    read = dataclasses.replace(opened.created[7], source=None)
    d = lifecycle.decide(cluster="c", open_incidents=[read], passes=[Pass([gpu], T0 + timedelta(minutes=1))])
    assert d.changed[7].source is gpu and read.source is None
    # A diagnosis kept (told, and the change is nothing to act on) is no longer the finding's.
    reworded = dataclasses.replace(gpu, explanation="other words")
    d2 = lifecycle.decide(
        cluster="c", open_incidents=[d.changed[7]], passes=[Pass([reworded], T0 + timedelta(minutes=2))]
    )
    assert d2.changed[7].explanation == gpu.explanation and d2.changed[7].source is None
