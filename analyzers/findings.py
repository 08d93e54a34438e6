"""The values the analysis produces: Findings and the Remedies they carry.

A Finding names its rule, severity, the affected object (the owning workload
when there is one), a one-line title, an explanation in plain words, the
evidence it used and zero or more Remedies. Its fingerprint is stable across
pod restarts and re-creations (owner + rule + root cause), so incidents group
the way a human would.
"""

from __future__ import annotations

import enum
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Severity(enum.StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A Kubernetes object by kind, namespace ("" when cluster-scoped) and name."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}


class RemedyKind(enum.StrEnum):
    PATCH = "patch"
    MANIFEST = "manifest"
    COMMAND = "command"


@dataclass(frozen=True, slots=True)
class Remedy:
    """A concrete change: YAML ready for kubectl, the command that applies it,
    and whether re-simulating the snapshot with the change applied showed that
    it works."""

    title: str
    kind: RemedyKind
    target: ObjectRef | None
    yaml: str
    command: str
    verified: bool
    verification: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "kind": str(self.kind),
            "target": self.target.as_dict() if self.target else None,
            "yaml": self.yaml,
            "command": self.command,
            "verified": self.verified,
            "verification": self.verification,
        }


@dataclass(frozen=True, slots=True)
class Finding:
    rule_id: str
    severity: Severity
    subject: ObjectRef
    title: str
    explanation: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remedies: tuple[Remedy, ...] = ()
    # What distinguishes this root cause from another of the same rule on the
    # same subject (e.g. the resource name for insufficient-resources). Part of
    # the fingerprint; never includes pod names or uids.
    cause: str = ""
    # Pods (namespace/name) that this finding explains; not part of identity.
    pods: tuple[str, ...] = ()

    @property
    def fingerprint(self) -> str:
        s = self.subject
        return _fingerprint(self.rule_id, s.kind, s.namespace, s.name, self.cause)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "severity": str(self.severity),
            "subject": self.subject.as_dict(),
            "title": self.title,
            "explanation": self.explanation,
            "evidence": dict(self.evidence),
            "remedies": [r.as_dict() for r in self.remedies],
            "fingerprint": self.fingerprint,
            "cause": self.cause,
            "pods": list(self.pods),
        }


def fingerprint(rule_id: str, subject: ObjectRef, cause: str = "") -> str:
    """Stable identity of a root cause: the owning workload, the rule and the cause.

    The cluster is added by the incident store, not here."""
    return _fingerprint(rule_id, subject.kind, subject.namespace, subject.name, cause)


# A pure function asked again for every pass that sees a finding; cached by plain strings, whose
# hashing and comparison stay in C (an ObjectRef in the key costs its dataclass __eq__ per hit).
@functools.lru_cache(maxsize=1 << 16)
def _fingerprint(rule_id: str, kind: str, namespace: str, name: str, cause: str) -> str:
    raw = "\x1f".join((rule_id, kind, namespace, name, cause))
    return hashlib.sha256(raw.encode()).hexdigest()[:32]
