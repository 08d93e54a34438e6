"""scheduling-gated: a pod has waited behind ``spec.schedulingGates`` for too long.

kube-scheduler does not try to place a pod that has scheduling gates: the
SchedulingGates PreEnqueue plugin keeps it out of the active queue
(pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates.go), its
PodScheduled condition reads reason ``SchedulingGated`` ("Scheduling is
blocked due to non-empty scheduling gates", pkg/scheduler/schedule_one.go),
and no FailedScheduling event is ever written. Gates can only be *removed*
after creation, never added (pkg/apis/core/validation: schedulingGates may
only shrink on update), so the pod has been gated since its creation time and
whoever added them at admission (usually a mutating webhook) is expected to
remove them.

Fires when an unscheduled pod of kube-scheduler is gated for longer than
``thresholds.gated_after_seconds`` (``ctx.now`` minus the pod's
creationTimestamp). One finding per owning workload and gate set. The
explanation names each gate and who removes it (Kueue's
``kueue.x-k8s.io/admission`` when the Workload is admitted to its
ClusterQueue, Kueue TAS's ``kueue.x-k8s.io/topology``, Volcano's
``volcano.sh/queue-allocation-gate``; else the controller of the gate's
domain), and what happens once ungated: the pod is re-simulated without its
gates.

For Kueue's gates the finding also carries what Kueue last said about the
pod's Workload (its ``Pending`` event, found by the Workload's computed name:
analyzers/kueue.py), parsed into its reasons (quota in use, quota too small,
a flavor that cannot serve the pod set, a missing or inactive queue).

Remedies: what to inspect for a known gate owner, and the command that
removes the gates by hand, verified when the ungated pods would then fit.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace
from typing import Any

from analyzers.capacity import node_capacities
from analyzers.findings import Finding, ObjectRef, Remedy, Severity
from analyzers.kueue import candidate_workloads, newest_workload_event
from analyzers.messages import QUEUE, parse_message
from analyzers.records import Event, OwnerRef, Pod
from analyzers.rules._describe import are, describe_verdict, duration, plural, what_if_verdict, where_fits
from analyzers.rules.context import RuleContext

RULE_ID = "scheduling-gated"

_REMOVE_GATES = [{"op": "remove", "path": "/spec/schedulingGates"}]


@dataclass(frozen=True, slots=True)
class _Owner:
    who: str
    removes_when: str
    inspect: str  # a command template ({ns}, {queue}); "" when there is nothing specific to inspect


_KNOWN_GATES: tuple[tuple[str, _Owner], ...] = (
    (
        "kueue.x-k8s.io/admission",
        _Owner(
            "Kueue",
            "when the pod's Workload is admitted to its ClusterQueue (quota reserved in the LocalQueue's "
            "ClusterQueue and every AdmissionCheck, e.g. a ProvisioningRequest, Ready)",
            "kubectl get workloads.kueue.x-k8s.io -n {ns} -o wide",
        ),
    ),
    (
        "kueue.x-k8s.io/topology",
        _Owner(
            "Kueue (topology-aware scheduling)",
            "once it has assigned the admitted pod its topology domain",
            "kubectl get workloads.kueue.x-k8s.io -n {ns} -o wide",
        ),
    ),
    (
        "volcano.sh/queue-allocation-gate",
        _Owner(
            "Volcano",
            "when the pod's Volcano queue has capacity allocated for it",
            "kubectl get queues.scheduling.volcano.sh",
        ),
    ),
)


def gate_owner(gate: str) -> _Owner:
    for name, owner in _KNOWN_GATES:
        if gate == name:
            return owner
    if gate.startswith("kueue.x-k8s.io/"):
        return _Owner(
            "Kueue",
            "when its admission of the pod completes",
            "kubectl get workloads.kueue.x-k8s.io -n {ns} -o wide",
        )
    domain = gate.split("/", 1)[0] if "/" in gate else ""
    who = f"the controller of {domain} that added it" if domain else "the controller that added it"
    return _Owner(
        who, "when its own condition for releasing the pod is met (usually a mutating webhook added it)", ""
    )


def analyze(ctx: RuleContext) -> list[Finding]:
    threshold = ctx.thresholds.gated_after_seconds
    findings = []
    for ref, pods in ctx.pending_by_workload().items():
        groups: dict[tuple[str, ...], list[Pod]] = {}
        for pod in pods:
            gates = pod.spec.scheduling_gates
            if not gates or pod.created is None or ctx.now - pod.created < threshold:
                continue
            groups.setdefault(tuple(sorted(set(gates))), []).append(pod)
        for gates, gated in sorted(groups.items()):
            findings.append(_finding(ctx, ref, gates, gated))
    return findings


def _finding(ctx: RuleContext, ref: ObjectRef, gates: tuple[str, ...], pods: list[Pod]) -> Finding:
    oldest = min(pods, key=lambda p: (p.created or ctx.now, p.name))
    waited = ctx.now - (oldest.created or ctx.now)
    owners = {g: gate_owner(g) for g in gates}
    ungated_ok, ungated_text = _ungated(ctx, pods)
    subject = ref
    what = (
        f"{ref.kind} {ref.namespace}/{ref.name}" if ref.kind != "Pod" else f"Pod {ref.namespace}/{ref.name}"
    )
    count = plural(len(pods), "pod")
    gate_words = []
    for g in gates:
        o = owners[g]
        text = f"{g}: {o.who} removes it {o.removes_when}"
        queue = oldest.labels.get("kueue.x-k8s.io/queue-name")
        if o.who.startswith("Kueue"):
            text += (
                f"; the pod names LocalQueue {queue}"
                if queue
                else "; the pod carries no kueue.x-k8s.io/queue-name label"
            )
        gate_words.append(text)
    kueue_event = _kueue_word(ctx, pods) if any(g.startswith("kueue.x-k8s.io/") for g in gates) else None
    kueue_said = parse_message(kueue_event.message) if kueue_event is not None else None
    kueue_text = ""
    if kueue_event is not None and kueue_said is not None:
        kueue_text = f" Kueue says about Workload {kueue_event.involved.name}: {kueue_event.message!r}"
        if kueue_said.kind == QUEUE and kueue_said.reasons:
            kueue_text += f" ({kueue_said.reasons[0].info.meaning})"
        kueue_text += "."
    explanation = (
        f"{count} of {what} {are(len(pods))} held by schedulingGates [{', '.join(gates)}]; the oldest, {oldest.name}, "
        f"has waited {duration(waited)} (threshold {duration(ctx.thresholds.gated_after_seconds)}). kube-scheduler does "
        "not even try to place a gated pod: the SchedulingGates PreEnqueue plugin keeps it out of the scheduling queue "
        "and its PodScheduled condition reads SchedulingGated, so no FailedScheduling event explains the wait. Gates "
        "can only be removed after creation, never added, so they were set when the pod was created and whoever set "
        f"them must remove them: {'; '.join(gate_words)}.{kueue_text} {ungated_text}"
    )
    remedies = _remedies(ctx, ref, gates, owners, pods, ungated_ok, ungated_text, oldest)
    evidence: dict[str, Any] = {
        "gates": list(gates),
        "owners": {g: o.who for g, o in owners.items()},
        "pods": [p.name for p in pods],
        "gated_pod_count": len(pods),
        "oldest_pod": oldest.name,
        "waited_seconds": int(waited),
        "threshold_seconds": ctx.thresholds.gated_after_seconds,
        "queue_name": oldest.labels.get("kueue.x-k8s.io/queue-name"),
        "fits_once_ungated": ungated_ok,
    }
    if kueue_event is not None and kueue_said is not None:
        evidence["kueue_workload"] = kueue_event.involved.name
        evidence["kueue_message"] = kueue_event.message
        evidence["kueue_reasons"] = [r.code for r in kueue_said.reasons] if kueue_said.kind == QUEUE else []
    first_owner = owners[gates[0]].who
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARNING,
        subject=subject,
        title=(
            f"{count} of {ref.name} gated for {duration(waited)} by {', '.join(gates)} "
            f"(waiting for {first_owner})"
        ),
        explanation=explanation,
        evidence=evidence,
        remedies=tuple(remedies),
        cause="gates:" + ",".join(gates),
        pods=tuple(f"{p.namespace}/{p.name}" for p in pods),
    )


def _kueue_word(ctx: RuleContext, pods: list[Pod]) -> Event | None:
    """Kueue's newest word on the pods' Workloads, found by their computed names
    (plain pods each have their own Workload; a Job's pods share one)."""
    snap = ctx.snapshot
    namespace = pods[0].namespace
    parents: dict[tuple[str, str], OwnerRef] = {
        (kind, obj.name): obj.owner
        for kind, objects in (("Job", snap.jobs), ("ReplicaSet", snap.replicasets))
        for (ns, _), obj in objects.items()
        if ns == namespace and obj.owner is not None
    }
    names = dict.fromkeys(name for pod in pods for name in candidate_workloads(pod, parents))
    events = (ev for name in names for ev in snap.events_for("Workload", namespace, name))
    return newest_workload_event(tuple(events))


def _without_gates(pod: Pod) -> Pod:
    return replace(pod, spec=replace(pod.spec, scheduling_gates=()))


def _ungated(ctx: RuleContext, pods: list[Pod]) -> tuple[bool, str]:
    """Re-simulate the oldest gated pod without its gates against the cluster as it is
    (the group's pods share their owner and gates; a StatefulSet's differ only in claims),
    then check there is room for all of them: as many feasible nodes as pods, else the
    NodeResourcesFit arithmetic of how many copies the feasible nodes hold."""
    pod = pods[0]
    free = _without_gates(pod)
    verdict = what_if_verdict(ctx, free)
    note = " (resources only: anti-affinity or spread among the gated pods themselves was not simulated)"
    if not verdict.fits:
        return (
            False,
            f"Without its gates {pod.name} would still not be scheduled: {describe_verdict(free, verdict)} "
            f"({verdict.message}).",
        )
    needed = len(pods)
    if verdict.feasible_nodes >= needed:
        return (
            True,
            f"Once ungated the cluster has room: re-simulated without gates, {pod.name} fits on "
            f"{where_fits(verdict)}"
            + (f", one node each for the {needed} gated pods." if needed > 1 else "."),
        )
    caps = node_capacities(ctx.snapshot)
    wanted = {r: v for r, v in pod.spec.requests.items() if v > 0}
    room = 0
    for nv in verdict.nodes:
        cap = caps.get(nv.node) if nv.fits else None
        if cap is None:
            continue
        copies = min((cap.free(r) // v for r, v in wanted.items()), default=needed)
        room += max(0, min(copies, cap.free("pods")))
    where = where_fits(verdict)
    if room >= needed:
        return (
            True,
            f"Once ungated the cluster has room: re-simulated without gates, {pod.name} fits on {where}, which "
            f"have room for {room} such pods, {needed} needed{note}.",
        )
    return (
        False,
        f"Once ungated not all of them would be scheduled: {pod.name} fits on {where}, but their free resources "
        f"hold only {room} of the {plural(needed, 'gated pod')}{note}.",
    )


def _remedies(
    ctx: RuleContext,
    ref: ObjectRef,
    gates: tuple[str, ...],
    owners: dict[str, _Owner],
    pods: list[Pod],
    ungated_ok: bool,
    ungated_text: str,
    oldest: Pod,
) -> list[Remedy]:
    out: list[Remedy] = []
    ns = ref.namespace
    seen: set[str] = set()
    for g in gates:
        o = owners[g]
        if not o.inspect or o.inspect in seen:
            continue
        seen.add(o.inspect)
        command = o.inspect.format(ns=shlex.quote(ns))
        queue = oldest.labels.get("kueue.x-k8s.io/queue-name")
        if queue and o.who.startswith("Kueue"):
            command += f" && kubectl describe localqueue {shlex.quote(queue)} -n {shlex.quote(ns)}"
        out.append(
            ctx.renderer.command(
                f"Find out why {o.who} has not released the pod",
                ObjectRef("Namespace", "", ns),
                command,
                note=f"{o.who} removes {g} {o.removes_when}; its status says what it waits for.",
                verified=False,
                verification="an inspection, not a change: nothing to re-simulate",
            )
        )
    patch = json.dumps(_REMOVE_GATES, separators=(",", ":"))
    if len(pods) == 1:
        command = f"kubectl patch pod {shlex.quote(pods[0].name)} -n {shlex.quote(ns)} --type json -p {shlex.quote(patch)}"
    else:
        pod_list = " ".join(shlex.quote(p.name) for p in pods)
        command = f'for p in {pod_list}; do kubectl patch pod "$p" -n {shlex.quote(ns)} --type json -p {shlex.quote(patch)}; done'
    known = any(not owners[g].who.startswith("the controller") for g in gates)
    caveat = (
        f"Only when {', '.join(sorted({owners[g].who for g in gates}))} is not going to release the pod (not installed, "
        "misconfigured, or the pod is not in its queue): removing a queueing gate by hand bypasses its quota."
        if known
        else "Only if the controller that added the gate is gone or stuck; it does not re-add a removed gate."
    )
    out.append(
        ctx.renderer.command(
            f"Remove the scheduling gates by hand ({plural(len(pods), 'pod')})",
            ObjectRef("Pod", ns, pods[0].name) if len(pods) == 1 else ref,
            command,
            note=caveat,
            verified=ungated_ok,
            verification=ungated_text,
        )
    )
    return out
