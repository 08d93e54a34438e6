"""scheduler-silent: a pod waits in Pending and no scheduler has said a word about it.

kube-scheduler answers every pod it tries: a ``PodScheduled`` condition on the
pod (``False`` with the verdict, or ``SchedulingGated``) and a FailedScheduling
event (pkg/scheduler/schedule_one.go handleSchedulingFailure). A pod with
neither, long after its creation, was never tried:

- its ``spec.schedulerName`` names a scheduler that does not run (kube-scheduler
  only takes pods of its own profiles, pkg/scheduler/eventhandlers.go
  responsibleForPod); whether any pod of that scheduler was ever bound tells a
  scheduler that is gone or misnamed from one that never existed;
- or it claims a PersistentVolumeClaim that does not exist;
- or DynamicResources' PreEnqueue holds it out of the queue: a ResourceClaim
  not created yet from its template, missing, being deleted, or not the pod's
  (analyzers.simulator.dra, with the upstream sources).

Pods behind ``schedulingGates`` are the scheduling-gated rule's. Fires when the
pod is older than ``thresholds.silent_after_seconds`` (``ctx.now`` minus its
creationTimestamp); one finding per owning workload and cause. Listed last in
RULES: a pod another rule explains is not silent.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from typing import Any

from analyzers.findings import Finding, ObjectRef, Remedy, Severity
from analyzers.messages.gpu_schedulers import EVENT_REASONS, SCHEDULER_NAMES
from analyzers.records import Pod
from analyzers.rules._describe import are, duration, names, plural, what_if_verdict, where_fits
from analyzers.rules.context import RuleContext
from analyzers.simulator import dra, volumes

RULE_ID = "scheduler-silent"
DEFAULT_SCHEDULER = "default-scheduler"
_TEMPLATE_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")


def _spoken_to(ctx: RuleContext, pod: Pod) -> bool:
    """Whether a scheduler said anything about the pod: kube-scheduler's words, or those
    of the GPU scheduler its schedulerName names (KAI and Volcano ``Unschedulable``,
    HAMi ``FilteringFailed``: analyzers.messages.gpu_schedulers)."""
    if pod.scheduled is not None:
        return True
    reasons: tuple[str, ...] = ("FailedScheduling", "Scheduled")
    if pod.spec.scheduler_name in SCHEDULER_NAMES:
        reasons = (*reasons, *EVENT_REASONS)
    return any(e.reason in reasons for e in ctx.snapshot.events_for("Pod", pod.namespace, pod.name))


def _cause(ctx: RuleContext, pod: Pod) -> tuple[str, str] | None:
    """(cause, its detail): the scheduler's name or the missing claim; None when the
    snapshot shows no reason (a pod of kube-scheduler not tried yet is not reported:
    a dump can catch any pod between creation and its first attempt)."""
    if not ctx.served(pod.spec.scheduler_name):
        return "unknown-scheduler", pod.spec.scheduler_name
    held = dra.claim_hold(ctx.snapshot, pod)
    if held is not None:
        return held.cause, held.name
    missing = [c for c in pod.spec.pvc_names if (pod.namespace, c) not in ctx.snapshot.pvcs]
    if missing and not ctx.snapshot.lacks(volumes.PVC_KIND):
        return "missing-pvc", missing[0]
    return None


CLAIM_CAUSES = (dra.NOT_CREATED, dra.MISSING, dra.DELETING, dra.NOT_OWNED)


def analyze(ctx: RuleContext) -> list[Finding]:
    threshold = ctx.thresholds.silent_after_seconds
    groups: dict[tuple[ObjectRef, str, str], list[Pod]] = {}
    for pod in ctx.snapshot.unscheduled_pods():
        if pod.spec.scheduling_gates or pod.created is None or ctx.now - pod.created < threshold:
            continue
        if _spoken_to(ctx, pod):
            continue
        found = _cause(ctx, pod)
        if found is None:
            continue
        cause, detail = found
        groups.setdefault((ctx.snapshot.workload_of(pod).ref, cause, detail), []).append(pod)
    return [
        _finding(ctx, ref, cause, detail, sorted(pods, key=lambda p: (p.created or 0.0, p.name)))
        for (ref, cause, detail), pods in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1:]))
    ]


def _scheduler_record(ctx: RuleContext, scheduler: str) -> dict[str, Any]:
    """What the snapshot shows of ``scheduler``: pods of it bound to a node, and the
    events it wrote (reportingController / source.component)."""
    bound = sorted(
        (p for p in ctx.snapshot.pods.values() if p.spec.scheduler_name == scheduler and p.node_name),
        key=lambda p: (p.namespace, p.name),
    )
    events = [e for e in ctx.snapshot.events.values() if e.source == scheduler]
    last = max((e.last_seen or e.first_seen or 0.0 for e in events), default=None)
    return {
        "bound_pods": len(bound),
        "bound_examples": [f"{p.namespace}/{p.name}" for p in bound[:3]],
        "events_from_scheduler": len(events),
        "last_event_age_seconds": int(ctx.now - last) if last else None,
    }


def _finding(ctx: RuleContext, ref: ObjectRef, cause: str, detail: str, pods: list[Pod]) -> Finding:
    oldest = pods[0]
    waited = int(ctx.now - (oldest.created or ctx.now))
    threshold = int(ctx.thresholds.silent_after_seconds)
    what = f"{ref.kind} {ref.namespace}/{ref.name}"
    count = plural(len(pods), "pod")
    who = f"{count} of {ref.name} {'waits' if len(pods) == 1 else 'wait'}"
    evidence: dict[str, Any] = {
        "cause": cause,
        "pods": [p.name for p in pods],
        "pending_pod_count": len(pods),
        "oldest_pod": oldest.name,
        "waited_seconds": waited,
        "threshold_seconds": threshold,
        "scheduler_name": oldest.spec.scheduler_name,
    }
    lead = (
        f"{count} of {what} {are(len(pods))} Pending with no node; the oldest, {oldest.name}, has waited "
        f"{duration(waited)} (threshold {duration(threshold)}) without a PodScheduled condition or a "
        "FailedScheduling event: no scheduler has tried to place it."
    )
    remedies: list[Remedy] = []
    if cause == "unknown-scheduler":
        record = _scheduler_record(ctx, detail)
        evidence.update(record)
        if record["bound_pods"]:
            history = (
                f"{plural(record['bound_pods'], 'pod')} of {detail} {are(record['bound_pods'])} bound to nodes "
                f"({names(record['bound_examples'])}), so {detail} has run in this cluster; it is not taking new "
                "pods now (stopped, crashed, or lost its leader lease)."
            )
        else:
            history = (
                f"No pod of {detail} is bound to any node and it wrote "
                f"{plural(record['events_from_scheduler'], 'event')}: as far as this cluster shows it has never run, "
                "or the name is misspelt."
            )
        configured = (
            f"here {names(served_profiles(ctx))}, by the --scheduler-config given"
            if ctx.profiles is not None
            else f"{DEFAULT_SCHEDULER} by default"
        )
        explanation = (
            f"{lead} Its spec.schedulerName is {detail}; kube-scheduler only takes pods whose schedulerName is one "
            f"of its profiles ({configured}), so only {detail} can bind it. {history}"
        )
        title = f"{who} for scheduler {detail}, which has not answered for {duration(waited)}"
        remedies.extend(_scheduler_remedies(ctx, ref, oldest, detail))
    elif cause in CLAIM_CAUSES:
        hold = dra.claim_hold(ctx.snapshot, oldest)
        assert hold is not None
        explanation, title, remedy = _claim_words(ctx, ref, hold, oldest, lead, who)
        evidence["resource_claim_template" if cause == dra.NOT_CREATED else "resource_claim"] = detail
        evidence["pod_resource_claim"] = hold.entry
        evidence["preenqueue_status"] = hold.message
        remedies.append(remedy)
    else:  # missing-pvc
        evidence["missing_pvc"] = detail
        explanation = (
            f"{lead} It mounts PersistentVolumeClaim {ref.namespace}/{detail}, which does not exist; kube-scheduler "
            f'cannot place a pod before its claims exist (VolumeBinding: persistentvolumeclaim "{detail}" not found).'
        )
        title = f"{who} for PersistentVolumeClaim {detail}, which does not exist"
        remedies.append(
            ctx.renderer.command(
                f"Create PersistentVolumeClaim {detail} (or fix the claim name in the pod template)",
                ObjectRef("PersistentVolumeClaim", ref.namespace, detail),
                f"kubectl get pvc -n {shlex.quote(ref.namespace)}",
                note="The claims that do exist in the namespace; the pod is scheduled once its claim is created.",
                verified=False,
                verification="an inspection, not a change: nothing to re-simulate",
            )
        )
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARNING,
        subject=ref,
        title=title,
        explanation=explanation,
        evidence=evidence,
        remedies=tuple(remedies),
        cause=f"{cause}:{detail}",
        pods=tuple(f"{p.namespace}/{p.name}" for p in pods),
    )


def _claim_words(
    ctx: RuleContext, ref: ObjectRef, hold: dra.ClaimHold, pod: Pod, lead: str, who: str
) -> tuple[str, str, Remedy]:
    """(explanation, title, remedy) of a pod DynamicResources' PreEnqueue holds."""
    ns = shlex.quote(ref.namespace)
    cause, name = hold.cause, hold.name
    held = (
        f" kube-scheduler's DynamicResources PreEnqueue keeps it out of the scheduling queue "
        f"({hold.message}), so it is never tried and nothing is written about it."
    )
    q, where = shlex.quote(name), f"{ref.namespace}/{name}"
    # cause -> (why, title, remedy title, object kind, command, note)
    words = {
        dra.NOT_CREATED: (
            f" Its spec.resourceClaims entry {hold.entry} comes from ResourceClaimTemplate {where}; the resourceclaim "
            "controller (kube-controller-manager) creates the claim and records it in the pod's "
            "status.resourceClaimStatuses, and it has not: the template may not exist, or the controller cannot "
            "create claims (not running, quota, admission).",
            f"{who} for a ResourceClaim from template {name}, not created yet",
            f"Check ResourceClaimTemplate {name} and why no claim was created from it",
            "ResourceClaimTemplate",
            f"kubectl get resourceclaimtemplate {q} -n {ns}; "
            f"kubectl get events -n {ns} --field-selector involvedObject.name={shlex.quote(pod.name)}",
            "The resourceclaim controller reports failures to create a claim as events on the pod.",
        ),
        dra.MISSING: (
            f" It names ResourceClaim {where}, which does not exist.",
            f"{who} for ResourceClaim {name}, which does not exist",
            f"Create ResourceClaim {name} (or fix the claim name in the pod template)",
            "ResourceClaim",
            f"kubectl get resourceclaims -n {ns}",
            "The claims that do exist in the namespace; the pod enters the queue once its claim exists.",
        ),
        dra.DELETING: (
            f" Its ResourceClaim {where} is being deleted (deletionTimestamp set).",
            f"{who} on ResourceClaim {name}, which is being deleted",
            f"See what holds ResourceClaim {name} (finalizers, reservedFor)",
            "ResourceClaim",
            f"kubectl get resourceclaim {q} -n {ns} -o yaml",
            "Once the claim is gone, re-create it (or the pod, for a claim from a template).",
        ),
        dra.NOT_OWNED: (
            f" Its status names ResourceClaim {where} for a template entry, but that claim's controller "
            "(ownerReference) is not this pod: a claim left from an earlier pod of the same name.",
            f"{who}: ResourceClaim {name} belongs to another pod",
            f"See who owns ResourceClaim {name}",
            "ResourceClaim",
            f"kubectl get resourceclaim {q} -n {ns} -o jsonpath='{{.metadata.ownerReferences}}'",
            "Deleting the stale claim lets the controller generate one for this pod.",
        ),
    }
    why, title, action, kind, command, note = words[cause]
    remedy = ctx.renderer.command(
        action,
        ObjectRef(kind, ref.namespace, name),
        command,
        note=note,
        verified=False,
        verification="an inspection, not a change: nothing to re-simulate",
    )
    return lead + why + held, title, remedy


# At most this many of a configuration's profiles are proposed as the pod's scheduler.
_PROPOSED_PROFILES = 3


def served_profiles(ctx: RuleContext) -> list[str]:
    """The schedulerNames kube-scheduler answers to: the configured profiles (their
    order in the file), else the default configuration's one."""
    return list(ctx.profiles) if ctx.profiles is not None else [DEFAULT_SCHEDULER]


def _move_to_profile(ctx: RuleContext, ref: ObjectRef, pod: Pod, profile: str) -> Remedy:
    moved = replace(pod, spec=replace(pod.spec, scheduler_name=profile))
    verdict = what_if_verdict(ctx, moved)
    patch = json.dumps({"spec": {"template": {"spec": {"schedulerName": profile}}}})
    configured = " (a profile of the given scheduler configuration)" if ctx.profiles is not None else ""
    by = f"kube-scheduler's profile {profile}" if ctx.profiles is not None else "kube-scheduler"
    return ctx.renderer.command(
        f"Or let kube-scheduler place it: schedulerName {profile} in the pod template{configured}",
        ref,
        f"kubectl patch {ref.kind.lower()} {shlex.quote(ref.name)} -n {shlex.quote(ref.namespace)} "
        f"--type strategic -p {shlex.quote(patch)}",
        note=(
            "spec.schedulerName of a pod cannot be changed; the new template's pods replace the pending "
            "ones (delete them by hand for a StatefulSet or a Job)."
        ),
        verified=verdict.fits,
        verification=(
            f"re-simulated with {by}: {pod.name} fits on {where_fits(verdict)}"
            if verdict.fits
            else f"re-simulated with {by}: still unschedulable ({verdict.message})"
        ),
    )


def _scheduler_remedies(ctx: RuleContext, ref: ObjectRef, pod: Pod, scheduler: str) -> list[Remedy]:
    out = [
        ctx.renderer.command(
            f"Find scheduler {scheduler} and the pods it placed",
            ObjectRef("Namespace", "", ref.namespace),
            f"kubectl get pods -A --field-selector spec.schedulerName={shlex.quote(scheduler)} -o wide",
            note=f"Bound pods in the list show {scheduler} ran; its own pod's logs say why it stopped.",
            verified=False,
            verification="an inspection, not a change: nothing to re-simulate",
        )
    ]
    if ref.kind in _TEMPLATE_KINDS:
        # A pod's schedulerName cannot change: the template changes and the controller
        # replaces the pending pods (a command, as the pods themselves are not patched).
        # The names proposed are the profiles kube-scheduler runs (the configuration's).
        for profile in served_profiles(ctx)[:_PROPOSED_PROFILES]:
            out.append(_move_to_profile(ctx, ref, pod, profile))
    return out
