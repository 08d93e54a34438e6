"""Regular expressions in DRA selectors have Go's ``regexp`` semantics (RE2 syntax): the
Kubernetes regex library's ``find``/``findAll`` (k8s.io/apiserver/pkg/cel/library/regex.go
v0.37.2) and CEL's ``matches``. Each row is one where Python's ``re`` answers differently:
lookaround and backreferences are refused with Go's parse error, ``\\w`` is ASCII, ``$``
does not match before a final newline, ``findAll`` returns whole matches.

A constant pattern Go refuses is a compile error, as upstream: ``matches`` through the
environment's cel.ValidateRegexLiterals (``invalid matches argument``), ``find``/``findAll``
when the program is created (``program instantiation failed: ...``); a pattern built at run
time is a runtime error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analyzers.simulator.dra import cel
from tests.dra.test_dra_allocation import (
    DRIVER,
    claim,
    device,
    device_class,
    exactly,
    node,
    pod,
    slice_,
    verdict,
)

MODEL = f'device.attributes["{DRIVER}"].model'


def run(expression: str, model: str) -> bool:
    compiled = cel.compile_selector(expression)
    assert not compiled.error, compiled.error
    return cel.evaluate(compiled, cel.device_variable(DRIVER, {"model": ("string", model)}, {}, False))


@pytest.mark.parametrize(
    ("expression", "model", "want"),
    [
        (f'{MODEL}.find("\\\\w+") == "A"', "Aé", True),  # Go's \w is [0-9A-Za-z_]; Python's takes é
        (f'({MODEL} + "\\n").find("0$") == ""', "H100", True),  # $ is the end of the text, not before "\n"
        (f'{MODEL}.findAll("(1)0") == ["10"]', "H100", True),  # whole matches, not the group
        (f'{MODEL}.findAll("[0-9]", 2) == ["1", "0"]', "H100", True),
        (f'{MODEL}.findAll("[0-9]", 0) == []', "H100", True),
        (f'{MODEL}.matches("^\\\\w+$")', "Aé", False),
    ],
)
def test_go_regexp_semantics(expression: str, model: str, want: bool) -> None:
    assert run(expression, model) is want


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        (
            f'{MODEL}.find("H(?=1)" + "") == "H"',
            "Illegal regex: error parsing regexp: invalid or unsupported Perl syntax: `(?=`",
        ),
        (
            f'{MODEL}.findAll("(H)\\\\1" + "").size() > 0',
            "Illegal regex: error parsing regexp: invalid escape sequence: `\\1`",
        ),
        (f'{MODEL}.find("(" + "H") == ""', "Illegal regex: error parsing regexp: missing closing ): `(H`"),
        (
            f'{MODEL}.find({MODEL} + "**") == ""',
            "Illegal regex: error parsing regexp: invalid nested repetition operator: `**`",
        ),
        (
            f'{MODEL}.matches("H(?!2)" + "")',
            "error parsing regexp: invalid or unsupported Perl syntax: `(?!`",
        ),
    ],
)
def test_patterns_built_at_run_time_go_refuses_are_runtime_errors_in_gos_words(
    expression: str, error: str
) -> None:
    with pytest.raises(cel.CelError) as raised:
        run(expression, "H100")
    assert str(raised.value) == error


# CompileCELExpression's error for each expression, printed by k8s.io/dynamic-resource-allocation
# v0.37.2 itself (cel.GetCompiler(...).CompileCELExpression(expr, cel.Options{}).Error.Detail;
# "" when it compiles). The first rows are Kubernetes' own (apiextensions-apiserver v0.37.2
# pkg/apiserver/schema/cel/validation_test.go, "regex" and "string extension" errors) with
# the device's driver for ``self.str``.
REGEX_CONSTANTS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "cel_regex_constants_v0.37.2.json").read_text()
)


@pytest.mark.parametrize("row", REGEX_CONSTANTS, ids=[r["expression"] for r in REGEX_CONSTANTS])
def test_constant_patterns_go_refuses_are_compile_errors_in_kubernetes_words(row: dict[str, Any]) -> None:
    assert cel.compile_selector(row["expression"]).error == row["error"]


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        (
            f'{MODEL}.find("H(?=1)") == "H"',
            "Internal error: program instantiation failed: error parsing regexp: invalid or unsupported "
            "Perl syntax: `(?=`",
        ),
        (
            f'{MODEL}.matches("H(?!2)")',
            "Invalid value: compilation failed: ERROR: <input>:1:52: invalid matches argument",
        ),
    ],
)
def test_a_claim_with_a_constant_pattern_go_refuses_does_not_validate(expression: str, error: str) -> None:
    """The API server compiles selectors as the scheduler does: such a claim is refused
    (convertCELErrorToValidationError), so in a dump it is one warning and its pod's DRA
    needs are unjudged -- where it used to be judged a Filter error at evaluation."""
    snap, v = verdict(
        node("a"),
        slice_("a", [device("gpu-0")]),
        device_class(),
        claim("c", [exactly(selectors=[{"cel": {"expression": expression}}])]),
        pod("p", "c"),
    )
    [warning] = snap.warnings
    assert f"spec.devices.requests[0].exactly.selectors[0].cel.expression: {error}" in warning
    assert v.fits and not v.allocations  # not judged


def test_the_scheduler_reports_the_regex_error_as_the_filter_error() -> None:
    selector = {"cel": {"expression": f'{MODEL}.find("H(?=1)" + "") == "H"'}}
    _, v = verdict(
        node("a"),
        slice_("a", [device("gpu-0")]),
        device_class(),
        claim("c", [exactly(selectors=[selector])]),
        pod("p", "c"),
    )
    assert not v.fits
    assert v.message == (
        'running "DynamicResources" filter plugin: claim default/c: selector #0 on device '
        f"{DRIVER}/a/gpu-0: CEL runtime error: Illegal regex: error parsing regexp: "
        "invalid or unsupported Perl syntax: `(?=`"
    )
