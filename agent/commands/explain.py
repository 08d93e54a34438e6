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
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any

import orjson

from agent.cli import EXIT_OK, UserError
from analyzers.messages import (
    EVICTION,
    MULTIPLE_PDBS,
    PDB_VIOLATION,
    SCHEDULING,
    ParsedMessage,
    Preemption,
    Reason,
    parse_message,
)

_FLUSH_EVERY = 1024


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
    return EXIT_OK


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


def _nodes(count: int | None, uncounted: str) -> str:
    if count is None:
        return uncounted
    return f"{count} node" if count == 1 else f"{count} nodes"


def _reason_lines(reasons: Iterable[Reason], *, detailed: bool, uncounted: str = "-") -> list[str]:
    lines: list[str] = []
    for reason in reasons:
        lines.append(f"  {_nodes(reason.count, uncounted):<10} {reason.text}")
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


def _preemption_lines(preemption: Preemption | None) -> list[str]:
    if preemption is None:
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


def render_text(parsed: ParsedMessage) -> str:
    lines: list[str] = []
    if parsed.kind == SCHEDULING:
        if parsed.total_nodes is not None:
            head = f"Scheduling failure: 0 of {parsed.total_nodes} nodes can run the pod"
        else:
            head = "Scheduling failure"
        if parsed.pod:
            head += f" {parsed.pod}"
        lines.append(head + ".")
        prefilter = parsed.format == "fit-error-prefilter"
        if prefilter:
            lines.append("Rejected at PreFilter, before any node was tried:")
        lines.extend(
            _reason_lines(parsed.reasons, detailed=True, uncounted="PreFilter" if prefilter else "-")
        )
        for note in parsed.notes:
            lines.append(f"Note: {note}.")
        if parsed.format != "reasons":
            lines.extend(_preemption_lines(parsed.preemption))
        if parsed.truncated:
            lines.append("The message is cut short: the last reason may be incomplete.")
    elif parsed.kind == EVICTION and parsed.eviction is not None:
        ev = parsed.eviction
        if ev.kind == PDB_VIOLATION:
            lines.append("Eviction refused: a PodDisruptionBudget allows no disruption right now.")
        elif ev.kind == MULTIPLE_PDBS:
            lines.append(
                "Eviction refused: more than one PodDisruptionBudget selects the pod; the eviction API "
                "refuses such pods (HTTP 500) until the budgets no longer overlap."
            )
        else:
            lines.append("Eviction failure.")
        if ev.pod:
            lines.append(f"  pod: {ev.namespace + '/' if ev.namespace else ''}{ev.pod}")
        if ev.pdb:
            lines.append(f"  PodDisruptionBudget: {ev.namespace + '/' if ev.namespace else ''}{ev.pdb}")
        if ev.desired_healthy is not None and ev.current_healthy is not None:
            lines.append(
                f"  it needs {ev.desired_healthy} healthy pods and has {ev.current_healthy}: "
                f"evicting one would leave {ev.current_healthy - 1}, so disruptionsAllowed is "
                f"{max(ev.current_healthy - ev.desired_healthy, 0)}."
            )
        if ev.kind == PDB_VIOLATION:
            lines.append(
                "  The eviction API answers 429 until a replacement pod is Ready elsewhere; "
                "kubectl drain retries every 5s" + (" (it is retrying)." if ev.will_retry else ".")
            )
        if ev.detail and ev.kind != PDB_VIOLATION:
            lines.append(f"  {ev.detail}")
    else:
        lines.append("unstick does not recognise this as a scheduling or eviction failure.")
        if parsed.message:
            lines.append(f"  {parsed.message[:200]}")
    return "\n".join(lines) + "\n"
