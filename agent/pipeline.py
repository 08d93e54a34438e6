"""The analysis pipeline: cluster changes in, incidents out.

Plain async functions and one small class with its dependencies passed in, so
the in-process agent, the faust-streaming worker and the tests all drive it the
same way.

* **Triggers.** FailedScheduling events, autoscaler and eviction events, and
  any change of the cached state mark the cluster dirty. Events are triggers,
  not truth: the event recorder deduplicates FailedScheduling and may keep a
  message for up to 30 minutes, so the analysis reads each pod's
  ``PodScheduled=False`` condition (see ``analyzers.report``).
* **Debounce.** A burst of changes becomes one pass: a pass starts
  ``debounce`` seconds after the first change, and at least every
  ``resync`` seconds while anything is waiting for a grace period.
* **Grace.** A finding whose pods have all been pending for less than
  ``grace`` seconds is held back (kube-scheduler often places a pod on the
  next attempt); findings about incidents already open are never held back.
* **Autoscaler awareness.** When cluster-autoscaler (``TriggeredScaleUp``) or
  Karpenter (``Nominated``) is already adding capacity for a finding's pods,
  its incident is stored *waiting for scale-up* instead of paging, and
  escalates (pages) when the scale-up fails (``FailedScaleUp``,
  ``NotTriggerScaleUp``, Karpenter launch failures) or takes longer than
  ``scale_up_timeout`` (see ``storage.tracker``).
* **Scope.** A pass analyses only the workloads the change since the last
  pass touched (``analyzers.scope``: new pending pods, their events, workload
  objects; for a node's taints, conditions or images, the pending workloads
  whose verdict it moves), plus those with held or waiting findings, when the
  change is that narrow; nodes added, removed or resized, bound pods, budgets,
  storage or metrics changing, and at least every ``full_resync`` seconds, the
  whole cluster. New problems go first:
  touched workloads without an open incident are analysed in the next pass,
  while those whose incident is already open (what changes for them is a count
  or a wording) queue up and are analysed ``update_batch`` at a time, oldest
  first, alongside. A storm of FailedScheduling events for 200 broken
  Deployments then does not delay the incident of the 201st. Event triggers go
  with the pass that analyses their pod's workload, so no occurrence is lost.
* **Tracking.** Every pass goes through ``storage.tracker.track``, which opens,
  updates and resolves incidents idempotently; a scoped pass resolves only
  incidents of the workloads it evaluated. An incident it resolves gets a
  resolution from the pass's snapshot (``analyzers.resolution``: what changed
  since its evidence was recorded). Every ``reminder_check`` seconds the loop
  asks the tracker for the reminders owed (``storage.tracker.remind``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.cache import ClusterCache
from analyzers.findings import Finding, ObjectRef
from analyzers.ingest import trigger_from_event
from analyzers.lifecycle import EVERY_SUBJECT, NotifyPolicy, TrackResult, Trigger
from analyzers.records import Pod
from analyzers.remedies import RemedyRenderer
from analyzers.report import Report, build_report
from analyzers.resolution import what_changed
from analyzers.scope import Change, affected_workloads, carry_over, changes_between
from analyzers.snapshot import ClusterSnapshot
from storage.models import Incident, IncidentStatus
from storage.tracker import HeldIncidents, track, track_reminders

log = logging.getLogger(__name__)

SCALE_UP_STARTED = frozenset({"TriggeredScaleUp", "Nominated"})
SCALE_UP_FAILED = frozenset(
    {"FailedScaleUp", "NotTriggerScaleUp", "FailedLaunching", "InsufficientCapacityError", "LaunchFailed"}
)
TRIGGER_REASONS = frozenset(
    {
        "FailedScheduling",
        "EvictionBlocked",
        "FailedEviction",
        "Scheduled",
        *SCALE_UP_STARTED,
        *SCALE_UP_FAILED,
    }
)


@dataclass(frozen=True)
class PipelineConfig:
    cluster: str = "default"
    grace: float = 60.0
    debounce: float = 0.5
    resync: float = 15.0
    full_resync: float = 60.0
    update_batch: int = 16
    scale_up_timeout: float = 600.0
    sinks: tuple[str, ...] = ()
    kube_version: str | None = None
    # The cluster's KubeSchedulerConfiguration profiles (--scheduler-config); None: the default.
    scheduler_profiles: Mapping[str, Any] | None = None
    notify_policy: NotifyPolicy = field(default_factory=NotifyPolicy)
    reminder_check: float = 60.0  # seconds between looks for reminders owed


@dataclass
class PassOutcome:
    now: float
    report: Report
    tracked: tuple[Finding, ...]
    held: tuple[tuple[Finding, str], ...]  # (finding, why it waits)
    result: TrackResult
    seconds: float
    scope: frozenset[ObjectRef] | None = None  # the workloads analysed; None: the whole cluster


@dataclass
class PipelineStats:
    passes: int = 0
    scoped_passes: int = 0  # of the passes, those that analysed only the workloads a change touched
    failed_passes: int = 0
    triggers: int = 0
    last_pass_seconds: float = 0.0
    held: int = 0  # findings held back by the grace period in the last pass
    waiting: int = 0  # open incidents waiting for scale-up after the last pass
    escalated: int = 0  # waiting incidents that escalated (the scale-up failed or timed out), in total


def pending_since(pod: Pod) -> float | None:
    """When the pod started waiting: its PodScheduled=False transition, else its creation."""
    cond = pod.scheduled
    if cond is not None and cond.status == "False" and cond.last_transition is not None:
        return cond.last_transition
    return pod.created


def scale_up_state(snapshot: ClusterSnapshot, pods: Sequence[Pod], now: float, timeout: float) -> str | None:
    """'waiting' while an autoscaler is adding capacity for these pods; 'failed'
    when it said it could not; None when no autoscaler spoke."""
    started: float | None = None
    failed = False
    for pod in pods:
        for ev in snapshot.events_for("Pod", pod.namespace, pod.name):
            if ev.reason in SCALE_UP_STARTED:
                started = max(started or 0.0, ev.last_seen or 0.0)
        for ev in snapshot.events_for("Pod", pod.namespace, pod.name):
            if ev.reason in SCALE_UP_FAILED and (started is None or (ev.last_seen or 0.0) >= started):
                failed = True
    if failed:
        return "failed"
    if started is None:
        return None
    return "waiting" if now - started < timeout else "failed"


WAITING_FOR_SCALE_UP = "scale-up"


def _pods_of(finding: Finding, snapshot: ClusterSnapshot) -> list[Pod]:
    return [
        snapshot.pods[(ns, name)]
        # Names hold no "/": only the first one splits.
        for ns, name in (p.split("/", 1) for p in finding.pods)  # pragma: no mutate
        if (ns, name) in snapshot.pods
    ]


def hold_reason(
    finding: Finding, snapshot: ClusterSnapshot, now: float, config: PipelineConfig
) -> str | None:
    """Why a new finding should not become an incident yet (None: track it): the grace period."""
    pods = _pods_of(finding, snapshot)
    if not pods:
        return None
    oldest = min((pending_since(p) or now) for p in pods)
    if now - oldest < config.grace:
        return f"pending for {now - oldest:.0f}s, grace period {config.grace:.0f}s"
    return None


def waiting_reason(
    finding: Finding, snapshot: ClusterSnapshot, now: float, config: PipelineConfig
) -> str | None:
    """What a tracked finding waits for instead of paging: ``"scale-up"`` while an
    autoscaler is adding capacity for its pods (None once it failed or timed out)."""
    pods = _pods_of(finding, snapshot)
    if pods and scale_up_state(snapshot, pods, now, config.scale_up_timeout) == "waiting":
        return WAITING_FOR_SCALE_UP
    return None


async def open_incidents(sessions: async_sessionmaker[AsyncSession], cluster: str) -> dict[str, ObjectRef]:
    """Fingerprint -> subject of the cluster's open incidents."""
    async with sessions() as session:
        rows = await session.execute(
            select(
                Incident.fingerprint, Incident.subject_kind, Incident.namespace, Incident.subject_name
            ).where(Incident.cluster == cluster, Incident.status == IncidentStatus.OPEN)
        )
        return {fp: ObjectRef(kind, ns, name) for fp, kind, ns, name in rows}


@dataclass(frozen=True)
class Scope:
    """What one pass analyses: ``workloads`` (None: the whole cluster), and the touched
    workloads with open incidents it leaves for later passes (``deferred``, oldest first)."""

    workloads: frozenset[ObjectRef] | None
    deferred: tuple[ObjectRef, ...] = ()


def plan_scope(
    snapshot: ClusterSnapshot,
    previous: ClusterSnapshot | None,
    *,
    full: bool,
    known: frozenset[ObjectRef],
    carried: tuple[ObjectRef, ...],
    always: frozenset[ObjectRef],
    batch: int,
    changed: Sequence[Change] | None = None,
    kube_version: str | None = None,
) -> Scope:
    """The scope of a pass (module docstring). ``known``: subjects of open incidents;
    ``carried``: workloads deferred by earlier passes, oldest first; ``always``:
    subjects with held or waiting findings, looked at by every pass; ``batch``: how
    many workloads with open incidents one pass takes; ``changed``: the changes
    since ``previous`` when already listed; ``kube_version``: the analysis's wording."""
    touched = (
        None
        if full or previous is None
        else affected_workloads(previous, snapshot, changed, kube_version=kube_version)
    )
    if touched is None:
        return Scope(None)
    queue = list(dict.fromkeys([*carried, *sorted(touched & known, key=str)]))
    new = touched - known
    return Scope(frozenset(new | always | set(queue[:batch])), tuple(queue[batch:]))


def analyse(
    snapshot: ClusterSnapshot,
    previous: ClusterSnapshot | None,
    *,
    now: float,
    kube_version: str | None,
    renderer: RemedyRenderer,
    profiles: Mapping[str, Any] | None = None,
    **plan: Any,
) -> tuple[Report, Scope]:
    """One pass's analysis (run off the event loop): read the changes since the last
    pass from the state's journal, carry the indexes over, plan the scope (``plan``:
    plan_scope's arguments), build the report."""
    changed = None
    if previous is not None:
        changed = changes_between(previous, snapshot)
        carry_over(previous, snapshot, changed)
    scope = plan_scope(snapshot, previous, changed=changed, kube_version=kube_version, **plan)
    report = build_report(
        snapshot,
        now=now,
        kube_version=kube_version,
        renderer=renderer,
        scope=scope.workloads,
        profiles=profiles,
    )
    return report, scope


def _trigger_workload(snapshot: ClusterSnapshot, trigger: Trigger) -> ObjectRef | None:
    ns, _, name = trigger.pod.partition("/")
    pod = snapshot.pods.get((ns, name)) if trigger.pod else None
    return snapshot.workload_of(pod).ref if pod is not None else None


class Pipeline:
    """Runs analysis passes over a ClusterCache and tracks incidents."""

    def __init__(
        self,
        cache: ClusterCache,
        sessions: async_sessionmaker[AsyncSession],
        config: PipelineConfig,
        *,
        renderer: RemedyRenderer | None = None,
        clock: Callable[[], float] = time.time,
        on_pass: Callable[[PassOutcome], Awaitable[None] | None] | None = None,
        observe_seconds: Callable[[float], None] | None = None,
        check_remedies: Callable[[Sequence[Finding]], Awaitable[list[Finding]]] | None = None,
        before_pass: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self.cache = cache
        # e.g. agent.scales.ScaleReader: reads the state does not watch, before each pass
        self.before_pass = before_pass
        # e.g. agent.dryrun.DryRunVerifier.check: the API server's dry run of each patch remedy
        self.check_remedies = check_remedies
        self.sessions = sessions
        self.config = config
        self.renderer = renderer or RemedyRenderer()
        self.clock = clock
        self.on_pass = on_pass
        self.observe_seconds = observe_seconds
        self.stats = PipelineStats()
        self._triggers: list[Trigger] = []
        self._open: dict[str, ObjectRef] | None = None  # fingerprint -> subject of open incidents
        # The cluster's open incidents as the tracker last wrote them (read again when another wrote).
        self._held = HeldIncidents(config.cluster)
        # Any value below the first generation (0) and either flag: the first pass always runs.
        self._last_generation = -1  # pragma: no mutate
        self._held_any = False  # pragma: no mutate
        self._previous: ClusterSnapshot | None = None  # the last pass's snapshot
        self._last_full = float("-inf")  # when the last whole-cluster pass ran (clock)
        self._pending_subjects: frozenset[ObjectRef] = frozenset()  # held or waiting: every pass looks again
        self._deferred: tuple[ObjectRef, ...] = ()  # touched, incident open, not analysed yet (oldest first)
        self._lock = asyncio.Lock()
        self._last_reminder_check = float("-inf")

    @property
    def caught_up(self) -> bool:
        """No pass running and nothing waiting for one: the last pass saw the current state
        and every trigger (held or deferred findings may still bring more passes)."""
        return (
            not self._lock.locked()
            and not self._triggers
            and self.cache.state.generation == self._last_generation
        )

    def on_event(self, event: dict[str, Any]) -> None:
        """Called by the cache for each relevant Event: remember it as a trigger."""
        if event.get("reason") not in TRIGGER_REASONS:
            return
        try:
            self._triggers.append(trigger_from_event(event))
            self.stats.triggers += 1
        except ValueError as exc:
            log.warning("event without identity ignored as a trigger: %s", exc)

    async def run_pass(self) -> PassOutcome | None:
        """One analysis pass over the current snapshot; None when nothing changed."""
        async with self._lock:
            if self.before_pass is not None:
                await self.before_pass()
            snapshot = self.cache.state.snapshot()
            if (
                snapshot.generation == self._last_generation
                and not self._triggers
                and not self._held_any
                and not self._deferred
            ):
                return None
            if self._open is None:
                self._open = await open_incidents(self.sessions, self.config.cluster)
            started = time.perf_counter()
            now = self.clock()
            report, plan = await asyncio.to_thread(
                analyse,
                snapshot,
                self._previous,
                now=now,
                kube_version=self.config.kube_version,
                renderer=self.renderer,
                profiles=self.config.scheduler_profiles,
                full=now - self._last_full >= self.config.full_resync,
                known=frozenset(self._open.values()),
                carried=self._deferred,
                always=self._pending_subjects,
                batch=self.config.update_batch,
            )
            scope = plan.workloads
            tracked: list[Finding] = []
            held: list[tuple[Finding, str]] = []
            waiting: dict[str, str] = {}  # fingerprint → what it waits for (the tracker pages no one)
            for finding in report.findings:
                why = (
                    None
                    if finding.fingerprint in self._open
                    else hold_reason(finding, snapshot, now, self.config)
                )
                if why is not None:
                    held.append((finding, why))
                    continue
                tracked.append(finding)
                wait = waiting_reason(finding, snapshot, now, self.config)
                if wait is not None:
                    waiting[finding.fingerprint] = wait
            if scope is None:
                triggers, self._triggers = self._triggers, []
            else:  # a trigger counts once: it goes with the pass that analyses its workload
                triggers, later = [], []
                for t in self._triggers:
                    (triggers if _trigger_workload(snapshot, t) in scope else later).append(t)
                self._triggers = later
            if self.check_remedies is not None and tracked:
                tracked = await self.check_remedies(tracked)
            result = await track(
                self.sessions,
                cluster=self.config.cluster,
                findings=tracked,
                now=datetime.fromtimestamp(now, UTC),
                evaluated=EVERY_SUBJECT if scope is None else scope,
                triggers=triggers,
                waiting=waiting,
                sinks=self.config.sinks,
                policy=self.config.notify_policy,
                held=self._held,
                explain_resolution=lambda subject, pods, evidence, remedies: what_changed(
                    snapshot, subject, pods, evidence, remedies
                ),
            )
            self._deferred = plan.deferred
            if scope is None:
                self._open = {f.fingerprint: f.subject for f in tracked}
                self._last_full = now
            else:
                self._open = {fp: s for fp, s in self._open.items() if s not in scope}
                self._open.update((f.fingerprint, f.subject) for f in tracked)
                self.stats.scoped_passes += 1
            self._pending_subjects = frozenset(
                {f.subject for f, _ in held} | {f.subject for f in tracked if f.fingerprint in waiting}
            )
            self._previous = snapshot
            self._last_generation = snapshot.generation
            # Held and waiting findings need passes without changes too: the grace period and
            # the scale-up timeout run out on the clock.
            self._held_any = bool(held or waiting)
            seconds = time.perf_counter() - started
            self.stats.passes += 1
            self.stats.held = len(held)
            self.stats.waiting = len(result.waiting)
            self.stats.escalated += len(result.escalated)
            self.stats.last_pass_seconds = seconds
            if self.observe_seconds is not None:
                self.observe_seconds(seconds)
            for finding, why in held:
                log.info(
                    "finding held back: %s",
                    why,
                    extra={"rule_id": finding.rule_id, "k8s_object": str(finding.subject)},
                )
            if result.escalated:
                log.warning(
                    "%d incident(s) escalated: the scale-up failed or took longer than %.0fs",
                    len(result.escalated),
                    self.config.scale_up_timeout,
                )
            if not self.config.sinks and (result.opened or result.resolved or result.root_cause_changed):
                log.warning(
                    "incidents: %d opened, %d resolved, %d root cause changed (no notification sink configured)",
                    len(result.opened),
                    len(result.resolved),
                    len(result.root_cause_changed),
                )
            outcome = PassOutcome(now, report, tuple(tracked), tuple(held), result, seconds, scope)
            if self.on_pass is not None:
                maybe = self.on_pass(outcome)
                if maybe is not None:
                    await maybe
            return outcome

    async def send_reminders(self) -> list[int]:
        """Write the reminders owed for incidents still open after the re-notify interval."""
        self._last_reminder_check = self.clock()
        ids = await track_reminders(
            self.sessions,
            cluster=self.config.cluster,
            now=datetime.fromtimestamp(self._last_reminder_check, UTC),
            sinks=self.config.sinks,
            policy=self.config.notify_policy,
        )
        if ids:
            log.info("%d reminder(s) for incidents still open", len(ids))
        return ids

    async def run(self, stop: asyncio.Event) -> None:
        """Forever: wait for a change (or the resync tick), debounce, run a pass.
        A failing pass is logged and counted; the loop goes on."""
        while not stop.is_set():
            changed = self.cache.changed
            waiter = asyncio.ensure_future(changed.wait())
            stopper = asyncio.ensure_future(stop.wait())
            # Deferred updates are due at once (a debounce later), even when nothing else changes.
            timeout = self.config.debounce if self._deferred else self.config.resync
            try:
                await asyncio.wait({waiter, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:  # also when the loop is cancelled (a worker losing the cluster)
                waiter.cancel()
                stopper.cancel()
            if stop.is_set():
                break
            if changed.is_set():
                await asyncio.sleep(self.config.debounce)
                changed.clear()
            try:
                await self.run_pass()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.stats.failed_passes += 1
                log.exception("analysis pass failed; will retry on the next change")
            if self.clock() - self._last_reminder_check >= self.config.reminder_check:
                try:
                    await self.send_reminders()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("reminders failed; will retry")
        # Drain: one last pass so nothing seen before shutdown is lost.
        try:
            await self.run_pass()
        except Exception:
            log.exception("final analysis pass failed")
