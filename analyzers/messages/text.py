"""Turning pasted text into one clean line.

Users paste messages from ``kubectl describe`` (event columns, messages split
over indented lines), ``kubectl get events`` rows, JSON or YAML dumps (quotes,
``\\"`` and ``\\n`` escapes), logs and chat (``#``/``>`` quote markers), and
terminal UIs (k9s, Lens, ``column``, Markdown, and its autolinks of names that look
like domains): box-drawing borders and table
pipes, colour codes, the event recorder's ``(combined from similar events): ``
prefix and `` (repeated N times)`` suffix, kubectl's ``(x3 over 10m)`` age
column, lines a table cell wrapped at its width (inside a word, too), a word
wrapper's break after a hyphen, and a list continued one reason per line. The parsers work on one line with single spaces; this module
produces it.
"""

from __future__ import annotations

import re
from typing import Final

from analyzers.messages.pane import join_wrapped, unframe

_QUOTES: Final = "\"'`"
_TYPOGRAPHIC: Final = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2026": "..."}
)
_LINE_MARKER_RE: Final = re.compile(r"(?m)^[ \t]*(?:#+|>+|//)[ \t]+")
# A full stop glued to a closing quote or bracket (a message inside JSON, YAML
# or prose) is spaced out, so that every sentence end is ". " or a final ".".
_GLUED_STOP_RE: Final = re.compile(r"\.([\"'`,)\]}])")
# SGR colour codes from a coloured terminal (other escape sequences are kept, and
# shown escaped by whoever prints them).
_SGR_RE: Final = re.compile(r"\x1b\[[0-9;]{0,32}m")
# k8s.io/client-go/tools/record/events_cache.go: the aggregator's prefix and the
# old "(repeated N times)" suffix; kubectl describe's age column "3m (x25 over 10m)".
_AGGREGATION_RE: Final = re.compile(
    r"\(combined from similar events\):\s*|\s*\(repeated [0-9]{1,9} times?\)|\s*\(x[0-9]{1,9} over [0-9a-z]{1,12}\)"
)
_BOX_CHARS: Final = "".join(chr(c) for c in range(0x2500, 0x2580))
_BORDER_LINE_RE: Final = re.compile(r"[\s" + _BOX_CHARS + r"+|=:-]*")
_LEFT_BORDER_RE: Final = re.compile(r"^[ \t]*[|" + _BOX_CHARS + r"][ \t]?")
_RIGHT_BORDER_RE: Final = re.compile(r"[ \t]*[|" + _BOX_CHARS + r"][ \t]*$")
_INNER_CELL_RE: Final = re.compile(r"[ \t]+[|" + _BOX_CHARS + r"][ \t]+|[" + _BOX_CHARS + r"]")
# A line that starts with "<count> <word>" continues a reason list (cluster-autoscaler
# prints one reason per line in newer releases).
_COUNTED_LINE_RE: Final = re.compile(r"[0-9]{1,9} [A-Za-z(]")
_CELL_SPLIT_RE: Final = re.compile(r"[|" + _BOX_CHARS + r"]")
# Markdown autolinks a chat or issue tracker made of names that look like domains:
# "[nvidia.com/gpu](http://nvidia.com/gpu)" is "nvidia.com/gpu" as printed.
_MARKDOWN_LINK_RE: Final = re.compile(r"\[([^\[\]\s]{1,253})\]\((?:https?|mailto):[^()\s]{0,2048}\)")


def _is_box(ch: str) -> bool:
    return "\u2500" <= ch <= "\u257f"


def _cells(line: str) -> list[str] | None:
    """The cells of a table row (``| a | b |``, ``│ a │ b │``) without the one space
    of padding on each side, or None when ``line`` is not a bordered row."""
    stripped = line.strip()
    if len(stripped) < 2 or _CELL_SPLIT_RE.fullmatch(stripped[0]) is None:
        return None
    if _CELL_SPLIT_RE.fullmatch(stripped[-1]) is None:
        return None
    cells = _CELL_SPLIT_RE.split(stripped[1:-1])
    return [c[1:] if c.startswith(" ") else c for c in (c[:-1] if c.endswith(" ") else c for c in cells)]


def _join_cells(text: str, tail: str, cell: str) -> str:
    """``text`` (a cell's text so far, ``tail`` its last row as printed) continued by
    ``cell``. A table wraps at the cell's width: a break inside a word leaves a
    full row (no padding before the border) and a continuation that does not
    start with a space."""
    if not cell.strip():
        return text
    if tail and not tail.endswith(" ") and not cell.startswith(" "):
        return text.rstrip() + cell.rstrip()  # cut inside a word
    return (text.rstrip() + " " + cell.strip()).strip()


def _join_lines(text: str) -> str:
    """Join the lines of a paste into one, undoing table borders and the wraps
    inside table cells (k9s, Lens, ``column``, Markdown); a one-column pane's wraps are
    analyzers.messages.pane's."""
    pane = unframe(text)
    if pane is not None:
        return pane
    rows: list[list[str]] = []  # a bordered row's cells; a plain line is a row of one
    tails: list[str | None] = []  # a bordered row's last cell as printed; None for a plain line
    for line in text.splitlines():
        if not line.strip():
            continue
        has_box = any(_is_box(ch) for ch in line)
        if (has_box or "|" in line or "+-" in line) and _BORDER_LINE_RE.fullmatch(line):
            continue  # a border or a rule between rows
        cells = _cells(line) if (has_box or "|" in line) else None
        if cells is None:
            rows.append([line.rstrip()])
            tails.append(None)
            continue
        tail = tails[-1] if tails else None
        if tail is not None and len(rows[-1]) == len(cells) and not any(c.strip() for c in cells[:-1]):
            # A continuation row: only the last (message) column goes on.
            rows[-1][-1] = _join_cells(rows[-1][-1], tail, cells[-1])
            tails[-1] = cells[-1]
            continue
        rows.append(cells)
        tails.append(cells[-1])
    out: list[str] = []
    for cells, tail in zip(rows, tails, strict=True):
        line = cells[0] if tail is None else "  ".join(c.strip() for c in cells)
        if out:
            prev = out[-1]
            if prev[-1:] == "-" and prev[-2:-1].isalnum() and line.lstrip()[:1].isalnum():
                out[-1] = (
                    prev + line.lstrip()
                )  # a word wrapper's break after the hyphen of "ephemeral-storage"
                continue
            if prev[-1:].isalpha() and _COUNTED_LINE_RE.match(line.lstrip()) is not None:
                out[-1] = prev + ", " + line.lstrip()
                continue
            if join_wrapped(prev, line):
                out[-1] = prev + line  # a word wrap split a word the parsers know ("No p" / "reemption")
                continue
        out.append(line)
    return " ".join(out)


def clean(text: str) -> str:
    """Collapse ``text`` to one line with single spaces, undoing JSON escapes,
    line-start quote markers and surrounding quotes.

    Afterwards a sentence ends at ``". "`` or at a final ``"."``: reason texts
    never contain one (resource names, taint keys and values and object names
    have no spaces).
    """
    if "\x1b" in text:
        text = _SGR_RE.sub("", text)
    if "](" in text:
        text = _MARKDOWN_LINK_RE.sub(r"\1", text)
    if "\\" in text:
        text = text.replace("\\n", "\n").replace("\\t", " ").replace('\\"', '"').replace("\\'", "'")
    if "\n" in text or "\r" in text:
        if "#" in text or ">" in text or "//" in text:
            text = _LINE_MARKER_RE.sub("", text)
        text = " ".join(_join_lines(text).split())
    elif "|" in text or not text.isascii():
        text = " ".join(
            _INNER_CELL_RE.sub("  ", _RIGHT_BORDER_RE.sub("", _LEFT_BORDER_RE.sub("", text))).split()
        )
    elif (
        not text.isascii() or "  " in text or "\t" in text or "\r" in text or "\x0b" in text or "\x0c" in text
    ):
        text = " ".join(text.split())
    else:
        text = text.strip()
    if not text.isascii():
        # Pasted through chat or a word processor: "didn’t", "“...”".
        text = text.translate(_TYPOGRAPHIC)
    if "(combined" in text or " times)" in text or " over " in text:
        text = " ".join(_AGGREGATION_RE.sub(" ", text).split())
    if "''" in text:
        # A YAML single-quoted scalar (kubectl get pod -o yaml) doubles apostrophes.
        text = text.replace("''", "'")
    if text and text[0] in _QUOTES:
        while len(text) >= 2 and text[0] in _QUOTES and text[-1] == text[0]:
            text = text[1:-1].strip()
    if _GLUED_STOP_RE.search(text) is not None:
        text = _GLUED_STOP_RE.sub(r". \1", text)
    return text


# The next row of a pasted event table: its type column, then its reason
# ("... reached   Warning  FailedScheduling  ..."), or its age column at the end.
_NEXT_EVENT_RE: Final = re.compile(r"\s(?:Normal|Warning)\s+[A-Z][A-Za-z]+(?:\s|$)|\s[0-9]+[smhd][0-9smhd]*$")


def cut_at_next_event(text: str) -> str:
    """``text`` up to where the next event of a pasted table begins (for
    messages without a final full stop)."""
    match = _NEXT_EVENT_RE.search(text)
    return text[: match.start()] if match is not None else text


def quoted_until(text: str, start: int) -> int:
    """Where a message that begins at ``start`` ends when a quote opened it (prose,
    chat or a log quoting it: ``the event said "0/3 nodes are ..." yesterday``): at
    its closing quote. ``len(text)`` when no quote opened it or none closes it.

    Quotes inside the message are paired (``persistentvolumeclaim "data" not found``,
    ``nodepool "gpu"``: one opens after a space and is followed by a name) and
    apostrophes between letters (``didn't``, ``Pod's``) are not quotes.
    """
    if start == 0 or text[start - 1] not in _QUOTES:
        return len(text)
    quote = text[start - 1]
    inner = False
    i = text.find(quote, start)
    while i >= 0:
        before = text[i - 1] if i > start else " "
        after = text[i + 1] if i + 1 < len(text) else " "
        if quote == "'" and before.isalnum() and after.isalnum():
            pass  # an apostrophe
        elif not inner and before in " ([{=:," and not after.isspace():
            inner = True
        elif inner:
            inner = False
        else:
            return i
        i = text.find(quote, i + 1)
    return len(text)


def _inside_a_name(text: str, after: int) -> bool:
    """Whether the ". " ending before ``after`` is a dot of a name a line wrap broke
    ("nvidia. com/gpu, ...", "{example. com/team: x}"): what follows is the rest of
    a resource, taint key or value, not a sentence."""
    if not text[after : after + 1].islower():
        return False
    word = text[after : after + 64].split(" ", 1)[0]
    return "/" in word or word.endswith((":", "}", "},", "}."))


def until_terminator(text: str) -> tuple[str, str, bool]:
    """Split a cleaned text at its first sentence end: (before, after, found).
    Repeated full stops (``..`` of 1.26-1.28) belong to the terminator."""
    i = text.find(". ")
    while i >= 0 and _inside_a_name(text, i + 2):
        i = text.find(". ", i + 2)
    if i >= 0:
        return text[:i].rstrip("."), text[i + 2 :], True
    if text.endswith("."):
        return text.rstrip("."), "", True
    return text, "", False
