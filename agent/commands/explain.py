"""``unstick explain``: what a FailedScheduling or eviction message says, in plain words.

    unstick explain "0/3 nodes are available: 3 Insufficient cpu. preemption: ..."
    unstick explain --json "…"                 # one JSON object
    kubectl describe pod web-0 | unstick explain -
    unstick explain --jsonl events.jsonl       # JSON Lines in, JSON Lines out

JSON Lines input: each line is a JSON string, or an object with a string
``message`` (an Event as ``kubectl get events -o json`` prints it works; so does
an events.k8s.io ``note``). Output: one JSON object per input line, in order,
each with ``line`` (1-based); a line that cannot be read yields
``{"error": "...", "line": n}`` and the batch goes on. Blank lines count as bad
lines. Repeated messages are served from the parser's cache.

Exit status for one message: 0 when it was recognised, 1 when nothing in it
was (``kind: unknown``), 2 for a usage error. Terminal control characters of
the input (escape sequences, bidi overrides) are shown escaped in the text
output, as the JSON output escapes them.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any

import orjson

from agent.cli import EXIT_OK, UserError
from analyzers.messages import (
    AUTOSCALER,
    DISRUPTION_BLOCKED,
    DO_NOT_DISRUPT,
    DRAIN_REFUSED,
    EVICTION,
    KUBELET_ADMISSION,
    MULTIPLE_PDBS,
    NODE_CONDITION,
    NODE_PRESSURE,
    PDB_VIOLATION,
    QUEUE,
    SCHEDULER_ERROR,
    SCHEDULING,
    UNKNOWN,
    ParsedMessage,
    Preemption,
    Reason,
    parse_message,
)

_FLUSH_EVERY = 1024
EXIT_UNRECOGNISED = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="explain a FailedScheduling or eviction message",
        description=(
            "Break a kube-scheduler FailedScheduling message (any version), a PodScheduled "
            "condition message or a kubectl drain / eviction error into its reasons, with the "
            "plugin behind each and what it means. Pass '-' to read the message from stdin."
        ),
    )
    parser.add_argument("message", nargs="*", metavar="MESSAGE", help="the message text, or '-' for stdin")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument(
        "--jsonl",
        metavar="FILE",
        help="explain a batch: JSON Lines in (a string or {\"message\": ...} per line), JSON Lines out; '-' = stdin",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.jsonl is not None:
        if args.message:
            raise UserError("give either MESSAGE or --jsonl FILE, not both")
        return run_jsonl(args.jsonl, sys.stdout.buffer)
    text = " ".join(args.message)
    if text.strip() == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise UserError("explain needs a MESSAGE (or '-' to read it from stdin, or --jsonl FILE)")
    parsed = parse_message(text)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(parsed.as_dict()) + b"\n")
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(render_text(parsed))
        sys.stdout.flush()
    return EXIT_UNRECOGNISED if parsed.kind == UNKNOWN else EXIT_OK


# --- batches ------------------------------------------------------------------------------


def _message_of(doc: Any) -> str:
    if isinstance(doc, str):
        return doc
    if isinstance(doc, dict):
        for key in ("message", "note"):
            value = doc.get(key)
            if isinstance(value, str):
                return value
        raise ValueError('object has no string "message"')
    raise ValueError(f'expected a JSON string or an object with a string "message", got {type(doc).__name__}')


def explain_lines(lines: Iterable[bytes]) -> Iterator[bytes]:
    """One encoded JSON line (with trailing newline) per input line, in order; never raises."""
    for number, raw in enumerate(lines, 1):
        try:
            message = _message_of(orjson.loads(raw))
            if not message.strip():
                raise ValueError("empty message")
            doc = parse_message(message).as_dict()
            doc["line"] = number
        except orjson.JSONDecodeError as exc:
            doc = {"error": f"invalid JSON: {exc}", "line": number}
        except Exception as exc:  # one bad line never stops the batch
            doc = {"error": str(exc) or type(exc).__name__, "line": number}
        yield orjson.dumps(doc) + b"\n"


def _read_lines(stream: IO[bytes]) -> Iterator[bytes]:
    for raw in stream:
        yield raw.rstrip(b"\r\n")


def run_jsonl(path: str, out: IO[bytes]) -> int:
    if path == "-":
        source: IO[bytes] = sys.stdin.buffer
        close = False
    else:
        try:
            source = open(path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror or exc}") from exc
        close = True
    try:
        chunk: list[bytes] = []
        for encoded in explain_lines(_read_lines(source)):
            chunk.append(encoded)
            if len(chunk) >= _FLUSH_EVERY:
                out.write(b"".join(chunk))
                chunk.clear()
        out.write(b"".join(chunk))
        out.flush()
    finally:
        if close:
            source.close()
    return EXIT_OK


# --- text -----------------------------------------------------------------------------------

# C0 and C1 control characters (ESC starts every terminal escape sequence) and the
# bidi overrides that reorder what a terminal shows.
_UNSAFE = dict.fromkeys(
    [*range(0x00, 0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
)
_ESCAPES = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _UNSAFE}


def neutralise(line: str) -> str:
    """``line`` with terminal control characters shown escaped (``\x1b`` -> ``\\x1b``)."""
    if line.isascii() and line.isprintable():
        return line
    return line.translate(_ESCAPES)


def _nodes(count: int | None, uncounted: str, unit: str = "node") -> str:
    if count is None:
        return uncounted
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def _reason_lines(
    reasons: Iterable[Reason], *, detailed: bool, uncounted: str = "-", unit: str = "node"
) -> list[str]:
    lines: list[str] = []
    for reason in reasons:
        lines.append(f"  {_nodes(reason.count, uncounted, unit):<10} {reason.text}")
        plugin = f" ({reason.plugin})" if reason.plugin else ""
        if detailed:
            lines.append(f"  {'':<10} {reason.code}{plugin}: {reason.info.meaning}.")
        else:
            lines.append(f"  {'':<10} {reason.code}{plugin}")
    return lines


_VERDICTS = {
    "not-eligible": "not attempted: {note}.",
    "cannot-help": "cannot help: evicting lower-priority pods would not make room on any node.",
    "no-candidate": "found no node where evicting lower-priority pods makes the pod fit.",
    "unknown": "verdict unclear (the message is cut short or gives a reason unstick does not know).",
}


def _preemption_lines(preemption: Preemption | None, *, truncated: bool) -> list[str]:
    if preemption is None:
        if truncated:
            return ["Preemption: no verdict in the text (the message was cut before it)."]
        return [
            "Preemption: no verdict in the message (kube-scheduler before 1.19, or a node was nominated)."
        ]
    verdict = preemption.verdict
    line = "Preemption: " + _VERDICTS[verdict].format(note=preemption.note or "")
    lines = [line]
    if preemption.note is not None and verdict != "not-eligible":
        lines.append(f"  {preemption.note}")
    lines.extend(_reason_lines(preemption.reasons, detailed=False))
    return lines


# Who prints the verdicts unstick reads besides kube-scheduler's (analyzers.messages.gpu_schedulers).
_SCHEDULER_TITLES = {
    "kai-scheduler": "NVIDIA KAI-Scheduler",
    "volcano": "Volcano",
    "hami-scheduler": "HAMi",
    "kueue": "Kueue (topology-aware scheduling)",
}


def _gang_lines(parsed: ParsedMessage) -> list[str]:
    gang = parsed.gang
    if gang is None:
        return []
    unit = gang.unit
    lines: list[str] = []
    where = f" in sub-group {gang.subgroup}" if gang.subgroup else ""
    if gang.found is not None and gang.required is not None:
        lines.append(
            f"Gang: room found for {gang.found} {unit}(s){where} while {gang.required} must start together: "
            f"{max(gang.required - gang.found, 0)} more {unit}(s) need room before any of them starts."
        )
    elif gang.required is not None:
        lines.append(f"Gang: {gang.required} {unit}(s){where} must start together (minAvailable).")
    if gang.unschedulable is not None and gang.total is not None:
        lines.append(f"  {gang.unschedulable} of the group's {gang.total} tasks cannot be scheduled.")
    if gang.phases:
        lines.append("  tasks: " + ", ".join(f"{n} {phase}" for phase, n in gang.phases))
    return lines


def _other_scheduler_lines(parsed: ParsedMessage) -> list[str]:
    title = _SCHEDULER_TITLES.get(parsed.scheduler or "", parsed.scheduler or "another scheduler")
    head = f"Scheduling failure, as {title} words it"
    if parsed.total_nodes is not None:
        head += f": 0 of {parsed.total_nodes} nodes can run the pod"
    if parsed.pod:
        head += f" ({parsed.pod})"
    lines = [head + "."]
    lines.extend(_gang_lines(parsed))
    if parsed.reasons:
        unit = (
            "group" if parsed.format == "kai-fit-error" and "podgroup" in parsed.message.lower() else "node"
        )
        lines.extend(_reason_lines(parsed.reasons, detailed=True, unit=unit))
    for note in parsed.notes:
        lines.append(f"Note: {note}.")
    lines.append(
        f"This verdict is {title}'s, not kube-scheduler's: unstick's simulation is kube-scheduler's, so it is "
        "read as printed and not compared with a simulation (a pod whose schedulerName names this scheduler is "
        "diagnosed from that scheduler's own events and conditions)."
    )
    if parsed.truncated:
        lines.append("The message ends without its final full stop: the last reason may be incomplete.")
    return lines


def _scheduling_lines(parsed: ParsedMessage) -> list[str]:
    if not parsed.comparable:
        return _other_scheduler_lines(parsed)
    lines: list[str] = []
    if parsed.total_nodes is not None:
        head = f"Scheduling failure: 0 of {parsed.total_nodes} nodes can run the pod"
    else:
        head = "Scheduling failure"
    if parsed.pod:
        head += f" {parsed.pod}"
    lines.append(head + ".")
    if parsed.format == "preemption-only":
        lines.append(
            "Only the preemption part of the message is here: the filter reasons (why no node fits) are "
            "missing; read them from the pod's PodScheduled condition (kubectl get pod -o yaml)."
        )
    elif parsed.head_missing:
        lines.append(
            "The text starts in the middle of the message: the node total is missing and only the reasons "
            "that are whole are listed."
        )
    elif parsed.total_nodes is None and parsed.format in ("fit-error", "fit-error-prefilter"):
        lines.append("The node total is not in the text (redacted or cut).")
    if parsed.format == "legacy-per-node":
        lines.append("kube-scheduler 1.2-1.4 listed each node; the counts below are nodes per reason.")
    prefilter = parsed.format == "fit-error-prefilter"
    if prefilter:
        lines.append("Rejected at PreFilter, before any node was tried:")
    lines.extend(_reason_lines(parsed.reasons, detailed=True, uncounted="PreFilter" if prefilter else "-"))
    for note in parsed.notes:
        lines.append(f"Note: {note}.")
    lines.append(
        "This is kube-scheduler's verdict: unstick's simulation can be compared with it (unstick analyze, "
        "kubectl unstick)."
    )
    if parsed.format not in ("reasons", "legacy-summary", "legacy-per-node", "legacy-predicates"):
        lines.extend(_preemption_lines(parsed.preemption, truncated=parsed.truncated))
    if parsed.truncated and parsed.message.rstrip().endswith("..."):
        lines.append(
            "The message is cut short (kube-scheduler cuts event messages at 1024 bytes): the last reason may "
            "be incomplete; the pod's PodScheduled condition holds the whole text."
        )
    elif parsed.truncated:
        lines.append(
            "The message ends without its final full stop: if it was cut when copied, the last reason may be "
            "incomplete; the pod's PodScheduled condition holds the whole text."
        )
    return lines


_AUTOSCALER_HEADS = {
    "ca-no-scale-up": "cluster-autoscaler did not scale up for the pod; per node group:",
    "ca-scale-up": "cluster-autoscaler is adding nodes for the pod:",
    "karpenter-failed": "Karpenter cannot launch a node for the pod; per NodePool:",
    "karpenter-nominated": "Karpenter is launching capacity for the pod; it should schedule on:",
}


def _autoscaler_lines(parsed: ParsedMessage) -> list[str]:
    lines = [_AUTOSCALER_HEADS.get(parsed.format, "Autoscaler message:")]
    unit = "NodePool" if parsed.format.startswith("karpenter") else "group"
    for reason in parsed.reasons:
        where = (
            f" [NodePool {reason.info.object_name}]" if unit == "NodePool" and reason.info.object_name else ""
        )
        lines.append(f"  {_nodes(reason.count, '-', unit):<10} {reason.text}{where}")
        plugin = f" ({reason.plugin})" if reason.plugin else ""
        lines.append(f"  {'':<10} {reason.code}{plugin}: {reason.info.meaning}.")
    lines.extend(f"  {note}" for note in parsed.notes)
    if parsed.format == "ca-no-scale-up" and not parsed.reasons:
        lines.append(
            "  No node group is named: cluster-autoscaler considered none for the pod (it discovered no node "
            "group it may scale: check its --nodes or --node-group-auto-discovery settings and the groups' tags)."
        )
    if parsed.format in ("ca-scale-up", "karpenter-nominated"):
        lines.append("  Capacity is on its way: the pod should schedule once the new node is Ready.")
    return lines


# What an error at each extension point usually means, and where to look.
_ERROR_HINTS = {
    ("PreBind", "VolumeBinding"): (
        "binding or provisioning the pod's volumes failed or timed out: read the PersistentVolumeClaims' events "
        "and the CSI provisioner's log (kubectl describe pvc)"
    ),
    ("Bind", None): (
        "the API server refused the binding (another scheduler or an earlier attempt already bound the pod, or "
        "the API server could not be reached): usually passes on retry"
    ),
    ("Reserve", "DynamicResources"): "reserving the pod's ResourceClaims failed: read the claims' status",
    (
        "PreBind",
        "DynamicResources",
    ): "writing the claims' allocation failed: read the claims' status and events",
}


def _scheduler_error_lines(parsed: ParsedMessage) -> list[str]:
    if parsed.format == "pod-deleting":
        return [f"kube-scheduler skips pod {parsed.pod}: it is being deleted (it has a deletionTimestamp)."]
    point = parsed.notes[0] if parsed.notes else "?"
    [reason] = parsed.reasons
    who = f"plugin {reason.plugin}" if reason.plugin else f"the {point} plugins"
    hint = _ERROR_HINTS.get((point, reason.plugin)) or _ERROR_HINTS.get((point, None))
    lines = [
        f"kube-scheduler error at {point}, from {who}: not a verdict about nodes. The pod stays Pending and is "
        "retried with backoff; its PodScheduled condition reads SchedulerError.",
        f"  {reason.text}",
    ]
    if hint:
        lines.append(f"  {hint[0].upper()}{hint[1:]}.")
    lines.append("  kube-scheduler's log around the event has the full error.")
    return lines


def _queue_lines(parsed: ParsedMessage) -> list[str]:
    lines = [
        "Kueue has not admitted the workload: its pods wait behind the kueue.x-k8s.io/admission scheduling "
        "gate, and kube-scheduler has not seen them yet."
    ]
    reasons = iter(parsed.reasons)
    for name, count in parsed.groups or [("", len(parsed.reasons))]:
        if name:
            lines.append(f"Pod set {name}: no ResourceFlavor fits every resource it requests:")
        for reason in itertools.islice(reasons, count):
            lines.append(f"  {reason.text}")
            lines.append(f"    {reason.code}: {reason.info.meaning}.")
    lines.extend(f"{note}." for note in parsed.notes)
    lines.extend(_gang_lines(parsed))
    lines.append(
        "Look: kubectl get workloads -n NAMESPACE -o wide; kubectl describe clusterqueue NAME (quota in use)."
    )
    return lines


_EVICTION_HEADS = {
    PDB_VIOLATION: "Eviction refused: a PodDisruptionBudget allows no disruption right now.",
    MULTIPLE_PDBS: (
        "Eviction refused: more than one PodDisruptionBudget selects the pod; the eviction API "
        "refuses such pods (HTTP 500) until the budgets no longer overlap."
    ),
    DO_NOT_DISRUPT: (
        "Disruption blocked: the pod (or node) carries Karpenter's do-not-disrupt annotation, so Karpenter "
        "will not evict it voluntarily."
    ),
    NODE_PRESSURE: "The kubelet evicted the pod: its node ran low on a resource (node-pressure eviction).",
    NODE_CONDITION: "The kubelet refused the pod: its node reports a pressure condition (admission).",
    KUBELET_ADMISSION: "The kubelet refused to admit the pod on its node (admission check failed).",
    DISRUPTION_BLOCKED: "Karpenter will not disrupt (consolidate, expire or replace) this node right now.",
    DRAIN_REFUSED: (
        "kubectl drain refused to start: the node holds pods it may not delete without a flag. Nothing was "
        "evicted, but the node stays cordoned (kubectl uncordon NODE to undo that)."
    ),
}

# What each of kubectl drain's flags does to the pods it lets through (k8s.io/kubectl/pkg/drain/filters.go).
_DRAIN_FLAGS = {
    "--force": "deletes them, and nothing re-creates a pod without a controller: recreate it elsewhere first",
    "--ignore-daemonsets": "leaves them running on the node (DaemonSet pods tolerate the cordon; they stop with it)",
    "--delete-emptydir-data": "deletes them with their emptyDir data, which is lost",
    "--delete-local-data": "deletes them with their emptyDir data, which is lost (the flag's name before 1.20)",
}


# What each Karpenter disruption blocker means (analyzers.messages.karpenter_disruption).
_BLOCKERS = {
    "nominated": (
        "a pending pod is nominated to this node (Karpenter's own scheduling simulation placed it there), so "
        "Karpenter keeps the node until that pod binds"
    ),
    "no-node-or-nodeclaim": (
        "Karpenter tracks only half of the pair: a Node without its NodeClaim or a NodeClaim whose node has not "
        "registered; it disrupts only complete pairs"
    ),
    "not-initialized": "the node is not initialized yet (not Ready, or its resources are not registered)",
    "deleting": "the node is already being deleted",
    "already-disrupting": "another disruption command already holds this node",
    "do-not-disrupt-annotation": "the node carries the karpenter.sh/do-not-disrupt annotation",
    "not-managed": "the node lacks the karpenter.sh/nodepool label: Karpenter does not manage it",
    "nodepool-missing": "the node's NodePool no longer exists",
    "instance-type-unknown": "the node's instance type is not among those Karpenter can resolve",
    "budget": "the NodePool's disruption budgets allow no disruption now (spec.disruption.budgets)",
    "unconsolidatable": "consolidation found no cheaper or emptier arrangement that keeps every pod scheduled",
}


def _eviction_lines(parsed: ParsedMessage) -> list[str]:
    ev = parsed.eviction
    assert ev is not None
    lines = [_EVICTION_HEADS.get(ev.kind, "Eviction failure.")]
    if ev.blocker is not None:
        lines.append(f"  {ev.detail}")
        lines.append(f"  {ev.blocker}: {_BLOCKERS.get(ev.blocker, 'see the NodeClaim and Node events')}.")
        return lines
    if ev.pod and not ev.refusals:
        lines.append(f"  pod: {ev.namespace + '/' if ev.namespace else ''}{ev.pod}")
    if ev.pdb:
        lines.append(f"  PodDisruptionBudget: {ev.namespace + '/' if ev.namespace else ''}{ev.pdb}")
    elif ev.budgets:
        lines.append(f"  PodDisruptionBudgets: {', '.join(ev.budgets)}")
    if ev.resource:
        lines.append(f"  resource: {ev.resource}")
    for what, flag, pods in ev.refusals:
        lines.append(f"  {what}: {', '.join(pods)}")
        lines.append(f"    {flag} {_DRAIN_FLAGS.get(flag, 'lets kubectl drain go on')}.")
    if ev.desired_healthy is not None and ev.current_healthy is not None:
        lines.append(
            f"  it needs {ev.desired_healthy} healthy pods and has {ev.current_healthy}: "
            f"evicting one would leave {ev.current_healthy - 1}, so disruptionsAllowed is "
            f"{max(ev.current_healthy - ev.desired_healthy, 0)}."
        )
    if ev.sync_failed:
        lines.append(
            "  The budget's controller failed to sync it (fail-safe): the API refuses every eviction until the "
            "controller can compute the budget again, whatever the pods' health."
        )
    if ev.kind == PDB_VIOLATION:
        lines.append(
            "  The eviction API answers 429 until a replacement pod is Ready elsewhere; "
            "kubectl drain retries every 5s" + (" (it is retrying)." if ev.will_retry else ".")
        )
    if ev.detail and not ev.refusals and (ev.kind != PDB_VIOLATION or ev.sync_failed):
        lines.append(f"  {ev.detail}")
    return lines


def render_text(parsed: ParsedMessage) -> str:
    if parsed.kind == SCHEDULING:
        lines = _scheduling_lines(parsed)
    elif parsed.kind == AUTOSCALER:
        lines = _autoscaler_lines(parsed)
    elif parsed.kind == QUEUE:
        lines = _queue_lines(parsed)
    elif parsed.kind == SCHEDULER_ERROR:
        lines = _scheduler_error_lines(parsed)
    elif parsed.kind == EVICTION and parsed.eviction is not None:
        lines = _eviction_lines(parsed)
    else:
        lines = [
            "unstick does not recognise this as a scheduling, scheduler error, autoscaler, Kueue or eviction message."
        ]
        if parsed.message:
            lines.append(f"  {parsed.message[:200]}")
    return "\n".join(neutralise(line) for line in lines) + "\n"
