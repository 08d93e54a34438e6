"""Parsing what the node autoscalers say about a pod, into the reason/count structure.

Upstream texts:

- cluster-autoscaler ``processors/status/eventing_scale_up_processor.go``: ``NotTriggerScaleUp``
  ``pod didn't trigger scale-up: <count> <reason>, ...`` (one ``"%d %s"`` per reason, counting node
  groups, in map order; before 1.13 ``pod didn't trigger scale-up (it wouldn't fit if a new node is
  added): ...``), or ``max total nodes in cluster reached``; ``TriggeredScaleUp`` ``pod triggered
  scale-up: [{<group> <from>-><to> (max: <max>)}]``. The reasons are the scheduler's own (a node
  group's template node fails ``Insufficient cpu``, ``node(s) didn't match Pod's node affinity/
  selector``, ...) or the skipped-group reasons of ``core/scaleup/orchestrator/skippedreasons.go``
  (``max node group size reached``, ``not ready for scale-up``, ...).
- Karpenter ``pkg/controllers/provisioning/scheduling/events.go``: ``FailedScheduling`` ``Failed to
  schedule pod, <error>``, where the error holds one clause per NodePool joined with ``"; "``
  (v0.3x-v1.0: ``incompatible with nodepool "<name>", daemonset overhead={...}, <reason>``; v1.1+:
  ``<reason> (NodePool=<name>)`` or the reason alone), and ``Nominated`` ``Pod should schedule on:
  nodeclaim/<name>, node/<name>`` (v0.28-v0.31, before NodeClaims: ``machine/<name>``).
"""

from __future__ import annotations

import itertools
import re
from typing import Final

from analyzers.messages.model import AUTOSCALER, ParsedMessage, Reason, make_reason
from analyzers.messages.reasons import (
    AUTOSCALER_LIMIT,
    AUTOSCALER_NO_INSTANCE_TYPE,
    INSUFFICIENT_RESOURCE,
    NODE_AFFINITY,
    NODE_AFFINITY_MISMATCH,
    NODE_RESOURCES_FIT,
    OTHER,
    TAINT_TOLERATION,
    UNTOLERATED_TAINT,
    ReasonInfo,
    Taint,
    classify_reason,
)
from analyzers.messages.scheduling import parse_reason_list
from analyzers.messages.text import cut_at_next_event, quoted_until

_CA_NO_SCALE_UP_RE: Final = re.compile(
    r"pod didn't trigger scale-up(?: \(it wouldn't fit if a new node is added\))?:?", re.IGNORECASE
)
_CA_SCALE_UP_RE: Final = re.compile(r"pod triggered scale-up:?", re.IGNORECASE)
_CA_GROUP_RE: Final = re.compile(r"\{([^{}\s]+) ([0-9]+)->([0-9]+) \(max: ([0-9]+)\)\}")
# "Failed to schedule pod, " is the event; "Could not schedule pod, " the provisioner's log line.
_KARPENTER_FAILED_RE: Final = re.compile(r"(?:Failed to|Could not) schedule pod, ", re.IGNORECASE)
# Where a message quoted inside a JSON log line ends: its closing quote, then the next key.
_JSON_NEXT_FIELD_RE: Final = re.compile(r'"\s*,\s*"[A-Za-z_][A-Za-z0-9_.-]*"\s*:')
_KARPENTER_NOMINATED_RE: Final = re.compile(r"Pod should schedule on: ?", re.IGNORECASE)
_NODEPOOL_RE: Final = re.compile(r'incompatible with (?:nodepool|provisioner) "([^"]*)",? ?', re.IGNORECASE)
_NODEPOOL_KV_RE: Final = re.compile(r"\s*\(NodePool=([^()\s,]+)\)")
_OVERHEAD_RE: Final = re.compile(r"daemonset overhead=\{[^{}]*\},? ?")
_KARPENTER_TAINT_RE: Final = re.compile(
    r"did not tolerate(?: taint)?\s*\(?(?:taint=)?([^=:\s()]+)(?:=([^:\s()]*))?"
)


def _json_field_end(body: str) -> re.Match[str] | None:
    """Where a message quoted inside a JSON log line ends: the first ``", "key":`` outside
    the braces of a JSON value the message itself holds (``no instance type satisfied
    resources {"cpu":"29500m","pods":"1"}``: its ``","pods":`` is not the log line's)."""
    for match in _JSON_NEXT_FIELD_RE.finditer(body):
        head = body[: match.start()]
        if head.count("{") <= head.count("}") and head.count("[") <= head.count("]"):
            return match
    return None


def _karpenter_info(reason: str, nodepool: str | None) -> ReasonInfo:
    """What one Karpenter clause means, in the scheduler's codes where they agree."""
    lower = reason.lower()
    if lower.startswith("did not tolerate"):
        match = _KARPENTER_TAINT_RE.match(reason)
        taint = Taint(match.group(1), match.group(2) or "") if match is not None else None
        return ReasonInfo(UNTOLERATED_TAINT, TAINT_TOLERATION, taint=taint, object_name=nodepool)
    if lower.startswith("incompatible requirements"):
        return ReasonInfo(NODE_AFFINITY_MISMATCH, NODE_AFFINITY, object_name=nodepool)
    if lower.startswith("no instance type has enough resources"):
        return ReasonInfo(INSUFFICIENT_RESOURCE, NODE_RESOURCES_FIT, object_name=nodepool)
    if lower.startswith("no instance type"):
        return ReasonInfo(AUTOSCALER_NO_INSTANCE_TYPE, None, object_name=nodepool)
    info = classify_reason(reason)
    if info.code == OTHER and "limit" in lower and "nodepool" in lower:
        info = ReasonInfo(AUTOSCALER_LIMIT, None)
    if nodepool is not None:
        return ReasonInfo(info.code, info.plugin, info.resource, info.taint, nodepool)
    return info


def _karpenter_clause(clause: str) -> Reason | None:
    nodepool: str | None = None
    named = _NODEPOOL_RE.search(clause)
    if named is not None:
        nodepool = named.group(1)
        clause = clause[: named.start()] + clause[named.end() :]
    kv = _NODEPOOL_KV_RE.search(clause)
    if kv is not None:
        nodepool = nodepool or kv.group(1)
        clause = clause[: kv.start()] + clause[kv.end() :]
    clause = _OVERHEAD_RE.sub("", clause).strip().strip(",;").strip()
    if not clause:
        return None
    return make_reason(1 if nodepool is not None else None, clause, _karpenter_info(clause, nodepool))


def _split_clauses(body: str) -> list[str]:
    """Karpenter's ``"; "``-joined errors, and the v1.0 ``, incompatible with nodepool``
    clauses that were joined with commas."""
    parts: list[str] = []
    for part in body.split("; "):
        starts = [m.start() for m in _NODEPOOL_RE.finditer(part)]
        if len(starts) <= 1:
            parts.append(part)
            continue
        bounds = [*starts, len(part)]
        if starts[0] > 0:
            parts.append(part[: starts[0]])
        parts.extend(part[a:b] for a, b in itertools.pairwise(bounds))
    return parts


def parse_autoscaler(text: str) -> ParsedMessage | None:
    """Parse a cleaned cluster-autoscaler or Karpenter message about a pod; None
    when ``text`` is neither."""
    match = _CA_NO_SCALE_UP_RE.search(text)
    if match is not None:
        body = cut_at_next_event(text[match.end() : quoted_until(text, match.start())]).strip().rstrip(".")
        if body.lower() == "max total nodes in cluster reached":
            reasons: tuple[Reason, ...] = (make_reason(None, body, classify_reason(body)),)
        else:
            reasons = parse_reason_list(body)
        return ParsedMessage(
            kind=AUTOSCALER,
            format="ca-no-scale-up",
            message=text[match.start() : match.end() + len(body) + 1].strip(),
            reasons=reasons,
        )
    match = _CA_SCALE_UP_RE.search(text)
    if match is not None:
        body = cut_at_next_event(text[match.end() : quoted_until(text, match.start())]).strip()
        groups = tuple(f"{g}: {a}->{b} (max {m})" for g, a, b, m in _CA_GROUP_RE.findall(body))
        return ParsedMessage(
            kind=AUTOSCALER,
            format="ca-scale-up",
            message=text[match.start() : quoted_until(text, match.start())].strip(),
            notes=groups,
        )
    match = _KARPENTER_FAILED_RE.search(text)
    start = match.end() if match is not None else None
    if match is None and (clause := _NODEPOOL_RE.search(text)) is not None:
        match, start = clause, clause.start()  # the error quoted without its first words
    if match is not None and start is not None:
        quote_end = quoted_until(text, match.start())
        body = _OVERHEAD_RE.sub("", text[start:quote_end])  # its JSON would look like the log line's
        json_end = _json_field_end(body)
        if json_end is not None:
            body = body[: json_end.start()]
        body = cut_at_next_event(body).strip()
        clauses = (_karpenter_clause(c) for c in _split_clauses(body))
        return ParsedMessage(
            kind=AUTOSCALER,
            format="karpenter-failed",
            message=(text[match.start() : start] + body).strip()
            if json_end
            else text[match.start() : quote_end].strip(),
            reasons=tuple(r for r in clauses if r is not None),
        )
    match = _KARPENTER_NOMINATED_RE.search(text)
    if match is not None:
        body = cut_at_next_event(text[match.end() : quoted_until(text, match.start())]).strip()
        targets = tuple(
            t.strip() for t in body.split(",") if t.strip().startswith(("nodeclaim/", "machine/", "node/"))
        )
        if targets:
            return ParsedMessage(
                kind=AUTOSCALER,
                format="karpenter-nominated",
                message=text[match.start() : quoted_until(text, match.start())].strip(),
                notes=targets,
            )
    return None
