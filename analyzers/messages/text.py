"""Turning pasted text into one clean line.

Users paste messages from ``kubectl describe`` (event columns, messages split
over indented lines), ``kubectl get events`` rows, JSON or YAML dumps (quotes,
``\\"`` and ``\\n`` escapes), logs and chat (``#``/``>`` quote markers), and
terminal UIs (k9s, Lens, ``column``, Markdown): box-drawing borders and table
pipes, colour codes, the event recorder's ``(combined from similar events): ``
prefix and `` (repeated N times)`` suffix, kubectl's ``(x3 over 10m)`` age
column, and lines a terminal or table cell wrapped at a fixed width (inside a
word, too). The parsers work on one line with single spaces; this module
produces it.
"""

from __future__ import annotations

import itertools
import re
from typing import Final

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
_MIN_WRAP_WIDTH: Final = 30


def _is_box(ch: str) -> bool:
    return "\u2500" <= ch <= "\u257f"


def _join_lines(text: str) -> str:
    """Join the lines of a paste into one, undoing table borders and fixed-width wraps.

    A terminal or a table cell wraps at a fixed width W: every wrapped line is
    exactly W long, and a word cut there continues at the start of the next line
    (with copy-paste trimming the trailing space, a break between words leaves a
    line shorter than W). So a line of the block's full width that ends and
    whose successor starts inside a word is joined without a space, when the
    block is a bordered table or has two or more full-width lines.
    """
    boxed = False
    lines: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        has_box = any(_is_box(ch) for ch in line)
        if (has_box or "|" in line or "+-" in line) and _BORDER_LINE_RE.fullmatch(line):
            boxed = True
            continue  # a border or a rule between rows
        if has_box or "|" in line:
            stripped = _RIGHT_BORDER_RE.sub("", _LEFT_BORDER_RE.sub("", line))
            if stripped != line:
                boxed = True
                line = _INNER_CELL_RE.sub("  ", stripped)
        lines.append(line.rstrip())
    if not lines:
        return ""
    width = max(len(line) for line in lines)
    wrapped = width >= _MIN_WRAP_WIDTH and (boxed or sum(len(line) == width for line in lines) >= 2)
    out = [lines[0]]
    for prev, line in itertools.pairwise(lines):
        if wrapped and len(prev) == width and prev[-1].isalnum() and line[:1].isalnum():
            out.append(line)
        elif prev[-1:].isalpha() and _COUNTED_LINE_RE.match(line.lstrip()) is not None:
            out.append(", " + line)
        else:
            out.append(" " + line)
    return "".join(out)


def clean(text: str) -> str:
    """Collapse ``text`` to one line with single spaces, undoing JSON escapes,
    line-start quote markers and surrounding quotes.

    Afterwards a sentence ends at ``". "`` or at a final ``"."``: reason texts
    never contain one (resource names, taint keys and values and object names
    have no spaces).
    """
    if "\x1b" in text:
        text = _SGR_RE.sub("", text)
    if "\\" in text:
        text = text.replace("\\n", "\n").replace("\\t", " ").replace('\\"', '"').replace("\\'", "'")
    if "\n" in text or "\r" in text:
        if "#" in text or ">" in text or "//" in text:
            text = _LINE_MARKER_RE.sub(" ", text)
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


def until_terminator(text: str) -> tuple[str, str, bool]:
    """Split a cleaned text at its first sentence end: (before, after, found).
    Repeated full stops (``..`` of 1.26-1.28) belong to the terminator."""
    i = text.find(". ")
    if i >= 0:
        return text[:i].rstrip("."), text[i + 2 :], True
    if text.endswith("."):
        return text.rstrip("."), "", True
    return text, "", False
