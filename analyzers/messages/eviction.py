"""Parsing eviction and drain failures.

Upstream texts:

- ``pkg/registry/core/pod/storage/eviction.go`` (the eviction subresource): 429 ``Cannot evict pod as
  it would violate the pod's disruption budget.`` with the cause ``The disruption budget <pdb> needs
  <desired> healthy pods and has <current> currently`` (newer: ``... does not allow evicting pods
  currently`` with a sync-failure or condition detail); 500 ``This pod has more than one
  PodDisruptionBudget, which the eviction subresource does not support.``
- ``staging/src/k8s.io/kubectl/pkg/drain/drain.go``: ``evicting pod <ns>/<name>``, ``error when
  evicting pods/"<name>" -n "<ns>" (will retry after 5s): <error>``; before 1.18 ``evicting pod
  "<name>"`` and ``error when evicting pod "<name>" (will retry after 5s): <error>``.
- cluster-autoscaler: ``not enough pod disruption budget to move <ns>/<name>``; Karpenter: ``pdb
  "<ns>/<name>" prevents pod evictions``; kubelet node-pressure eviction: ``The node was low on
  resource: <resource>. ...``
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from analyzers.messages.text import until_terminator

PDB_VIOLATION: Final = "pdb-violation"
MULTIPLE_PDBS: Final = "multiple-pdbs"
OTHER: Final = "other"

_KUBECTL_NEW_RE: Final = re.compile(
    r'error when evicting pods/"([^"]+)" -n "([^"]+)"( \(will retry after [^)]*\))?:? ?'
)
_KUBECTL_OLD_RE: Final = re.compile(r'error when evicting pod "([^"]+)"( \(will retry after [^)]*\))?:? ?')
_EVICTING_NS_RE: Final = re.compile(r'evicting pod ([^\s/"]+)/([^\s"]+)')
_EVICTING_OLD_RE: Final = re.compile(r'evicting pod "([^"]+)"')
_EVICTED_RE: Final = re.compile(r"\bpod/([^\s/]+) evicted\b")
_PDB_NEEDS_RE: Final = re.compile(
    r"The disruption budget (\S+) needs ([0-9]{1,9}) healthy pods? and has ([0-9]{1,9}) currently"
)
_PDB_DENIES_RE: Final = re.compile(r"The disruption budget (\S+) does not allow evicting pods currently[^.]*")
_CA_RE: Final = re.compile(r"not enough pod disruption budget to move ([^\s/]+)/(\S+)")
_KARPENTER_RE: Final = re.compile(r'pdb "?([^\s/"]+)/([^\s"]+)"? prevents pod evictions')
_PRESSURE_RE: Final = re.compile(r"The node was low on resource: ([\w./-]+)")

_VIOLATION_MARKERS: Final = (
    "would violate the pod's disruption budget",
    "not enough pod disruption budget",
    "prevents pod evictions",
)


@dataclass(frozen=True, slots=True)
class Eviction:
    """An eviction failure: what kind, for which pod, and the PDB figures when
    the API's text is present."""

    kind: str
    pod: str | None
    namespace: str | None
    pdb: str | None = None
    desired_healthy: int | None = None
    current_healthy: int | None = None
    will_retry: bool = False
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "pod": self.pod,
            "namespace": self.namespace,
            "pdb": self.pdb,
            "desired_healthy": self.desired_healthy,
            "current_healthy": self.current_healthy,
            "will_retry": self.will_retry,
            "detail": self.detail,
        }


def looks_like_eviction(text: str) -> bool:
    lower = text.lower()
    return (
        "evict" in lower
        or "disruption budget" in lower
        or "poddisruptionbudget" in lower
        or "low on resource" in lower
    )


def parse_eviction(text: str) -> Eviction | None:
    """Parse a cleaned eviction/drain text; None when it does not look like one."""
    if not looks_like_eviction(text):
        return None
    lower = text.lower()
    pod: str | None = None
    namespace: str | None = None
    will_retry = False
    detail: str | None = None

    match = _KUBECTL_NEW_RE.search(text)
    if match is not None:
        pod, namespace = match.group(1), match.group(2)
        will_retry = match.group(3) is not None
        detail = text[match.end() :].strip() or None
    else:
        old = _KUBECTL_OLD_RE.search(text)
        if old is not None:
            pod = old.group(1)
            will_retry = old.group(2) is not None
            detail = text[old.end() :].strip() or None
    if namespace is None:
        evicting = _EVICTING_NS_RE.search(text)
        if evicting is not None and (pod is None or evicting.group(2) == pod):
            namespace, pod = evicting.group(1), evicting.group(2)
    if pod is None:
        for regex in (_EVICTING_OLD_RE, _EVICTED_RE):
            found = regex.search(text)
            if found is not None:
                pod = found.group(1)
                break
    if pod is None:
        ca = _CA_RE.search(text)
        if ca is not None:
            namespace, pod = ca.group(1), ca.group(2)

    pdb: str | None = None
    desired: int | None = None
    current: int | None = None
    needs = _PDB_NEEDS_RE.search(text)
    if needs is not None:
        pdb, desired, current = needs.group(1), int(needs.group(2)), int(needs.group(3))
        detail = needs.group(0)
    else:
        denies = _PDB_DENIES_RE.search(text)
        if denies is not None:
            pdb = denies.group(1)
            detail = denies.group(0).strip()
        else:
            karpenter = _KARPENTER_RE.search(text)
            if karpenter is not None:
                namespace = namespace or karpenter.group(1)
                pdb = karpenter.group(2)

    if "more than one poddisruptionbudget" in lower:
        kind = MULTIPLE_PDBS
    elif needs is not None or pdb is not None or any(m in lower for m in _VIOLATION_MARKERS):
        kind = PDB_VIOLATION
    else:
        kind = OTHER
        if detail is None:
            pressure = _PRESSURE_RE.search(text)
            detail = pressure.group(0) if pressure is not None else None
    if detail is None and kind != OTHER:
        detail = text
    if detail is not None:
        detail = until_terminator(detail)[0].strip() or None
    return Eviction(
        kind=kind,
        pod=pod,
        namespace=namespace,
        pdb=pdb,
        desired_healthy=desired,
        current_healthy=current,
        will_retry=will_retry,
        detail=detail,
    )
