"""Label selector validation as kube-scheduler meets it, with apimachinery's words.

The API server does not validate the values of node-affinity expressions (and
older servers did not validate pod-affinity selector values either), so a pod
can carry a selector that apimachinery refuses to parse. What the scheduler
then does (v1.34.2 sources):

- NodeAffinity: component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go
  (``nodeSelectorRequirementsAsSelector``, ``nodeSelectorTerm.match``): a term
  whose expression fails ``labels.NewRequirement`` records a parse error and
  matches no node; the other terms still count. matchFields accept only In and
  NotIn with exactly one value (``nodeSelectorRequirementsAsFieldSelector``).
- InterPodAffinity: pkg/scheduler/framework/plugins/interpodaffinity/filtering.go
  PreFilter returns ``UnschedulableAndUnresolvable`` with ``parsing pod: <err>``
  when ``framework.NewPodInfo`` (pkg/scheduler/framework/types.go
  ``PodInfo.Update``) fails on any of the pod's required or preferred
  (anti-)affinity terms (``metav1.LabelSelectorAsSelector``).

``requirement_errors`` is ``labels.NewRequirement`` (apimachinery
pkg/labels/selector.go) with the messages of
pkg/util/validation/validation.go (IsQualifiedName, IsValidLabelValue,
IsDNS1123Subdomain) and pkg/util/validation/field/errors.go.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from analyzers.records import (
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodSpec,
    Requirement,
    parse_int64,
)

_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_QNAME_RE = re.compile(_QNAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_MAX_NAME = 63
_MAX_SUBDOMAIN = 253

_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_QNAME_FMT}')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    f"'12345', regex used for validation is '{_LABEL_VALUE_FMT}')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    f"validation is '{_DNS1123_SUBDOMAIN_FMT}')"
)

# Node selector operators map 1:1 onto selection operators; a LabelSelector knows
# only four (metav1.LabelSelectorAsSelector).
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def go_quote(text: str) -> str:
    """``%q`` of a Go string, for the printable texts a selector carries."""
    return json.dumps(text, ensure_ascii=False)


def _full(regex: re.Pattern[str], text: str) -> bool:
    return regex.fullmatch(text) is not None


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain_errors(prefix))
    else:
        return [
            f"a qualified name {_QNAME_MSG} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > _MAX_NAME:
        errs.append("name part " + _max_len(_MAX_NAME))
    if not _full(_QNAME_RE, name):
        errs.append("name part " + _QNAME_MSG)
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if len(value) > _MAX_SUBDOMAIN:
        errs.append(_max_len(_MAX_SUBDOMAIN))
    if not _full(_DNS1123_SUBDOMAIN_RE, value):
        errs.append(_SUBDOMAIN_MSG)
    return errs


def label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    errs = []
    if len(value) > _MAX_NAME:
        errs.append(_max_len(_MAX_NAME))
    if not _full(_LABEL_VALUE_RE, value):
        errs.append(_LABEL_VALUE_MSG)
    return errs


def _parses_as_int64(text: str) -> bool:
    return parse_int64(text) is not None


def _values_repr(values: Sequence[str]) -> str:
    # append([]string(nil), expr.Values...) of no values is nil: printed as null.
    return "[" + ",".join(go_quote(v) for v in values) + "]" if values else "null"


def requirement_errors(req: Requirement) -> list[str]:
    """labels.NewRequirement's field errors for ``req`` (empty: it parses)."""
    errs: list[str] = []
    key_errs = qualified_name_errors(req.key)
    if key_errs:
        errs.append(f"key: Invalid value: {go_quote(req.key)}: {'; '.join(key_errs)}")
    op, vals = req.operator, req.values
    if op in ("In", "NotIn"):
        if not vals:
            errs.append(
                f"values: Invalid value: {_values_repr(vals)}: "
                "for 'in', 'notin' operators, values set can't be empty"
            )
    elif op in ("Exists", "DoesNotExist"):
        if vals:
            errs.append(
                f"values: Invalid value: {_values_repr(vals)}: "
                "values set must be empty for exists and does not exist"
            )
    elif op in ("Gt", "Lt"):
        if len(vals) != 1:
            errs.append(
                f"values: Invalid value: {_values_repr(vals)}: "
                "for 'Gt', 'Lt' operators, exactly one value is required"
            )
        for i, v in enumerate(vals):
            if not _parses_as_int64(v):
                errs.append(
                    f"values[{i}]: Invalid value: {go_quote(v)}: "
                    "for 'Gt', 'Lt' operators, the value must be an integer"
                )
    else:
        errs.append(f"operator: Unsupported value: {go_quote(op)}")
    for i, v in enumerate(vals):
        value_errs = label_value_errors(v)
        if value_errs:
            errs.append(f"values[{i}][{req.key}]: Invalid value: {go_quote(v)}: {'; '.join(value_errs)}")
    return errs


def _aggregate(messages: Sequence[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as is, several in brackets
    (duplicates once)."""
    seen: list[str] = []
    for m in messages:
        if m not in seen:
            seen.append(m)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def node_term_valid(term: NodeSelectorTerm) -> bool:
    """Whether nodeaffinity.newNodeSelectorTerm parses ``term`` without errors."""
    # requirement_errors refuses operators outside NODE_SELECTOR_OPERATORS too.
    if any(requirement_errors(req) for req in term.match_expressions):
        return False
    return all(req.operator in ("In", "NotIn") and len(req.values) == 1 for req in term.match_fields)


def node_term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str | None) -> bool:
    """nodeSelectorTerm.match: an empty term or one that does not parse matches
    nothing. ``node_name`` None: the node is seen by its labels only (a PV's node
    affinity, component-helpers/storage/volume CheckNodeAffinity), so
    ``metadata.name`` reads as empty."""
    if not term.match_expressions and not term.match_fields:
        return False
    if not node_term_valid(term):
        return False
    if not all(req.matches(labels) for req in term.match_expressions):
        return False
    fields = {"metadata.name": node_name or ""}
    return all(req.matches(fields) for req in term.match_fields)


def node_selector_matches(selector: NodeSelector, labels: Mapping[str, str], node_name: str | None) -> bool:
    """LazyErrorNodeSelector.Match: any term matches (see :func:`node_term_matches`)."""
    return any(node_term_matches(term, labels, node_name) for term in selector.terms)


def label_selector_error(selector: LabelSelector | None) -> str | None:
    """metav1.LabelSelectorAsSelector's error for ``selector``, or None. It stops at
    the first requirement that fails: matchLabels (as ``key = value``) first, then
    matchExpressions."""
    if selector is None or selector.is_empty:
        return None
    for key, value in selector.match_labels.items():
        errs = requirement_errors(Requirement(key, "In", (value,)))
        if errs:
            return _aggregate(errs)
    for req in selector.match_expressions:
        if req.operator not in LABEL_SELECTOR_OPERATORS:
            return f"{go_quote(req.operator)} is not a valid label selector operator"
        errs = requirement_errors(req)
        if errs:
            return _aggregate(errs)
    return None


def _terms_error(terms: Sequence[PodAffinityTerm]) -> str | None:
    for term in terms:
        found = label_selector_error(term.label_selector) or label_selector_error(term.namespace_selector)
        if found is not None:
            return found
    return None


def pod_affinity_parse_error(spec: PodSpec) -> str | None:
    """The ``parsing pod: ...`` status message of InterPodAffinity's PreFilter, or None
    when every (anti-)affinity term of the pod parses."""
    errs = []
    for label, terms in (
        ("requiredAffinityTerms", spec.pod_affinity),
        ("requiredAntiAffinityTerms", spec.pod_anti_affinity),
        ("preferredAffinityTerms", spec.preferred_pod_affinity),
        ("preferredAntiAffinityTerms", spec.preferred_pod_anti_affinity),
    ):
        found = _terms_error(terms)
        if found is not None:
            errs.append(f"{label}: {found}")
    if not errs:
        return None
    return "parsing pod: " + _aggregate(errs)
