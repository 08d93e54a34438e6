"""Every number an explanation states is in its finding's evidence, so a reviewer can
check it against the data: over every golden scenario."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.scenarios.test_golden import CASES, analyse, load_case

# A number standing alone (a version too): not part of a name (w-0, ip-10-8-4-17), a path,
# a quantity with its unit (775m, 14.6Gi) or a duration (10m).
NUMBER = re.compile(r"(?<![\w./:{-])\d+(?:\.\d+)?(?![\w./:}-])")


def evidence_numbers(value: Any, out: set[str]) -> set[str]:
    if isinstance(value, dict):
        for item in value.values():
            evidence_numbers(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            evidence_numbers(item, out)
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int | float):
        out.add(str(value))
        if isinstance(value, float) and value.is_integer():
            out.add(str(int(value)))
    elif isinstance(value, str):
        out.update(NUMBER.findall(value))
    return out


def test_the_number_pattern_skips_names_and_quantities() -> None:
    text = "node w-0 (ip-10-8-4-17) on 1.30 uses 775m of 14.6Gi for 10m: 4 replicas > 3 nodes (20%)"
    assert NUMBER.findall(text) == ["1.30", "4", "3", "20"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_every_number_in_an_explanation_is_evidence(case: Path) -> None:
    objects, expected = load_case(case)
    for finding in analyse(objects, expected).findings:
        have = evidence_numbers(dict(finding.evidence), set())
        missing = sorted({n for n in NUMBER.findall(finding.explanation) if n not in have})
        assert not missing, f"{finding.rule_id}: {missing} stated but not in the evidence"
