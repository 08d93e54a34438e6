"""Text from a cluster, made safe to print on a terminal.

Object names, labels and event messages are written by whoever controls the
objects; an escape sequence in them (``\\x1b]…``) could rewrite the screen or
the window title. Human output shows such characters escaped (``\\x1b``), as
``--json`` does.
"""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls; newline and tab are kept where layout allows.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROLS_ALL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def printable(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with control characters shown as ``\\xNN`` (newlines and tabs
    kept unless ``keep_newlines`` is false, as for one-line names)."""
    pattern = _CONTROLS if keep_newlines else _CONTROLS_ALL
    return pattern.sub(_escape, text)
