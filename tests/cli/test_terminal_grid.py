"""The terminal grid of every golden scenario, Unicode and ASCII, against goldens.

Regenerate after a deliberate change with UNSTICK_UPDATE_GOLDENS=1 and read the
diff: the goldens are the review."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.terminal import Glyphs, capacity_line, grid_lines, wants_unicode
from analyzers.grid import build_grid
from tests.scenarios.test_golden import CASES
from tests.simulator.test_grid import report_of

GOLDENS = Path(__file__).parent / "grid_goldens"
UPDATE = os.environ.get("UNSTICK_UPDATE_GOLDENS") == "1"


def rendered(case: Path) -> str:
    report = report_of(case)
    parts: list[str] = []
    for p in report.pods:
        if not p.verdict.nodes or p.verdict.fits:
            continue
        grid = build_grid(p.verdict, [f"{p.pod.namespace}/{p.pod.name}"])
        parts.append(f"# {p.pod.namespace}/{p.pod.name}")
        for unicode in (True, False):
            parts.extend(grid_lines(grid, Glyphs(unicode)))
    return "\n".join(parts) + "\n"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_the_terminal_grid_of_every_golden_scenario(case: Path) -> None:
    golden = GOLDENS / case.parent.name / f"{case.name}.txt"
    text = rendered(case)
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden {golden}: run with UNSTICK_UPDATE_GOLDENS=1 and review it"
    assert text == golden.read_text()


def test_ascii_output_is_ascii_and_unicode_only_on_utf8() -> None:
    case = next(c for c in CASES if c.name == "gpu-tracker")
    report = report_of(case)
    [pod] = [p for p in report.pods if not p.verdict.fits]
    grid = build_grid(pod.verdict, ["x"])
    assert all(line.isascii() for line in grid_lines(grid, Glyphs(False)))
    assert any("┌" in line for line in grid_lines(grid, Glyphs(True)))
    assert wants_unicode("utf-8", False) and wants_unicode("UTF8", False)
    assert (
        not wants_unicode("utf-8", True)
        and not wants_unicode("ascii", False)
        and not wants_unicode(None, False)
    )


def test_the_capacity_line_marks_allocatable_and_the_pods_request() -> None:
    bar = {
        "node": "n1",
        "resource": "cpu",
        "allocatable": 4000,
        "requested_by_others": 3600,
        "request": 500,
        "allocatable_text": "4",
        "requested_by_others_text": "3600m",
        "request_text": "500m",
        "free_text": "400m",
    }
    line = capacity_line(bar, Glyphs(False), width=41)
    body = line.split("[", 1)[1].split("]", 1)[0]
    # 4100 wide: 3600 of others (36 cells), 500 this pod (5), allocatable's mark after 40 cells.
    assert body.index("|") == 40 and body.count("#") == 36 and body.count("+") == 5
    assert line.endswith("allocatable 4, requested by others 3600m, this pod 500m, free 400m")
