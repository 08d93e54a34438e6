"""Findings and triggers for the storage and API tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from analyzers.findings import Finding, ObjectRef, Remedy, RemedyKind, Severity
from storage.tracker import Trigger

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

GPU_YAML = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer
  namespace: ml
spec:
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 0
      maxUnavailable: 1
"""


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def deployment(name: str = "trainer", namespace: str = "ml") -> ObjectRef:
    return ObjectRef("Deployment", namespace, name)


def finding(
    subject: ObjectRef | None = None,
    *,
    rule_id: str = "rollout-deadlock",
    cause: str = "",
    severity: Severity = Severity.CRITICAL,
    title: str = "Rollout of ml/trainer cannot progress: maxSurge 1 needs a second GPU",
    explanation: str = "25% of 1 replica rounds up to a surge of 1 and down to 0 unavailable.",
    evidence: dict[str, Any] | None = None,
    pods: tuple[str, ...] = (),
    remedies: tuple[Remedy, ...] | None = None,
) -> Finding:
    subject = subject or deployment()
    if remedies is None:
        remedies = (
            Remedy(
                title="Let the old pod go first (maxSurge 0, maxUnavailable 1)",
                kind=RemedyKind.PATCH,
                target=subject,
                yaml=GPU_YAML,
                command=f"kubectl -n {subject.namespace} patch deployment {subject.name} --patch-file fix.yaml",
                verified=True,
                verification="re-simulated: the new pod fits on gpu-node-1 once the old pod is gone",
            ),
        )
    return Finding(
        rule_id=rule_id,
        severity=severity,
        subject=subject,
        title=title,
        explanation=explanation,
        evidence=evidence if evidence is not None else {"gpus_free": 0, "nodes": 10},
        remedies=remedies,
        cause=cause,
        pods=pods,
    )


MESSAGE = (
    "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/10 nodes are available: 1 No preemption victims found for "
    "incoming pod, 9 Preemption is not helpful for scheduling."
)


def trigger(uid: str = "ev-1", count: int = 1, message: str = MESSAGE, pod: str = "") -> Trigger:
    return Trigger(key=f"{uid}:{count}", message=message, pod=pod)
