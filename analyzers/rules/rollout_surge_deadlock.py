"""rollout-surge-deadlock: a RollingUpdate whose new pod needs what the old pods hold.

With effective maxUnavailable 0 (e.g. the default 25%/25% on fewer than 4
replicas: surge rounds up, unavailable rounds down,
pkg/controller/deployment/util/deployment_util.go ResolveFenceposts) the
deployment controller must start a new pod before it may stop an old one. If
the only nodes the new pod may use are full because the old pods occupy them
(a GPU, CPU, a hostPort, anti-affinity) and preemption cannot help (the old
pods have the same priority), the rollout never progresses. This fires as soon
as the simulator confirms it, long before ProgressDeadlineExceeded.

Confirmation is a what-if: remove the old pods from the nodes the new pod could
otherwise use and re-simulate; if it then fits, the old pods are the obstacle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from analyzers.capacity import node_capacities
from analyzers.findings import Finding, ObjectRef, Remedy, Severity
from analyzers.quantity import format_units
from analyzers.records import Deployment, FrozenMap, Pod
from analyzers.rollout import (
    describe_fenceposts,
    effective_max_surge,
    effective_max_unavailable,
    is_new_replicaset,
    resolve_fenceposts,
    rollouts_taking_no_pod_down,
)
from analyzers.rules.context import RuleContext
from analyzers.simulator import FilterFailure
from analyzers.simulator import codes as C
from analyzers.simulator.dra.plugin import REASON_CANNOT_ALLOCATE, without_pods
from analyzers.snapshot import ClusterSnapshot

RULE_ID = "rollout-surge-deadlock"
# Where the GPU Operator's Helm chart installs it, and the ConfigMap unstick's
# time-slicing remedy writes (ClusterPolicy spec.devicePlugin.config.name).
GPU_OPERATOR_NAMESPACE = "gpu-operator"
TIME_SLICING_CONFIG = "device-plugin-time-slicing"

# Filters whose failure an old pod's departure can cure.
_RESOLVABLE = "Unschedulable"


def analyze(ctx: RuleContext) -> list[Finding]:
    findings = []
    snap = ctx.snapshot
    for dep in rollouts_taking_no_pod_down(snap):
        if effective_max_unavailable(dep) != 0:
            continue
        finding = _check(ctx, dep)
        if finding is not None:
            findings.append(finding)
    return findings


def _check(ctx: RuleContext, dep: Deployment) -> Finding | None:
    snap = ctx.snapshot
    ref = ObjectRef("Deployment", dep.namespace, dep.name)
    pods = snap.pods_of_workload(ref)
    replicasets = [
        rs
        for rs in snap.replicasets.values()
        if rs.owner
        and rs.owner.kind == "Deployment"
        and rs.owner.name == dep.name
        and rs.namespace == dep.namespace
    ]
    new_rs_names = {rs.name for rs in replicasets if is_new_replicaset(dep, rs)}
    if not new_rs_names:
        return None
    new_pending = [
        p
        for p in pods
        if p.owner and p.owner.name in new_rs_names and p.unscheduled and not p.spec.scheduling_gates
    ]
    old_running = [
        p
        for p in pods
        if p.owner
        and p.owner.name not in new_rs_names
        and p.node_name
        and not p.finished
        and p.deleted is None
    ]
    if not new_pending or not old_running:
        return None
    pending = new_pending[0]
    verdict = ctx.verdict(pending)
    if verdict.fits or verdict.prefilter is not None:
        return None
    if verdict.preemption.candidates:
        return None  # kube-scheduler can preempt its way out
    # Nodes the new pod could use but for something an old pod may be holding.
    # (DynamicResources' "cannot allocate all claims" is UnschedulableAndUnresolvable, yet the
    # old pods' claims free their devices when the pods go: the resourceclaim controller.)
    resolvable = {
        n.node
        for n in verdict.nodes
        if n.filters and all(f.code == _RESOLVABLE or _devices_held(f) for f in n.filters)
    }
    blockers = [p for p in old_running if p.node_name in resolvable]
    if not blockers:
        return None
    without_old = without_pods(snap, blockers)
    if not ctx.verdict(pending, without_old).fits:
        return None  # the old pods are not what stands in the way

    surge, unavailable = effective_max_surge(dep), effective_max_unavailable(dep)
    nodes = sorted(resolvable)
    first_failures = {n.node: n.filters[0] for n in verdict.nodes if n.node in resolvable}
    held = _held_resources(pending, blockers, snap)
    new_priority = snap.priority_of(pending)
    old_priorities = sorted({snap.priority_of(p) for p in blockers})
    reasons = sorted({r for f in first_failures.values() for r in f.reasons})
    node_text = ", ".join(nodes)
    holders = ", ".join(sorted(p.name for p in blockers))
    allowed_by = _placement_words(pending)
    explanation = (
        f"Deployment {dep.namespace}/{dep.name} is rolling out"
        + (f" revision {dep.revision}" if dep.revision else "")
        + f", but its new pod {pending.name} cannot be scheduled. "
        f"The strategy is RollingUpdate with maxSurge {dep.max_surge} and maxUnavailable {dep.max_unavailable}: "
        f"{describe_fenceposts(dep)}, so the controller must start a new pod before it may stop an old one. "
        f"The new pod {allowed_by} can only run on {node_text}"
        + (f", where it has {held}" if held else "")
        + f" — held by the old pod(s) {holders} ({'; '.join(reasons)}). "
        f"Preemption cannot free it: the old pods have priority {', '.join(map(str, old_priorities))} and the new pod "
        f"{new_priority}; kube-scheduler only preempts pods of lower priority. "
        f"Without a change the rollout waits until progressDeadlineSeconds ({dep.progress_deadline_seconds} s) marks it "
        "failed, and then keeps waiting."
    )
    remedies = _remedies(ctx, dep, ref, pending, blockers, held_resource=_main_resource(first_failures))
    deadline = any(c.type == "Progressing" and c.reason == "ProgressDeadlineExceeded" for c in dep.conditions)
    evidence = {
        "replicas": dep.replicas,
        "strategy": {
            "type": dep.strategy_type,
            "maxSurge": dep.max_surge,
            "maxUnavailable": dep.max_unavailable,
        },
        "effective_max_surge": surge,
        "effective_max_unavailable": unavailable,
        "pending_pods": [p.name for p in new_pending],
        "revision": dep.revision,
        "progress_deadline_seconds": dep.progress_deadline_seconds,
        "old_pods": [p.name for p in blockers],
        "nodes": nodes,
        "scheduler_message": verdict.message,
        "new_pod_priority": new_priority,
        "old_pod_priorities": old_priorities,
        "progress_deadline_exceeded": deadline,
    }
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.CRITICAL,
        subject=ref,
        title=f"Rollout of {dep.name} is deadlocked: the new pod needs what the old pod holds (maxUnavailable resolves to 0)",
        explanation=explanation,
        evidence=evidence,
        remedies=tuple(remedies),
        cause="surge-needs-held-capacity",
        pods=tuple(f"{p.namespace}/{p.name}" for p in new_pending),
    )


def _placement_words(pod: Pod) -> str:
    parts = []
    if pod.spec.node_selector:
        parts.append(
            "with nodeSelector " + ",".join(f"{k}={v}" for k, v in sorted(pod.spec.node_selector.items()))
        )
    if pod.spec.required_node_affinity is not None:
        parts.append("with its required node affinity")
    return " ".join(parts) if parts else "under its scheduling constraints"


def _main_resource(first_failures: Mapping[str, FilterFailure]) -> str | None:
    """The resource named by the first 'Insufficient <resource>' reason, if any."""
    for failure in first_failures.values():
        for reason in failure.reasons:
            if reason.startswith("Insufficient "):
                return reason[len("Insufficient ") :]
    return None


def _held_resources(pending: Pod, blockers: list[Pod], snap: ClusterSnapshot) -> str:
    caps = node_capacities(snap)
    parts = []
    nodes = sorted({p.node_name for p in blockers})
    for node_name in nodes:
        cap = caps.get(node_name)
        if cap is None:
            continue
        for res, want in sorted(pending.spec.requests.items()):
            if cap.free(res) < want:
                parts.append(
                    f"{format_units(res, cap.allocatable(res))} {res} allocatable, "
                    f"{format_units(res, cap.requested.get(res, 0))} requested, and the new pod needs {format_units(res, want)}"
                )
    return (
        "; ".join(parts)
        if len(nodes) == 1
        else "; ".join(f"{n}: {t}" for n, t in zip(nodes, parts, strict=False))
    )


# The strategy of the first remedy: (maxSurge, maxUnavailable).
OLD_POD_FIRST: tuple[int, int] = (0, 1)


def _devices_held(failure: FilterFailure) -> bool:
    return failure.plugin == C.DYNAMIC_RESOURCES and failure.reasons == (REASON_CANNOT_ALLOCATE,)


def _with_strategy(
    dep: Deployment, strategy_type: str, surge: int | str | None, unavailable: int | str | None
) -> Deployment:
    return replace(dep, strategy_type=strategy_type, max_surge=surge, max_unavailable=unavailable)


def _fits_after_controller_scales_down(
    ctx: RuleContext, dep: Deployment, pending: Pod, blockers: list[Pod]
) -> tuple[bool, str]:
    """With the changed strategy, the controller may first remove up to
    maxUnavailable old pods (all of them for Recreate); does the new pod fit then?"""
    if dep.strategy_type == "Recreate":
        removable = blockers
    else:
        _, unavailable = resolve_fenceposts(dep.max_surge, dep.max_unavailable, dep.replicas)
        removable = blockers[: min(unavailable, dep.replicas)]
    if not removable:
        return False, "the changed strategy still lets no old pod go first"
    after = without_pods(ctx.snapshot, removable)
    verdict = ctx.verdict(pending, after)
    names = ", ".join(p.name for p in removable)
    if verdict.fits:
        where = ", ".join(n.node for n in verdict.nodes if n.fits)
        return True, f"re-simulated with {names} scaled down first: the new pod fits on {where}"
    return False, f"re-simulated with {names} scaled down first: still unschedulable ({verdict.message})"


def _remedies(
    ctx: RuleContext,
    dep: Deployment,
    ref: ObjectRef,
    pending: Pod,
    blockers: list[Pod],
    held_resource: str | None,
) -> list[Remedy]:
    r = ctx.renderer
    out: list[Remedy] = []
    # 1. maxSurge 0 / maxUnavailable 1: the old pod goes first. The patch is built from
    # the very strategy that was simulated.
    surge, unavailable = OLD_POD_FIRST
    ok, how = _fits_after_controller_scales_down(
        ctx, _with_strategy(dep, "RollingUpdate", surge, unavailable), pending, blockers
    )
    out.append(
        r.patch(
            f"Let the old pod go first: strategy.rollingUpdate maxSurge {surge}, maxUnavailable {unavailable}",
            ref,
            {
                "spec": {
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
                    }
                }
            },
            verified=ok,
            verification=how + " (brief downtime: one replica is down while the new pod starts)",
        )
    )
    # 2. Recreate.
    ok, how = _fits_after_controller_scales_down(
        ctx, _with_strategy(dep, "Recreate", None, None), pending, blockers
    )
    out.append(
        r.patch(
            "Or use the Recreate strategy (all old pods stop before new ones start)",
            ref,
            {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": None}}},
            verified=ok,
            verification=how + " (downtime for the whole Deployment during each rollout)",
        )
    )
    # 3. Relax the selector when other nodes have the resource free.
    relaxed = _relaxed_selector(ctx, ref, pending, held_resource)
    if relaxed is not None:
        out.append(relaxed)
    # 4. More capacity of the held resource on the pinned node (GPU time-slicing / MIG).
    if held_resource is not None and blockers:
        out.append(_capacity_remedy(ctx, pending, blockers, held_resource))
    return out


def _relaxed_selector(ctx: RuleContext, ref: ObjectRef, pending: Pod, resource: str | None) -> Remedy | None:
    """If the pod is pinned by a hostname nodeSelector and other nodes share a
    label that also has free capacity, propose selecting by that label instead."""
    selector = dict(pending.spec.node_selector)
    if "kubernetes.io/hostname" not in selector or resource is None:
        return None
    pinned = ctx.snapshot.nodes.get(selector["kubernetes.io/hostname"])
    if pinned is None:
        return None
    caps = node_capacities(ctx.snapshot)
    want = pending.spec.requests.get(resource, 0)
    others = [c for name, c in caps.items() if name != pinned.name and c.free(resource) >= want > 0]
    if not others:
        return None
    # A label the pinned node shares with the nodes that have room, hostname aside.
    for key, value in sorted(pinned.labels.items()):
        if key in ("kubernetes.io/hostname",) or not any(c.node.labels.get(key) == value for c in others):
            continue
        new_selector = {k: v for k, v in selector.items() if k != "kubernetes.io/hostname"} | {key: value}
        spec = replace(pending.spec, node_selector=FrozenMap(new_selector))
        what_if = replace(pending, spec=spec)
        v = ctx.verdict(what_if, ctx.snapshot.replace(what_if))
        if not v.fits:
            continue
        where = ", ".join(n.node for n in v.nodes if n.fits)
        return ctx.renderer.patch(
            f"Or select nodes by {key}={value} instead of pinning one hostname",
            ref,
            {"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": None, key: value}}}}},
            verified=True,
            verification=f"re-simulated the new pod with nodeSelector {key}={value}: it fits on {where}",
        )
    return None


def _capacity_remedy(ctx: RuleContext, pending: Pod, blockers: list[Pod], resource: str) -> Remedy:
    node_name = blockers[0].node_name
    node = ctx.snapshot.nodes[node_name]
    current = node.allocatable.get(resource, 0)
    bigger = replace(
        node,
        allocatable=FrozenMap(
            {**node.allocatable, resource: current + pending.spec.requests.get(resource, 1)}
        ),
    )
    fits = ctx.verdict(pending, ctx.snapshot.replace(bigger)).fits
    wanted = current + pending.spec.requests.get(resource, 1)
    verification = (
        f"re-simulated with {node_name} advertising {wanted} {resource}: "
        + ("the new pod fits" if fits else "still unschedulable")
        + " (a capacity change outside Kubernetes objects; apply it in the device plugin or node pool)"
    )
    if resource == "nvidia.com/gpu" and current > 0:
        # Time-slicing advertises `replicas` nvidia.com/gpu per physical GPU.
        replicas = -(-wanted // current)
        key = f"time-sliced-{replicas}"
        patch = {"spec": {"devicePlugin": {"config": {"name": TIME_SLICING_CONFIG}}}}
        return ctx.renderer.manifest(
            f"Or share the GPU of {node_name}: NVIDIA time-slicing with {replicas} replicas advertises "
            f"{current * replicas} nvidia.com/gpu (GPU Operator ConfigMap, ClusterPolicy, node label)",
            ObjectRef("Node", "", node_name),
            "nvidia-time-slicing.yaml.j2",
            verified=fits,
            verification=verification
            + ". Time-sliced pods share the GPU's memory and compute with no isolation; MIG (A100/H100) "
            "partitions it instead (GPU Operator: the node label nvidia.com/mig.config)",
            command=(
                f"kubectl apply -n {GPU_OPERATOR_NAMESPACE} -f - && "
                f"kubectl patch clusterpolicies.nvidia.com/cluster-policy --type merge -p '{json.dumps(patch, separators=(',', ':'))}' && "
                f"kubectl label node {node_name} nvidia.com/device-plugin.config={key} --overwrite"
            ),
            name=TIME_SLICING_CONFIG,
            namespace=GPU_OPERATOR_NAMESPACE,
            key=key,
            resource=resource,
            replicas=replicas,
        )
    title = f"Or add {resource} capacity to {node_name}"
    note = "A bigger node (or a second eligible node) leaves room for one more pod during the rollout."
    command = f"kubectl describe node {node_name}"
    return ctx.renderer.command(
        title,
        ObjectRef("Node", "", node_name),
        command,
        note=note,
        verified=fits,
        verification=verification,
    )
