"""The incident lifecycle as a pure decision (analyzers.lifecycle): no database, plain values.

A small in-memory "store" threads decisions from pass to pass the way the tracker does (open
incidents in, created/changed incidents out), so the properties hold for what the tracker
persists: for any sequence of passes an incident opens once, nobody is told twice about the
same state, and every resolved incident says what fixed it.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.findings import Finding, ObjectRef, Remedy, RemedyKind, Severity
from analyzers.lifecycle import (
    EVERY_SUBJECT,
    Decision,
    IncidentState,
    IncidentStatus,
    Notice,
    NotificationEvent,
    NotifyPolicy,
    Pass,
    TimelineKind,
    Trigger,
    decide,
    ids_needed,
    subject_names,
)
from analyzers.resolution import Resolution

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SUBJECTS = (ObjectRef("Deployment", "ml", "trainer"), ObjectRef("Deployment", "web", "api"))
CAUSES = ("Insufficient nvidia.com/gpu", "untolerated taint", "")
PAGED = {NotificationEvent.OPENED, NotificationEvent.ESCALATED, NotificationEvent.ROOT_CAUSE_CHANGED}


def fixed(subject: ObjectRef, pods: object, evidence: object, remedies: object) -> Resolution:
    return Resolution(summary=f"{subject} schedules again", causes=(), effects=("pod placed",))


def remedy(title: str) -> Remedy:
    return Remedy(title, RemedyKind.COMMAND, None, "", f"kubectl {title}", True, "re-simulated")


def finding(subject: int, cause: int, severity: Severity, pods: int, remedy_title: str) -> Finding:
    ref = SUBJECTS[subject]
    return Finding(
        rule_id="pending-pods",
        severity=severity,
        subject=ref,
        title=f"{ref.name}: {CAUSES[cause] or 'unschedulable'}",
        explanation="plain words",
        evidence={"cause": CAUSES[cause]},
        remedies=(remedy(remedy_title),),
        cause=CAUSES[cause],
        pods=tuple(f"{ref.namespace}/{ref.name}-{i}" for i in range(pods)),
    )


@dataclass
class Store:
    """What the tracker keeps between batches, in memory."""

    incidents: dict[int, IncidentState] = field(default_factory=dict)
    applied: set[str] = field(default_factory=set)
    notices: list[Notice] = field(default_factory=list)
    timeline: list[tuple[int, TimelineKind, dict[str, object]]] = field(default_factory=list)
    fast_path: bool = True  # decide's fast path for a finding identical to its incident's

    def apply(self, passes: list[Pass], policy: NotifyPolicy, notify: bool = True) -> Decision:
        names = subject_names(passes)
        open_incidents = [
            i
            for i in self.incidents.values()
            if i.status == IncidentStatus.OPEN and (names is None or i.subject_name in names)
        ]
        keys = {t.key for p in passes for t in p.triggers}
        latest: dict[str, int] = {}
        for i in sorted(self.incidents.values(), key=lambda i: i.id):
            if i.status == IncidentStatus.RESOLVED:
                latest[i.fingerprint] = i.id
        first = min(p.now for p in passes)
        recent = sorted(
            i.first_seen
            for i in self.incidents.values()
            if i.first_seen > first - policy.storm_window and i.waiting_for is None
        )
        start = max(self.incidents, default=0) + 1
        before = copy.deepcopy(open_incidents)
        decision = decide(
            cluster="c",
            open_incidents=open_incidents,
            passes=passes,
            latest_resolved=latest,
            fresh_keys=keys - self.applied,
            ids=range(start, start + ids_needed(passes, open_incidents)),
            policy=policy,
            notify=notify,
            recent_opens=recent,
            fast_path=self.fast_path,
        )
        assert open_incidents == before, "decide changed the incidents it was given"
        self.applied |= keys
        self.incidents.update(decision.changed)
        self.incidents.update(decision.created)
        self.notices += decision.notices
        self.timeline += [(e.incident_id, e.kind, dict(e.detail)) for e in decision.timeline]
        return decision


severities = st.sampled_from([Severity.WARNING, Severity.CRITICAL])
findings_st = st.lists(
    st.builds(
        finding,
        st.integers(0, len(SUBJECTS) - 1),
        st.integers(0, len(CAUSES) - 1),
        severities,
        st.integers(0, 6),
        st.sampled_from(["a", "b"]),
    ),
    max_size=4,
)


@st.composite
def passes_st(draw: st.DrawFn) -> list[Pass]:
    passes = []
    for n in range(draw(st.integers(1, 12))):
        found = draw(findings_st)
        evaluated = draw(st.one_of(st.just(EVERY_SUBJECT), st.sets(st.sampled_from(SUBJECTS)).map(tuple)))
        waiting = {f.fingerprint: "scale-up" for f in found if draw(st.booleans()) and draw(st.booleans())}
        triggers = tuple(
            Trigger(f"ev-{draw(st.integers(0, 3))}:{draw(st.integers(1, 3))}", "0/3 nodes are available")
            for _ in range(draw(st.integers(0, 2)))
        )
        passes.append(
            Pass(
                findings=found,
                now=T0 + timedelta(minutes=n),
                evaluated=evaluated,
                triggers=triggers,
                waiting=waiting,
                explain_resolution=fixed,
            )
        )
    return passes


POLICY = NotifyPolicy(storm_threshold=3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(passes_st())
def test_any_sequence_opens_once_tells_once_and_resolves_with_what_fixed_it(passes: list[Pass]) -> None:
    store = Store()
    opened: list[int] = []
    for p in passes:
        decision = store.apply([p], POLICY)
        [result] = decision.results
        opened += result.opened
        # At most one open incident per fingerprint, at every step.
        open_fps = [i.fingerprint for i in store.incidents.values() if i.status == IncidentStatus.OPEN]
        assert len(open_fps) == len(set(open_fps))
        # Every finding of the pass has its open incident afterwards.
        assert {f.fingerprint for f in p.findings} <= set(open_fps)
    # An incident opens once.
    assert len(opened) == len(set(opened)) == len(store.incidents)
    assert [k for _, k, _ in store.timeline].count(TimelineKind.OPENED) == len(store.incidents)

    by_incident: dict[int, list[Notice]] = {}
    for n in store.notices:
        if n.event != NotificationEvent.DIGEST:
            by_incident.setdefault(n.incident.id, []).append(n)
        for i in n.digest:
            by_incident.setdefault(i.id, []).append(n)
    for inc_id, notices in by_incident.items():
        events = [n.event for n in notices]
        # Paged once at most (open, root-cause change or escalation, or in a digest), resolved once.
        paged = [e for e in events if e in PAGED or e == NotificationEvent.DIGEST]
        assert len(paged) <= 1, (inc_id, events)
        assert events.count(NotificationEvent.RESOLVED) <= 1
        # Nobody hears about an incident that was never paged.
        assert (paged and events.index(paged[0]) == 0) or (not paged and not events), (inc_id, events)
        # Never twice in a row about the same state.
        states = [
            (
                n.event,
                n.incident.status,
                n.incident.severity,
                n.incident.remedies[0]["title"],
                n.incident.peak_pods,
            )
            for n in notices
        ]
        assert all(a != b for a, b in itertools.pairwise(states)), states

    for inc in store.incidents.values():
        if inc.status != IncidentStatus.RESOLVED:
            assert inc.resolution is None and inc.resolved_at is None
            continue
        # Resolved with what fixed it: the root-cause change that replaced it, or what the
        # pipeline's explain_resolution saw.
        assert inc.resolution is not None and inc.resolved_at is not None
        [detail] = [d for i, k, d in store.timeline if i == inc.id and k == TimelineKind.RESOLVED]
        if detail.get("reason") == "root_cause_changed":
            successors = [store.incidents[s] for s in detail["replaced_by"]]  # type: ignore[attr-defined]
            assert all(s.ref == inc.ref and s.first_seen == inc.resolved_at for s in successors)
            assert inc.resolution["summary"].startswith("The root cause changed: ")
        else:
            assert inc.resolution == {"summary": f"{inc.ref} schedules again", "changes": ["pod placed"]}
        # A resolved incident that was waiting was never paged: nothing was sent about it.
        if inc.waiting_for is not None:
            assert inc.id not in by_incident


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(passes_st(), st.integers(1, 5))
def test_a_batch_decides_as_its_passes_one_by_one(passes: list[Pass], batch: int) -> None:
    one, many = Store(), Store()
    for p in passes:
        one.apply([p], POLICY)
    for i in range(0, len(passes), batch):
        many.apply(passes[i : i + batch], POLICY)
    assert many.incidents == one.incidents
    assert many.timeline == one.timeline
    assert [(n.event, n.incident, n.digest, n.replaces) for n in many.notices] == [
        (n.event, n.incident, n.digest, n.replaces) for n in one.notices
    ]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(passes_st())
def test_the_same_pass_again_tells_nobody_anything(passes: list[Pass]) -> None:
    store = Store()
    for p in passes:
        store.apply([p], POLICY)
    last = passes[-1]
    again = Pass(
        findings=last.findings,
        now=last.now + timedelta(seconds=30),
        evaluated=last.evaluated,
        triggers=last.triggers,  # replays: no occurrence
        waiting=last.waiting,
        explain_resolution=fixed,
    )
    before = copy.deepcopy(store.incidents)
    decision = store.apply([again], POLICY)
    assert decision.notices == [] and decision.created == {}
    [result] = decision.results
    assert result.opened == result.resolved == [] and result.new_triggers == 0
    for inc_id, inc in decision.changed.items():
        old = before[inc_id]
        assert (inc.occurrences, inc.severity, inc.title, inc.status) == (
            old.occurrences,
            old.severity,
            old.title,
            old.status,
        )


def test_open_update_resolve_as_values() -> None:
    store = Store()
    gpu = finding(0, 0, Severity.CRITICAL, 1, "a")
    d1 = store.apply(
        [Pass([gpu], T0, evaluated=[SUBJECTS[0]], triggers=[Trigger("e:1", "0/3 nodes", "ml/trainer-0")])],
        POLICY,
    )
    [inc] = d1.created.values()
    assert (inc.id, inc.status, inc.occurrences, inc.last_message) == (1, "open", 1, "0/3 nodes")
    assert [n.event for n in d1.notices] == [NotificationEvent.OPENED]

    # Same finding, the event fires again (count 2): one more occurrence, nobody told.
    d2 = store.apply(
        [
            Pass(
                [gpu],
                T0 + timedelta(minutes=1),
                evaluated=[SUBJECTS[0]],
                triggers=[Trigger("e:2", "0/3 nodes")],
            )
        ],
        POLICY,
    )
    assert d2.notices == [] and d2.changed[1].occurrences == 2 and d2.changed[1].last_seen > T0

    # The cause moves to a taint: the GPU incident resolves, replaced by the taint's, one notice.
    taint = finding(0, 1, Severity.CRITICAL, 1, "a")
    d3 = store.apply([Pass([taint], T0 + timedelta(minutes=2), evaluated=[SUBJECTS[0]])], POLICY)
    assert d3.changed[1].status == "resolved" and d3.changed[1].resolution is not None
    assert [(n.event, n.incident.id, [r.id for r in n.replaces]) for n in d3.notices] == [
        (NotificationEvent.ROOT_CAUSE_CHANGED, 2, [1])
    ]

    # Evaluated without findings: resolved with what fixed it (explain_resolution's view).
    d4 = store.apply(
        [Pass([], T0 + timedelta(minutes=3), evaluated=[SUBJECTS[0]], explain_resolution=fixed)], POLICY
    )
    assert d4.changed[2].resolution == {
        "summary": f"{SUBJECTS[0]} schedules again",
        "changes": ["pod placed"],
    }
    assert [(n.event, n.incident.id) for n in d4.notices] == [(NotificationEvent.RESOLVED, 2)]


def test_waiting_escalates_once_and_resolving_while_waiting_pages_nobody() -> None:
    store = Store()
    gpu = finding(0, 0, Severity.CRITICAL, 1, "a")
    d1 = store.apply([Pass([gpu], T0, waiting={gpu.fingerprint: "scale-up"})], POLICY)
    assert d1.notices == [] and d1.results[0].waiting == [1]
    d2 = store.apply([Pass([gpu], T0 + timedelta(minutes=1))], POLICY)
    assert [n.event for n in d2.notices] == [NotificationEvent.ESCALATED]
    assert d2.changed[1].waiting_for is None and d2.changed[1].notified_at == T0 + timedelta(minutes=1)
    # Paged now: it never goes back to waiting.
    d3 = store.apply([Pass([gpu], T0 + timedelta(minutes=2), waiting={gpu.fingerprint: "scale-up"})], POLICY)
    assert d3.notices == [] and d3.changed[1].waiting_for is None

    other = finding(1, 0, Severity.WARNING, 1, "a")
    store.apply([Pass([other], T0 + timedelta(minutes=3), waiting={other.fingerprint: "scale-up"})], POLICY)
    d5 = store.apply([Pass([], T0 + timedelta(minutes=4), evaluated=[SUBJECTS[1]])], POLICY)
    assert d5.changed[2].status == "resolved" and d5.notices == []


def test_too_few_ids_is_refused_and_a_naive_clock_too() -> None:
    gpu = finding(0, 0, Severity.CRITICAL, 1, "a")
    with pytest.raises(ValueError, match="fewer ids"):
        decide(cluster="c", open_incidents=(), passes=[Pass([gpu], T0)], ids=())
    with pytest.raises(ValueError, match="timezone-aware"):
        decide(cluster="c", open_incidents=(), passes=[Pass([gpu], T0.replace(tzinfo=None))], ids=(1,))
