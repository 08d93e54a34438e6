"""Regular expressions in DRA selectors have Go's ``regexp`` semantics (RE2 syntax): the
Kubernetes regex library's ``find``/``findAll`` (k8s.io/apiserver/pkg/cel/library/regex.go
v0.37.2) and CEL's ``matches``. Each row is one where Python's ``re`` answers differently:
lookaround and backreferences are refused with Go's parse error, ``\\w`` is ASCII, ``$``
does not match before a final newline, ``findAll`` returns whole matches."""

from __future__ import annotations

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
            f'{MODEL}.find("H(?=1)") == "H"',
            "Illegal regex: error parsing regexp: invalid or unsupported Perl syntax: `(?=`",
        ),
        (
            f'{MODEL}.findAll("(H)\\\\1").size() > 0',
            "Illegal regex: error parsing regexp: invalid escape sequence: `\\1`",
        ),
        (f'{MODEL}.find("(H") == ""', "Illegal regex: error parsing regexp: missing closing ): `(H`"),
        (
            f'{MODEL}.find("H**") == ""',
            "Illegal regex: error parsing regexp: invalid nested repetition operator: `**`",
        ),
        (f'{MODEL}.matches("H(?!2)")', "error parsing regexp: invalid or unsupported Perl syntax: `(?!`"),
    ],
)
def test_patterns_go_refuses_are_runtime_errors_in_gos_words(expression: str, error: str) -> None:
    with pytest.raises(cel.CelError) as raised:
        run(expression, "H100")
    assert str(raised.value) == error


def test_the_scheduler_reports_the_regex_error_as_the_filter_error() -> None:
    selector = {"cel": {"expression": f'{MODEL}.find("H(?=1)") == "H"'}}
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
