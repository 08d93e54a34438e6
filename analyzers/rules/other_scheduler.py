"""other-scheduler: a pod of KAI-Scheduler, Volcano or HAMi waits, in its scheduler's own words.

kube-scheduler takes only pods whose ``spec.schedulerName`` names one of its profiles
(pkg/scheduler/eventhandlers.go responsibleForPod), so unstick does not simulate a pod
another scheduler owns: kube-scheduler's filters would answer a question nobody asked.
What that scheduler said is the diagnosis: its ``PodScheduled=False`` condition (KAI
writes it unless the PodGroup's ``markUnschedulable`` is false, Volcano always) and
its newest event on the pod (KAI and Volcano ``Unschedulable``, HAMi ``FilteringFailed``;
analyzers.messages.gpu_schedulers cites the files). The verdict is read as printed,
reasons and gang figures included, and said to be that scheduler's.

One finding per owning workload and scheduler; a pod none of them spoke about is
scheduler-silent's (listed before it, so a pod explained here is not silent).
"""

from __future__ import annotations

from typing import Any

from analyzers.findings import Finding, ObjectRef, Severity
from analyzers.messages import SCHEDULING, ParsedMessage, parse_message
from analyzers.messages.gpu_schedulers import EVENT_REASONS, SCHEDULER_NAMES, attribute
from analyzers.records import Pod
from analyzers.rules._describe import are, plural
from analyzers.rules.context import RuleContext

RULE_ID = "other-scheduler"
_TITLES = {"kai-scheduler": "KAI-Scheduler", "volcano": "Volcano", "hami-scheduler": "HAMi"}


def verdict_of(ctx: RuleContext, pod: Pod) -> tuple[ParsedMessage, str] | None:
    """(what the pod's own scheduler last said, where: ``condition`` or ``event``), or None
    when its scheduler is kube-scheduler or said nothing unstick reads as a verdict."""
    scheduler = SCHEDULER_NAMES.get(pod.spec.scheduler_name)
    if scheduler is None:
        return None
    cond = pod.scheduled
    if cond is not None and cond.status == "False" and cond.message:
        parsed = parse_message(cond.message)
        if parsed.kind == SCHEDULING:
            return attribute(parsed, scheduler), "condition"
    for event in reversed(ctx.snapshot.events_for("Pod", pod.namespace, pod.name)):
        if event.reason in EVENT_REASONS and event.message:
            parsed = parse_message(event.message)
            if parsed.kind == SCHEDULING:
                return attribute(parsed, scheduler), "event"
    return None


def analyze(ctx: RuleContext) -> list[Finding]:
    groups: dict[tuple[ObjectRef, str], list[tuple[Pod, ParsedMessage, str]]] = {}
    for pod in ctx.snapshot.unscheduled_pods():
        found = verdict_of(ctx, pod)
        if found is None:
            continue
        parsed, source = found
        key = (ctx.snapshot.workload_of(pod).ref, parsed.scheduler or pod.spec.scheduler_name)
        groups.setdefault(key, []).append((pod, parsed, source))
    return [
        _finding(ref, scheduler, sorted(items, key=lambda t: (t[0].created or 0.0, t[0].name)))
        for (ref, scheduler), items in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))
    ]


def _finding(ref: ObjectRef, scheduler: str, items: list[tuple[Pod, ParsedMessage, str]]) -> Finding:
    pods = [pod for pod, _, _ in items]
    oldest, parsed, source = items[0]
    title_name = _TITLES.get(scheduler, scheduler)
    count = plural(len(pods), "pod")
    reasons = [
        {"count": r.count, "reason": r.text, "code": r.code, "resource": r.info.resource}
        for r in parsed.reasons
    ]
    said = "; ".join(f"{r.count} {r.text}" if r.count is not None else r.text for r in parsed.reasons)
    gang = parsed.gang
    gang_words = ""
    if gang is not None and gang.found is not None and gang.required is not None:
        gang_words = (
            f" It schedules them as a gang: it found room for {gang.found} of the {gang.required} pods that must "
            "start together, so none starts."
        )
    elif gang is not None and gang.required is not None:
        gang_words = (
            f" It schedules them as a gang of at least {gang.required} pods that must start together."
        )
    explanation = (
        f"{count} of {ref.kind} {ref.namespace}/{ref.name} {are(len(pods))} Pending under "
        f"schedulerName {oldest.spec.scheduler_name} ({title_name}), not kube-scheduler. Its "
        f"{'PodScheduled condition' if source == 'condition' else 'newest event'} on {oldest.name} says: "
        f"{parsed.message!r}.{gang_words}"
        + (f" Per its reasons: {said}." if said else "")
        + f" This is {title_name}'s verdict: unstick does not re-simulate the pod with kube-scheduler's filters "
        "(its simulation is kube-scheduler's, so the verdicts cannot be compared)."
    )
    evidence: dict[str, Any] = {
        "scheduler": scheduler,
        "scheduler_name": oldest.spec.scheduler_name,
        "source": source,
        "message": parsed.message,
        "format": parsed.format,
        "total_nodes": parsed.total_nodes,
        "reasons": reasons,
        "gang": gang.as_dict() if gang is not None else None,
        "pods": [p.name for p in pods],
        "pending_pod_count": len(pods),
        "comparable": False,
    }
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARNING,
        subject=ref,
        title=f"{title_name} cannot place {count} of {ref.name}",
        explanation=explanation,
        evidence=evidence,
        cause=scheduler,
        pods=tuple(f"{p.namespace}/{p.name}" for p in pods),
    )
