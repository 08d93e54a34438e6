"""The DRA CEL environment: what a DeviceClass or ResourceClaim selector sees.

Kubernetes: staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go
(v0.37.2, k8s.io/dynamic-resource-allocation of v1.37.2). A selector sees one
variable, ``device``, with

- ``device.driver`` (string),
- ``device.attributes[domain][id]`` (int, bool, string or a semver value), an
  unknown domain reading as an empty map (``newStringInterfaceMapWithDefault``),
- ``device.capacity[domain][id]`` (a Kubernetes quantity),
- ``device.allowMultipleAllocations`` (bool, DRAConsumableCapacity);

qualified names without a domain belong to the device's driver
(``parseQualifiedName``). The Kubernetes CEL libraries a selector uses are
provided with their upstream names (k8s.io/apiserver/pkg/cel/library,
quantity.go and semverlib.go): ``quantity``, ``isQuantity``, ``isInteger``,
``asInteger``, ``asApproximateFloat``, ``sign``, ``add``, ``sub``,
``isGreaterThan``, ``isLessThan``, ``compareTo``; ``semver``, ``isSemver``,
``major``, ``minor``, ``patch``; plus ``cel.bind`` and the strings extension.

The CEL library is Google's own C++ implementation through its Python binding
(PyPI ``cel-expr-python``; docs/dra.md says why): expressions are parsed and
type-checked, and errors read like cel-go's (``ERROR: <input>:1:7: undeclared
reference to 'nosuch'``). A compile error or a runtime error becomes the text
the allocator wraps (``CEL compile error: compilation failed: ...``,
``CEL runtime error: no such key: model``), never an exception out of the
simulator.

Limits (stated in docs/dra.md): quantities and semvers are values of a map type
here, not opaque types, so a selector comparing a quantity with ``==`` behaves
as upstream (equal values compare equal) but a selector mixing types that
cel-go's checker refuses at compile time may compile here; the runtime cost
limit (``CELSelectorExpressionMaxCost``, 1,000,000) is not metered -- the API
server's admission already refuses expressions whose estimated cost exceeds it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]
from cel_expr_python import cel as _cel
from cel_expr_python.ext import ext_bindings, ext_strings

from analyzers.quantity import QuantityError, parse_quantity

# resourceapi.CELSelectorExpressionMaxCost (staging/src/k8s.io/api/resource/v1/types.go, v0.37.2).
MAX_COST = 1_000_000

_QUANTITY = "kubernetes.Quantity"
_SEMVER = "kubernetes.Semver"
_DYN = _cel.Type.DYN
_MAP = _cel.Type.Map(_cel.Type.STRING, _DYN)
_STR = _cel.Type.STRING
_INT = _cel.Type.INT
_BOOL = _cel.Type.BOOL
_DOUBLE = _cel.Type.DOUBLE

# blang/semver v4 Parse: MAJOR.MINOR.PATCH[-pre][+build], no leading zeros.
_SEMVER_RE = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


class CelError(Exception):
    """An evaluation error, worded as cel-go words it."""


def _canon(d: Decimal) -> str:
    if d == 0:
        return "0"
    text = format(d.normalize(), "f")
    return text


def quantity_value(text: str) -> dict[str, Any]:
    """A Kubernetes quantity as the selector sees it (equal values compare equal)."""
    return {_QUANTITY: _canon(parse_quantity(text))}


def semver_value(text: str) -> dict[str, Any]:
    if not _SEMVER_RE.match(text):
        raise CelError(f"invalid semver: {text}")
    return {_SEMVER: text}


def _q(v: Any) -> Decimal:
    if isinstance(v, Mapping) and _QUANTITY in v:
        return Decimal(v[_QUANTITY])
    raise CelError("no such overload")


def _sv(v: Any) -> tuple[int, int, int, str]:
    if isinstance(v, Mapping) and _SEMVER in v:
        m = _SEMVER_RE.match(v[_SEMVER])
        assert m is not None
        return int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) or ""
    raise CelError("no such overload")


def _pre_cmp(a: str, b: str) -> int:
    # semver 2.0.0 precedence of pre-release identifiers (blang/semver Version.Compare).
    if a == b:
        return 0
    if not a:
        return 1
    if not b:
        return -1
    pa, pb = a.split("."), b.split(".")
    for x, y in zip(pa, pb, strict=False):
        if x == y:
            continue
        xn, yn = x.isdigit(), y.isdigit()
        if xn and yn:
            return -1 if int(x) < int(y) else 1
        if xn != yn:
            return -1 if xn else 1
        return -1 if x < y else 1
    return (len(pa) > len(pb)) - (len(pa) < len(pb))


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Mapping) and _SEMVER in a:
        x, y = _sv(a), _sv(b)
        if x[:3] != y[:3]:
            return -1 if x[:3] < y[:3] else 1
        return _pre_cmp(x[3], y[3])
    qa, qb = _q(a), _q(b)
    return (qa > qb) - (qa < qb)


def _quantity(text: str) -> dict[str, Any]:
    _meter()
    try:
        return quantity_value(text)
    except QuantityError as exc:
        raise CelError(
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        ) from exc


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _as_integer(v: Any) -> int:
    d = _q(v)
    if d != d.to_integral_value() or not -(2**63) <= d < 2**63:
        raise CelError("cannot convert value to integer")
    return int(d)


def _add(a: Any, b: Any) -> dict[str, Any]:
    other = Decimal(b) if isinstance(b, int) else _q(b)
    return {_QUANTITY: _canon(_q(a) + other)}


def _sub(a: Any, b: Any) -> dict[str, Any]:
    other = Decimal(b) if isinstance(b, int) else _q(b)
    return {_QUANTITY: _canon(_q(a) - other)}


def _fn(name: str, *overloads: tuple[str, Any, list[Any], bool, Any]) -> Any:
    return _cel.FunctionDecl(name, [_cel.Overload(i, r, p, m, f) for i, r, p, m, f in overloads])


def _normalize(text: str) -> str:
    """normalizeAndParse (k8s.io/apiserver/pkg/cel/library/semverlib.go, v0.37.2)."""
    parts = text.removeprefix("v").split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or p[0] not in "0123456789":
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise CelError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _semver(text: str, normalize: bool = False) -> dict[str, Any]:
    _meter()
    return semver_value(_normalize(text) if normalize else text)


def _is_semver(text: str, normalize: bool = False) -> bool:
    _meter()
    try:
        return _SEMVER_RE.match(_normalize(text) if normalize else text) is not None
    except CelError:
        return False


def _find(text: str, pattern: str) -> str:
    """The regex library's ``find`` (k8s.io/apiserver/pkg/cel/library/regex.go v0.37.2):
    Go's ``regexp.FindString``, the leftmost-first match, "" when none."""
    _meter(len(text))
    m = _regex(pattern).search(text)
    return m.group(0) if m else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """``findAll``: Go's ``regexp.FindAllString(text, limit)`` (whole matches, not groups)."""
    _meter(len(text))
    if limit == 0:
        return []
    found: list[str] = []
    for m in _regex(pattern).finditer(text):
        found.append(m.group(0))
        if len(found) == limit:
            break
    return found


# Go's regexp/syntax error texts (ErrorCode, regexp/syntax/parse.go) for RE2's
# (re2/regexp.cc CodeText): the same parser rules, worded by each.
_GO_REGEXP_ERRORS = {
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
    "invalid named capture group": "invalid named capture",
}


def _regex_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the error is the selector's verdict, not a log line
    return options


_RE2_OPTIONS = _regex_options()


@lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    """``pattern`` compiled as Go's ``regexp.Compile`` would (RE2 syntax and semantics:
    no lookaround or backreferences, ASCII ``\\w``/``\\d``/``\\b``, ``$`` only at the end
    of the text). A pattern Go refuses raises the library's runtime error,
    ``Illegal regex: error parsing regexp: <code>: `<fragment>```."""
    compiled, error = _go_regexp(pattern)
    if error:
        raise CelError(f"Illegal regex: {error}")
    return compiled


@lru_cache(maxsize=256)
def _go_regexp(pattern: str) -> tuple[Any, str]:
    """(the compiled pattern, "") or (None, Go's ``regexp.Compile`` error text)."""
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS), ""
    except re2.error as exc:
        raw = exc.args[0] if exc.args else b""
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        return None, go_regexp_error(text)


def go_regexp_error(re2_text: str) -> str:
    """RE2's parse error (``<code>: <fragment>``) as Go's ``regexp/syntax.Error`` prints
    it: ``error parsing regexp: <code>: `<fragment>``` (a trailing backslash has an
    empty fragment in both)."""
    code, _, fragment = re2_text.partition(": ")
    return f"error parsing regexp: {_GO_REGEXP_ERRORS.get(code, code)}: `{fragment}`"


class _Meter:
    """What the Kubernetes library functions of one evaluation cost, against
    MAX_COST: cel-go meters every step; here only the library calls are counted
    (each at least 1, string-scanning ones by length), which catches the selectors
    that loop over them (the ``expensive`` case of compile_test.go)."""

    spent = 0


def _meter(cost: int = 1) -> None:
    _Meter.spent += max(1, cost)
    if _Meter.spent > MAX_COST:
        raise CelError("operation cancelled: actual cost limit exceeded")


_FUNCTIONS = [
    _fn("quantity", ("quantity_string", _MAP, [_STR], False, _quantity)),
    _fn("isQuantity", ("is_quantity_string", _BOOL, [_STR], False, _is_quantity)),
    _fn(
        "isInteger",
        ("quantity_is_integer", _BOOL, [_MAP], True, lambda v: _q(v) == _q(v).to_integral_value()),
    ),
    _fn("asInteger", ("quantity_get_int", _INT, [_MAP], True, _as_integer)),
    _fn("asApproximateFloat", ("quantity_get_float", _DOUBLE, [_MAP], True, lambda v: float(_q(v)))),
    _fn("sign", ("quantity_get_sign", _INT, [_MAP], True, lambda v: (_q(v) > 0) - (_q(v) < 0))),
    _fn(
        "add",
        ("quantity_add", _MAP, [_MAP, _MAP], True, _add),
        ("quantity_add_int", _MAP, [_MAP, _INT], True, _add),
    ),
    _fn(
        "sub",
        ("quantity_sub", _MAP, [_MAP, _MAP], True, _sub),
        ("quantity_sub_int", _MAP, [_MAP, _INT], True, _sub),
    ),
    _fn("isGreaterThan", ("greater_than", _BOOL, [_MAP, _MAP], True, lambda a, b: _compare(a, b) > 0)),
    _fn("isLessThan", ("less_than", _BOOL, [_MAP, _MAP], True, lambda a, b: _compare(a, b) < 0)),
    _fn("compareTo", ("compare_to", _INT, [_MAP, _MAP], True, _compare)),
    _fn(
        "semver",
        ("string_to_semver", _MAP, [_STR], False, _semver),
        ("string_bool_to_semver", _MAP, [_STR, _BOOL], False, _semver),
    ),
    _fn(
        "isSemver",
        ("is_semver_string", _BOOL, [_STR], False, _is_semver),
        ("is_semver_string_bool", _BOOL, [_STR, _BOOL], False, _is_semver),
    ),
    _fn("find", ("string_find_string", _STR, [_STR, _STR], True, _find)),
    _fn(
        "findAll",
        ("string_find_all_string", _cel.Type.List(_STR), [_STR, _STR], True, _find_all),
        ("string_find_all_string_int", _cel.Type.List(_STR), [_STR, _STR, _INT], True, _find_all),
    ),
    _fn("major", ("semver_major", _INT, [_MAP], True, lambda v: _sv(v)[0])),
    _fn("minor", ("semver_minor", _INT, [_MAP], True, lambda v: _sv(v)[1])),
    _fn("patch", ("semver_patch", _INT, [_MAP], True, lambda v: _sv(v)[2])),
]


@lru_cache(maxsize=1)
def _env() -> Any:
    return _cel.NewEnv(
        variables={"device": _MAP},
        functions=_FUNCTIONS,
        extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings()],
    )


_STATUS = re.compile(r"^[A-Z_]+: (.*?)(?: \[[A-Z_]+\])?$", re.S)


def _strip_status(text: str) -> str:
    m = _STATUS.match(text.strip())
    return m.group(1) if m else text.strip()


@dataclass(frozen=True, slots=True)
class Compiled:
    """A compiled selector, or ``error``: the compile error as kube's CompilationResult
    words it (``compilation failed: ERROR: <input>:...``); ``internal`` when its type is
    ErrorTypeInternal (the program could not be created), else ErrorTypeInvalid."""

    expression: str
    program: Any = None
    error: str = ""
    internal: bool = False


@lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Compiled:
    """Compile ``expression`` once (cel.Cache.GetOrCompile), in CompileCELExpression's order
    (k8s.io/dynamic-resource-allocation/cel/compile.go v0.37.2): parse and check, then the
    environment's AST validators (a constant ``matches`` pattern, :func:`regex_literal_issues`),
    the output type, then the program (constant ``find``/``findAll``/``matches`` patterns,
    :func:`regex_constant_error`)."""
    try:
        program = _env().compile(expression)
    except Exception as exc:  # the library's one error type is a RuntimeError
        text = _strip_status(str(exc))
        if not _only_dyn_range_errors(text):
            return Compiled(expression, error="compilation failed: " + text)
        # cel-cpp's checker refuses a comprehension over a dyn value, which cel-go accepts
        # (device.attributes[domain].exists(...)); such an expression passed every other
        # check, so it is evaluated unchecked.
        program = _env().compile(expression, disable_check=True)
        return_type = _DYN
    else:
        return_type = program.return_type()
    if issues := regex_literal_issues(expression):
        return Compiled(expression, error="compilation failed: " + issues)
    if return_type not in (_BOOL, _DYN):
        return Compiled(
            expression,
            error=f"must evaluate to bool or the unknown type, not {return_type.name().lower()}",
        )
    if error := regex_constant_error(expression):
        return Compiled(expression, error="program instantiation failed: " + error, internal=True)
    return Compiled(expression, program)


# -- constant regex patterns ---------------------------------------------------------------
# Kubernetes' base CEL environment (k8s.io/apiserver/pkg/cel/environment/base.go v0.37.2,
# from 1.29) adds cel.ValidateRegexLiterals(): after type-checking, every call of ``matches``
# whose first argument (the receiver not counted) is a string literal has it compiled with Go's
# regexp.Compile, and a refused one is the issue ``invalid matches argument`` at the literal
# (cel-go v0.29.2 cel/validator.go). Creating the program then compiles the constant pattern
# of ``find``/``findAll`` (the regex library's FindRegexOptimization and
# FindAllRegexOptimization, library/regex.go) and of ``matches`` (cel-go's
# MatchesRegexOptimization) -- the second argument, the receiver counted -- and the first one
# refused fails the program: ``program instantiation failed: error parsing regexp: ...``.
# Patterns built at run time stay runtime errors.

_REGEX_FUNCTIONS = ("matches", "find", "findAll")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9][0-9A-Za-z_.]*")
_ESCAPE = re.compile(
    r"""\\(?:([\\'"`?abfnrtv])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-3][0-7]{2})|)"""
)
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_QUOTES = ('"""', "'''", '"', "'")
_STRING_PREFIXES = ("r", "b", "rb", "br")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "str" (a string literal), "other" (bytes, numbers), "ident" or "punct"
    text: str
    start: int  # offset in code points
    value: str = ""  # a string literal's value


def _unescape(body: str) -> str | None:
    """A quoted CEL string's value (cel-go parser/unescape.go); None when it is malformed."""
    bad = False

    def one(m: re.Match[str]) -> str:
        nonlocal bad
        simple, hex2, hex4, hex8, octal = m.groups()
        if simple is not None:
            return _SIMPLE_ESCAPES.get(simple, simple)
        code = hex2 or hex4 or hex8
        if code is not None and int(code, 16) < 0x110000:
            return chr(int(code, 16))
        if octal is not None:
            return chr(int(octal, 8))
        bad = True
        return ""

    value = _ESCAPE.sub(one, body)
    return None if bad else value


def _string_at(expression: str, i: int, prefix: str) -> tuple[int, str] | None:
    """The string literal whose quote starts at ``i``: (its end, its value); None when it
    does not scan."""
    quote = next(q for q in _QUOTES if expression.startswith(q, i))
    raw = "r" in prefix
    j = i + len(quote)
    while not expression.startswith(quote, j):
        if j >= len(expression) or (len(quote) == 1 and expression[j] == "\n"):
            return None
        j += 2 if expression[j] == "\\" and not raw else 1
    body = expression[i + len(quote) : j].replace("\r\n", "\n").replace("\r", "\n")
    value = body if raw else _unescape(body)
    return None if value is None else (j + len(quote), value)


def _tokens(expression: str) -> list[_Token] | None:
    """CEL's lexemes, as far as calls and their literal arguments need (comments and
    whitespace dropped); None when a string does not scan (then it did not compile)."""
    out: list[_Token] = []
    i, n = 0, len(expression)
    while i < n:
        c = expression[i]
        if c.isspace():
            i += 1
            continue
        if expression.startswith("//", i):
            newline = expression.find("\n", i)
            i = n if newline < 0 else newline
            continue
        prefix = ""
        m = _IDENT.match(expression, i)
        if m and m.group(0).lower() in _STRING_PREFIXES and expression[m.end() : m.end() + 1] in ("'", '"'):
            prefix = m.group(0).lower()
        elif m:
            out.append(_Token("ident", m.group(0), i))
            i = m.end()
            continue
        if expression[i + len(prefix) : i + len(prefix) + 1] in ("'", '"'):
            scanned = _string_at(expression, i + len(prefix), prefix)
            if scanned is None:
                return None
            end, value = scanned
            out.append(_Token("other" if "b" in prefix else "str", expression[i:end], i, value))
            i = end
            continue
        m = _NUMBER.match(expression, i)
        if m:
            out.append(_Token("other", m.group(0), i))
            i = m.end()
            continue
        out.append(_Token("punct", c, i))
        i += 1
    return out


def _arguments(tokens: list[_Token]) -> list[list[_Token]]:
    """The comma-separated arguments from just after a call's "(" to its ")"."""
    args: list[list[_Token]] = [[]]
    depth = 0
    for t in tokens:
        if t.kind == "punct" and t.text in "([{":
            depth += 1
        elif t.kind == "punct" and t.text in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif t.kind == "punct" and t.text == "," and depth == 0:
            args.append([])
            continue
        args[-1].append(t)
    return args


def _regex_calls(expression: str) -> list[tuple[str, bool, list[_Token | None]]]:
    """Each call of ``matches``/``find``/``findAll`` in source order: (name, called on a
    receiver, each argument's string literal or None when it is not one literal)."""
    tokens = _tokens(expression)
    if tokens is None:
        return []
    found = []
    for k, tok in enumerate(tokens[:-1]):
        if tok.kind != "ident" or tok.text not in _REGEX_FUNCTIONS or tokens[k + 1].text != "(":
            continue
        literals: list[_Token | None] = []
        for arg in _arguments(tokens[k + 2 :]):
            while len(arg) >= 3 and arg[0].text == "(" and arg[-1].text == ")":
                arg = arg[1:-1]  # parentheses are not in the AST
            literals.append(arg[0] if len(arg) == 1 and arg[0].kind == "str" else None)
        member = k > 0 and tokens[k - 1].kind == "punct" and tokens[k - 1].text == "."
        found.append((tok.text, member, literals))
    return found


def regex_literal_issues(expression: str) -> str:
    """cel.ValidateRegexLiterals' issues, displayed as cel-go displays them ("" when none)."""
    if "matches" not in expression:
        return ""
    issues = []
    for name, _, args in _regex_calls(expression):
        literal = args[0] if args else None
        if name == "matches" and literal is not None and _go_regexp(literal.value)[1]:
            issues.append(literal.start)
    return "\n".join(_display(expression, at, "invalid matches argument") for at in sorted(issues))


def regex_constant_error(expression: str) -> str:
    """The Go error of the first constant pattern the program cannot compile ("" when none)."""
    if not any(name in expression for name in _REGEX_FUNCTIONS):
        return ""
    for _, member, args in _regex_calls(expression):
        at = 0 if member else 1  # the pattern is the second argument, the receiver counted
        pattern = args[at] if len(args) > at else None
        if pattern is not None and (error := _go_regexp(pattern.value)[1]):
            return error
    return ""


def _display(expression: str, at: int, message: str) -> str:
    """common.Error.ToDisplayString (cel-go v0.29.2): the 1-based line and column, the
    source line and a caret under the offending character (wide characters as wide dots)."""
    line_start = expression.rfind("\n", 0, at) + 1
    line_end = expression.find("\n", at)
    snippet = expression[line_start : line_end if line_end >= 0 else len(expression)]
    column = at - line_start
    text = f"ERROR: <input>:{expression.count(chr(10), 0, at) + 1}:{column + 1}: {message}"
    if len(snippet.encode()) > 16384:
        return text
    wide = [len(ch.encode()) > 1 for ch in snippet]
    marks = "".join("\uff0e" if w else "." for w in wide[:column])
    caret = "\uff3e" if column < len(wide) and wide[column] else "^"
    return f"{text}\n | {snippet.replace(chr(9), ' ')}\n | {marks}{caret}"


def _only_dyn_range_errors(text: str) -> bool:
    errors = [line for line in text.splitlines() if line.startswith("ERROR:")]
    return bool(errors) and all("of type 'dyn' cannot be the range of a comprehension" in e for e in errors)


def _attr_value(kind: str, value: Any) -> Any:
    if kind == "version":
        return semver_value(value)
    return value


def device_variable(
    driver: str,
    attributes: Mapping[str, tuple[str, Any]],
    capacity: Mapping[str, str],
    allow_multiple: bool,
) -> dict[str, Any]:
    """The ``device`` variable (CompilationResult.DeviceMatches): names without a
    domain belong to the driver (parseQualifiedName)."""
    attrs: dict[str, dict[str, Any]] = {}
    for name, (kind, value) in attributes.items():
        domain, _, ident = name.rpartition("/")
        attrs.setdefault(domain or driver, {})[ident] = _attr_value(kind, value)
    caps: dict[str, dict[str, Any]] = {}
    for name, q in capacity.items():
        domain, _, ident = name.rpartition("/")
        caps.setdefault(domain or driver, {})[ident] = quantity_value(q)
    return {
        "driver": driver,
        "allowMultipleAllocations": allow_multiple,
        "attributes": attrs,
        "capacity": caps,
    }


_NO_KEY = re.compile(r'Key not found in map : "?(.*?)"?$')


def evaluate(compiled: Compiled, device: Mapping[str, Any]) -> bool:
    """Whether ``device`` matches. Raises CelError with cel-go's wording on a runtime
    error (a missing key reads ``no such key: <key>``, as EnhanceRuntimeError expects).

    Upstream, ``device.attributes`` and ``device.capacity`` answer an unknown domain
    with an empty map (newStringInterfaceMapWithDefault), so only the attribute is
    missing. The C++ maps cannot default: a lookup of a domain the device lacks is
    retried with that domain present and empty -- the same result, as no other
    part of the expression could see the difference before the failing lookup."""
    assert compiled.program is not None
    data: dict[str, Any] = {"device": device}
    _Meter.spent = 0
    for _ in range(8):
        try:
            value = compiled.program.eval(data=data)
        except Exception as exc:  # a Python function raised (CelError, or a bug caught as error)
            raise CelError(_runtime_text(str(exc))) from exc
        if value.type() != _cel.Type.ERROR:
            break
        text = _runtime_text(str(value.value()))
        missing = text[len("no such key: ") :] if text.startswith("no such key: ") else None
        dev = data["device"]
        if missing is None or "/" in missing or (missing in dev["attributes"] and missing in dev["capacity"]):
            raise CelError(text)
        dev = dict(dev)
        for part in ("attributes", "capacity"):
            if missing not in dev[part]:
                dev[part] = {**dev[part], missing: {}}
        data = {"device": dev}
    else:  # pragma: no cover - more unknown domains than any selector names
        raise CelError(text)
    result = value.value()
    if not isinstance(result, bool):
        kind = value.type().name().lower()
        raise CelError(f"CEL result of type {kind} could not be converted to bool")
    return result


def _runtime_text(text: str) -> str:
    text = _strip_status(text)
    if "Iteration budget exceeded" in text:
        # cel-cpp's comprehension budget stands for cel-go's cost limit here.
        return "operation cancelled: actual cost limit exceeded"
    m = _NO_KEY.search(text)
    if m:
        return f"no such key: {m.group(1)}"
    if text.startswith(_CPP_BAD_REGEX):
        # cel-cpp's matches() (RE2) refusing its pattern; cel-go's matches() returns
        # regexp.Compile's error as is.
        return go_regexp_error(text[len(_CPP_BAD_REGEX) :])
    return text


_CPP_BAD_REGEX = "invalid regular expression: "


def enhance(message: str) -> str:
    """cel.EnhanceRuntimeError (staging/.../dynamic-resource-allocation/cel/errors.go, v0.37.2)."""
    if "no such key:" in message:
        return (
            message + ". consider using CEL optional chaining (.? followed by orValue()) "
            "or guarding the check with has() for optional fields"
        )
    return message


_DEVICE_REF = re.compile(r"device\s*\.\s*(attributes|capacity|driver|allowMultipleAllocations)\b")
_LOOKUP = re.compile(
    r'device\s*\.\s*(attributes|capacity)\s*\[\s*"([^"\\]*)"\s*\]\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()|\[\s*"([^"\\]*)"\s*\])'
)


@lru_cache(maxsize=4096)
def reads(expression: str) -> tuple[tuple[str, str, str], ...] | None:
    """The (map, domain, id) entries ``expression`` reads when every reference to
    ``device.attributes`` / ``device.capacity`` is a literal two-level lookup
    (``device.attributes["d"].id`` or ``["d"]["id"]``); None otherwise (it may read
    anything). Two devices with the same driver and the same values at these
    entries get the same answer, which lets the allocator evaluate a selector once
    per distinct device model rather than once per device."""
    if "\\" in expression:
        return None
    found = [(m.group(1), m.group(2), m.group(3) or m.group(4) or "") for m in _LOOKUP.finditer(expression)]
    refs = [m.group(1) for m in _DEVICE_REF.finditer(expression) if m.group(1) in ("attributes", "capacity")]
    if len(refs) != len(found) or any(not ident for _, _, ident in found):
        return None
    if re.search(r"\bdevice\b(?!\s*\.)", expression):
        return None  # the device variable itself passed around (cel.bind, comparisons)
    return tuple(sorted(set(found)))


def projection(
    entries: tuple[tuple[str, str, str], ...],
    driver: str,
    attributes: Mapping[str, tuple[str, Any]],
    capacity: Mapping[str, str],
) -> tuple[Any, ...]:
    """The values ``entries`` (from :func:`reads`) see on one device (None: absent)."""
    return project(lookups(entries), driver, attributes, capacity)


def project(
    spelled: tuple[tuple[bool, str, str, str], ...],
    driver: str,
    attributes: Mapping[str, tuple[str, Any]],
    capacity: Mapping[str, str],
) -> tuple[Any, ...]:
    """:func:`projection` with the entries' :func:`lookups` spelled by the caller (once
    per selector set rather than once per device)."""
    out: list[Any] = []
    for is_attribute, qualified, domain, ident in spelled:
        source: Mapping[str, Any] = attributes if is_attribute else capacity
        value = source.get(qualified)
        if value is None and domain == driver:
            value = source.get(ident)
        out.append(value)
    return tuple(out)


@lru_cache(maxsize=4096)
def lookups(entries: tuple[tuple[str, str, str], ...]) -> tuple[tuple[bool, str, str, str], ...]:
    """``entries`` with their qualified names spelled once (projection runs per device)."""
    return tuple(
        (kind == "attributes", f"{domain}/{ident}", domain, ident) for kind, domain, ident in entries
    )
