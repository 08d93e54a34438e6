"""preference-outweighed: a preference kube-scheduler can never honour as the scores stand.

A preferred node-affinity term, a preferred pod (anti-)affinity term, or a
PreferNoSchedule taint only adds to a node's score: NodeAffinity,
InterPodAffinity and TaintToleration each normalize to 0-100 and are
multiplied by their weight (2, 2 and 3 in the default profile,
pkg/scheduler/apis/config/v1/default_plugins.go, v1.37.2; or the
``--scheduler-config`` profile's). When the other plugins' weighted scores
separate the winning node from every node the preference favours by more than
that plugin's weight x 100, no score the preference could reach changes the
outcome: users read the manifest, see the preference, and lose hours asking
why it is ignored.

Judged (analyzers/rules/_scoring.py) for a workload's pending pod of
kube-scheduler, else its newest pod placed within
``thresholds.recent_placement_seconds``, when the pod has preferred node or
pod (anti-)affinity terms (or the profile adds preferred node affinity), or
untolerated PreferNoSchedule taints on the nodes it would win. One finding per
workload and plugin, with the numbers: the plugin's ceiling, the other
plugins' margin and the plugin that decides.

Remedy: the plugin's weight in the pod's profile raised just enough for the
best preferred node to win, verified by re-running the Score phase (it applies
to every pod of that profile); the explanation names the hard alternatives
(required affinity, a NoSchedule taint).
"""

from __future__ import annotations

from typing import Any

from analyzers.findings import Finding
from analyzers.records import Pod, Requirement
from analyzers.rules._placement import affinity_term_yaml, requirement_yaml
from analyzers.rules._scoring import Outweighed, Scored, outweighed, scored_pods, weight_remedy
from analyzers.rules.context import RuleContext
from analyzers.simulator.basic import tolerates
from analyzers.simulator.scoring.profile import INTER_POD_AFFINITY, NODE_AFFINITY, TAINT_TOLERATION, Profile
from analyzers.snapshot import ClusterSnapshot

RULE_ID = "preference-outweighed"

_SOFT = "PreferNoSchedule"


def _prefer_no_schedule(snap: ClusterSnapshot, pod: Pod, node: str) -> list[str]:
    """The PreferNoSchedule taints of ``node`` the pod does not tolerate (as TaintToleration counts them)."""
    n = snap.nodes.get(node)
    if n is None:
        return []
    tolerations = [t for t in pod.spec.tolerations if t.effect in ("", _SOFT)]
    return [str(t) for t in n.taints if t.effect == _SOFT and not tolerates(tolerations, t)]


def _wants(pod: Pod, profile: Profile, snap: ClusterSnapshot) -> bool:
    s = pod.spec
    if s.preferred_node_affinity or profile.added_preferred or s.preferred_pod_affinity:
        return True
    if s.preferred_pod_anti_affinity:
        return True
    return any(_prefer_no_schedule(snap, pod, name) for name in snap.nodes)


def _req(r: Requirement) -> str:
    return f"{r.key} {r.operator} [{', '.join(r.values)}]" if r.values else f"{r.key} {r.operator}"


def _preference(sc: Scored, plugin: str, ow: Outweighed) -> tuple[str, Any]:
    """(words, evidence) for what the plugin scores."""
    spec = sc.pod.spec
    if plugin == NODE_AFFINITY:
        node_terms = [*spec.preferred_node_affinity, *sc.profile.added_preferred]
        words = "; ".join(
            f"weight {w}: {' and '.join(_req(r) for r in (*t.match_expressions, *t.match_fields))}"
            for w, t in node_terms
        )
        evidence = [
            {"weight": w, "matchExpressions": [requirement_yaml(r) for r in t.match_expressions]}
            for w, t in node_terms
        ]
        return f"prefers nodes by its preferred node affinity ({words})", evidence
    if plugin == INTER_POD_AFFINITY:
        kinds = []
        pod_evidence = []
        for word, terms, weights in (
            ("affinity", spec.preferred_pod_affinity, spec.preferred_pod_affinity_weights),
            ("anti-affinity", spec.preferred_pod_anti_affinity, spec.preferred_pod_anti_affinity_weights),
        ):
            for term, w in zip(terms, weights, strict=False):
                kinds.append(f"{word} weight {w} over {term.topology_key}")
                pod_evidence.append({"kind": word, "weight": w, "term": affinity_term_yaml(term)})
        return f"has preferred pod {'; '.join(kinds)}", pod_evidence
    taints = _prefer_no_schedule(sc.snapshot, sc.pod, ow.winner)
    return (
        f"should be kept off {ow.winner} by that node's PreferNoSchedule taint{'s' if len(taints) > 1 else ''} "
        f"{', '.join(taints)}",
        taints,
    )


def analyze(ctx: RuleContext) -> list[Finding]:
    findings: list[Finding] = []
    for sc in scored_pods(ctx, _wants):
        spec = sc.pod.spec
        plugins = []
        if spec.preferred_node_affinity or sc.profile.added_preferred:
            plugins.append(NODE_AFFINITY)
        if spec.preferred_pod_affinity or spec.preferred_pod_anti_affinity:
            plugins.append(INTER_POD_AFFINITY)
        plugins.append(TAINT_TOLERATION)
        for plugin in plugins:
            ow = outweighed(sc, plugin)
            if ow is None or not ow.can_never_matter:
                continue
            if plugin == TAINT_TOLERATION and not _prefer_no_schedule(sc.snapshot, sc.pod, ow.winner):
                continue
            findings.append(_finding(ctx, sc, plugin, ow))
    return findings


def _finding(ctx: RuleContext, sc: Scored, plugin: str, ow: Outweighed) -> Finding:
    ref = sc.ref
    what, described = _preference(sc, plugin, ow)
    taint = plugin == TAINT_TOLERATION
    wanted = (
        f"the nodes without it ({', '.join(ow.wanted[:3])}{'…' if len(ow.wanted) > 3 else ''})"
        if taint
        else f"the nodes it favours ({', '.join(ow.wanted[:3])}{'…' if len(ow.wanted) > 3 else ''})"
    )
    hard = (
        "a NoSchedule taint keeps pods off a node for certain"
        if taint
        else "a requiredDuringSchedulingIgnoredDuringExecution term makes it hold"
    )
    explanation = (
        f"{ref.kind} {ref.namespace}/{ref.name}: pod {sc.pod.name} ({sc.when()}) {what}. kube-scheduler "
        f"(profile {sc.profile.scheduler_name}) sends it to {ow.winner} anyway, not to {wanted}: {ow.words()}. "
        f"Since {ow.margin} > {ow.ceiling}, no score {plugin} can give changes the outcome while the other "
        f"scores stand: the {'taint' if taint else 'preference'} has no effect. If it must hold, {hard}; or "
        f"weigh {plugin} more."
    )
    title = (
        f"{ref.name}: {'PreferNoSchedule on ' + ow.winner if taint else 'its preferred ' + ('node affinity' if plugin == NODE_AFFINITY else 'pod affinity')} "
        f"never decides: the other plugins outweigh it by {ow.margin} > {ow.weight}\u00d7100 "
        f"({ow.decider} {ow.decider_gap})"
    )
    evidence: dict[str, Any] = {
        "preference": described,
        **ow.evidence(),
    }
    remedy = weight_remedy(ctx, sc, ow, "the taint" if taint else "the preference")
    return sc.finding(
        RULE_ID, title=title, explanation=explanation, evidence=evidence, remedy=remedy, cause=plugin
    )
