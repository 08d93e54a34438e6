"""Parsing why Kueue has not admitted a workload, into the reason structure.

A pod managed by Kueue waits behind the ``kueue.x-k8s.io/admission`` scheduling gate
until its Workload is admitted to a ClusterQueue; kube-scheduler says nothing about it.
What Kueue says is on the Workload: the ``Pending`` event and the ``QuotaReserved``
condition, both ``inadmissibleMsg`` (``pkg/scheduler/scheduler.go``, v0.17.0):

- ``Assignment.Message()`` (``pkg/scheduler/flavorassigner/flavorassigner.go``): per pod set
  that does not fit, ``couldn't assign flavors to pod set <name>: <reasons>``, the pod sets
  joined with ``"; "``, each one's reasons sorted and joined with ``", "`` (reasons hold
  commas themselves); ``failed to assign flavors to pod set <name>: <error>`` on an error.
  Reasons: ``insufficient unused quota for <resource> in flavor <flavor>, <q> more needed``,
  ``insufficient quota for <resource> in flavor <flavor>, previously considered podsets
  requests (<q>) + current podset request (<q>) > maximum capacity (<q>)``, ``resource <r>
  unavailable in ClusterQueue``, ``flavor <f> not found``, ``untolerated taint <taint> in
  flavor <f>``, ``flavor <f> doesn't match node affinity``, ``could not assign <f> flavor
  since the original workload is assigned: <f>`` and topology-aware scheduling's ``Flavor
  "<f>" ...`` (``tas_flavorassigner.go``). A preemption under way appends ``. Pending the
  preemption of <n> workload(s)``.
- queue-level: ``ClusterQueue <name> is inactive`` / ``not found`` / ``doesn't exist``,
  ``LocalQueue <name> doesn't exist`` / ``is inactive`` (``pkg/controller/core/
  workload_controller.go``), ``The workload has failed admission checks``, ``Workload namespace
  doesn't match ClusterQueue selector``.

Counts are not printed: every reason is about the pod set, not about nodes.
"""

from __future__ import annotations

import re
from typing import Final

from analyzers.messages.gpu_schedulers import tas_gang
from analyzers.messages.model import QUEUE, ParsedMessage, Reason, make_reason
from analyzers.messages.reasons import (
    OTHER,
    QUEUE_ADMISSION,
    QUEUE_FLAVOR_MISMATCH,
    QUEUE_INACTIVE,
    QUEUE_MISSING,
    QUEUE_QUOTA_EXCEEDED,
    QUEUE_QUOTA_UNUSED,
    ReasonInfo,
    Taint,
)
from analyzers.messages.text import cut_at_next_event, quoted_until

_POD_SET_RE: Final = re.compile(r"(couldn't|failed to) assign flavors to pod set (\S+?): ", re.IGNORECASE)
# Where one sorted reason ends and the next begins (the reasons hold ", " themselves).
_NEXT_REASON_RE: Final = re.compile(
    r", (?=insufficient (?:unused )?quota for |resource \S+ unavailable in ClusterQueue"
    r"|flavor \S+ (?:not found|doesn't match node affinity)|untolerated taint |could not assign \S+ flavor"
    r'|Flavor "[^"]*" )'
)
_PREEMPTING_RE: Final = re.compile(
    r"\. (Pending the preemption of \d+ workload\(s\)|Preempting \d+ workload\(s\) failed, will retry)\.?$"
)
_UNUSED_RE: Final = re.compile(r"^insufficient unused quota for (\S+) in flavor (\S+), (\S+) more needed$")
_EXCEEDED_RE: Final = re.compile(r"^insufficient quota for (\S+) in flavor (\S+), ")
_UNAVAILABLE_RE: Final = re.compile(r"^resource (\S+) unavailable in ClusterQueue$")
_FLAVOR_RE: Final = re.compile(r"^flavor (\S+) (?:not found|doesn't match node affinity)$")
_TAINT_RE: Final = re.compile(r"^untolerated taint ([^=:\s]+)(?:=([^:\s]*))?(?::(\S+))? in flavor (\S+)$")
_TAS_RE: Final = re.compile(r'^(?:Flavor "([^"]*)" |could not assign (\S+) flavor )')

_QUEUE_RE: Final = re.compile(
    r"\b(ClusterQueue|LocalQueue) (\S+) (doesn't exist|not found|is inactive)\b", re.IGNORECASE
)
_ADMISSION_TEXTS: Final = (
    "The workload has failed admission checks",
    "Workload namespace doesn't match ClusterQueue selector",
)


def _reason(text: str, pod_set: str) -> Reason:
    """One flavor-assignment reason, its pod set named in ``object_name`` when the text names no flavor."""
    match = _UNUSED_RE.match(text)
    if match is not None:
        return make_reason(
            None, text, ReasonInfo(QUEUE_QUOTA_UNUSED, None, match.group(1), None, match.group(2))
        )
    match = _EXCEEDED_RE.match(text)
    if match is not None:
        return make_reason(
            None, text, ReasonInfo(QUEUE_QUOTA_EXCEEDED, None, match.group(1), None, match.group(2))
        )
    match = _UNAVAILABLE_RE.match(text)
    if match is not None:
        return make_reason(None, text, ReasonInfo(QUEUE_FLAVOR_MISMATCH, None, match.group(1), None, pod_set))
    match = _TAINT_RE.match(text)
    if match is not None:
        taint = Taint(match.group(1), match.group(2) or "")
        return make_reason(None, text, ReasonInfo(QUEUE_FLAVOR_MISMATCH, None, None, taint, match.group(4)))
    match = _FLAVOR_RE.match(text) or _TAS_RE.match(text)
    if match is not None:
        flavor = next(g for g in match.groups() if g is not None)
        return make_reason(None, text, ReasonInfo(QUEUE_FLAVOR_MISMATCH, None, None, None, flavor))
    return make_reason(None, text, ReasonInfo(OTHER, None, None, None, pod_set))


def _pod_sets(body: str) -> tuple[tuple[Reason, ...], tuple[tuple[str, int], ...], tuple[str, ...]]:
    """The reasons of every pod set in ``body`` (from the first ``... pod set``), how
    many belong to each pod set, and notes."""
    reasons: list[Reason] = []
    groups: list[tuple[str, int]] = []
    notes: list[str] = []
    preempting = _PREEMPTING_RE.search(body)
    if preempting is not None:
        notes.append(preempting.group(1))
        body = body[: preempting.start()]
    matches = list(_POD_SET_RE.finditer(body))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        text = body[match.end() : end].rstrip().removesuffix(";").rstrip().rstrip(".")
        pod_set = match.group(2)
        if match.group(1).lower() == "failed to":
            found = [make_reason(None, text, ReasonInfo(OTHER, None, None, None, pod_set))]
        else:
            found = [
                _reason(piece.strip(), pod_set) for piece in _NEXT_REASON_RE.split(text) if piece.strip()
            ]
        reasons.extend(found)
        groups.append((pod_set, len(found)))
    return tuple(reasons), tuple(groups), tuple(notes)


def parse_kueue(text: str) -> ParsedMessage | None:
    """Parse a cleaned Kueue admission message; None when ``text`` is not one."""
    match = _POD_SET_RE.search(text)
    if match is not None:
        body = cut_at_next_event(text[match.start() : quoted_until(text, match.start())]).strip()
        reasons, groups, notes = _pod_sets(body)
        return ParsedMessage(
            kind=QUEUE,
            format="kueue-flavors",
            message=body,
            reasons=reasons,
            notes=notes,
            groups=groups,
            gang=tas_gang(body),
        )
    match = _QUEUE_RE.search(text)
    if match is not None:
        kind, name, state = match.groups()
        code = QUEUE_INACTIVE if state.lower() == "is inactive" else QUEUE_MISSING
        reason = make_reason(None, match.group(0), ReasonInfo(code, None, None, None, f"{kind} {name}"))
        return ParsedMessage(kind=QUEUE, format="kueue-queue", message=match.group(0), reasons=(reason,))
    lowered = text.lower()
    for admission in _ADMISSION_TEXTS:
        if admission.lower() in lowered:
            reason = make_reason(None, admission, ReasonInfo(QUEUE_ADMISSION, None))
            return ParsedMessage(kind=QUEUE, format="kueue-queue", message=admission, reasons=(reason,))
    return None
