"""Parsing kube-scheduler's FailedScheduling message, every generation of it.

The layouts (upstream ``pkg/scheduler/framework/types.go``, ``FitError.Error``,
and before 1.19 ``pkg/scheduler/core/generic_scheduler.go``):

- 1.5-1.6: ``No nodes are available that match all of the following predicates:: Insufficient cpu (2),
  MatchNodeSelector (1).`` (``... of the predicates: ...`` in 1.7); predicate names, count in brackets.
- 1.8-1.9: ``0/3 nodes are available: 2 Insufficient cpu, 1 MatchNodeSelector.``
- 1.10+: ``0/N nodes are available: <count> <reason>, <count> <reason>.``: ``"<count> <reason>"``
  strings sorted as strings and joined with ``", "``.
- 1.19+: the PostFilter (preemption) verdict is appended: `` preemption: 0/N nodes are available:
  <count> <reason>, ....`` or a note (``preemption: not eligible due to preemptionPolicy=Never.``).
  Other PostFilter plugins (DRA: ``no new claims to deallocate``, ``still not schedulable``) come
  before it, joined with ``", "``.
- 1.26+: a PreFilter rejection is printed alone and without count (``0/3 nodes are available: pod has
  unbound immediate PersistentVolumeClaims.``); 1.26-1.28 end the preemption part with ``..``.

Reasons may contain commas (1.18-1.23 ``node(s) had taint {k: v}, that the pod didn't tolerate``):
a comma-separated piece without a count continues the reason before it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Final

from analyzers.messages.model import (
    SCHEDULING,
    ParsedMessage,
    Preemption,
    Reason,
    make_reason,
    make_scheduling,
)
from analyzers.messages.reasons import NO_NODES, OTHER, classify_reason, classify_truncated
from analyzers.messages.text import until_terminator

HEADER_RE: Final = re.compile(
    r"([0-9]{1,9})/([0-9]{1,9}) nodes are (?:un)?available(?: to run pod ([^\s:]+))?:"
)
_HEADER_ANCHOR: Final = " nodes are "


def find_header(text: str, start: int = 0) -> re.Match[str] | None:
    """The first ``N/M nodes are available:`` header in ``text`` from ``start``.

    Looks for the literal " nodes are " (a fast scan) and matches the header
    regex where its numbers begin, instead of letting the regex try every
    position of a long prefix (event columns, log lines).
    """
    if start == 0 and text.startswith("0/"):
        match = HEADER_RE.match(text)
        if match is not None:
            return match
    at = text.find(_HEADER_ANCHOR, start)
    while at >= 0:
        begin = at
        while begin > start and text[begin - 1].isdigit():
            begin -= 1
        if begin < at and begin - 1 > start and text[begin - 1] == "/" and text[begin - 2].isdigit():
            begin -= 2
            while begin > start and text[begin - 1].isdigit():
                begin -= 1
            match = HEADER_RE.match(text, begin)
            if match is not None:
                return match
        at = text.find(_HEADER_ANCHOR, at + 1)
    return None


# Volcano and kube-batch: "all nodes are unavailable: ..." (no count of nodes).
_ALL_NODES_HEADER_RE: Final = re.compile(r"()all nodes are unavailable:()()")
_LEGACY_HEADER_RE: Final = re.compile(
    r"No nodes are available that match all of the (?:following )?predicates:*"
)
_LEGACY_TOKEN_RE: Final = re.compile(r"^(.*?)\s*\(([0-9]{1,9})\)$")
_PREEMPTION: Final = "preemption:"
_PREEMPTION_PREFIX: Final = "preemption: "


# --- reason lists --------------------------------------------------------------------

# ", " followed by a count starts the next reason; any other comma is part of a reason.
_ITEM_SPLIT_RE: Final = re.compile(r",\s+(?=[0-9]+ )")
_TRAILING_COUNT_RE: Final = re.compile(r",\s*[0-9]*$")
_COMMA_WITHOUT_COUNT_RE: Final = re.compile(r",(?!\s+[0-9]+ )")


def _reason(count: int | None, text: str) -> Reason:
    return make_reason(count, text, classify_reason(text))


def _piece(piece: str) -> Reason:
    """``"<count> <reason>"`` (or a reason without count) as a Reason."""
    count, _, rest = piece.partition(" ")
    if len(count) <= 9 and count.isascii() and count.isdigit():
        rest = rest.strip()
        return make_reason(int(count), rest, classify_reason(rest))
    piece = piece.strip()
    return make_reason(None, piece, classify_reason(piece))


def parse_reason_list(text: str, *, truncated: bool = False) -> tuple[Reason, ...]:
    """Parse ``"2 Insufficient cpu, 1 node(s) had taint {a: b}, that the pod didn't tolerate"``.

    A comma starts a new reason only when a count follows it, so reasons that
    contain commas stay whole. A text that does not start with a count is one
    reason (a PreFilter message, which may itself contain commas). With
    ``truncated`` the last reason may be cut short: it is matched against the
    beginnings of known reasons, and a dangling ``, 1`` is dropped.
    """
    if truncated:
        text = _TRAILING_COUNT_RE.sub("", text.strip())
    text = text.strip().rstrip(", ")
    if not text:
        return ()
    if text[0].isdigit():
        pieces = (
            text.split(", ") if _COMMA_WITHOUT_COUNT_RE.search(text) is None else _ITEM_SPLIT_RE.split(text)
        )
        reasons = []
        for piece in pieces:  # _piece, inlined: this loop is the parser's hottest
            count, _, rest = piece.partition(" ")
            if len(count) <= 9 and count.isascii() and count.isdigit():
                rest = rest.strip()
                reasons.append(make_reason(int(count), rest, classify_reason(rest)))
            else:
                reasons.append(_piece(piece))
    else:
        reasons = [_reason(None, text)]
    if truncated:
        last = reasons[-1]
        if last.info.code == OTHER:
            guess = classify_truncated(last.text)
            if guess is not None:
                reasons[-1] = Reason(last.count, last.text, guess)
    return tuple(reasons)


def _parse_legacy_list(text: str) -> tuple[Reason, ...]:
    """``Insufficient cpu (2), MatchNodeSelector (1)``: reason, then the count in brackets."""
    reasons: list[Reason] = []
    for token in text.split(", "):
        token = token.strip()
        if not token:
            continue
        match = _LEGACY_TOKEN_RE.match(token)
        if match is not None:
            reasons.append(_reason(int(match.group(2)), match.group(1)))
        else:
            reasons.append(_reason(None, token))
    return tuple(reasons)


# --- whole messages --------------------------------------------------------------------


def _next_message_start(body: str) -> int:
    """Where a second, unrelated message begins in ``body`` (a paste of several
    events), or -1. The preemption part's own header does not count."""
    match = find_header(body)
    while match is not None:
        start = match.start()
        if not body.endswith(_PREEMPTION_PREFIX, 0, start) and not body.endswith(_PREEMPTION, 0, start):
            return start
        match = find_header(body, match.end())
    legacy = _LEGACY_HEADER_RE.search(body)
    return legacy.start() if legacy is not None else -1


@lru_cache(maxsize=16384)
def _parse_preemption(text: str) -> tuple[Preemption, bool]:
    """Parse what follows ``preemption:``; returns (preemption, truncated).
    Cached: the verdict part repeats far more than whole messages do."""
    text = text.strip()
    header = HEADER_RE.match(text)
    if header is not None:
        body, _, found = until_terminator(text[header.end() :])
        reasons = parse_reason_list(body, truncated=not found)
        return Preemption(int(header.group(2)), reasons, None), not found
    note, _, found = until_terminator(text)
    note = note.strip()
    if not note:
        return Preemption(None, (), None), not found
    info = classify_reason(note)
    if not found and info.code == OTHER:
        info = classify_truncated(note) or info
    return Preemption(None, (), note, info), not found


def _notes(rest: str) -> tuple[str, ...]:
    return tuple(n for n in (part.strip().strip(".").strip() for part in rest.split(",")) if n)


def parse_fit_error(text: str, header: re.Match[str]) -> ParsedMessage:
    """Parse a ``0/N nodes are available: ...`` message whose header is ``header``
    (matched in the cleaned ``text``)."""
    start, end = header.span()
    total, pod = header.group(2, 3)
    body = text[end:]
    preemption_at = body.find(_PREEMPTION)
    if body.count(_HEADER_ANCHOR) > (preemption_at >= 0) or "No nodes are" in body:
        cut = _next_message_start(body)
        if cut >= 0:
            body = body[:cut]
            preemption_at = body.find(_PREEMPTION)
    if preemption_at < 0:
        reasons_text, _, found = until_terminator(body)
        # Only kube-scheduler ends its message with a full stop (Volcano does not).
        truncated = not found and text.endswith(" available:", start, end)
        preemption = None
        notes: tuple[str, ...] = ()
    else:
        filter_part = body[:preemption_at]
        reasons_text, rest, found = until_terminator(filter_part)
        if not found:
            # "… selector, preemption: …" without a full stop: no notes to split off.
            reasons_text, rest = filter_part, ""
        preemption, truncated = _parse_preemption(body[preemption_at + 11 :])
        notes = _notes(rest) if rest and not rest.isspace() else ()
    reasons = parse_reason_list(reasons_text, truncated=truncated and preemption is None)
    prefilter = bool(reasons) and reasons[0].count is None and all(r.count is None for r in reasons)
    stop = end + len(body)
    return make_scheduling(
        "fit-error-prefilter" if prefilter else "fit-error",
        text if start == 0 and stop == len(text) else text[start:stop].strip(),
        int(total) if total else None,
        reasons,
        preemption,
        notes,
        pod,
        truncated,
    )


def parse_legacy(text: str, header: re.Match[str]) -> ParsedMessage:
    """Parse the 1.5-1.7 ``No nodes are available that match all of the ... predicates`` form."""
    body = text[header.end() :]
    cut = _next_message_start(body)
    if cut >= 0:
        body = body[:cut]
    reasons_text, _, found = until_terminator(body)
    return ParsedMessage(
        kind=SCHEDULING,
        format="legacy-predicates",
        message=text[header.start() : header.end() + len(body)].strip(),
        reasons=_parse_legacy_list(reasons_text),
        truncated=not found,
    )


def parse_scheduling(text: str) -> ParsedMessage | None:
    """Parse a cleaned text as a scheduling failure; None if it is not one.

    Tries, in order: the FitError layout anywhere in the text (so event columns
    and log prefixes before it do not matter), the 1.5-1.7 predicates layout,
    and a bare reason list (``Insufficient cpu``, ``2 Insufficient cpu, 1
    node(s) were unschedulable``, ``waiting for scheduling gates: [x]``, a
    PodScheduled condition message) of which at least one reason is known.
    """
    header = find_header(text) or _ALL_NODES_HEADER_RE.search(text)
    if header is not None:
        return parse_fit_error(text, header)
    legacy = _LEGACY_HEADER_RE.search(text)
    if legacy is not None:
        return parse_legacy(text, legacy)
    body = until_terminator(text)[0]
    reasons = parse_reason_list(body)
    if not reasons or all(r.info.code == OTHER for r in reasons):
        return None
    return ParsedMessage(
        kind=SCHEDULING,
        format="reasons",
        message=body.strip(),
        # ErrNoNodesAvailable: returned when the scheduler's snapshot has no node at all.
        total_nodes=0 if len(reasons) == 1 and reasons[0].info.code == NO_NODES else None,
        reasons=reasons,
    )


def clear_caches() -> None:
    """Empty the parser's inner caches (for benchmarks and tests)."""
    _parse_preemption.cache_clear()
    classify_reason.cache_clear()


# --- rendering (kube-scheduler's own format, for the simulator and tests) ----------------


def _histogram(reasons: Mapping[str, int] | Iterable[tuple[str, int]]) -> str:
    items = reasons.items() if isinstance(reasons, Mapping) else reasons
    # FitError.Error: fmt.Sprintf("%v %v", count, reason), then sort.Strings.
    return ", ".join(sorted(f"{count} {reason}" for reason, count in items))


def format_fit_error(
    total_nodes: int,
    reasons: Mapping[str, int] | Iterable[tuple[str, int]] = (),
    *,
    prefilter_msg: str = "",
    postfilter_msg: str = "",
) -> str:
    """Render a FailedScheduling message exactly as kube-scheduler 1.26+ does
    (``FitError.Error`` in ``pkg/scheduler/framework/types.go``)."""
    message = f"0/{total_nodes} nodes are available:"
    if prefilter_msg:
        message += f" {prefilter_msg}."
    else:
        histogram = _histogram(reasons)
        if histogram:
            message += f" {histogram}."
    if postfilter_msg:
        message += f" {postfilter_msg}"
    return message


def format_preemption(total_nodes: int, reasons: Mapping[str, int] | Iterable[tuple[str, int]]) -> str:
    """The DefaultPreemption PostFilter message: ``preemption: `` + the FitError of
    the dry run (``pkg/scheduler/framework/preemption/preemption.go``)."""
    return "preemption: " + format_fit_error(total_nodes, reasons)
