"""Run Kubernetes' own DRA CEL test table against unstick's DRA CEL environment.

Usage: python scripts/dra_cel_conformance.py [path/to/compile_test.go]

The default path is k8s.io/dynamic-resource-allocation@v0.37.2/cel/compile_test.go
in the Go module cache. Each case of its ``testcases`` table (expression, driver,
attributes, capacity, expected compile error, match error or match) is evaluated
with analyzers.simulator.dra.cel; cases limited to the alpha
DRAListTypeAttributes feature (off by default in 1.37) are counted apart. It
prints the agreement and every disagreement, and the median time per evaluation.
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzers.simulator.dra import cel

DEFAULT = Path("/root/go/pkg/mod/k8s.io/dynamic-resource-allocation@v0.37.2/cel/compile_test.go")

_CASE = re.compile(r'^\t"([^"]+)": \{\n(.*?)^\t\},', re.S | re.M)
_STR = r'(?:`([^`]*)`|"((?:[^"\\]|\\.)*)")'


def _field(body: str, name: str) -> str | None:
    m = re.search(rf"^\t\t{name}:\s+{_STR}", body, re.M)
    if not m:
        return None
    return m.group(1) if m.group(1) is not None else bytes(m.group(2), "utf-8").decode("unicode_escape")


def _block(body: str, name: str) -> str:
    """The braces of ``name: map[...]...{ ... }``, however many lines they span."""
    m = re.search(rf"^\t\t{name}:\s+map\[[^\]]+\][\w.]+\{{", body, re.M)
    if not m:
        return ""
    depth, i = 1, m.end()
    while depth and i < len(body):
        depth += {"{": 1, "}": -1}.get(body[i], 0)
        i += 1
    return body[m.end() : i - 1]


def _attributes(body: str) -> dict[str, tuple[str, Any]] | None:
    block = _block(body, "attributes")
    out: dict[str, tuple[str, Any]] = {}
    for name, kind, raw in re.findall(r'"([^"]+)":\s*\{(\w+):\s*([^}]*)\}', block):
        value = re.search(r"\(([^()]*(?:\([^()]*\))?[^()]*)\)\s*$", raw.strip())
        text = value.group(1) if value else raw
        text = re.sub(r"^int64\((.*)\)$", r"\1", text.strip())
        if kind == "BoolValue":
            out[name] = ("bool", text == "true")
        elif kind == "IntValue":
            out[name] = ("int", int(text))
        elif kind == "StringValue":
            out[name] = ("string", text.strip('"'))
        elif kind == "VersionValue":
            out[name] = ("version", text.strip('"'))
        else:
            return None  # list-typed attributes: alpha
    return out


def _capacity(body: str) -> dict[str, str]:
    return dict(
        re.findall(r'"([^"]+)":\s*\{Value:\s*resource\.MustParse\("([^"]+)"\)\}', _block(body, "capacity"))
    )


def run(path: Path) -> tuple[int, list[str], int, list[float]]:
    """(agreeing cases, disagreements, alpha-only cases skipped, evaluation times)."""
    text = path.read_text()
    table = text[text.index("var testcases = ") :]
    agree = skipped = 0
    disagreements: list[str] = []
    timings: list[float] = []
    for name, body in _CASE.findall(table):
        expr = _field(body, "expression")
        if expr is None:
            continue
        if "EnableListTypeAttributes: true" in body or "NewExpressions" in body:
            skipped += 1
            continue
        attributes = _attributes(body)
        if attributes is None:
            skipped += 1
            continue
        want_compile = _field(body, "expectCompileError")
        want_error = _field(body, "expectMatchError")
        want_match = re.search(r"^\t\texpectMatch:\s+true", body, re.M) is not None
        driver = _field(body, "driver") or ""
        multi = re.search(r"allowMultipleAllocations:\s+(?:ptr\.To|new)\(true\)", body) is not None
        compiled = cel.compile_selector(expr)
        got = ""
        if compiled.error:
            ok = bool(want_compile) and want_compile in compiled.error
            got = compiled.error.splitlines()[0]
        elif want_compile:
            ok, got = False, "compiled"
        else:
            var = cel.device_variable(driver, attributes, _capacity(body), multi)
            start = time.perf_counter()
            try:
                match = cel.evaluate(compiled, var)
                err = ""
            except cel.CelError as exc:
                match, err = False, str(exc)
            timings.append(time.perf_counter() - start)
            if want_error:
                ok = want_error in err
                got = err or f"match={match}"
            else:
                ok = not err and match == want_match
                got = err or f"match={match}"
        if ok:
            agree += 1
        else:
            disagreements.append(
                f"{name}: {expr!r}: want {want_compile or want_error or want_match!r}, got {got!r}"
            )
    return agree, disagreements, skipped, timings


def main(path: Path) -> int:
    agree, disagreements, skipped, timings = run(path)
    for line in disagreements:
        print("DISAGREE", line)
    total = agree + len(disagreements)
    print(f"{agree}/{total} cases agree ({skipped} alpha-only cases skipped)")
    if timings:
        print(f"median evaluation {statistics.median(timings) * 1e6:.1f} us over {len(timings)} evaluations")
    return 1 if disagreements else 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT))
