"""Turning pasted text into one clean line.

Users paste messages from ``kubectl describe`` (event columns, messages split
over indented lines), ``kubectl get events`` rows, JSON or YAML dumps (quotes,
``\\"`` and ``\\n`` escapes), logs and chat (``#``/``>`` quote markers). The
parsers work on one line with single spaces; this module produces it.
"""

from __future__ import annotations

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


def clean(text: str) -> str:
    """Collapse ``text`` to one line with single spaces, undoing JSON escapes,
    line-start quote markers and surrounding quotes.

    Afterwards a sentence ends at ``". "`` or at a final ``"."``: reason texts
    never contain one (resource names, taint keys and values and object names
    have no spaces).
    """
    if "\\" in text:
        text = text.replace("\\n", " ").replace("\\t", " ").replace('\\"', '"').replace("\\'", "'")
    if "\n" in text:
        if "#" in text or ">" in text or "//" in text:
            text = _LINE_MARKER_RE.sub(" ", text)
        text = " ".join(text.split())
    elif (
        not text.isascii() or "  " in text or "\t" in text or "\r" in text or "\x0b" in text or "\x0c" in text
    ):
        text = " ".join(text.split())
    else:
        text = text.strip()
    if not text.isascii():
        # Pasted through chat or a word processor: "didn’t", "“...”".
        text = text.translate(_TYPOGRAPHIC)
    if "''" in text:
        # A YAML single-quoted scalar (kubectl get pod -o yaml) doubles apostrophes.
        text = text.replace("''", "'")
    if text and text[0] in _QUOTES:
        while len(text) >= 2 and text[0] in _QUOTES and text[-1] == text[0]:
            text = text[1:-1].strip()
    if _GLUED_STOP_RE.search(text) is not None:
        text = _GLUED_STOP_RE.sub(r". \1", text)
    return text


def until_terminator(text: str) -> tuple[str, str, bool]:
    """Split a cleaned text at its first sentence end: (before, after, found).
    Repeated full stops (``..`` of 1.26-1.28) belong to the terminator."""
    i = text.find(". ")
    if i >= 0:
        return text[:i].rstrip("."), text[i + 2 :], True
    if text.endswith("."):
        return text.rstrip("."), "", True
    return text, "", False
