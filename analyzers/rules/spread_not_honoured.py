"""spread-not-honoured: a ScheduleAnyway topology spread kube-scheduler will not honour at this skew.

``whenUnsatisfiable: ScheduleAnyway`` never filters: PodTopologySpread only
scores (pkg/scheduler/framework/plugins/podtopologyspread/scoring.go,
v1.37.2), normalized to 0-100 and weighted 2 in the default profile
(pkg/scheduler/apis/config/v1/default_plugins.go). When the other plugins
outweigh it, the pod goes to a domain that already holds more matching pods,
and the skew grows past ``maxSkew`` although the manifest says "spread".

Judged (analyzers/rules/_scoring.py) for a workload's pending pod of
kube-scheduler, else its newest pod placed within
``thresholds.recent_placement_seconds`` (as if scheduled now), when the pod has
its own ScheduleAnyway constraints. Fires when the best node is not one the
spread scores highest *and* placing the pod there makes a constraint's skew
(matching pods in the chosen domain + 1 minus the fewest in any domain of the
feasible nodes, as the filter's skew is counted in common.go / filtering.go)
exceed its ``maxSkew``, while a feasible node would keep it within.

Remedy: PodTopologySpread's weight in the pod's profile raised just enough for
the best spreading node to win, verified by re-running the Score phase; the
explanation names the hard alternative (``DoNotSchedule``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyzers.findings import Finding
from analyzers.records import Pod, TopologySpreadConstraint
from analyzers.rules._placement import spread_yaml
from analyzers.rules._scoring import Outweighed, Scored, outweighed, scored_pods, weight_remedy
from analyzers.rules.context import RuleContext
from analyzers.simulator.nodeinfo import node_table
from analyzers.simulator.scoring.profile import POD_TOPOLOGY_SPREAD, Profile
from analyzers.simulator.spread import effective_selector, matching_pods_per_node
from analyzers.snapshot import ClusterSnapshot

RULE_ID = "spread-not-honoured"

SCHEDULE_ANYWAY = "ScheduleAnyway"


def _soft(pod: Pod) -> list[TopologySpreadConstraint]:
    return [c for c in pod.spec.topology_spread if c.when_unsatisfiable == SCHEDULE_ANYWAY]


def _wants(pod: Pod, profile: Profile, snap: ClusterSnapshot) -> bool:
    return bool(_soft(pod))


@dataclass(frozen=True, slots=True)
class Skew:
    constraint: TopologySpreadConstraint
    domain: str  # the winner's domain
    count: int  # matching pods there before the pod
    fewest_domain: str
    fewest: int
    skew: int  # after placing the pod on the winner

    def words(self, winner: str) -> str:
        key = self.constraint.topology_key
        return (
            f"{winner} ({key}={self.domain}) already holds {self.count} matching pod(s) against {self.fewest} in "
            f"{key}={self.fewest_domain}: placing it there makes the skew {self.skew} > maxSkew "
            f"{self.constraint.max_skew}"
        )


def skews(sc: Scored, node: str) -> list[Skew]:
    """Per ScheduleAnyway constraint exceeded by placing the pod on ``node``."""
    table = node_table(sc.snapshot)
    feasible = [sc.phase.nodes[k] for k in range(len(sc.phase.nodes))]
    at = table.index.get(node)
    out = []
    for c in _soft(sc.pod):
        selector = effective_selector(c.label_selector, sc.pod, c.match_label_keys)
        per_node = matching_pods_per_node(table, sc.pod.namespace, selector) if selector is not None else {}
        counts: dict[str, int] = {}
        for i in feasible:
            value = table.labels[i].get(c.topology_key)
            if value is not None:
                counts.setdefault(value, 0)
        for i, n in per_node.items():
            value = table.labels[i].get(c.topology_key)
            if value in counts:
                counts[value] += n
        if at is None or not counts:
            continue
        domain = table.labels[at].get(c.topology_key)
        if domain is None:
            continue
        fewest_domain = min(counts, key=lambda d: (counts[d], d))
        skew = counts[domain] + 1 - counts[fewest_domain]
        if skew > c.max_skew:
            out.append(Skew(c, domain, counts[domain], fewest_domain, counts[fewest_domain], skew))
    return out


def analyze(ctx: RuleContext) -> list[Finding]:
    findings: list[Finding] = []
    for sc in scored_pods(ctx, _wants):
        ow = outweighed(sc, POD_TOPOLOGY_SPREAD)
        if ow is None:
            continue
        exceeded = skews(sc, ow.winner)
        if not exceeded or skews(sc, ow.best_wanted):
            continue
        findings.append(_finding(ctx, sc, ow, exceeded))
    return findings


def _finding(ctx: RuleContext, sc: Scored, ow: Outweighed, exceeded: list[Skew]) -> Finding:
    ref = sc.ref
    first = exceeded[0]
    explanation = (
        f"{ref.kind} {ref.namespace}/{ref.name}: pod {sc.pod.name} ({sc.when()}) asks to spread over "
        f"{first.constraint.topology_key} with maxSkew {first.constraint.max_skew}, whenUnsatisfiable: "
        f"ScheduleAnyway, which only scores. kube-scheduler (profile {sc.profile.scheduler_name}) sends it to "
        f"{ow.winner}: {first.words(ow.winner)}, while {ow.best_wanted} would keep the spread. PodTopologySpread "
        f"scores {ow.winner} {ow.plugin_scores[0]} and {ow.best_wanted} {ow.plugin_scores[1]} (\u00d7{ow.weight}); "
        f"{ow.words()}. At this skew the scheduler does not honour the spread; with whenUnsatisfiable: "
        "DoNotSchedule it would (the pod then waits when no domain keeps the skew)."
    )
    title = (
        f"{ref.name}: ScheduleAnyway spread over {first.constraint.topology_key} is not honoured: "
        f"skew {first.skew} > {first.constraint.max_skew} on {ow.winner} ({ow.decider} outweighs it by {ow.decider_gap})"
    )
    evidence: dict[str, Any] = {
        "constraints": [
            {
                "constraint": spread_yaml(s.constraint),
                "winner_domain": s.domain,
                "matching_pods_there": s.count,
                "fewest_domain": s.fewest_domain,
                "matching_pods_in_fewest": s.fewest,
                "skew_after": s.skew,
            }
            for s in exceeded
        ],
        **ow.evidence(),
    }
    remedy = weight_remedy(ctx, sc, ow, "the spread")
    return sc.finding(
        RULE_ID,
        title=title,
        explanation=explanation,
        evidence=evidence,
        remedy=remedy,
        cause=first.constraint.topology_key,
    )
