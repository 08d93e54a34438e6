"""Text from a cluster, made safe to print on a terminal.

Object names, labels and event messages are written by whoever controls the
objects; an escape sequence in them (``\\x1b]…``) could rewrite the screen or
the window title. Human output shows such characters escaped (``\\x1b``), as
``--json`` does.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

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


# The nodes × filter plugins grid (analyzers.grid) and capacity bars, for a terminal.


class Glyphs:
    """Box drawing and marks: Unicode, or ASCII for a terminal that is not UTF-8 (or ``--no-color``)."""

    def __init__(self, unicode: bool) -> None:
        self.unicode = unicode
        if unicode:
            self.h, self.v = "─", "│"
            self.top = ("┌", "┬", "┐")
            self.mid = ("├", "┼", "┤")
            self.bottom = ("└", "┴", "┘")
            self.marks = {"pass": "✓", "fail": "✗", "not-evaluated": "·", "extra-fail": "(✗)"}
            self.used, self.request, self.free = "█", "▒", "░"
        else:
            self.h, self.v = "-", "|"
            self.top = self.mid = self.bottom = ("+", "+", "+")
            self.marks = {"pass": "ok", "fail": "X", "not-evaluated": ".", "extra-fail": "(x)"}
            self.used, self.request, self.free = "#", "+", "."


def wants_unicode(encoding: str | None, no_color: bool) -> bool:
    """Unicode box drawing only on a UTF-8 stream, and not with ``--no-color``."""
    return not no_color and (encoding or "").lower().replace("-", "").replace("_", "") == "utf8"


def plugin_abbreviation(plugin: str) -> str:
    """``NodeResourcesFit`` → ``NRF``: the capitals of the plugin's name."""
    caps = "".join(ch for ch in plugin if ch.isupper())
    return caps or plugin[:3]


PREEMPTION_WORDS = {
    "candidate": "candidate",
    "no-victims": "no victims",
    "not-helpful": "not helpful",
    "pod-may-not-preempt": "may not preempt",
    "not-attempted": "not attempted",
    "": "",
}


def _names(row: dict[str, Any], limit: int = 3) -> str:
    names = [printable(str(n), keep_newlines=False) for n in row["nodes"]]
    if row["count"] == 1:
        return names[0]
    shown = ", ".join(names[:limit])
    more = row["count"] - min(limit, len(names))
    return f"{row['count']} nodes ({shown}{f' +{more} more' if more else ''})"


LINE_WIDTH = 100
NODE_NAME_WIDTH = 28


def _short(name: str) -> str:
    return name if len(name) <= NODE_NAME_WIDTH else name[: NODE_NAME_WIDTH - 1] + "~"


def grid_lines(
    grid: dict[str, Any], glyphs: Glyphs, *, indent: str = "    ", max_rows: int = 12
) -> list[str]:
    """The grid as text lines: a box with one row per node group, one column per plugin
    (abbreviated, with a legend), the preemption verdict; then each row's reasons; then
    one capacity line per candidate node."""
    plugins = [str(p) for p in grid["plugins"]]
    abbreviations = [plugin_abbreviation(p) for p in plugins]
    rows = list(grid["rows"])[:max_rows]
    g = glyphs
    labels = [f"{i}" for i in range(1, len(rows) + 1)]
    nodes_col = [
        _short(printable(str(r["nodes"][0]), keep_newlines=False))
        if r["count"] == 1
        else f"{r['count']} nodes"
        for r in rows
    ]
    widths = [
        max(1, *(len(x) for x in labels)),
        max(5, *(len(x) for x in nodes_col)),
        *(max(len(a), 3) for a in abbreviations),
        max(10, *(len(PREEMPTION_WORDS.get(r["preemption"], r["preemption"])) for r in rows)),
    ]
    header = ["#", "nodes", *abbreviations, "preemption"]

    def rule(ends: tuple[str, str, str]) -> str:
        return indent + ends[0] + ends[1].join(g.h * (w + 2) for w in widths) + ends[2]

    def line(cells: list[str]) -> str:
        return indent + g.v + g.v.join(f" {c:<{w}} " for c, w in zip(cells, widths, strict=True)) + g.v

    out = [
        f"{indent}NODES × FILTER PLUGINS: {grid['feasible_nodes']}/{grid['total_nodes']} nodes pass every filter"
        if g.unicode
        else f"{indent}NODES x FILTER PLUGINS: {grid['feasible_nodes']}/{grid['total_nodes']} nodes pass every filter"
    ]
    if grid.get("banner"):
        b = grid["banner"]
        stage = "PreEnqueue" if b["kind"] == "gated" else "PreFilter"
        out.append(
            f"{indent}{stage} {b['plugin']} rejects the pod before any node is tried: {'; '.join(b['reasons'])}"
        )
    out.append(rule(g.top))
    out.append(line(header))
    out.append(rule(g.mid))
    for label, count, r in zip(labels, nodes_col, rows, strict=True):
        marks = [g.marks[c["state"]] for c in r["cells"]]
        out.append(line([label, count, *marks, PREEMPTION_WORDS.get(r["preemption"], r["preemption"])]))
    out.append(rule(g.bottom))
    legend = (
        f"{g.marks['pass']} passes  {g.marks['fail']} first failure (what kube-scheduler reports)  "
        f"{g.marks['not-evaluated']} not evaluated by the scheduler  "
        f"{g.marks['extra-fail']} not evaluated by the scheduler, fails in unstick's own evaluation"
    )
    names = "  ".join(f"{a} {p}" for a, p in zip(abbreviations, plugins, strict=True))
    for text in (legend, names):
        out.extend(textwrap.wrap(text, LINE_WIDTH, initial_indent=indent, subsequent_indent=indent))
    for label, r in zip(labels, rows, strict=True):
        if r["fits"]:
            out.append(f"{indent}{label}. {_names(r)}: fits")
            continue
        first = next((c for c in r["cells"] if c["state"] == "fail"), None)
        extra = [c for c in r["cells"] if c["state"] == "extra-fail"]
        text = f"{indent}{label}. {_names(r)}: "
        text += f"{first['plugin']}: {'; '.join(first['reasons'])}" if first else "rejected"
        if extra:
            text += "; unstick also finds " + "; ".join(
                f"{c['plugin']}: {'; '.join(c['reasons'])}" for c in extra
            )
        out.append(printable(text, keep_newlines=False))
    if len(grid["rows"]) > len(rows):
        hidden = grid["rows"][len(rows) :]
        out.append(
            f"{indent}… {len(hidden)} more group(s), {sum(r['count'] for r in hidden)} node(s)"
            if g.unicode
            else f"{indent}... {len(hidden)} more group(s), {sum(r['count'] for r in hidden)} node(s)"
        )
    for bar in grid.get("capacity", ()):
        out.append(indent + capacity_line(bar, g))
    return out


def capacity_line(bar: dict[str, Any], glyphs: Glyphs, width: int = 20) -> str:
    """``tracker-node nvidia.com/gpu [██████████▒▒▒▒▒▒▒▒▒▒|] allocatable 1, others 1, this pod 1, free 0``:
    the bar is allocatable wide (or others + this pod when that is more); the ``|`` marks allocatable."""
    allocatable, used, request = int(bar["allocatable"]), int(bar["requested_by_others"]), int(bar["request"])
    total = max(allocatable, used + request, 1)
    cells_used = round(width * min(used, total) / total)
    cells_request = min(width - cells_used, max(1 if request else 0, round(width * request / total)))
    cells_alloc = round(width * allocatable / total)
    chars = [glyphs.used] * cells_used + [glyphs.request] * cells_request
    chars += [glyphs.free] * (width - len(chars))
    chars.insert(cells_alloc, "|")
    name = printable(str(bar["node"]), keep_newlines=False)
    return (
        f"{name} {bar['resource']} [{''.join(chars)}] allocatable {bar['allocatable_text']}, "
        f"requested by others {bar['requested_by_others_text']}, this pod {bar['request_text']}, free {bar['free_text']}"
        + (f", real usage {bar['usage_text']}" if "usage" in bar else "")
    )
