"""Parsing kube-scheduler's FailedScheduling message, every generation of it.

The layouts (upstream ``pkg/scheduler/framework/types.go``, ``FitError.Error``,
before 1.19 ``pkg/scheduler/core/generic_scheduler.go``, before 1.6
``plugin/pkg/scheduler/generic_scheduler.go``):

- 1.2-1.4: ``pod (NAME) failed to fit in any node`` then one line per node, ``fit failure on node
  (NODE): REASON`` (1.2: reasons joined with ``,``; 1.3: one reason; 1.4: joined with ``, ``); the
  parser counts the nodes per reason.
- 1.5: ``pod (NAME) failed to fit in any node`` + newline + ``fit failure summary on nodes : REASON (N),
  REASON (N)`` (``"%v (%v)"`` strings sorted and joined with ``", "``); pastes also separate them with
  newlines, spaces or `` - ``.
- 1.6: ``No nodes are available that match all of the following predicates:: Insufficient cpu (2),
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

Pieces of messages: kube-scheduler cuts an event message longer than 1024 bytes
to its first 1020 and appends `` ...`` (``truncateMessage`` in
``pkg/scheduler/schedule_one.go``, ``validation.NoteLengthLimit``); the
PodScheduled condition keeps the whole text. A paste may also start in the
middle (only the ``preemption: 0/N nodes are available: ...`` tail, a quote that
begins inside the reasons) or have its total redacted (``0/x``) or spaced
(``0 /3``). The parser reports what is there: the preemption histogram is never
taken for the filter verdict, a headless filter part has an unknown total, and
no reason is ever a header, empty, or a bare count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Final

from analyzers.messages.model import (
    KUBE_SCHEDULER,
    SCHEDULING,
    ParsedMessage,
    Preemption,
    Reason,
    make_reason,
    make_scheduling,
)
from analyzers.messages.reasons import (
    NO_NODES,
    OTHER,
    PREEMPTION_NO_VICTIMS,
    PREEMPTION_NOT_ELIGIBLE,
    PREEMPTION_NOT_HELPFUL,
    PREEMPTION_PLACEMENT_FOUND,
    ReasonInfo,
    beginning_codes,
    classify_reason,
    classify_truncated,
)
from analyzers.messages.text import quoted_until, until_terminator

# N of "0/N" may be redacted ("0/x", "0/N", "0/<n>") or spaced ("0 /3") in a paste.
HEADER_RE: Final = re.compile(
    r"([0-9]{1,9}|[xX?*#]{1,9}|N) ?/ ?([0-9]{1,9}|[xX?*#]{1,9}|N|<[^<>\s/]{1,20}>|\.\.\.) "
    r"nodes are (?:un)?available(?: to run pod ([^\s:]+))?:"
)
_HEADER_TAIL_RE: Final = re.compile(
    r"(?:[0-9]{1,9}|[xX?*#]{1,9}|N) ?/ ?(?:[0-9]{1,9}|[xX?*#]{1,9}|N|<[^<>\s/]{1,20}>|\.\.\.)\Z"
)
_HEADER_ANCHOR: Final = " nodes are "
# What is left of a header cut at the front: "odes are available:", "are available:".
_PARTIAL_HEADER_RE: Final = re.compile(r"(?:\S+ )?are (?:un)?available(?: to run pod ([^\s:]+))?:")


def header_total(match: re.Match[str]) -> int | None:
    """N of a header match, or None when it was redacted."""
    total = match.group(2)
    return int(total) if total.isdigit() else None


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
        tail = _HEADER_TAIL_RE.search(text, max(start, at - 48), at)
        if tail is not None:
            match = HEADER_RE.match(text, tail.start())
            if match is not None:
                return match
        at = text.find(_HEADER_ANCHOR, at + 1)
    return None


def _after_preemption_marker(text: str, index: int) -> bool:
    """Whether the header at ``index`` is the preemption part's own (``preemption:
    0/N ...``, or what is left of the marker when a paste starts inside it)."""
    if text.endswith(_PREEMPTION, 0, index) or text.endswith(_PREEMPTION_PREFIX, 0, index):
        return True
    before = text[max(0, index - 12) : index].split()
    return (
        bool(before)
        and len(before[-1]) >= 3
        and "preemption:".endswith(before[-1])
        and (len(before) == 1 and index <= 12)
    )


# Volcano and kube-batch: "all nodes are unavailable: ..." (no count of nodes).
_ALL_NODES_HEADER_RE: Final = re.compile(r"()all nodes are unavailable:()()")
_LEGACY_HEADER_RE: Final = re.compile(
    r"No nodes are available that match all of the (?:following )?predicates:*"
)
_LEGACY_TOKEN_RE: Final = re.compile(r"^(.*?)\s*\(([0-9]{1,9})\)$")
_PREEMPTION: Final = "preemption:"
_PREEMPTION_PREFIX: Final = "preemption: "
# truncateMessage (pkg/scheduler/schedule_one.go) ends a cut event message with " ...".
_CUT_MARK_RE: Final = re.compile(r" \.\.\.(?=\s|$)")
# What no reason text ever contains: a header, or the preemption marker.
_NOT_IN_A_REASON: Final = ("nodes are available", "are available:", "are unavailable:", "preemption:")


# --- reason lists --------------------------------------------------------------------

# ", " followed by a count starts the next reason; any other comma is part of a reason.
_ITEM_SPLIT_RE: Final = re.compile(r",\s+(?=[0-9]+ )")
_TRAILING_COUNT_RE: Final = re.compile(r",\s*[0-9]*$")
_COMMA_WITHOUT_COUNT_RE: Final = re.compile(r",(?!\s+[0-9]+ )")
# PreFilter messages that hold ", <number> " themselves stay one reason.
_HEAD_PIECE_RE: Final = re.compile(r"(?:pod has|persistentvolumeclaim|resourceclaim|waiting for)\b")
_PREEMPTION_CODES: Final = frozenset({PREEMPTION_NO_VICTIMS, PREEMPTION_NOT_HELPFUL, PREEMPTION_NOT_ELIGIBLE})


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


def _is_reason_text(text: str) -> bool:
    """False for what a reason never is: empty, a bare count, or text holding a header."""
    return bool(text) and not text.isdigit() and not any(marker in text for marker in _NOT_IN_A_REASON)


def parse_reason_list(text: str, *, truncated: bool = False, headed: bool = True) -> tuple[Reason, ...]:
    """Parse ``"2 Insufficient cpu, 1 node(s) had taint {a: b}, that the pod didn't tolerate"``.

    A comma starts a new reason only when a count follows it, so reasons that
    contain commas stay whole. A text that does not start with a count is one
    reason (a PreFilter message, which may itself contain commas). With
    ``truncated`` the last reason may be cut short: it is matched against the
    beginnings of known reasons, and a dangling ``, 1`` is dropped. Pieces that
    are empty, bare counts or hold a header are dropped. ``headed``: the text
    follows a header, so its first piece begins a reason even without a count.
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
                if rest and not rest.isdigit():
                    reasons.append(make_reason(int(count), rest, classify_reason(rest)))
            else:
                reasons.append(_piece(piece))
    elif _ITEM_SPLIT_RE.search(text) is not None and _HEAD_PIECE_RE.match(text) is None:
        # "<reason>, 3 <reason>, ...": a list whose first count is missing (cut at
        # the front). The first piece is uncounted; the others are whole.
        first, *rest_pieces = _ITEM_SPLIT_RE.split(text)
        reasons = [_reason(None, first.strip()), *(_piece(p) for p in rest_pieces)]
    else:
        reasons = [_reason(None, text)]
    if "available" in text or _PREEMPTION in text or any(not r.text for r in reasons):
        reasons = [r for r in reasons if _is_reason_text(r.text)]
    if truncated and reasons:
        last = reasons[-1]
        # A cut piece is read as the beginning of a known reason only where a reason begins:
        # after a header or a count. A bare piece without either ("pod affi ...") may have
        # been cut at both ends, and begin in the middle of any reason.
        starts_a_reason = headed or last.count is not None or len(reasons) > 1
        if last.info.code == OTHER and starts_a_reason:
            guess = classify_truncated(last.text)
            if guess is not None:
                reasons[-1] = Reason(last.count, last.text, guess)
        elif last.info.resource is not None:
            # "Insufficient nvidia.com/g ...": the resource name may be cut.
            reasons[-1] = Reason(last.count, last.text, ReasonInfo(last.info.code, last.info.plugin))
    return tuple(reasons)


def _complete_reasons(fragment: str) -> tuple[Reason, ...]:
    """The reasons of a list whose beginning is missing: the first piece may be
    cut (its count or its text), so it is kept only when what is left of it is a
    whole known reason ("pod has unbound immediate PersistentVolumeClaims"), and
    then without its count; the pieces after a ``", <count> "`` boundary are whole."""
    pieces = _ITEM_SPLIT_RE.split(fragment.strip().rstrip(", "))
    first = _piece(pieces[0]) if pieces[0].strip() else None
    head: tuple[Reason, ...] = ()
    if first is not None and first.code != OTHER and _is_reason_text(first.text):
        head = (make_reason(None, first.text, first.info),)
    if len(pieces) < 2:
        return head
    return head + parse_reason_list(", ".join(pieces[1:]))


_LEGACY_TOKEN_SEP_RE: Final = re.compile(r"\s*(?:[,;]|-(?=\s))?\s*")


def _parse_legacy_list(text: str) -> tuple[Reason, ...]:
    """``Insufficient cpu (2), MatchNodeSelector (1)``: reason, then the count in brackets
    (``"%v (%v)"`` joined with ``", "``; pastes also use newlines, spaces or `` - ``)."""
    reasons: list[Reason] = []
    pos = 0
    while pos < len(text):
        pos = _LEGACY_TOKEN_SEP_RE.match(text, pos).end()  # type: ignore[union-attr]  # always matches
        match = _LEGACY_COUNTED_RE.match(text, pos)
        if match is None:
            break
        reason = match.group(1).strip()
        if _is_reason_text(reason):
            reasons.append(_reason(int(match.group(2)), reason))
        pos = match.end()
    rest = text[pos:].strip().strip(".,;- ").strip()
    if rest and not reasons:
        # No count at all: one reason per comma-separated token.
        reasons = [_reason(None, t.strip()) for t in rest.split(",") if _is_reason_text(t.strip())]
    return tuple(reasons)


_LEGACY_COUNTED_RE: Final = re.compile(r"([^,;()]*?[^,;()\s])\s*\(([0-9]{1,9})\)")


# --- whole messages --------------------------------------------------------------------


def _next_message_start(body: str) -> int:
    """Where a second, unrelated message begins in ``body`` (a paste of several
    events), or -1. The preemption part's own header does not count."""
    match = find_header(body)
    while match is not None:
        start = match.start()
        if not _after_preemption_marker(body, start):
            return start
        match = find_header(body, match.end())
    legacy = _LEGACY_HEADER_RE.search(body)
    return legacy.start() if legacy is not None else -1


def _until_end(text: str) -> tuple[str, str, bool, bool]:
    """``until_terminator`` that also knows kube-scheduler's cut mark: returns
    (before, after, found, cut). A text cut by ``truncateMessage`` ends in `` ...``,
    which looks like a terminator after a space."""
    before, after, found = until_terminator(text)
    if found and ((before.endswith(" ") and text.startswith("...", len(before))) or after.startswith("...")):
        # " ..." after a word, or after a full stop that was part of a name
        # ("{example. ..." of example.com) or ended the sentence.
        return before.rstrip(), "", False, True
    # A full stop a terminal's wrap moved to the next line ("taint(s)\n. no new ...").
    return before.rstrip(" ") if found else before, after, found, False


@lru_cache(maxsize=16384)
def _parse_preemption(text: str) -> tuple[Preemption, bool]:
    """Parse what follows ``preemption:``; returns (preemption, truncated).
    Cached: the verdict part repeats far more than whole messages do."""
    text = text.strip()
    header = HEADER_RE.match(text)
    if header is not None:
        body, _, found, _ = _until_end(text[header.end() :])
        reasons = parse_reason_list(body, truncated=not found)
        return Preemption(header_total(header), reasons, None), not found
    note, _, found, _ = _until_end(text)
    note = note.strip()
    if not note or (not found and note[:1].isdigit()):
        # Nothing, or a header cut short ("0/10 nodes are avai"): no verdict.
        return Preemption(None, (), None), not found
    info = classify_reason(note)
    if info.code == PREEMPTION_PLACEMENT_FOUND:
        # 1.37's success note ends the message without a full stop: complete as it is.
        return Preemption(None, (), note, info), False
    if not found and info.code == OTHER:
        info = classify_truncated(note) or info
    return Preemption(None, (), note, info), not found


# PostFilter messages besides preemption's: DynamicResources' (dynamicresources.go) and an
# error from a PostFilter plugin (pkg/scheduler/framework/types_test.go's own table).
_POSTFILTER_NOTE_RE: Final = re.compile(
    r"\s*(?:no new claims to deallocate|still not schedulable|error running postfilter plugin|running postfilter plugin)",
    re.IGNORECASE,
)


def _notes(rest: str) -> tuple[str, ...]:
    return tuple(
        n
        for n in (part.strip().strip(".").strip() for part in rest.split(","))
        if n and not n.startswith("...")
    )


def parse_fit_error(
    text: str,
    start: int,
    end: int,
    total: int | None,
    pod: str | None,
    *,
    head_missing: bool = False,
) -> ParsedMessage:
    """Parse a ``0/N nodes are available: ...`` message whose header spans
    ``text[start:end]`` (``total`` is N, None when not printed). A message a quote
    opened ends at its closing quote (the message is whole: its full stop is
    restored when the quote left it out)."""
    quote_end = quoted_until(text, start)
    body = text[end:quote_end]
    if quote_end < len(text) and not body.rstrip().endswith("."):
        body = body.rstrip() + "."
    preemption_at = body.find(_PREEMPTION)
    if body.count(_HEADER_ANCHOR) > (preemption_at >= 0) or "No nodes are" in body:
        cut = _next_message_start(body)
        if cut >= 0:
            body = body[:cut]
            preemption_at = body.find(_PREEMPTION)
    mark = body.find(" ...")
    if mark >= 0 and (found_mark := _CUT_MARK_RE.search(body, mark)) is not None:
        mark = found_mark.start()
    else:
        mark = -1
    if mark >= 0:
        # truncateMessage's mark: the message ends there, whatever follows in the paste.
        body = body[: mark + 4]
        if preemption_at > mark:
            preemption_at = -1
    filter_cut = False
    if preemption_at < 0:
        reasons_text, rest, found, cut_mark = _until_end(body)
        # Only kube-scheduler ends its message with a full stop (Volcano does not).
        filter_cut = cut_mark or (not found and text.endswith(" available:", start, end))
        truncated = filter_cut or mark >= 0
        preemption = None
        # A PostFilter message without preemption's (1.19+ FitError.Error appends it):
        # kept when it is one kube-scheduler writes, never the prose after a paste.
        notes: tuple[str, ...] = (rest.strip().rstrip("."),) if _POSTFILTER_NOTE_RE.match(rest) else ()
    else:
        filter_part = body[:preemption_at]
        reasons_text, rest, found, _ = _until_end(filter_part)
        if not found:
            # "… selector, preemption: …" without a full stop: no notes to split off.
            reasons_text, rest = filter_part, ""
        preemption, truncated = _parse_preemption(body[preemption_at + 11 :])
        truncated = truncated or mark >= 0
        notes = _notes(rest) if rest and not rest.isspace() else ()
    reasons = parse_reason_list(reasons_text, truncated=filter_cut)
    prefilter = bool(reasons) and all(r.count is None for r in reasons)
    stop = min(end + len(body), quote_end)
    return make_scheduling(
        "fit-error-prefilter" if prefilter else "fit-error",
        text if start == 0 and stop == len(text) else text[start:stop].strip(),
        total,
        reasons,
        preemption,
        notes,
        pod,
        truncated,
        head_missing,
    )


def _parse_preemption_only(text: str, marker: int, header: int) -> ParsedMessage:
    """A text whose only header is the preemption part's (at ``header``, after the
    ``preemption:`` marker at ``marker``): the PostFilter verdict, and of the
    filter part only the reasons that are whole."""
    preemption, truncated = _parse_preemption(text[header:])
    fragment = text[:marker]
    reasons_text, rest, found, _ = _until_end(fragment)
    if not found:
        reasons_text, rest = fragment, ""
    reasons = _complete_reasons(reasons_text)
    notes = _notes(rest) if rest and not rest.isspace() else ()
    # A PreFilter rejection is printed without a count: one uncounted reason is all of it.
    prefilter = len(reasons) == 1 and reasons[0].count is None and not reasons_text.strip()[:1].isdigit()
    return make_scheduling(
        ("fit-error-prefilter" if prefilter else "fit-error") if reasons else "preemption-only",
        text.strip(),
        None,
        reasons,
        preemption,
        notes,
        None,
        truncated,
        True,
    )


def parse_legacy(text: str, header: re.Match[str]) -> ParsedMessage:
    """Parse the 1.6-1.7 ``No nodes are available that match all of the ... predicates`` form."""
    body = text[header.end() :]
    cut = _next_message_start(body)
    if cut >= 0:
        body = body[:cut]
    reasons_text, _, _, cut_mark = _until_end(body)
    return ParsedMessage(
        kind=SCHEDULING,
        scheduler=KUBE_SCHEDULER,
        format="legacy-predicates",
        message=text[header.start() : header.end() + len(body)].strip(),
        reasons=_parse_legacy_list(reasons_text),
        truncated=cut_mark,
    )


# 1.2-1.5 (plugin/pkg/scheduler/generic_scheduler.go, FitError.Error).
_POD_FAILED_RE: Final = re.compile(r"pod \(([^()\s]*)\) failed to fit in any node")
_SUMMARY_RE: Final = re.compile(r"fit failure summary on nodes ?: ?")
_PER_NODE_RE: Final = re.compile(r"fit failure on node \(([^()\s]*)\) ?: ?")
# 1.2-1.4 per-node reasons: "Insufficient <resource>" or a predicate name.
_PER_NODE_REASON_RE: Final = re.compile(r"Insufficient [^\s,]+|[A-Za-z][A-Za-z0-9]*")


def _per_node_reasons(segment: str, last: bool) -> list[str]:
    """The reasons of one ``fit failure on node (NODE): ...`` line. Reasons of
    these releases are ``Insufficient <resource>`` or one predicate name, so
    what follows them on the last line (the next event of a paste) is dropped."""
    out: list[str] = []
    for token in segment.split(","):
        token = token.strip()
        if not token:
            continue
        if classify_reason(token).code != OTHER:
            out.append(token)
            continue
        match = _PER_NODE_REASON_RE.match(token)
        if match is not None and (last or match.end() < len(token)):
            out.append(match.group(0))
            if last and match.end() < len(token):
                break
        elif not last:
            out.append(token)
    return out


def parse_pre_16(text: str) -> ParsedMessage | None:
    """Parse the 1.2-1.5 FitError (``pod (NAME) failed to fit in any node`` with a
    summary or per-node lines); None when the text has neither."""
    pod_line = _POD_FAILED_RE.search(text)
    summary = _SUMMARY_RE.search(text)
    if summary is not None:
        body = text[summary.end() :]
        cut = _next_message_start(body)
        if cut >= 0:
            body = body[:cut]
        reasons = _parse_legacy_list(body)
        begin = (
            pod_line.start()
            if pod_line is not None and pod_line.start() < summary.start()
            else summary.start()
        )
        return ParsedMessage(
            kind=SCHEDULING,
            scheduler=KUBE_SCHEDULER,
            format="legacy-summary",
            message=text[begin:].strip(),
            reasons=reasons,
            pod=pod_line.group(1) if pod_line is not None else None,
        )
    nodes = list(_PER_NODE_RE.finditer(text))
    if not nodes:
        return None
    counts: dict[str, int] = {}
    for i, match in enumerate(nodes):
        last = i == len(nodes) - 1
        segment = text[match.end() : len(text) if last else nodes[i + 1].start()]
        for reason in dict.fromkeys(_per_node_reasons(segment, last)):
            counts[reason] = counts.get(reason, 0) + 1
    begin = (
        pod_line.start() if pod_line is not None and pod_line.start() < nodes[0].start() else nodes[0].start()
    )
    return ParsedMessage(
        kind=SCHEDULING,
        scheduler=KUBE_SCHEDULER,
        format="legacy-per-node",
        message=text[begin:].strip(),
        reasons=tuple(_reason(count, reason) for reason, count in counts.items()),
        pod=pod_line.group(1) if pod_line is not None else None,
    )


def _find_headers(text: str) -> tuple[re.Match[str] | None, re.Match[str] | None]:
    """(the first filter-phase header, the first preemption-part header) of ``text``."""
    first_preemption: re.Match[str] | None = None
    match = find_header(text)
    while match is not None:
        if not _after_preemption_marker(text, match.start()):
            return match, first_preemption
        if first_preemption is None:
            first_preemption = match
        match = find_header(text, match.end())
    return None, first_preemption


def _is_preemption_histogram(reasons: tuple[Reason, ...], truncated: bool) -> bool:
    """Preemption's own reasons never appear in a filter histogram: a list holding
    one is the preemption part, pasted without its ``preemption:`` marker. So is a
    list cut short inside a reason that only preemption's reasons begin with
    (``0/3 nodes are available: 3 P ...``): no filter reason starts that way."""
    if any(r.info.code in _PREEMPTION_CODES for r in reasons):
        return True
    if not (truncated and reasons and reasons[-1].info.code == OTHER):
        return False
    begun = beginning_codes(reasons[-1].text)
    return bool(begun) and begun <= _PREEMPTION_CODES


def _preemption_only(parsed: ParsedMessage) -> ParsedMessage:
    """``parsed`` (a filter-looking parse of a preemption histogram or note) as what it is."""
    eligible = next((x for x in parsed.reasons if x.info.code == PREEMPTION_NOT_ELIGIBLE), None)
    preemption = (
        Preemption(None, (), eligible.text, eligible.info)
        if eligible is not None
        else Preemption(parsed.total_nodes, parsed.reasons, None)
    )
    return make_scheduling(
        "preemption-only",
        parsed.message,
        None,
        (),
        preemption,
        (),
        None,
        parsed.truncated,
        True,
    )


def parse_headed(text: str) -> ParsedMessage | None:
    """Parse a cleaned text as a FitError of any generation, whole or in pieces;
    None when it carries no FitError header or piece of one."""
    parsed = _parse_headed(text)
    if (
        parsed is not None
        and parsed.preemption is None
        and _is_preemption_histogram(parsed.reasons, parsed.truncated)
    ):
        return _preemption_only(parsed)
    return parsed


def _parse_headed(text: str) -> ParsedMessage | None:
    header, preemption_header = _find_headers(text)
    if header is not None:
        return parse_fit_error(text, header.start(), header.end(), header_total(header), header.group(3))
    volcano = _ALL_NODES_HEADER_RE.search(text)
    if volcano is not None:
        return parse_fit_error(text, volcano.start(), volcano.end(), None, None)
    legacy = _LEGACY_HEADER_RE.search(text)
    if legacy is not None:
        return parse_legacy(text, legacy)
    if "fit failure" in text:
        old = parse_pre_16(text)
        if old is not None:
            return old
    limit = len(text)
    if preemption_header is not None:
        # Where the marker ("preemption:", or what a cut left of it) begins.
        limit = text.rfind(" ", 0, preemption_header.start() - 1) + 1
    partial = _PARTIAL_HEADER_RE.search(text, 0, limit)
    if partial is not None:
        parsed = parse_fit_error(
            text, partial.start(), partial.end(), None, partial.group(1), head_missing=True
        )
        if any(r.info.code != OTHER for r in parsed.reasons):
            return parsed
    if preemption_header is not None:
        return _parse_preemption_only(text, limit, preemption_header.start())
    return None


def parse_reasons_only(text: str) -> ParsedMessage | None:
    """A bare reason list (``Insufficient cpu``, ``2 Insufficient cpu, 1 node(s) were
    unschedulable``, ``waiting for scheduling gates: [x]``, a PodScheduled
    condition message) of which at least one reason is known; else None."""
    body, _, _, cut = _until_end(text)
    reasons = parse_reason_list(body, truncated=cut, headed=False)
    if not reasons or all(r.info.code == OTHER for r in reasons):
        return None
    # A list whose first piece has no count while later ones have was cut at the front.
    head_missing = reasons[0].count is None and any(r.count is not None for r in reasons)
    if head_missing:
        reasons = reasons[1:]
    parsed = ParsedMessage(
        kind=SCHEDULING,
        scheduler=KUBE_SCHEDULER,
        format="reasons",
        message=body.strip(),
        # ErrNoNodesAvailable: returned when the scheduler's snapshot has no node at all.
        total_nodes=0 if len(reasons) == 1 and reasons[0].info.code == NO_NODES else None,
        reasons=reasons,
        truncated=cut,
        head_missing=head_missing,
    )
    return _preemption_only(parsed) if _is_preemption_histogram(reasons, cut) else parsed


def parse_scheduling(text: str) -> ParsedMessage | None:
    """Parse a cleaned text as a scheduling failure; None if it is not one.

    Tries, in order: the FitError layout anywhere in the text (so event columns
    and log prefixes before it do not matter), the 1.2-1.7 layouts, pieces of a
    FitError (a preemption tail, a header cut at the front), and a bare reason
    list of which at least one reason is known.
    """
    return parse_headed(text) or parse_reasons_only(text)


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
