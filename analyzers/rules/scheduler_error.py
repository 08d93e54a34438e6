"""scheduler-error: kube-scheduler keeps failing on a pod with an error, not a verdict.

When a plugin returns an error instead of "unschedulable" (a volume that cannot be
bound or provisioned in time at PreBind, a binding the API server refuses, a claim
that cannot be reserved), kube-scheduler writes the error as the FailedScheduling
event's message, sets the pod's PodScheduled condition to reason ``SchedulerError``
(``v1.PodReasonSchedulerError``, pkg/scheduler/schedule_one.go
handleSchedulingFailure) and retries the pod with backoff. No node was found
wanting, so the filter simulation says the pod fits and no placement rule speaks:
this rule does, when the newest of those events is an error
(analyzers/messages/scheduler_errors.py) and the pod has waited longer than
``thresholds.erroring_after_seconds``.

One finding per owning workload and (extension point, plugin). Remedies are
inspections of what the failing plugin works on (the pods' claims for the volume
and DRA plugins) and kube-scheduler's own log; nothing to re-simulate.
"""

from __future__ import annotations

import shlex
from typing import Any

from analyzers.findings import Finding, ObjectRef, Remedy, Severity
from analyzers.messages import SCHEDULER_ERROR, parse_message
from analyzers.records import Event, Pod
from analyzers.rules._describe import are, duration, plural
from analyzers.rules.context import RuleContext

RULE_ID = "scheduler-error"
SCHEDULER_ERROR_REASON = "SchedulerError"  # v1.PodReasonSchedulerError
# VolumeBindingArgs.bindTimeoutSeconds' default (pkg/scheduler/apis/config/v1/defaults.go).
BIND_TIMEOUT_DEFAULT_SECONDS = 600

# What an error at (extension point, plugin) means, in words an on-call engineer acts on.
_MEANING = {
    ("PreBind", "VolumeBinding"): (
        "binding or provisioning its volumes failed or timed out; VolumeBinding waits up to its bindTimeout "
        f"({BIND_TIMEOUT_DEFAULT_SECONDS} s unless VolumeBindingArgs say otherwise) for the PersistentVolume "
        "controller and the CSI provisioner"
    ),
    ("Bind", None): "the API server refused to bind the pod to the chosen node",
    ("Reserve", "DynamicResources"): "reserving the pod's ResourceClaims failed",
    ("PreBind", "DynamicResources"): "writing the pod's ResourceClaim allocation failed",
    (
        "PreFilter",
        None,
    ): "a plugin failed before any node was tried, often because an object it needs cannot be read",
}


def _newest_error(ctx: RuleContext, pod: Pod) -> tuple[Event, str, str | None, str] | None:
    """(event, extension point, plugin, error) when the pod's newest FailedScheduling is an error."""
    events = [
        e for e in ctx.snapshot.events_for("Pod", pod.namespace, pod.name) if e.reason == "FailedScheduling"
    ]
    if not events:
        return None
    newest = events[-1]
    parsed = parse_message(newest.message)
    if parsed.kind != SCHEDULER_ERROR or parsed.format != "plugin-error" or not parsed.reasons:
        return None
    [reason] = parsed.reasons
    return newest, (parsed.notes[0] if parsed.notes else "?"), reason.plugin, reason.text


def analyze(ctx: RuleContext) -> list[Finding]:
    threshold = ctx.thresholds.erroring_after_seconds
    groups: dict[tuple[ObjectRef, str, str], list[tuple[Pod, Event, str]]] = {}
    for pod in ctx.snapshot.unscheduled_pods():
        if pod.created is None or ctx.now - pod.created < threshold:
            continue
        found = _newest_error(ctx, pod)
        if found is None:
            continue
        event, point, plugin, error = found
        key = (ctx.snapshot.workload_of(pod).ref, point, plugin or "")
        groups.setdefault(key, []).append((pod, event, error))
    return [
        _finding(
            ctx, ref, point, plugin or None, sorted(items, key=lambda t: (t[0].created or 0.0, t[0].name))
        )
        for (ref, point, plugin), items in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1:]))
    ]


def _finding(
    ctx: RuleContext, ref: ObjectRef, point: str, plugin: str | None, items: list[tuple[Pod, Event, str]]
) -> Finding:
    pods = [pod for pod, _, _ in items]
    oldest, event, error = items[0]
    waited = int(ctx.now - (oldest.created or ctx.now))
    attempts = sum(ev.count for _, ev, _ in items)
    who = f"plugin {plugin} at {point}" if plugin else f"its {point} plugins"
    meaning = _MEANING.get((point, plugin)) or _MEANING.get((point, None)) or "a scheduler plugin failed"
    condition = (
        " Its PodScheduled condition reads SchedulerError."
        if oldest.scheduled is not None and oldest.scheduled.reason == SCHEDULER_ERROR_REASON
        else ""
    )
    count = plural(len(pods), "pod")
    claim_event = _claim_warning(ctx, oldest) if plugin == "VolumeBinding" else None
    claim_words = (
        f" Its claim {claim_event.involved.name} says why, from {claim_event.source or 'its controller'} "
        f"({claim_event.reason}): {claim_event.message!r}."
        if claim_event is not None
        else ""
    )
    explanation = (
        f"{count} of {ref.kind} {ref.namespace}/{ref.name} {are(len(pods))} Pending because kube-scheduler fails on "
        f"{'them' if len(pods) > 1 else 'it'} with an error, not a verdict about nodes: {who} returned "
        f"{error!r}.{claim_words} That is: {meaning}.{condition} kube-scheduler retries with backoff; its newest "
        f"event says this {plural(event.count, 'time')} for {oldest.name}, which has waited {duration(waited)}. "
        "No node was found wanting, so capacity, selectors and taints are not the cause."
    )
    evidence: dict[str, Any] = {
        "extension_point": point,
        "plugin": plugin,
        "error": error,
        "event_message": event.message,
        "pods": [p.name for p in pods],
        "pending_pod_count": len(pods),
        "oldest_pod": oldest.name,
        "waited_seconds": waited,
        "threshold_seconds": int(ctx.thresholds.erroring_after_seconds),
        "attempts": attempts,
        "newest_event_count": event.count,
    }
    if (point, plugin) == ("PreBind", "VolumeBinding"):
        evidence["bind_timeout_default_seconds"] = BIND_TIMEOUT_DEFAULT_SECONDS
    if claim_event is not None:
        evidence["claim_event"] = {
            "claim": claim_event.involved.name,
            "reason": claim_event.reason,
            "source": claim_event.source,
            "message": claim_event.message,
        }
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARNING,
        subject=ref,
        title=f"kube-scheduler fails at {point}{f' ({plugin})' if plugin else ''} for {count} of {ref.name}: {error}",
        explanation=explanation,
        evidence=evidence,
        remedies=tuple(_remedies(ctx, ref, point, plugin, oldest)),
        cause=f"{point}:{plugin or ''}",
        pods=tuple(f"{p.namespace}/{p.name}" for p in pods),
    )


def _claim_warning(ctx: RuleContext, pod: Pod) -> Event | None:
    """The newest Warning event on one of the pod's claims (the provisioner's or the
    PersistentVolume controller's own words: ProvisioningFailed, FailedBinding)."""
    warnings = [
        ev
        for claim in pod.spec.pvc_names
        for ev in ctx.snapshot.events_for("PersistentVolumeClaim", pod.namespace, claim)
        if ev.type == "Warning"
    ]
    return max(warnings, key=lambda ev: ev.last_seen or 0.0) if warnings else None


def _remedies(ctx: RuleContext, ref: ObjectRef, point: str, plugin: str | None, pod: Pod) -> list[Remedy]:
    """Inspections only: (title, the object looked at, command, note) per what failed."""
    ns = shlex.quote(ref.namespace)
    namespace = ObjectRef("Namespace", "", ref.namespace)
    looks: list[tuple[str, ObjectRef, str, str]] = []
    if plugin == "VolumeBinding" and pod.spec.pvc_names:
        claims = " ".join(shlex.quote(c) for c in pod.spec.pvc_names)
        looks.append(
            (
                "Read why the pod's volumes are not bound",
                namespace,
                f"kubectl describe pvc {claims} -n {ns}",
                "The claims' events name the provisioner's error (quota, zone, StorageClass parameters).",
            )
        )
    if plugin == "DynamicResources":
        looks.append(
            (
                "Read the state of the pod's ResourceClaims",
                namespace,
                f"kubectl get resourceclaims -n {ns} -o wide",
                "A claim's status shows its allocation and who reserved it.",
            )
        )
    looks.append(
        (
            f"Read kube-scheduler's log for {pod.name}",
            ObjectRef("Pod", ref.namespace, pod.name),
            f"kubectl logs -n kube-system -l component=kube-scheduler --since=1h | grep -F {shlex.quote(pod.name)}",
            f"The full error of the {point} extension point; on managed clusters the control plane's logs.",
        )
    )
    return [
        ctx.renderer.command(
            title,
            target,
            command,
            note=note,
            verified=False,
            verification="an inspection, not a change: nothing to re-simulate",
        )
        for title, target, command, note in looks
    ]
