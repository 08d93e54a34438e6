"""untolerated-taint: the only nodes that would fit carry taints the pod does not tolerate.

TaintToleration (pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go)
rejects a node with a NoSchedule or NoExecute taint the pod has no matching
toleration for (v1helper.FindMatchingUntoleratedTaint; PreferNoSchedule only
scores), and NodeUnschedulable (nodeunschedulable/node_unschedulable.go) a
cordoned node unless the pod tolerates ``node.kubernetes.io/unschedulable``.
Both are UnschedulableAndUnresolvable: preemption never helps.

Whether a toleration is the fix depends on the taint:

- a dedicated pool (``dedicated=batch``, a team's taint): yes, if the workload
  belongs there -- a toleration permits, it does not attract;
- a GPU pool (``nvidia.com/gpu``): yes when the pod requests a GPU (the
  ExtendedResourceToleration admission plugin adds it automatically when
  enabled); a pod that needs no GPU belongs elsewhere;
- the control plane (``node-role.kubernetes.io/control-plane``): no, not for
  application workloads;
- ``node.kubernetes.io/not-ready``/``unreachable``/pressure taints: never -- the
  node is unhealthy (the node lifecycle controller's TaintNodesByCondition);
- cordon (``node.kubernetes.io/unschedulable``) and removal taints
  (cluster-autoscaler, Karpenter): the node is being drained; uncordon only
  when the maintenance is over.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace

from analyzers.findings import Finding, Remedy
from analyzers.records import Node, Pod, Taint, Toleration
from analyzers.rules import _placement as P
from analyzers.rules._describe import names
from analyzers.rules.context import RuleContext
from analyzers.simulator.basic import UNSCHEDULABLE_TAINT, tolerates
from analyzers.taints import CONTROL_PLANE as _CONTROL_PLANE
from analyzers.taints import REMOVAL as _REMOVAL
from analyzers.taints import STARTING as _STARTING
from analyzers.taints import UNHEALTHY as _UNHEALTHY

RULE_ID = "untolerated-taint"

_GPU_KEYS = frozenset({"nvidia.com/gpu", "amd.com/gpu", "gpu", "sku", "accelerator"})


@dataclass(frozen=True, slots=True)
class TaintKind:
    category: str  # dedicated, gpu-pool, control-plane, unhealthy, cordoned, removal, starting
    words: str
    tolerable: bool


def classify(taint: Taint, pod: Pod) -> TaintKind:
    key = taint.key
    if key in _CONTROL_PLANE:
        return TaintKind(
            "control-plane",
            "control-plane taint: intentional, it keeps application pods off the control plane; do not tolerate it",
            False,
        )
    if key in _UNHEALTHY:
        return TaintKind(
            "unhealthy", f"{_UNHEALTHY[key]}: not something to tolerate, the node needs repair", False
        )
    if key == "node.kubernetes.io/unschedulable":
        return TaintKind("cordoned", _REMOVAL[key], False)
    if key in _REMOVAL:
        return TaintKind("removal", f"{_REMOVAL[key]}: not something to tolerate", False)
    if key in _STARTING:
        return TaintKind("starting", f"{_STARTING[key]}: it goes away when the node is ready", False)
    if key in _GPU_KEYS or "gpu" in key.lower() or "gpu" in taint.value.lower():
        gpu = P.requests_gpu(pod)
        if gpu is not None:
            return TaintKind(
                "gpu-pool",
                f"GPU pool taint: intentional, it keeps pods without GPUs off the GPU nodes; this pod requests "
                f"{gpu}, so it is expected to tolerate it",
                True,
            )
        return TaintKind(
            "gpu-pool",
            "GPU pool taint: intentional, it keeps pods without GPUs off the GPU nodes; this pod requests no GPU, "
            "so it belongs elsewhere",
            False,
        )
    return TaintKind(
        "dedicated",
        "a dedicated-node taint: intentional; tolerate it only if the workload belongs on these nodes",
        True,
    )


@dataclass(slots=True)
class Blocker:
    node: Node
    taints: tuple[Taint, ...]  # untolerated NoSchedule/NoExecute taints (cordon as its taint)
    other: tuple[str, ...]  # reasons of the node's other failing filters


@dataclass(slots=True)
class Analysis:
    blockers: list[Blocker]
    would_fit: bool  # the blocked nodes fail nothing but taints/cordon


def blocking_taints(node: Node, pod: Pod) -> tuple[Taint, ...]:
    tolerations = pod.spec.tolerations
    found = [
        t for t in node.taints if t.effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t)
    ]
    cordoned = node.unschedulable and not tolerates(tolerations, UNSCHEDULABLE_TAINT)
    if cordoned and not any(t.key == UNSCHEDULABLE_TAINT.key for t in found):
        found.insert(0, UNSCHEDULABLE_TAINT)
    return tuple(found)


def analyze(ctx: RuleContext) -> list[Finding]:
    items = []
    for group in P.blocked(ctx, P.TAINT):
        analysis = _analyse(ctx, group)
        if not analysis.blockers:
            continue
        keys = sorted({t.key for b in analysis.blockers for t in b.taints})
        items.append(("taint:" + "+".join(keys), group, analysis))
    return [_finding(ctx, cause, found) for cause, found in P.merge_by_cause(items)]


def _analyse(ctx: RuleContext, group: P.Blocked) -> Analysis:
    snap = ctx.snapshot
    views = group.views
    taint_plugins = {"TaintToleration", "NodeUnschedulable"}
    only = views.where(lambda p: p <= taint_plugins, views.matches)
    focus = only or views.where(lambda p: bool(p & taint_plugins), views.matches)
    blockers = []
    for nv in (views.node(i) for i in views.indices(focus)):
        node = snap.nodes.get(nv.node)
        if node is None:
            continue
        taints = blocking_taints(node, group.pod)
        if not taints:
            continue
        other = tuple(r for f in nv.filters if f.plugin not in taint_plugins for r in f.reasons)
        blockers.append(Blocker(node, taints, other))
    return Analysis(blockers, bool(only))


def _finding(ctx: RuleContext, cause: str, found: list[tuple[P.Blocked, Analysis]]) -> Finding:
    group, analysis = found[0]
    pod = group.pod
    blockers = analysis.blockers
    by_taints: dict[tuple[Taint, ...], list[Blocker]] = {}
    for b in blockers:
        by_taints.setdefault(b.taints, []).append(b)
    lead = (
        "the only nodes that would otherwise fit carry taints the pod does not tolerate"
        if analysis.would_fit
        else "every node that matches its node affinity carries a taint the pod does not tolerate, and has "
        "other problems too"
    )
    parts = [f"{P.kind_word(group.ref)} has {P.pending_words(group, ctx.now)}: {lead}."]
    kinds: dict[str, TaintKind] = {}
    for taints, nodes in by_taints.items():
        node_names = names([b.node.name for b in nodes])
        described = "; ".join(f"{_taint_text(t)} ({classify(t, pod).words})" for t in taints)
        for t in taints:
            kinds[t.key] = classify(t, pod)
        extra = ""
        if not analysis.would_fit:
            others = sorted({r for b in nodes for r in b.other})
            extra = f"; even tolerated, {'it' if len(nodes) == 1 else 'they'} would fail: {'; '.join(others)}"
        parts.append(f"{node_names} {'has' if len(nodes) == 1 else 'have'} {described}{extra}.")
    rest = P.other_nodes_words(group.verdict, [b.node.name for b in blockers])
    if rest:
        parts.append(f"The other nodes: {rest}.")
    parts.append(
        "TaintToleration (pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go) rejects a node "
        "with a NoSchedule or NoExecute taint that no toleration of the pod matches, and NodeUnschedulable "
        "(nodeunschedulable/node_unschedulable.go) a cordoned node; both are UnschedulableAndUnresolvable, so "
        "preemption cannot help."
    )
    events = P.autoscaler_events(ctx.snapshot, group.pods)
    remedies = _remedies(ctx, group, analysis, by_taints)
    remedies.sort(key=lambda r: not r.verified)
    evidence = {
        "blocked_nodes": [
            {
                "node": b.node.name,
                "taints": [_taint_text(t) for t in b.taints],
                "kinds": [classify(t, pod).category for t in b.taints],
                "cordoned": b.node.unschedulable,
                "other_failures": list(b.other),
            }
            for b in blockers
        ],
        "pod_tolerations": [P.toleration_yaml(t) for t in pod.spec.tolerations],
        "would_fit_if_tolerated": analysis.would_fit,
        "scheduler_message": group.verdict.message,
        "pending_pods": [p.name for g, _ in found for p in g.pods],
        "pending_pod_count": sum(len(g.pods) for g, _ in found),
        "autoscaler_events": [{"reason": e.reason, "message": e.message} for e in events],
    }
    first = next(iter(by_taints))
    return Finding(
        rule_id=RULE_ID,
        severity=P.severity(ctx, group),
        subject=group.ref,
        title=f"{group.ref.name}: the nodes that would fit are tainted ({', '.join(_taint_text(t) for t in first)})",
        explanation=" ".join(parts) + P.autoscaler_words(events),
        evidence=evidence,
        remedies=tuple(remedies),
        cause=cause,
        pods=P.all_pods(found),
    )


def _taint_text(t: Taint) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def toleration_for(taint: Taint) -> Toleration:
    if taint.value:
        return Toleration(taint.key, "Equal", taint.value, taint.effect)
    return Toleration(taint.key, "Exists", "", taint.effect)


def _remedies(
    ctx: RuleContext,
    group: P.Blocked,
    analysis: Analysis,
    by_taints: dict[tuple[Taint, ...], list[Blocker]],
) -> list[Remedy]:
    pod = group.pod
    out: list[Remedy] = []
    # 1. Tolerations, for taints one may tolerate (up to two distinct taint sets).
    tried = 0
    for taints, nodes in sorted(by_taints.items(), key=lambda kv: -len(kv[1])):
        if tried == 2 or not all(classify(t, pod).tolerable for t in taints):
            continue
        tried += 1
        out.append(_toleration_patch(ctx, group, taints, [b.node.name for b in nodes]))
    # 2. Cordoned nodes that would take the pod: uncordon, when the maintenance is over.
    cordoned = [
        b
        for b in analysis.blockers
        if b.node.unschedulable and all(t.key == UNSCHEDULABLE_TAINT.key for t in b.taints)
    ]
    if cordoned:
        out.append(_uncordon(ctx, group, cordoned[0].node))
    # 3. Unhealthy or starting nodes: repair, never tolerate.
    sick = [
        b
        for b in analysis.blockers
        if any(classify(t, pod).category in ("unhealthy", "starting") for t in b.taints)
    ]
    if sick:
        out.append(_repair(ctx, group, sick))
    # 4. Nothing to tolerate: capacity without the taint.
    if not out or all(not r.verified for r in out):
        intentional = [
            b
            for b in analysis.blockers
            if all(classify(t, pod).category in ("control-plane", "gpu-pool", "removal") for t in b.taints)
        ]
        if intentional:
            out.append(_untainted_node(ctx, group, intentional[0]))
    return out


def _toleration_patch(
    ctx: RuleContext, group: P.Blocked, taints: Sequence[Taint], nodes: list[str]
) -> Remedy:
    pod = group.pod
    new = [toleration_for(t) for t in taints if not tolerates(pod.spec.tolerations, t)]
    verdict = P.what_if(ctx, P.with_spec(pod, tolerations=pod.spec.tolerations + tuple(new)))
    if group.ref.kind == "Pod":
        base = pod.spec.tolerations
    elif group.template is not None:
        base = group.template.tolerations
    else:  # the owner is not in the dump: the pod's own, without what admission added
        base = tuple(
            t
            for t in pod.spec.tolerations
            if not (t.key in P.ADMISSION_TOLERATION_KEYS and t.toleration_seconds == 300)
        )
    listed = list(base) + [t for t in new if t not in base]
    patch = {"tolerations": [P.toleration_yaml(t) for t in listed]}
    gpu = P.requests_gpu(pod)
    note = ""
    if not pod.spec.node_selector and pod.spec.required_node_affinity is None and gpu is None:
        note = (
            f" A toleration only permits; to keep {group.ref.name} on {names(nodes)}, also select them "
            "(nodeSelector or node affinity)."
        )
    return P.template_remedy(
        ctx,
        group,
        "Tolerate " + ", ".join(_taint_text(t) for t in taints),
        patch,
        verified=verdict.fits,
        verification=f"re-simulated {group.pods[0].name} with the toleration(s): {P.outcome(verdict)}.{note}",
    )


def _uncordon(ctx: RuleContext, group: P.Blocked, node: Node) -> Remedy:
    opened = replace(
        node,
        unschedulable=False,
        taints=tuple(t for t in node.taints if t.key != UNSCHEDULABLE_TAINT.key),
    )
    verdict = P.what_if_nodes(ctx, group.pod, opened, share=0.5)
    return ctx.renderer.command(
        f"Uncordon {node.name} once its maintenance or drain is finished",
        P.node_ref(node.name),
        f"kubectl uncordon {shlex.quote(node.name)}",
        note=f"{node.name} was cordoned on purpose (kubectl cordon/drain); uncordon it only when that work is done.",
        verified=P.fits(verdict),
        verification=f"re-simulated with {node.name} uncordoned: {P.outcome(verdict)}",
    )


def _repair(ctx: RuleContext, group: P.Blocked, sick: list[Blocker]) -> Remedy:
    node = sick[0].node
    healthy_taints = tuple(
        t for t in node.taints if classify(t, group.pod).category not in ("unhealthy", "starting")
    )
    verdict = P.what_if_nodes(ctx, group.pod, replace(node, taints=healthy_taints, ready=True), share=0.5)
    what = "; ".join(sorted({classify(t, group.pod).words.split(":")[0] for b in sick for t in b.taints}))
    return ctx.renderer.command(
        f"Repair {names([b.node.name for b in sick])}: {what}",
        P.node_ref(node.name),
        f"kubectl describe node {shlex.quote(node.name)}",
        note="Check the node's conditions and the kubelet; the node lifecycle controller removes the taint "
        "when the node is healthy again. Never tolerate it: the pod would be placed on a broken node.",
        verified=False,
        verification=(
            "not a change unstick can make or check; re-simulated with "
            f"{node.name} healthy: {P.outcome(verdict)}"
        ),
    )


def _untainted_node(ctx: RuleContext, group: P.Blocked, blocker: Blocker) -> Remedy:
    node = blocker.node
    keep = tuple(t for t in node.taints if t not in blocker.taints)
    name = P.synthetic_name(node.name)
    synthetic = replace(P.synthetic_node(node, name), taints=keep)
    synthetic = P.with_labels(synthetic, {}, _CONTROL_PLANE)
    verdict = P.what_if_nodes(ctx, group.pod, synthetic, share=0.5)
    return ctx.renderer.command(
        f"Add a schedulable node for {group.ref.name} (shaped like {node.name}, without "
        + ", ".join(_taint_text(t) for t in blocker.taints)
        + ")",
        None,
        "# add a node to a pool this workload may use (node group size, Karpenter NodePool, or your IaC)",
        note=f"{node.name}'s taint is intentional; give the workload capacity of its own instead of tolerating it.",
        verified=P.fits(verdict),
        verification=f"re-simulated with a synthetic empty node {name} shaped like {node.name} (labels copied, "
        f"those taints left off): {P.outcome(verdict)}",
    )
