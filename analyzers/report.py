"""One analysis of a snapshot: every unscheduled pod's simulated verdict next to
the scheduler's own, the rollout and PDB arithmetic, and the rules' findings.

This is the code path the offline ``unstick analyze`` and the live agent share
from the snapshot on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from analyzers.disruption import BudgetStatus, budget_status
from analyzers.findings import Finding, ObjectRef
from analyzers.gpu_capacity import device_inventory, pod_device_classes
from analyzers.grid import GRID_KEY, Inventory, grids_for
from analyzers.messages import SCHEDULING, ParsedMessage, parse_message
from analyzers.records import Deployment, Pod
from analyzers.remedies import RemedyRenderer
from analyzers.rollout import IntOrPercentError, effective_max_surge, effective_max_unavailable
from analyzers.rules import RuleError, run_rules
from analyzers.rules.context import RuleContext, Thresholds
from analyzers.scope import scoped
from analyzers.simulator import PodVerdict
from analyzers.simulator.scoring.profile import Profile
from analyzers.snapshot import CARRIED, ClusterSnapshot


@dataclass(frozen=True, slots=True)
class SchedulerVerdict:
    """What kube-scheduler itself last said about a pod."""

    message: str
    source: str  # "condition" (PodScheduled=False, current) or "event" (FailedScheduling, may be stale)


def scheduler_verdict(snapshot: ClusterSnapshot, pod: Pod) -> SchedulerVerdict | None:
    cond = pod.scheduled
    if cond is not None and cond.status == "False" and cond.message:
        return SchedulerVerdict(cond.message, "condition")
    event = snapshot.latest_event("Pod", pod.namespace, pod.name, "FailedScheduling")
    if event is not None and event.message:
        return SchedulerVerdict(event.message, "event")
    return None


def message_signature(parsed: ParsedMessage) -> tuple[Any, ...]:
    """What two messages must share to agree: node total and (code, resource, count)
    per reason, preemption included. Wording variants of one reason map to one
    code, so a 1.23 and a 1.30 message about the same cluster agree."""

    def reasons(items: Iterable[Any]) -> tuple[tuple[str, str, int | None], ...]:
        counter: Counter[tuple[str, str, int | None]] = Counter()
        for r in items:
            counter[(r.info.code, r.info.resource or "", r.count)] += 1
        return tuple(sorted(counter.items(), key=repr))  # type: ignore[arg-type]

    pre = parsed.preemption
    pre_sig = (
        None
        if pre is None
        else (pre.total_nodes, reasons(pre.reasons), pre.note_info.code if pre.note_info else None)
    )
    return (parsed.total_nodes, reasons(parsed.reasons), pre_sig)


@lru_cache(maxsize=4096)
def messages_agree(simulated: str, real: str) -> bool | None:
    """True/False when both are scheduling messages; None when the real one is not.
    (Memoised: the pending pods of one workload share both messages.)"""
    ours, theirs = parse_message(simulated), parse_message(real)
    if theirs.kind != SCHEDULING or ours.kind != SCHEDULING:
        return None
    if not theirs.comparable:
        return None  # another scheduler's verdict (KAI, Volcano, HAMi): the simulation is kube-scheduler's
    if theirs.head_missing or theirs.truncated or theirs.format == "preemption-only":
        return None  # a piece of a message (cut at 1024 bytes, or pasted from the middle) cannot be compared
    if theirs.preemption is None or ours.preemption is None:
        # Old schedulers and some paths print no preemption clause: compare the filters only.
        return message_signature(ours)[:2] == message_signature(theirs)[:2]
    return message_signature(ours) == message_signature(theirs)


@dataclass(frozen=True, slots=True)
class PodReport:
    pod: Pod
    verdict: PodVerdict
    scheduler: SchedulerVerdict | None
    agrees: bool | None

    def as_dict(self) -> dict[str, Any]:
        scheduling = self.verdict.as_dict()
        scheduling["event_message"] = self.scheduler.message if self.scheduler else None
        scheduling["event_source"] = self.scheduler.source if self.scheduler else None
        scheduling["agrees"] = self.agrees
        return {"namespace": self.pod.namespace, "name": self.pod.name, "scheduling": scheduling}


@dataclass(frozen=True, slots=True)
class DeploymentReport:
    deployment: Deployment
    max_surge: int | None
    max_unavailable: int | None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d = self.deployment
        strategy: dict[str, Any] = {"type": d.strategy_type}
        if d.strategy_type == "RollingUpdate":
            strategy["rollingUpdate"] = {"maxSurge": d.max_surge, "maxUnavailable": d.max_unavailable}
        out: dict[str, Any] = {
            "namespace": d.namespace,
            "name": d.name,
            "replicas": d.replicas,
            "strategy": strategy,
            "max_surge": self.max_surge,
            "max_unavailable": self.max_unavailable,
        }
        if self.error:
            out["error"] = self.error
        return out


@dataclass(frozen=True, slots=True)
class Report:
    pods: tuple[PodReport, ...]
    deployments: tuple[DeploymentReport, ...]
    pdbs: tuple[BudgetStatus, ...]
    findings: tuple[Finding, ...]
    rule_errors: tuple[RuleError, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "pods": [p.as_dict() for p in self.pods],
            "deployments": [d.as_dict() for d in self.deployments],
            "pdbs": [p.as_dict() for p in self.pdbs],
            "findings": [f.as_dict() for f in self.findings],
            "rule_errors": [{"rule_id": e.rule_id, "error": e.error} for e in self.rule_errors],
            "warnings": list(self.warnings),
        }


def build_report(
    snapshot: ClusterSnapshot,
    *,
    now: float,
    kube_version: str | None = None,
    renderer: RemedyRenderer | None = None,
    thresholds: Thresholds | None = None,
    pod_filter: Callable[[Pod], bool] | None = None,
    eviction_messages: tuple[dict[str, Any], ...] = (),
    scope: frozenset[ObjectRef] | None = None,
    profiles: Mapping[str, Profile] | None = None,
) -> Report:
    """Everything unstick says about ``snapshot`` at ``now``. With ``scope`` (owning
    workloads, as ``Finding.subject`` names them) only those workloads are analysed:
    other workloads' pending pods are left out and findings about other subjects
    dropped (see analyzers.scope); the live agent uses it for changes that touch a
    few workloads."""
    if scope is not None:
        snapshot = scoped(snapshot, scope)
    ctx = RuleContext(
        snapshot=snapshot,
        now=now,
        renderer=renderer or RemedyRenderer(),
        thresholds=thresholds or Thresholds(),
        kube_version=kube_version,
        eviction_messages=eviction_messages,
        profiles=profiles,
    )
    pods = []
    for pod in sorted(snapshot.unscheduled_pods(), key=lambda p: (p.namespace, p.name)):
        if not ctx.served(pod.spec.scheduler_name):
            continue
        if pod_filter is not None and not pod_filter(pod):
            continue
        verdict = ctx.verdict(pod)
        real = scheduler_verdict(snapshot, pod)
        # Without Node objects nothing was simulated: unknown, not a disagreement.
        agrees = (
            messages_agree(verdict.message, real.message)
            if real is not None and verdict.message and snapshot.nodes
            else None
        )
        pods.append(PodReport(pod, verdict, real, agrees))
    deployments = tuple(deployment_reports(snapshot).values())
    pdbs = tuple(
        budget_status(snapshot, p)
        for p in sorted(snapshot.pdbs.values(), key=lambda p: (p.namespace, p.name))
    )
    run = run_rules(ctx)
    findings = run.findings
    if pod_filter is not None:
        wanted = {f"{p.pod.namespace}/{p.pod.name}" for p in pods}
        findings = tuple(f for f in findings if not f.pods or wanted.intersection(f.pods))
    if scope is not None:
        findings = tuple(f for f in findings if f.subject in scope)
    by_key = {f"{p.pod.namespace}/{p.pod.name}": p for p in pods}
    findings = _with_grids(
        findings,
        {key: p.verdict for key, p in by_key.items()},
        {name: m.usage for name, m in snapshot.node_metrics.items()},
        lambda key: _inventory(snapshot, by_key[key].pod) if key in by_key else None,
    )
    return Report(tuple(pods), deployments, pdbs, findings, run.errors, snapshot.warnings)


DEPLOYMENT_REPORTS_KEY = "report.deployments"


def deployment_report(dep: Deployment) -> DeploymentReport:
    """The rollout arithmetic of one Deployment (analyzers.rollout)."""
    try:
        return DeploymentReport(dep, effective_max_surge(dep), effective_max_unavailable(dep))
    except IntOrPercentError as exc:
        return DeploymentReport(dep, None, None, str(exc))


def deployment_reports(snapshot: ClusterSnapshot) -> Mapping[tuple[str, str], DeploymentReport]:
    """Every Deployment's rollout arithmetic, by (namespace, name) in that order; carried
    from one snapshot of the live agent to the next (``_carry_deployment_reports``), so a
    pass works out only the Deployments that changed."""

    def build() -> dict[tuple[str, str], DeploymentReport]:
        return {key: deployment_report(snapshot.deployments[key]) for key in sorted(snapshot.deployments)}

    found: Mapping[tuple[str, str], DeploymentReport] = snapshot.derived(DEPLOYMENT_REPORTS_KEY, build)
    return found


def _carry_deployment_reports(
    base: Mapping[tuple[str, str], DeploymentReport],
    older: ClusterSnapshot,
    newer: ClusterSnapshot,
    changes: Mapping[str, Sequence[tuple[Any, Any]]],
) -> Mapping[tuple[str, str], DeploymentReport]:
    pairs = changes.get("deployments", ())
    if not pairs:
        return base
    out = dict(base)
    for old, new in pairs:
        if new is None:
            out.pop(old.key, None)
        else:
            out[new.key] = deployment_report(new)
    if len(out) != len(base) or any(old is None or new is None for old, new in pairs):
        out = {key: out[key] for key in sorted(out)}
    return out


CARRIED[DEPLOYMENT_REPORTS_KEY] = _carry_deployment_reports


def _inventory(snapshot: ClusterSnapshot, pod: Pod) -> Inventory | None:
    """The DRA devices of the pod's DeviceClasses on given nodes; None without any."""
    classes = pod_device_classes(snapshot, pod) if snapshot.device_classes else []
    if not classes:
        return None
    return lambda nodes: device_inventory(snapshot, nodes, classes)


def _with_grids(
    findings: tuple[Finding, ...],
    verdicts: dict[str, PodVerdict],
    usage: Mapping[str, Mapping[str, int]] | None = None,
    inventory: Callable[[str], Inventory | None] | None = None,
) -> tuple[Finding, ...]:
    """Each finding about pending pods carries their nodes × filter plugins grid
    (analyzers.grid) in its evidence, so every view renders the stored grid."""
    out = []
    for f in findings:
        grids = (
            grids_for(list(f.pods), verdicts, usage, inventory)
            if f.pods and GRID_KEY not in f.evidence
            else []
        )
        out.append(replace(f, evidence={**f.evidence, GRID_KEY: grids}) if grids else f)
    return tuple(out)
