"""The verdicts of the GPU schedulers people run beside (or instead of) kube-scheduler.

Each prints its own words on the pod (an event and, mostly, the ``PodScheduled``
condition) and on its gang object. unstick's simulation is kube-scheduler's, so these
are read (``kind: scheduling`` with ``scheduler`` naming who spoke) but never compared
with a simulation. Upstream texts:

- **NVIDIA KAI-Scheduler** (``schedulerName: kai-scheduler``; v0.4.0 to v0.12.17, same
  words): ``pkg/scheduler/api/common_info/pod_errors.go`` ``TasksFitErrors.Error()``:
  ``no nodes with enough resources were found: <count> <reason>. \\n<count> <reason>.``
  (the histogram sorted as strings, joined with ``". \\n"``; reasons such as ``node(s)
  didn't have enough resources: GPUs`` / ``GPU memory`` / ``CPU cores`` / ``memory`` /
  ``<resource>``, ``node(s) didn't have enough of mig profile: <profile>``, and
  kube-scheduler's own predicate texts); ``job_errors.go`` ``JobFitErrorsToMessage``:
  ``Unable to schedule podgroup: ...`` / ``Not enough resources for the workload: ...``
  (a count only when above 1: ``node-group(s) didn't have enough resources: GPUs``);
  ``pkg/scheduler/actions/common/allocate.go``: ``Resources were found for <found> pods
  while <required> are required for gang scheduling. Additional pods cannot be scheduled
  due to: <error>``, the sub-group form ``Resources were found for <found> pods from all
  sub-groups while sub-group <name> requires <required> pods for gang scheduling.
  Additional pods cannot be scheduled in this sub-group due to: <error>`` and ``Resources
  were not found for pod <ns>/<name> due to: <error>``;
  ``cache/status_updater/default_status_updater.go`` prefixes ``Node-Pool '<pool>': ``
  and writes the ``Unschedulable`` event and condition. ``no nodes`` is lower-case
  upstream; pastes capitalise it, so matching ignores case.
- **Volcano** (``schedulerName: volcano``; master after v1.15.1): ``pkg/scheduler/api/
  unschedule_info.go`` ``FitErrors.Error()``: ``0/<n> nodes are unavailable: <count>
  <reason>, ....`` (``In hyperNode <name>: `` before it; ``all nodes are unavailable``
  without nodes); ``pkg/scheduler/api/job_info.go`` ``FitError()``: ``pod group is not
  ready, <count> <phase>, ..., <n> minAvailable; Pending: <count> <reason>, ... . Origin
  reason is <task>: <fit error>``; ``pkg/scheduler/plugins/gang/gang.go`` and
  ``cache/cache.go``: ``<n>/<total> tasks in gang unschedulable: <FitError()>`` (the
  PodGroup's ``Unschedulable`` event and condition).
- **HAMi** (``schedulerName: hami-scheduler``, a kube-scheduler extender; v2.10.0, and v2.4's
  wording from a paste in Project-HAMi/HAMi#591):
  ``pkg/scheduler/scheduler.go`` ``FilteringFailed`` events ``no available node, <n>
  nodes do not meet`` (v2.4: ``no available node, all node scores do not meet``) and
  ``score.go`` ``recordFilteringFailures``: ``<n> nodes <Code>(<node>,<node>)`` per
  reason code of ``pkg/device/common/common.go`` (``CardInsufficientMemory``,
  ``CardInsufficientCore``, ``NodeInsufficientDevice``, ...).
- **Kueue topology-aware scheduling** (main after v0.19): ``pkg/cache/scheduler/
  tas_flavor_snapshot.go`` ``notFitMessage``: ``topology "<name>" allows to fit only
  <found> out of <required> pod(s)`` / ``slice(s)``, ``topology "<name>" doesn't allow to
  fit any of <required> pod(s)``; inside Kueue's flavor message it is read by
  analyzers.messages.kueue, alone here.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Final

from analyzers.messages.model import (
    SCHEDULING,
    Gang,
    ParsedMessage,
    Reason,
    make_reason,
)
from analyzers.messages.reasons import (
    INSUFFICIENT_RESOURCE,
    OTHER,
    ReasonInfo,
    classify_reason,
)
from analyzers.messages.scheduling import parse_headed
from analyzers.messages.text import cut_at_next_event, quoted_until

KAI: Final = "kai-scheduler"
VOLCANO: Final = "volcano"
HAMI: Final = "hami-scheduler"
KUEUE: Final = "kueue"

# spec.schedulerName as each project's chart installs it -> who speaks for the pod.
SCHEDULER_NAMES: Final = {
    "kai-scheduler": KAI,  # KAI-Scheduler pkg/common/constants/constants.go DefaultSchedulerName
    "volcano": VOLCANO,  # volcano installer/helm values: scheduler_name
    "hami-scheduler": HAMI,  # HAMi charts/hami values.yaml schedulerName
}
# The event reasons each writes on a pod it could not place.
EVENT_REASONS: Final = frozenset({"Unschedulable", "FailedScheduling", "FilteringFailed"})

_I: Final = re.IGNORECASE
_KAI_HEAD_RE: Final = re.compile(
    r"(?:Node-Pool '(?P<pool>[^']*)': )?"
    r"(?P<head>no nodes with enough resources were found|Unable to schedule podgroup"
    r"|Not enough resources for the workload|Unable to schedule pod)(?=[:.]|$)",
    _I,
)
_KAI_GANG_RE: Final = re.compile(
    r"Resources were found for (?P<found>[0-9]{1,9}) pods (?:from all sub-groups while sub-group "
    r"(?P<subgroup>\S+) requires (?P<sub_required>[0-9]{1,9}) pods|while (?P<required>[0-9]{1,9}) are "
    r"required) for gang scheduling\. Additional pods cannot be scheduled (?:in this sub-group )?due to: ?",
    _I,
)
_KAI_POOL_RE: Final = re.compile(r"Node-Pool '([^']*)': ")
_KAI_POD_RE: Final = re.compile(r"Resources were not found for pod (\S+?) due to: ?", _I)
_COUNTED_RE: Final = re.compile(r"([0-9]{1,9}) (.+)")
# KAI's own resource words -> the resource name they are about.
_KAI_RESOURCES: Final = {"GPUs": "GPUs", "GPU memory": "GPU memory", "CPU cores": "cpu", "memory": "memory"}
_KAI_ENOUGH_RE: Final = re.compile(
    r"(?:node|node-group)\(s\) didn't have enough (?:resources|of mig profile): (.+)", _I
)

_VOLCANO_GANG_RE: Final = re.compile(
    r"(?P<unsched>[0-9]{1,9})/(?P<total>[0-9]{1,9}) tasks in gang unschedulable: ?", _I
)
_VOLCANO_READY_RE: Final = re.compile(r"pod group is (?:not )?ready, ", _I)
_VOLCANO_ORIGIN_RE: Final = re.compile(r"\. Origin reason is(?: (?P<task>[^:\s]+))?: ", _I)
_VOLCANO_HEADER_RE: Final = re.compile(
    r"(?:In hyperNode (?P<hyper>\S+): )?(?P<core>[0-9]{1,9}/[0-9]{1,9} nodes are unavailable:|all nodes are unavailable\b)",
    _I,
)

_HAMI_NONE_RE: Final = re.compile(
    r"no available node, (?:(?P<n>[0-9]{1,9}) nodes do not meet|all node scores do not meet)", _I
)
_HAMI_REASON_RE: Final = re.compile(r"\b([0-9]{1,9}) nodes ([A-Z][A-Za-z]{2,63})\(([^()\s]*)\)")

_TAS_RE: Final = re.compile(
    r'topology "(?P<topology>[^"]*)" (?:allows to fit only (?P<found>[0-9]{1,9}) out of|doesn\'t allow to '
    r"fit any of) (?P<required>[0-9]{1,9}) (?P<unit>pod|slice)\(s\)",
    _I,
)

_MARKERS: Final = (
    "enough resources were found",
    "required for gang scheduling",
    "requires ",
    "unable to schedule pod",
    "not enough resources for the workload",
    "resources were not found for pod",
    "tasks in gang unschedulable",
    "nodes are unavailable",
    "pod group is",
    "no available node",
    "allow to fit",
    "allows to fit",
)


# The markers as printed (first letters left out where pastes capitalise them): a plain
# substring test per marker is the cheapest rejection of the many messages that are none of these.
_FAST_MARKERS: Final = (
    "o nodes with enough resources were found",
    "for gang scheduling",
    "nable to schedule pod",
    "ot enough resources for the workload",
    "esources were not found for pod",
    "tasks in gang unschedulable",
    "nodes are unavailable",
    "pod group is",
    "o available node",
    "allow to fit",
    "allows to fit",
)


def _kai_reason(text: str, count: int | None) -> Reason:
    match = _KAI_ENOUGH_RE.match(text)
    if match is not None:
        what = match.group(1).strip()
        resource = _KAI_RESOURCES.get(what, what)
        return make_reason(count, text, ReasonInfo(INSUFFICIENT_RESOURCE, None, resource))
    return make_reason(count, text, classify_reason(text))


def _kai_histogram(body: str) -> tuple[Reason, ...]:
    """``<count> <reason>. <count> <reason>.`` (KAI joins with ``". \\n"``; cleaned, ``". "``)."""
    body = body.strip().removesuffix(".")
    reasons: list[Reason] = []
    for item in body.split(". "):
        item = item.strip().rstrip(".")
        if not item:
            continue
        counted = _COUNTED_RE.fullmatch(item)
        if counted is not None:
            reasons.append(_kai_reason(counted.group(2), int(counted.group(1))))
        else:
            reasons.append(_kai_reason(item, None))
    return tuple(reasons)


def _kai(text: str) -> ParsedMessage | None:
    gang: Gang | None = None
    pod: str | None = None
    start: int | None = None
    body_from = 0
    gang_match = _KAI_GANG_RE.search(text)
    if gang_match is not None:
        start, body_from = gang_match.start(), gang_match.end()
        subgroup = gang_match.group("subgroup")
        required = gang_match.group("sub_required") if subgroup else gang_match.group("required")
        gang = Gang(found=int(gang_match.group("found")), required=int(required), subgroup=subgroup)
    else:
        pod_match = _KAI_POD_RE.search(text)
        if pod_match is not None:
            start, body_from, pod = pod_match.start(), pod_match.end(), pod_match.group(1)
    head = _KAI_HEAD_RE.search(text, body_from)
    if head is None and start is None:
        return None
    if start is None and head is not None:
        start = head.start()
    assert start is not None
    end = quoted_until(text, start)
    message = cut_at_next_event(text[start:end]).strip()
    reasons: tuple[Reason, ...] = ()
    notes: list[str] = []
    pool = _KAI_POOL_RE.search(text, max(0, start - 300), start)
    if pool is not None and pool.end() == start:
        notes.append(f"node pool {pool.group(1)}")
    elif head is not None and head.group("pool"):
        notes.append(f"node pool {head.group('pool')}")
    if head is not None and head.start() < end:
        rest = text[head.end() : end]
        if rest.startswith(":"):
            reasons = _kai_histogram(cut_at_next_event(rest[1:]))
    elif body_from < end:
        cause = cut_at_next_event(text[body_from:end]).strip()
        if cause:
            reasons = _kai_histogram(cause)
    return ParsedMessage(
        kind=SCHEDULING,
        format="kai-fit-error" if gang is None else "kai-gang",
        message=message,
        reasons=reasons,
        notes=tuple(notes),
        pod=pod,
        truncated=not message.endswith("."),
        scheduler=KAI,
        gang=gang,
    )


def _histogram(text: str) -> tuple[tuple[str, int], ...]:
    """``1 Pending, 3 Running, 4 minAvailable`` -> ``(("Pending", 1), ...)``."""
    out: list[tuple[str, int]] = []
    for item in text.split(", "):
        counted = _COUNTED_RE.fullmatch(item.strip())
        if counted is not None:
            out.append((counted.group(2), int(counted.group(1))))
    return tuple(out)


def _volcano(text: str) -> ParsedMessage | None:
    gang_match = _VOLCANO_GANG_RE.search(text)
    ready = _VOLCANO_READY_RE.search(text, gang_match.end() if gang_match is not None else 0)
    header = _VOLCANO_HEADER_RE.search(text)
    if gang_match is None and ready is None and header is None:
        return None
    first = min(m.start() for m in (gang_match, ready, header) if m is not None)
    end = quoted_until(text, first)
    gang: Gang | None = None
    notes: list[str] = []
    fit_from = first
    if ready is not None and ready.start() < end:
        origin = _VOLCANO_ORIGIN_RE.search(text, ready.end(), end)
        status = text[ready.end() : origin.start() if origin is not None else end]
        phases_text, _, pending_text = status.partition("; ")
        phases = _histogram(phases_text.rstrip("."))
        required = dict(phases).get("minAvailable")
        gang = Gang(
            required=required,
            unschedulable=int(gang_match.group("unsched")) if gang_match is not None else None,
            total=int(gang_match.group("total")) if gang_match is not None else None,
            phases=tuple(p for p in phases if p[0] != "minAvailable"),
        )
        if pending_text:
            notes.append(cut_at_next_event(pending_text).strip().rstrip("."))
        if origin is not None:
            if origin.group("task"):
                notes.append(f"first pod that failed: {origin.group('task')}")
            fit_from = origin.end()
        else:
            fit_from = end
    fit = _VOLCANO_HEADER_RE.search(text, fit_from, end)
    reasons: tuple[Reason, ...] = ()
    total: int | None = None
    preemption = None
    truncated = False
    if fit is not None:
        if fit.group("hyper"):
            notes.append(f"hyperNode {fit.group('hyper')}")
        headed = parse_headed(text[fit.start("core") : end])
        if headed is not None:
            reasons, total, preemption, truncated = (
                headed.reasons,
                headed.total_nodes,
                headed.preemption,
                headed.truncated,
            )
    elif gang is None:
        return None
    message = cut_at_next_event(text[first:end]).strip()
    return ParsedMessage(
        kind=SCHEDULING,
        format="volcano-gang" if gang is not None else "volcano-fit-error",
        message=message,
        total_nodes=total,
        reasons=reasons,
        preemption=preemption,
        notes=tuple(notes),
        truncated=truncated,
        scheduler=VOLCANO,
        gang=gang,
    )


def _hami(text: str) -> ParsedMessage | None:
    none = _HAMI_NONE_RE.search(text)
    found = list(_HAMI_REASON_RE.finditer(text))
    if none is None and not found:
        return None
    reasons = tuple(
        make_reason(
            int(m.group(1)), m.group(2), ReasonInfo(_hami_code(m.group(2)), None, _hami_resource(m.group(2)))
        )
        for m in found
    )
    notes = tuple(f"{m.group(2)}: {m.group(3).replace(',', ', ')}" for m in found if m.group(3))
    total = int(none.group("n")) if none is not None and none.group("n") else None
    first = min(m.start() for m in ([none] if none is not None else []) + found)
    last = max(m.end() for m in ([none] if none is not None else []) + found)
    return ParsedMessage(
        kind=SCHEDULING,
        format="hami-filter",
        message=text[first:last],
        total_nodes=total,
        reasons=reasons,
        notes=notes,
        scheduler=HAMI,
    )


def _hami_code(code: str) -> str:
    """HAMi's reason codes: the ``Insufficient`` ones say a device had too little of something."""
    return INSUFFICIENT_RESOURCE if "Insufficient" in code else OTHER


def _hami_resource(code: str) -> str | None:
    if code.endswith("InsufficientMemory"):
        return "device memory"
    if code.endswith("InsufficientCore"):
        return "device cores"
    if code == "NodeInsufficientDevice":
        return "devices"
    return None


def _tas(text: str) -> ParsedMessage | None:
    match = _TAS_RE.search(text)
    if match is None:
        return None
    found = int(match.group("found")) if match.group("found") else 0
    gang = Gang(found=found, required=int(match.group("required")), unit=match.group("unit").lower())
    reason = make_reason(None, match.group(0), ReasonInfo(OTHER, None, None, None, match.group("topology")))
    return ParsedMessage(
        kind=SCHEDULING,
        format="kueue-tas",
        message=match.group(0),
        reasons=(reason,),
        scheduler=KUEUE,
        gang=gang,
    )


def tas_gang(text: str) -> Gang | None:
    """Kueue TAS's gang figures in ``text`` (a flavor message), or None."""
    parsed = _tas(text)
    return parsed.gang if parsed is not None else None


def parse_gpu_scheduler(text: str) -> ParsedMessage | None:
    """Parse a cleaned verdict of KAI-Scheduler, Volcano, HAMi or Kueue TAS; None when
    ``text`` is none of theirs."""
    for marker in _FAST_MARKERS:
        if marker in text:
            break
    else:
        # HAMi's "<n> nodes <Code>(<nodes>)" alone (never beside kube-scheduler's header).
        if " nodes " not in text or " nodes are " in text or _HAMI_REASON_RE.search(text) is None:
            return None
    lower = text.lower()
    return (
        _kai(text)
        or _volcano(text)
        or _hami(text)
        or (
            _tas(text)
            if "couldn't assign flavors" not in lower and "failed to assign flavors" not in lower
            else None
        )
    )


def attribute(parsed: ParsedMessage, scheduler: str) -> ParsedMessage:
    """``parsed`` said by ``scheduler`` (a scheduling verdict read from that scheduler's pod)."""
    return replace(parsed, scheduler=scheduler) if parsed.kind == SCHEDULING else parsed
