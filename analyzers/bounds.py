"""One bounded parser for every duration, count, number and size a user gives.

Flags, environment variables, API bodies, page forms and configuration files
all reach the program as text. Each such value goes through one of the
functions here, which accept a small, exact grammar, refuse anything outside
``[minimum, maximum]`` and raise :class:`OutOfBounds` with a one-line message
that names the option (``--for: '9999999999d' is more than 365 days``).

The grammars match whole strings (``re.fullmatch``: no ``$``-before-newline
hole), take ASCII digits only (``str.isdigit`` accepts ``'²'``, which ``int``
then refuses), never an exponent, ``inf`` or ``nan``, and are length-capped
before any regular expression runs, so no input can overflow a ``timedelta``
or an integer column, or cost more than a few microseconds.

* durations: ``500ms``, ``15s``, ``1.5s``, ``30m``, ``2h``, ``1h30m``, ``7d``,
  ``2w``, and a bare number where the option says in which unit
  (``bare_unit``: seconds for ``--grace``, none for a silence's ``--for``);
* counts: a whole number (``12``);
* numbers: a decimal (``0.5``), for factors such as ``--speed``;
* sizes: bytes, with an optional binary suffix (``16384``, ``64Ki``, ``1Mi``).

This module is pure (no I/O), so ``storage`` and ``agent`` share it.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

MAX_TEXT: Final = 64
"""Longest value looked at; anything longer is refused without parsing."""

_DECIMAL: Final = r"[0-9]{1,15}(?:\.[0-9]{1,9})?"
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION_PART: Final = re.compile(rf"({_DECIMAL})(ms|s|m|h|d|w)")
_DURATION: Final = re.compile(rf"(?:{_DECIMAL}(?:ms|s|m|h|d|w))+")
_NUMBER: Final = re.compile(_DECIMAL)
_COUNT: Final = re.compile(r"[0-9]{1,19}")
_SIZE: Final = re.compile(r"([0-9]{1,19})(Ki|Mi|Gi)?")
_SIZE_FACTOR: Final = {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


class OutOfBounds(ValueError):
    """A value a user gave that is malformed or out of range; ``str()`` is one line naming the option."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option
        self.message = message


def _shown(raw: str) -> str:
    """The value as an error message shows it: quoted, escaped (one line), at most 40 characters."""
    return repr(raw[:40] + ("…" if len(raw) > 40 else ""))


def human_seconds(seconds: float) -> str:
    """``90`` → ``1m30s``, ``86400`` → ``1d`` (for messages)."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    out = []
    rest = round(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(out) or "0s"


def _text(option: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise OutOfBounds(option, f"expected text, got {type(raw).__name__}")
    if len(raw) > MAX_TEXT:
        raise OutOfBounds(option, f"{_shown(raw)} is longer than {MAX_TEXT} characters")
    return raw


def seconds(
    option: str,
    raw: object,
    *,
    minimum: float,
    maximum: float,
    bare_unit: str | None = "s",
) -> float:
    """A duration in seconds, within ``[minimum, maximum]``.

    ``bare_unit`` is the unit of a bare number (``"s"``, ``"m"``; None: a unit is required)."""
    text = _text(option, raw)
    forms = "such as 500ms, 15s, 30m, 2h, 1h30m or 7d"
    if bare_unit is not None and _NUMBER.fullmatch(text):
        value = float(text) * _UNIT_SECONDS[bare_unit]
    elif _DURATION.fullmatch(text):
        value = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))
    else:
        bare = f" or a number of {bare_unit_name(bare_unit)}" if bare_unit else ""
        raise OutOfBounds(option, f"{_shown(text)} is not a duration {forms}{bare}")
    if value < minimum:
        raise OutOfBounds(option, f"{_shown(text)} is less than {human_seconds(minimum)}")
    if value > maximum:
        raise OutOfBounds(option, f"{_shown(text)} is more than {human_seconds(maximum)}")
    return value


def bare_unit_name(unit: str) -> str:
    return {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[
        unit
    ]


def duration(
    option: str,
    raw: object,
    *,
    minimum: timedelta,
    maximum: timedelta,
    bare_unit: str | None = None,
) -> timedelta:
    """:func:`seconds` as a ``timedelta`` (bounded, so it never overflows)."""
    value = seconds(
        option,
        raw,
        minimum=minimum.total_seconds(),
        maximum=maximum.total_seconds(),
        bare_unit=bare_unit,
    )
    return timedelta(seconds=value)


def count(option: str, raw: object, *, minimum: int, maximum: int) -> int:
    """A whole number within ``[minimum, maximum]``."""
    text = _text(option, raw)
    if not _COUNT.fullmatch(text):
        raise OutOfBounds(option, f"{_shown(text)} is not a whole number from {minimum} to {maximum}")
    value = int(text)
    if not minimum <= value <= maximum:
        raise OutOfBounds(option, f"{_shown(text)} is outside {minimum} to {maximum}")
    return value


def number(
    option: str, raw: object, *, minimum: float, maximum: float, exclusive_minimum: bool = False
) -> float:
    """A decimal number within ``[minimum, maximum]`` (``(minimum, maximum]`` when ``exclusive_minimum``)."""
    text = _text(option, raw)
    if not _NUMBER.fullmatch(text):
        raise OutOfBounds(option, f"{_shown(text)} is not a decimal number (such as 0.5 or 2)")
    value = float(text)
    low_ok = value > minimum if exclusive_minimum else value >= minimum
    if not low_ok or value > maximum:
        low = f"more than {minimum:g}" if exclusive_minimum else f"from {minimum:g}"
        raise OutOfBounds(option, f"{_shown(text)} is not {low} to {maximum:g}")
    return value


def size(option: str, raw: object, *, minimum: int, maximum: int) -> int:
    """Bytes (``16384``, ``64Ki``, ``1Mi``, ``1Gi``) within ``[minimum, maximum]``."""
    text = _text(option, raw)
    match = _SIZE.fullmatch(text)
    if match is None:
        raise OutOfBounds(option, f"{_shown(text)} is not a size in bytes (such as 16384, 64Ki or 1Mi)")
    value = int(match[1]) * _SIZE_FACTOR[match[2]]
    if not minimum <= value <= maximum:
        raise OutOfBounds(option, f"{_shown(text)} is outside {minimum} to {maximum} bytes")
    return value
