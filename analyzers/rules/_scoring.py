"""Shared machinery of the Score-phase rules (preference-outweighed,
spread-not-honoured, packing-profile). Not a rule (no ``RULE_ID``).

**Which pods.** Only where it matters: per workload, its oldest pending pod of
kube-scheduler, else its newest pod placed within
``thresholds.recent_placement_seconds`` (scheduled "as if now": taken off its
node first, as ``unstick place`` does). A rule's ``wants`` test keeps only the
pods that carry the preference it judges, so the Score phase
(:func:`analyzers.simulator.scoring.placement.attempt`, the pod's profile from
``--scheduler-config``) runs for few pods. Clusters of more than
``MAX_NODES`` nodes are left to ``unstick place`` (seconds per pass).

**Outweighed.** A score plugin "wants" the feasible nodes where its normalized
score is highest. When none of them is in the best set, the other plugins'
weighted totals separate the winner from the best wanted node by ``margin``;
the plugin can add at most ``weight x 100`` (MaxNodeScore), so when ``margin``
exceeds that, nothing the plugin scores can change the outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from analyzers.findings import Finding, ObjectRef, Remedy, Severity
from analyzers.records import Pod
from analyzers.rules.context import RuleContext
from analyzers.simulator.nodeinfo import node_table
from analyzers.simulator.schedconfig import profile_for
from analyzers.simulator.scoring import MAX_NODE_SCORE, ScoreError, score_pod
from analyzers.simulator.scoring.framework import PhaseResult
from analyzers.simulator.scoring.placement import Step, attempt, bind
from analyzers.simulator.scoring.profile import Profile
from analyzers.snapshot import ClusterSnapshot

MAX_NODES = 150
# Workloads judged per rule and pass (the Score phase per workload).
MAX_WORKLOADS = 10


@dataclass(frozen=True, slots=True)
class Scored:
    """One pod of a workload through the Score phase."""

    ref: ObjectRef
    pod: Pod
    placed_on: str  # "" while pending
    profile: Profile
    snapshot: ClusterSnapshot  # the pod off its node
    step: Step
    names: tuple[str, ...]  # the node table's names (phase.nodes index it)

    @property
    def phase(self) -> PhaseResult:
        assert self.step.phase is not None
        return self.step.phase

    def node(self, k: int) -> str:
        """The name of the k-th scored node."""
        return self.names[self.phase.nodes[k]]

    def when(self) -> str:
        """``pending`` or ``placed on node-2``: what the finding is about."""
        return f"placed on {self.placed_on}" if self.placed_on else "pending"

    def finding(
        self,
        rule_id: str,
        *,
        title: str,
        explanation: str,
        evidence: dict[str, Any],
        remedy: Remedy | None,
        cause: str,
    ) -> Finding:
        """An ``info`` finding about this pod's workload; the evidence starts with the
        pod, its state and its profile."""
        head = {"pod": self.pod.name, "state": self.when(), "profile": self.profile.scheduler_name}
        return Finding(
            rule_id=rule_id,
            severity=Severity.INFO,
            subject=self.ref,
            title=title,
            explanation=explanation,
            evidence={**head, **evidence},
            remedies=(remedy,) if remedy is not None else (),
            cause=cause,
            pods=(f"{self.pod.namespace}/{self.pod.name}",),
        )


Wants = Callable[[Pod, Profile, ClusterSnapshot], bool]


def _candidates(ctx: RuleContext) -> Iterator[tuple[ObjectRef, Pod]]:
    snap = ctx.snapshot
    seen: set[ObjectRef] = set()
    for ref, pods in ctx.pending_by_workload().items():
        seen.add(ref)
        yield ref, pods[0]
    horizon = ctx.now - ctx.thresholds.recent_placement_seconds
    recent: dict[ObjectRef, Pod] = {}
    for pod in snap.pods.values():
        if not pod.node_name or pod.finished or pod.deleted is not None or pod.created is None:
            continue
        if pod.created < horizon or not ctx.served(pod.spec.scheduler_name):
            continue
        ref = snap.workload_of(pod).ref
        if ref in seen:
            continue
        best = recent.get(ref)
        if best is None or (pod.created, pod.name) > (best.created or 0.0, best.name):
            recent[ref] = pod
    yield from sorted(recent.items(), key=lambda kv: str(kv[0]))


def scored_pods(ctx: RuleContext, wants: Wants, limit: int = MAX_WORKLOADS) -> list[Scored]:
    """The pods worth judging (module docstring) with at least two feasible nodes, for
    at most ``limit`` workloads."""
    snap = ctx.snapshot
    if len(snap.nodes) > MAX_NODES:
        return []
    out: list[Scored] = []
    for ref, pod in _candidates(ctx):
        profile = profile_for(ctx.profiles, pod.spec.scheduler_name)
        if profile is None or not wants(pod, profile, snap):
            continue
        what_if = snap.replace(remove=[("pods", pod.key)]) if pod.node_name else snap
        try:
            step = attempt(what_if, pod, profile, kube_version=ctx.version, rows=False)
        except ScoreError:
            continue  # scheduler-error's story
        if step.phase is None or len(step.phase.nodes) < 2:
            continue
        out.append(Scored(ref, pod, pod.node_name, profile, what_if, step, node_table(what_if).names))
        if len(out) >= limit:
            break
    return out


def first_branch(
    snapshot: ClusterSnapshot, pod: Pod, replicas: int, profile: Profile, kube_version: str | None
) -> dict[str, int]:
    """Replicas per node when ``replicas`` copies of ``pod`` are bound one after another,
    each to the first node (by name) of its best set: one branch of
    :func:`analyzers.simulator.scoring.placement.place`, without the expectation over
    every tie (which node of a tie gets a pile is chance; how high it piles is not)."""
    out: dict[str, int] = {}
    snap = snapshot
    for k in range(1, replicas + 1):
        step = attempt(snap, pod, profile, kube_version=kube_version, rows=False)
        if not step.top:
            break
        node = step.top[0]
        out[node] = out.get(node, 0) + 1
        if k < replicas:
            snap = bind(snap, pod, node, k)
    return out


@dataclass(frozen=True, slots=True)
class Outweighed:
    """A score plugin whose wanted nodes all lose (module docstring)."""

    plugin: str
    weight: int
    winner: str  # the first node of the best set, by name
    top: tuple[str, ...]
    wanted: tuple[str, ...]  # the nodes the plugin scores highest
    best_wanted: str  # the wanted node the other plugins rank highest
    plugin_scores: tuple[int, int]  # the plugin's score on (winner, best_wanted)
    margin: int  # the other plugins' weighted totals, winner minus best_wanted
    decider: str  # the other plugin separating them most
    decider_gap: int
    totals: tuple[int, int]  # weighted totals on (winner, best_wanted)

    @property
    def ceiling(self) -> int:
        """The most the plugin can add to any node: weight x MaxNodeScore."""
        return self.weight * MAX_NODE_SCORE

    @property
    def can_never_matter(self) -> bool:
        return self.margin > self.ceiling

    def words(self) -> str:
        """``the preference adds at most 2x100 = 200 ... by 310``."""
        return (
            f"{self.plugin} (weight {self.weight}) can add at most {self.weight}\u00d7{MAX_NODE_SCORE} = "
            f"{self.ceiling} to a node, but the other plugins separate {self.winner} from {self.best_wanted} by "
            f"{self.margin} ({self.decider} alone by {self.decider_gap}): totals {self.totals[0]} vs {self.totals[1]}"
        )

    def evidence(self) -> dict[str, object]:
        return {
            "plugin": self.plugin,
            "weight": self.weight,
            "ceiling": self.ceiling,
            "winner": self.winner,
            "top": list(self.top),
            "wanted_nodes": list(self.wanted),
            "best_wanted_node": self.best_wanted,
            "plugin_score_winner": self.plugin_scores[0],
            "plugin_score_best_wanted": self.plugin_scores[1],
            "margin_of_other_plugins": self.margin,
            "deciding_plugin": self.decider,
            "deciding_plugin_gap": self.decider_gap,
            "total_winner": self.totals[0],
            "total_best_wanted": self.totals[1],
        }


def outweighed(sc: Scored, plugin: str) -> Outweighed | None:
    """``plugin``'s wanted nodes all lose on this Score phase; None when it scored
    no difference, was skipped, or one of its wanted nodes is among the best."""
    phase = sc.phase
    if plugin not in phase.plugins:
        return None
    j = phase.plugins.index(plugin)
    weight = phase.weights[j]
    scores = phase.scores[j]
    hi = max(scores)
    if min(scores) == hi or weight == 0:
        return None
    top = set(phase.top())
    wanted = [k for k, s in enumerate(scores) if s == hi]
    if any(phase.nodes[k] in top for k in wanted):
        return None
    best_set = sorted((k for k, n in enumerate(phase.nodes) if n in top), key=sc.node)
    win = best_set[0]

    def others(k: int) -> int:
        return phase.totals[k] - scores[k] * weight

    best = min(wanted, key=lambda k: (-others(k), sc.node(k)))
    gaps = [
        ((phase.scores[i][win] - phase.scores[i][best]) * w, p)
        for i, (p, w) in enumerate(zip(phase.plugins, phase.weights, strict=True))
        if p != plugin
    ]
    gap, decider = max(gaps, default=(0, ""))
    return Outweighed(
        plugin=plugin,
        weight=weight,
        winner=sc.node(win),
        top=tuple(sorted(sc.node(k) for k in best_set)),
        wanted=tuple(sorted(sc.node(k) for k in wanted)),
        best_wanted=sc.node(best),
        plugin_scores=(scores[win], scores[best]),
        margin=others(win) - others(best),
        decider=decider,
        decider_gap=gap,
        totals=(phase.totals[win], phase.totals[best]),
    )


def weight_remedy(ctx: RuleContext, sc: Scored, ow: Outweighed, what: str) -> Remedy | None:
    """Raise ``ow.plugin``'s weight in the pod's profile just enough for its best
    wanted node to win, verified by re-running the Score phase with that weight.
    kube-scheduler v1.37.2 bounds a weight only by the int64 overflow of the total
    (framework/runtime/framework.go getValidScoreWeights). None when the plugin
    scores the two nodes alike (no weight separates them)."""
    diff = ow.plugin_scores[1] - ow.plugin_scores[0]
    if diff <= 0:
        return None
    needed = ow.margin // diff + 1
    profile = replace(
        sc.profile,
        score_plugins=tuple((p, needed if p == ow.plugin else w) for p, w in sc.profile.score_plugins),
    )
    table = node_table(sc.snapshot)
    index = {n: i for i, n in enumerate(table.names)}
    phase = score_pod(sc.snapshot, sc.pod, [index[sc.node(k)] for k in range(len(sc.phase.nodes))], profile)
    top = sorted(table.names[i] for i in phase.top())
    verified = ow.best_wanted in top
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": sc.profile.scheduler_name,
                "plugins": {"multiPoint": {"enabled": [{"name": ow.plugin, "weight": needed}]}},
            }
        ],
    }
    return ctx.renderer.manifest(
        f"Weigh {what} enough to decide: {ow.plugin} weight {ow.weight} \u2192 {needed} in profile "
        f"{sc.profile.scheduler_name}",
        None,
        "object.yaml.j2",
        verified=verified,
        verification=(
            f"re-scored {sc.pod.name} with {ow.plugin} weight {needed}: best "
            f"{', '.join(top)} ({'the wanted node wins' if verified else 'still not a wanted node'}); "
            "the weight applies to every pod of the profile"
        ),
        command=(
            "# merge into the KubeSchedulerConfiguration kube-scheduler runs with (--config) and restart it; "
            "the weight changes placement for every pod of this profile"
        ),
        obj=config,
    )
