"""Field and label selectors as the API server parses and applies them.

- Field selectors: ``staging/src/k8s.io/apimachinery/pkg/fields/selector.go``
  (``ParseSelector``: comma-separated ``key=value``, ``key==value``,
  ``key!=value`` terms, ``\\`` escapes ``,``, ``=``, ``!`` and ``\\`` in values).
  Which field labels a resource accepts comes from each registry's
  ``ToSelectableFields`` (see ``agent.kube.kinds``); an unknown label is a
  400 ``field label not supported: …``.
- Label selectors: ``staging/src/k8s.io/apimachinery/pkg/labels/selector.go``
  (``=``, ``==``, ``!=``, ``in (…)``, ``notin (…)``, ``key``, ``!key``,
  ``>``/``<`` on integers).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.kube.kinds import Kind

__all__ = ["FieldSelector", "LabelSelector", "SelectorError", "field_value"]


class SelectorError(ValueError):
    """A selector the API server would reject with 400 BadRequest."""


def field_value(obj: Mapping[str, Any], label: str) -> str:
    """The string a field label has on ``obj``, as the registries' field sets
    render it: missing → "", booleans → "true"/"false", numbers → decimal.
    ``source`` on core/v1 Events is ``source.component``
    (pkg/registry/core/event/strategy.go)."""
    path = label.split(".")
    if obj.get("kind") == "Event" and label == "source":
        path = ["source", "component"]
    value: Any = obj
    for part in path:
        if not isinstance(value, Mapping):
            return ""
        value = value.get(part)
        if value is None:
            return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        raise SelectorError("trailing backslash in field selector")
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    out: list[str] = []
    it = iter(value)
    for ch in it:
        if ch == "\\":
            nxt = next(it, "")
            if nxt not in ("\\", ",", "=", "!"):
                raise SelectorError(f"invalid escape sequence in field selector value {value!r}")
            out.append(nxt)
        else:
            out.append(ch)
    return "".join(out)


def _split_term(raw: str) -> tuple[str, bool, str] | None:
    # Operator order matters: "!=" and "==" before "=".
    for op, equal in (("!=", False), ("==", True), ("=", True)):
        idx = raw.find(op)
        if idx > 0:
            return raw[:idx].strip(), equal, raw[idx + len(op) :]
    return None


@dataclass(frozen=True, slots=True)
class FieldSelector:
    terms: tuple[tuple[str, bool, str], ...]  # (label, equal?, value)

    @classmethod
    def parse(cls, text: str | None, kind: Kind | None = None) -> FieldSelector:
        if not text:
            return cls(())
        terms: list[tuple[str, bool, str]] = []
        for raw in _split_unescaped(text, ","):
            if not raw:
                continue
            term = _split_term(raw)
            if term is None:
                raise SelectorError(f"invalid selector: '{text}'; can't understand '{raw}'")
            label, equal, value = term
            if kind is not None and not kind.supports_field(label):
                # pkg/registry/... : "field label not supported: %s"
                raise SelectorError(f'field label not supported: {label}')
            terms.append((label, equal, _unescape(value)))
        return cls(tuple(terms))

    def __bool__(self) -> bool:
        return bool(self.terms)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, label) == value) == equal for label, equal, value in self.terms)


_LABEL_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET_RE = re.compile(rf"^\s*(?P<key>{_LABEL_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*(?P<key>{_LABEL_KEY})\s*(?P<op>==|!=|=|>|<)\s*(?P<value>[^\s,]*)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_LABEL_KEY})\s*$")


def _split_label_terms(text: str) -> list[str]:
    terms: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


Requirement = Callable[[Mapping[str, str]], bool]


def _requirement(term: str, text: str) -> Requirement:
    m = _SET_RE.match(term)
    if m:
        key, op = m["key"], m["op"]
        values = frozenset(v.strip() for v in m["values"].split(",") if v.strip())
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    m = _CMP_RE.match(term)
    if m:
        key, op, value = m["key"], m["op"], m["value"]
        if op in ("=", "=="):
            return lambda labels: labels.get(key) == value
        if op == "!=":
            return lambda labels: labels.get(key) != value
        try:
            bound = int(value)
        except ValueError:
            raise SelectorError(f"invalid label selector {text!r}: {value!r} is not an integer") from None

        def compare(labels: Mapping[str, str]) -> bool:
            try:
                have = int(labels.get(key, ""))
            except ValueError:
                return False
            return have > bound if op == ">" else have < bound

        return compare
    m = _EXISTS_RE.match(term)
    if m:
        key = m["key"]
        if m["neg"]:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"unable to parse requirement: {term!r} in label selector {text!r}")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    text: str
    requirements: tuple[Requirement, ...]

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        if not text:
            return cls("", ())
        return cls(text, tuple(_requirement(term, text) for term in _split_label_terms(text)))

    def __bool__(self) -> bool:
        return bool(self.requirements)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req(labels) for req in self.requirements)
