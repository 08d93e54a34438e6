"""packing-profile: the pod's scheduler profile packs, so a workload's replicas pile onto one node.

NodeResourcesFit's ``MostAllocated`` strategy scores a node higher the fuller
it is, and ``RequestedToCapacityRatio`` does when its shape's score rises with
utilization (pkg/scheduler/framework/plugins/noderesources/most_allocated.go,
requested_to_capacity_ratio.go, v1.37.2): bin-packing, as GPU clusters
configure it on purpose. For a workload of several replicas that packing is
a single node's failure away from an outage, and nobody reading the pod spec
sees why all replicas share a node: the reason is in the
KubeSchedulerConfiguration (``--scheduler-config``).

Judged (analyzers/rules/_scoring.py) for a workload's pending pod, else its
newest pod placed within ``thresholds.recent_placement_seconds``, whose
profile packs, when the workload has at least two replicas or the pod
requests a GPU. The next N replicas (the workload's pending pods, else its
replicas; at most ``MAX_REPLICAS``) are placed one after another
(:func:`analyzers.rules._scoring.first_branch`: each to the first node of its
best set) with the profile, and
again with LeastAllocated (the default strategy) for comparison. Fires when
at least half of them would land on one node and fewer would under
LeastAllocated.

Remedy: another configured profile that does not pack, when there is one
(``schedulerName`` in the pod template), verified by re-predicting the
distribution with it. No remedy otherwise: packing is the profile's purpose;
the explanation names the pod-level alternatives (spread with DoNotSchedule,
pod anti-affinity).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from typing import Any

from analyzers.findings import Finding, Remedy
from analyzers.records import Pod
from analyzers.rules._placement import replicas_of, requests_gpu
from analyzers.rules._scoring import Scored, first_branch, scored_pods
from analyzers.rules.context import RuleContext
from analyzers.simulator.scoring.profile import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    NODE_RESOURCES_FIT,
    REQUESTED_TO_CAPACITY_RATIO,
    Profile,
)
from analyzers.snapshot import ClusterSnapshot

RULE_ID = "packing-profile"

MAX_REPLICAS = 10
# Workloads followed per pass: each costs 2 x MAX_REPLICAS scheduling attempts.
MAX_PACKED_WORKLOADS = 3
_TEMPLATE_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")


def packs(profile: Profile) -> bool:
    """Whether NodeResourcesFit scores fuller nodes higher in ``profile``."""
    if NODE_RESOURCES_FIT not in profile.weights:
        return False
    if profile.fit_strategy == MOST_ALLOCATED:
        return True
    if profile.fit_strategy == REQUESTED_TO_CAPACITY_RATIO and len(profile.shape) >= 2:
        return profile.shape[-1][1] > profile.shape[0][1]
    return False


def _strategy(profile: Profile) -> str:
    if profile.fit_strategy == REQUESTED_TO_CAPACITY_RATIO:
        shape = ", ".join(f"{u}%\u2192{s}" for u, s in profile.shape)
        return f"RequestedToCapacityRatio (shape {shape})"
    return profile.fit_strategy


def analyze(ctx: RuleContext) -> list[Finding]:
    if ctx.profiles is None:
        return []  # the default profile spreads (LeastAllocated)
    snap = ctx.snapshot
    counts: dict[Any, int] = {}

    def wants(pod: Pod, profile: Profile, _: ClusterSnapshot) -> bool:
        if not packs(profile):
            return False
        workload = snap.workload_of(pod)
        n = len(ctx.pending_by_workload().get(workload.ref, ())) or (replicas_of(workload) or 1)
        counts[workload.ref] = min(MAX_REPLICAS, n)
        return counts[workload.ref] >= 2 or requests_gpu(pod) is not None

    findings = []
    for sc in scored_pods(ctx, wants, MAX_PACKED_WORKLOADS):
        n = max(2, counts.get(sc.ref, 2))
        packed = first_branch(sc.snapshot, sc.pod, n, sc.profile, ctx.version)
        if not packed:
            continue
        node, most = max(packed.items(), key=lambda kv: (kv[1], kv[0]))
        if most < n / 2:
            continue
        spreading = replace(sc.profile, fit_strategy=LEAST_ALLOCATED, shape=())
        spread = first_branch(sc.snapshot, sc.pod, n, spreading, ctx.version)
        if max(spread.values(), default=0) >= most:
            continue
        findings.append(_finding(ctx, sc, n, node, most, packed, spread))
    return findings


def _words(dist: dict[str, int]) -> str:
    return ", ".join(f"{n} {v:g}" for n, v in sorted(dist.items(), key=lambda kv: (-kv[1], kv[0])))


def _finding(
    ctx: RuleContext,
    sc: Scored,
    n: int,
    node: str,
    most: int,
    packed: dict[str, int],
    spread: dict[str, int],
) -> Finding:
    ref = sc.ref
    gpu = requests_gpu(sc.pod)
    what = f"the next {n} {gpu} pods" if gpu else f"the next {n} replicas"
    explanation = (
        f"{ref.kind} {ref.namespace}/{ref.name}: pod {sc.pod.name} ({sc.when()}) is scheduled by profile "
        f"{sc.profile.scheduler_name}, whose NodeResourcesFit uses {_strategy(sc.profile)}: the fuller a node, the "
        f"higher it scores. Placed one after another, {what} would put {most} of {n} on {node} "
        f"({_words(packed)}; where a first pod ties, which node gets the pile is chance, its height is not); with "
        f"LeastAllocated, kube-scheduler's default, at most {max(spread.values(), default=0)} would share a node "
        f"({_words(spread)}). Packing is what the profile is for, but these replicas then share one node's "
        "fate: if they must not, give the template a topologySpreadConstraint over kubernetes.io/hostname with "
        "whenUnsatisfiable: DoNotSchedule (or pod anti-affinity), or schedule them with a profile that spreads."
    )
    title = (
        f"{ref.name}: profile {sc.profile.scheduler_name} packs ({sc.profile.fit_strategy}): "
        f"{most} of the next {n} pods would land on {node}"
    )
    evidence: dict[str, Any] = {
        "scoring_strategy": sc.profile.fit_strategy,
        "shape": [{"utilization": u, "score": s} for u, s in sc.profile.shape],
        "replicas_predicted": n,
        "pile_node": node,
        "on_pile_node": most,
        "most_on_one_node_least_allocated": max(spread.values(), default=0),
        "distribution": packed,
        "distribution_least_allocated": spread,
    }
    remedy = _other_profile(ctx, sc, n, node, most)
    return sc.finding(
        RULE_ID,
        title=title,
        explanation=explanation,
        evidence=evidence,
        remedy=remedy,
        cause=sc.profile.scheduler_name,
    )


def _other_profile(ctx: RuleContext, sc: Scored, n: int, node: str, most: int) -> Remedy | None:
    """A configured profile that does not pack, for a workload whose template can name it."""
    if ctx.profiles is None or sc.ref.kind not in _TEMPLATE_KINDS:
        return None
    other = next(
        (p for name, p in ctx.profiles.items() if not packs(p) and name != sc.profile.scheduler_name), None
    )
    if other is None:
        return None
    moved = replace(sc.pod, spec=replace(sc.pod.spec, scheduler_name=other.scheduler_name))
    again = first_branch(sc.snapshot, moved, n, other, ctx.version)
    there = max(again.values(), default=0)
    patch = json.dumps({"spec": {"template": {"spec": {"schedulerName": other.scheduler_name}}}})
    return ctx.renderer.command(
        f"Schedule {sc.ref.name} with profile {other.scheduler_name} ({other.fit_strategy})",
        sc.ref,
        f"kubectl patch {sc.ref.kind.lower()} {shlex.quote(sc.ref.name)} -n {shlex.quote(sc.ref.namespace)} "
        f"--type strategic -p {shlex.quote(patch)}",
        note="The new template's pods are scheduled by that profile; pods already placed stay where they are.",
        verified=there < most,
        verification=(
            f"re-predicted the next {n} pods with profile {other.scheduler_name}: at most {there} on one node "
            f"(was {most} on {node}); {_words(again)}"
        ),
    )
