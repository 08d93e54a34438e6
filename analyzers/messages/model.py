"""The values the message parsers return. Frozen and slotted: parsed messages
are cached and shared between callers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from analyzers.messages.eviction import Eviction
from analyzers.messages.reasons import (
    OTHER,
    PREEMPTION_NO_VICTIMS,
    PREEMPTION_NOT_ELIGIBLE,
    PREEMPTION_NOT_HELPFUL,
    PREEMPTION_PLACEMENT_FOUND,
    PVC_NOT_FOUND,
    VOLUME_RESTRICTIONS_PLUGIN,
    ReasonInfo,
)

SCHEDULING: Final = "scheduling"
EVICTION: Final = "eviction"
# cluster-autoscaler's NotTriggerScaleUp/TriggeredScaleUp and Karpenter's
# FailedScheduling/Nominated: about node groups and NodePools, not nodes.
AUTOSCALER: Final = "autoscaler"
# Kueue's reasons for not admitting a Workload (its pods wait behind a scheduling gate).
QUEUE: Final = "queue"
# kube-scheduler's errors (a plugin failed), not a verdict about nodes.
SCHEDULER_ERROR: Final = "scheduler-error"
UNKNOWN: Final = "unknown"

# Who printed a scheduling verdict (``ParsedMessage.scheduler``): kube-scheduler, or a
# scheduler people run beside it (analyzers.messages.gpu_schedulers).
KUBE_SCHEDULER: Final = "kube-scheduler"

# Preemption verdicts.
NOT_ELIGIBLE: Final = "not-eligible"
CANNOT_HELP: Final = "cannot-help"
NO_CANDIDATE: Final = "no-candidate"
VERDICT_UNKNOWN: Final = "unknown"
# 1.37+: DefaultPreemption found a node and is evicting victims there (the note names it).
PREEMPTING: Final = "preempting"


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason as printed: how many nodes it counts, its text and what it means.

    ``count`` is None only for a PreFilter rejection, which kube-scheduler 1.26+
    prints without a count because no node was tried. In autoscaler messages it
    counts node groups (cluster-autoscaler) or NodePools (Karpenter; None when the
    clause names no NodePool).
    """

    count: int | None
    text: str
    info: ReasonInfo

    @property
    def code(self) -> str:
        return self.info.code

    @property
    def plugin(self) -> str | None:
        """The plugin that printed it. A missing ``persistentvolumeclaim "x"`` printed
        without count (a PreFilter rejection, 1.26+) is VolumeRestrictions': its
        PreFilter runs before VolumeBinding's and reads every claim of the pod since
        ReadWriteOncePod is on by default (1.27; ``volumerestrictions/
        volume_restrictions.go``). Only 1.26 prints the same text from VolumeBinding;
        counted (before 1.26) it is VolumeBinding's."""
        info = self.info
        if (
            self.count is None
            and info.code == PVC_NOT_FOUND
            and self.text.startswith("persistentvolumeclaim ")
        ):
            return VOLUME_RESTRICTIONS_PLUGIN
        return info.plugin

    def as_dict(self) -> dict[str, Any]:
        info = self.info
        return {
            "count": self.count,
            "reason": self.text,
            "code": info.code,
            "plugin": self.plugin,
            "resource": info.resource,
            "taint": info.taint.as_dict() if info.taint is not None else None,
            "object": info.object_name,
        }


@dataclass(frozen=True, slots=True)
class Preemption:
    """The PostFilter (preemption) verdict: a per-node histogram like the filter
    part, or a note when preemption was not attempted."""

    total_nodes: int | None
    reasons: tuple[Reason, ...]
    note: str | None
    note_info: ReasonInfo | None = None

    @property
    def verdict(self) -> str:
        """``not-eligible`` (not attempted), ``preempting`` (1.37+: a node was
        found and its victims are evicted), ``cannot-help`` (every node is "not
        helpful" or has no victims), ``no-candidate`` (some nodes still fail after
        removing victims) or ``unknown`` (no reasons, or one unstick does not know,
        e.g. cut short)."""
        if self.note is not None:
            code = self.note_info.code if self.note_info is not None else OTHER
            if code == PREEMPTION_NOT_ELIGIBLE:
                return NOT_ELIGIBLE
            if code == PREEMPTION_NOT_HELPFUL:
                return CANNOT_HELP
            if code == PREEMPTION_PLACEMENT_FOUND:
                return PREEMPTING
            return VERDICT_UNKNOWN
        if not self.reasons or any(r.info.code == OTHER for r in self.reasons):
            return VERDICT_UNKNOWN
        if all(r.info.code in (PREEMPTION_NOT_HELPFUL, PREEMPTION_NO_VICTIMS) for r in self.reasons):
            return CANNOT_HELP
        return NO_CANDIDATE

    def as_dict(self) -> dict[str, Any]:
        return {
            "total_nodes": self.total_nodes,
            "reasons": [r.as_dict() for r in self.reasons],
            "note": self.note,
            "note_code": self.note_info.code if self.note_info is not None else None,
            "verdict": self.verdict,
        }


@dataclass(frozen=True, slots=True)
class Gang:
    """Gang (all-or-nothing) figures a scheduler printed for a group of pods.

    ``found``: pods it found room for; ``required``: pods the group needs at once
    (KAI-Scheduler's ``Resources were found for <found> pods while <required> are
    required``, Volcano's ``<n> minAvailable``, Kueue TAS's ``allows to fit only
    <found> out of <required> pod(s)``); ``unschedulable``/``total``: Volcano's
    ``<unschedulable>/<total> tasks in gang unschedulable``; ``phases``: Volcano's
    task histogram (``(("Pending", 1), ("Running", 3))``); ``subgroup``: the
    KAI sub-group the figures are about. Any figure the text does not print is None.
    """

    found: int | None = None
    required: int | None = None
    unschedulable: int | None = None
    total: int | None = None
    phases: tuple[tuple[str, int], ...] = ()
    subgroup: str | None = None
    unit: str = "pod"

    def as_dict(self) -> dict[str, Any]:
        return {
            "found": self.found,
            "required": self.required,
            "unschedulable": self.unschedulable,
            "total": self.total,
            "phases": {name: n for name, n in self.phases},
            "subgroup": self.subgroup,
            "unit": self.unit,
        }


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    """What a message says, in the scheduler's terms.

    - ``kind``: ``scheduling``, ``eviction``, ``autoscaler``, ``queue`` (Kueue),
      ``scheduler-error`` (a plugin failed: ``notes`` holds its extension point) or ``unknown``.
    - ``format``: ``fit-error`` (``0/N nodes are available: <count> <reason>, ...``),
      ``fit-error-prefilter`` (1.26+, a PreFilter rejection without count),
      ``preemption-only`` (only the ``preemption: ...`` tail was pasted: ``reasons``
      is empty and says nothing about the filter phase), ``legacy-predicates``
      (1.6-1.7), ``legacy-summary`` (1.5), ``legacy-per-node`` (1.2-1.4),
      ``reasons`` (a bare reason list or a PodScheduled condition message),
      ``ca-no-scale-up``, ``ca-scale-up``, ``karpenter-failed``,
      ``karpenter-nominated``, ``kueue-flavors`` (per pod set; ``notes`` name the pod
      sets), ``kueue-queue`` (the queue itself), ``plugin-error``, ``pod-deleting``,
      ``eviction`` or ``unknown``.
    - ``total_nodes``: N of ``0/N nodes are available`` (None when not printed,
      redacted as ``0/x`` or cut off).
    - ``head_missing``: the text starts after the message's beginning (no
      ``0/N nodes are available:`` header): the total is unknown and the
      reasons listed may be only the complete ones that were left.
    - ``notes``: PostFilter messages other than preemption (DRA:
      ``no new claims to deallocate``; Kueue: a preemption under way).
    - ``groups``: how ``reasons`` divide into named groups, in order (Kueue's pod
      sets: ``(("main", 3), ("workers", 1))``); empty when they do not.
    - ``truncated``: the message ends before its final full stop, or carries
      kube-scheduler's `` ...`` cut mark (event messages longer than 1024 bytes).
    - ``message``: the message itself, cleaned (one line, without event columns).
    - ``scheduler``: who printed a ``scheduling`` verdict: ``kube-scheduler``, or
      ``kai-scheduler``, ``volcano``, ``hami-scheduler``, ``kueue`` (its
      topology-aware scheduling); None for the other kinds. Only kube-scheduler's
      verdicts can be compared with unstick's simulation.
    - ``gang``: gang figures (found/required pods), when the scheduler printed them.
    """

    kind: str
    format: str
    message: str
    total_nodes: int | None = None
    reasons: tuple[Reason, ...] = ()
    preemption: Preemption | None = None
    eviction: Eviction | None = None
    notes: tuple[str, ...] = ()
    pod: str | None = None
    truncated: bool = False
    head_missing: bool = False
    groups: tuple[tuple[str, int], ...] = ()
    scheduler: str | None = None
    gang: Gang | None = None

    @property
    def comparable(self) -> bool:
        """Whether unstick's simulation (kube-scheduler's) can be compared with this verdict."""
        return self.kind == SCHEDULING and self.scheduler == KUBE_SCHEDULER

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "scheduler": self.scheduler,
            "comparable": self.comparable,
            "gang": self.gang.as_dict() if self.gang is not None else None,
            "total_nodes": self.total_nodes,
            "reasons": [r.as_dict() for r in self.reasons],
            "preemption": self.preemption.as_dict() if self.preemption is not None else None,
            "eviction": self.eviction.as_dict() if self.eviction is not None else None,
            "format": self.format,
            "notes": list(self.notes),
            "pod": self.pod,
            "truncated": self.truncated,
            "head_missing": self.head_missing,
            "groups": [{"name": name, "reasons": n} for name, n in self.groups],
            "message": self.message,
        }


# --- fast constructors ------------------------------------------------------------------
#
# The parser builds millions of these values. A frozen dataclass's generated
# __init__ sets each field through object.__setattr__, looked up per field;
# setting the slots directly builds the same value in about half the time.
# Equality, hashing and repr are the dataclass's own (see the tests).

_new = object.__new__
_REASON_SLOTS = tuple(vars(Reason)[name].__set__ for name in ("count", "text", "info"))
_PARSED_SLOTS = tuple(
    vars(ParsedMessage)[name].__set__
    for name in (
        "kind",
        "format",
        "message",
        "total_nodes",
        "reasons",
        "preemption",
        "eviction",
        "notes",
        "pod",
        "truncated",
        "head_missing",
        "groups",
        "scheduler",
        "gang",
    )
)


def make_reason(count: int | None, text: str, info: ReasonInfo) -> Reason:
    """``Reason(count, text, info)``, built faster."""
    reason: Reason = _new(Reason)
    set_count, set_text, set_info = _REASON_SLOTS
    set_count(reason, count)
    set_text(reason, text)
    set_info(reason, info)
    return reason


def make_scheduling(
    format: str,
    message: str,
    total_nodes: int | None,
    reasons: tuple[Reason, ...],
    preemption: Preemption | None,
    notes: tuple[str, ...],
    pod: str | None,
    truncated: bool,
    head_missing: bool = False,
) -> ParsedMessage:
    """``ParsedMessage(SCHEDULING, format, message, ...)`` (no eviction), built faster."""
    parsed: ParsedMessage = _new(ParsedMessage)
    (
        s_kind,
        s_format,
        s_message,
        s_total,
        s_reasons,
        s_preemption,
        s_eviction,
        s_notes,
        s_pod,
        s_trunc,
        s_head,
        s_groups,
        s_scheduler,
        s_gang,
    ) = _PARSED_SLOTS
    s_kind(parsed, SCHEDULING)
    s_format(parsed, format)
    s_message(parsed, message)
    s_total(parsed, total_nodes)
    s_reasons(parsed, reasons)
    s_preemption(parsed, preemption)
    s_eviction(parsed, None)
    s_notes(parsed, notes)
    s_pod(parsed, pod)
    s_trunc(parsed, truncated)
    s_head(parsed, head_missing)
    s_groups(parsed, ())
    s_scheduler(parsed, KUBE_SCHEDULER)
    s_gang(parsed, None)
    return parsed
