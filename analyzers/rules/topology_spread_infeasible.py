"""topology-spread-infeasible: DoNotSchedule topology spread constraints leave the pod no node.

PodTopologySpread (pkg/scheduler/framework/plugins/podtopologyspread/filtering.go,
common.go) counts the pods matching a constraint's selector per topology
domain, over the nodes that carry every constraint's key, match the pod's node
affinity (``nodeAffinityPolicy: Honor``, the default) and -- only with
``nodeTaintsPolicy: Honor`` -- tolerate its taints. A node is rejected when its
domain's count + 1 - the global minimum exceeds ``maxSkew``; the minimum is 0
while fewer domains exist than ``minDomains``. A node without the key fails
with ``(missing required label)``.

So a domain the pod cannot use still counts: with the default
``nodeTaintsPolicy: Ignore`` a zone whose only nodes are tainted, cordoned
(cordon is not part of the count) or full keeps the minimum at its count, and
every other zone is closed once it is ``maxSkew`` ahead -- the classic
"maxSkew 1 over three zones, one zone has no usable node" deadlock.

Remedies, each verified by re-simulating the pod: ``whenUnsatisfiable:
ScheduleAnyway``, a larger ``maxSkew``, ``nodeTaintsPolicy: Honor`` (1.26+)
when the blocked domain's nodes are tainted, a smaller ``minDomains``, or
capacity in the domain the constraint points at (uncordon, or a synthetic node
there).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from analyzers.findings import Finding, Remedy
from analyzers.records import Node, Pod, TopologySpreadConstraint
from analyzers.rules import _placement as P
from analyzers.rules._describe import names, plural
from analyzers.rules.context import RuleContext
from analyzers.simulator import codes as C
from analyzers.simulator import node_table, parse_version
from analyzers.simulator.basic import UNSCHEDULABLE_TAINT
from analyzers.simulator.spread import effective_selector, matching_pods_per_node

RULE_ID = "topology-spread-infeasible"
_MAX_SKEW_TRIES = 5


@dataclass(slots=True)
class Domain:
    value: str
    count: int
    nodes: list[str]  # counted nodes in the domain
    blocked: dict[str, str] = field(
        default_factory=dict
    )  # node -> why the pod cannot use it (besides spread)


@dataclass(slots=True)
class ConstraintState:
    index: int
    spec: TopologySpreadConstraint
    domains: list[Domain]
    minimum: int
    self_match: int
    allowed: list[str]  # domains where the skew rule admits the pod
    missing_key: list[str]  # nodes without the key
    min_domains_short: bool

    @property
    def key(self) -> str:
        return self.spec.topology_key


@dataclass(slots=True)
class Analysis:
    culprits: list[ConstraintState]


def analyze(ctx: RuleContext) -> list[Finding]:
    items = []
    for group in P.blocked(ctx, P.SPREAD):
        analysis = _analyse(ctx, group)
        if not analysis.culprits:
            continue
        items.append(("spread:" + "+".join(sorted({c.key for c in analysis.culprits})), group, analysis))
    return [_finding(ctx, cause, found) for cause, found in P.merge_by_cause(items)]


# ---------------------------------------------------------------------------
# Analysis: the plugin's arithmetic, with the reasons behind each domain


def _analyse(ctx: RuleContext, group: P.Blocked) -> Analysis:
    snap = ctx.snapshot
    pod = group.pod
    views = group.views
    hard = [(i, c) for i, c in enumerate(pod.spec.topology_spread) if c.when_unsatisfiable == "DoNotSchedule"]
    keys = [c.topology_key for _, c in hard]
    # Which constraints reject usable nodes (nodes passing node affinity and taints).
    failing_keys: set[str] = set()
    for i in views.indices(views.where(lambda p: C.POD_TOPOLOGY_SPREAD in p, views.usable)):
        for f in views.node(i).filters:
            if f.plugin == C.POD_TOPOLOGY_SPREAD:
                key = f.detail.get("topology_key") if f.detail else None
                if isinstance(key, str):
                    failing_keys.add(key)
    culprits = []
    for index, c in hard:
        if c.topology_key not in failing_keys:
            continue
        culprits.append(_constraint(snap, pod, index, c, keys, views))
    return Analysis(culprits)


def _constraint(
    snap: Any,
    pod: Pod,
    index: int,
    c: TopologySpreadConstraint,
    keys: Sequence[str],
    views: P.NodeViews,
) -> ConstraintState:
    selector = effective_selector(c.label_selector, pod, c.match_label_keys)
    table = node_table(snap)
    matching = matching_pods_per_node(table, pod.namespace, selector) if selector is not None else {}
    domains: dict[str, Domain] = {}
    missing = []
    for name in sorted(snap.nodes):
        node: Node = snap.nodes[name]
        i = views.index(name)
        if c.topology_key not in node.labels:
            missing.append(name)
            continue
        if any(k not in node.labels for k in keys) or i is None:
            continue
        plugins = views.plugins(i)
        if c.node_affinity_policy != "Ignore" and not (views.matches >> i) & 1:
            continue
        if c.node_taints_policy == "Honor" and C.TAINT_TOLERATION in plugins:
            continue
        value = node.labels[c.topology_key]
        d = domains.setdefault(value, Domain(value, 0, []))
        d.nodes.append(name)
        d.count += matching.get(table.index[name], 0)
        reason = P.other_reason(views, i, C.POD_TOPOLOGY_SPREAD)
        if reason is not None:
            d.blocked[name] = reason
    self_match = 1 if selector is not None and selector.matches(pod.labels) else 0
    short = c.min_domains is not None and len(domains) < c.min_domains
    minimum = 0 if short or not domains else min(d.count for d in domains.values())
    allowed = [v for v, d in sorted(domains.items()) if d.count + self_match - minimum <= c.max_skew]
    return ConstraintState(
        index,
        c,
        sorted(domains.values(), key=lambda d: d.value),
        minimum,
        self_match,
        allowed,
        missing,
        short,
    )


# ---------------------------------------------------------------------------
# Words


def _finding(ctx: RuleContext, cause: str, found: list[tuple[P.Blocked, Analysis]]) -> Finding:
    group, a = found[0]
    parts = [f"{P.kind_word(group.ref)} has {P.pending_words(group, ctx.now)}."]
    for s in a.culprits:
        c = s.spec
        sel = c.label_selector.describe() if c.label_selector is not None else "<none>"
        counts = ", ".join(f"{d.value} {d.count}" for d in s.domains[:8]) or "none"
        parts.append(
            f"It spreads with maxSkew {c.max_skew} over {c.topology_key} (whenUnsatisfiable: DoNotSchedule, "
            f"selector {sel}): matching pods per domain -- {counts}."
        )
        if s.min_domains_short:
            parts.append(
                f"There are {plural(len(s.domains), 'eligible domain')}, fewer than minDomains {c.min_domains}, so the "
                "global minimum is taken as 0."
            )
        else:
            parts.append(f"The global minimum is {s.minimum}.")
        if s.allowed:
            parts.append(
                f"The pod may only go where count + {s.self_match} - {s.minimum} <= {c.max_skew}: "
                f"{names(s.allowed, 4)}."
            )
            for v in s.allowed[:3]:
                d = next(d for d in s.domains if d.value == v)
                why = "; ".join(f"{n}: {r}" for n, r in sorted(d.blocked.items())[:3])
                parts.append(f"No node in {v} can take it ({why}).")
                if c.node_taints_policy != "Honor" and any("taint" in r for r in d.blocked.values()):
                    parts.append(
                        f"{v} still counts as a domain: with nodeTaintsPolicy Ignore (the default) nodes whose taints "
                        "the pod does not tolerate are counted."
                    )
                if any("unschedulable" in r for r in d.blocked.values()):
                    parts.append(f"A cordoned node still counts: cordon does not remove {v} from the spread.")
        else:
            parts.append("No domain satisfies the skew rule.")
        if s.missing_key:
            parts.append(
                f"{plural(len(s.missing_key), 'node')} ({names(s.missing_key)}) lack the label {c.topology_key} and "
                'fail with "(missing required label)".'
            )
    parts.append(
        "PodTopologySpread (pkg/scheduler/framework/plugins/podtopologyspread/filtering.go) counts matching pods per "
        "domain over the nodes carrying the key that match the pod's node affinity, and rejects a node when its "
        "domain's count + 1 - the global minimum exceeds maxSkew."
    )
    remedies = _remedies(ctx, group, a)
    remedies.sort(key=lambda r: not r.verified)
    evidence: dict[str, Any] = {
        "constraints": [
            {
                "constraint": P.spread_yaml(s.spec),
                "domains": {
                    d.value: {"matching_pods": d.count, "nodes": d.nodes, "blocked": d.blocked}
                    for d in s.domains
                },
                "global_minimum": s.minimum,
                "allowed_domains": s.allowed,
                "nodes_missing_key": s.missing_key,
                "min_domains_short": s.min_domains_short,
            }
            for s in a.culprits
        ],
        "scheduler_message": group.verdict.message,
        "pending_pods": [p.name for g, _ in found for p in g.pods],
        "pending_pod_count": sum(len(g.pods) for g, _ in found),
    }
    first = a.culprits[0]
    return Finding(
        rule_id=RULE_ID,
        severity=P.severity(ctx, group),
        subject=group.ref,
        title=f"{group.ref.name}: topology spread (maxSkew {first.spec.max_skew} over {first.key}, DoNotSchedule) "
        "cannot be satisfied",
        explanation=" ".join(parts),
        evidence=evidence,
        remedies=tuple(remedies),
        cause=cause,
        pods=P.all_pods(found),
    )


# ---------------------------------------------------------------------------
# Remedies


def _with(pod: Pod, index: int, **changes: Any) -> tuple[TopologySpreadConstraint, ...]:
    spread = list(pod.spec.topology_spread)
    spread[index] = replace(spread[index], **changes)
    return tuple(spread)


def _spread_remedy(
    ctx: RuleContext, group: P.Blocked, title: str, spread: tuple[TopologySpreadConstraint, ...], what: str
) -> tuple[Remedy, bool]:
    verdict = P.what_if(ctx, P.with_spec(group.pod, topology_spread=spread))
    constraints = [P.spread_yaml(c) for c in spread]
    for doc, before, after in zip(constraints, group.pod.spec.topology_spread, spread, strict=True):
        if before.min_domains is not None and after.min_domains is None:
            # Strategic merge keeps a field the patch leaves out (the list merges by topologyKey):
            # a dropped minDomains must be deleted explicitly.
            doc["minDomains"] = None
    remedy = P.template_remedy(
        ctx,
        group,
        title,
        {"topologySpreadConstraints": constraints},
        verified=verdict.fits,
        verification=f"re-simulated {group.pods[0].name} with {what}: {P.outcome(verdict)}",
    )
    return remedy, verdict.fits


def _remedies(ctx: RuleContext, group: P.Blocked, a: Analysis) -> list[Remedy]:
    pod = group.pod
    out: list[Remedy] = []
    s = a.culprits[0]
    c = s.spec
    remedy, _ = _spread_remedy(
        ctx,
        group,
        f"Spread as a preference: whenUnsatisfiable ScheduleAnyway for {c.topology_key}",
        # minDomains is only allowed with DoNotSchedule (validateMinDomains,
        # pkg/apis/core/validation/validation.go): the API server refuses it beside ScheduleAnyway.
        _with(pod, s.index, when_unsatisfiable="ScheduleAnyway", min_domains=None),
        "whenUnsatisfiable: ScheduleAnyway (scoring only)",
    )
    out.append(remedy)
    for skew in range(c.max_skew + 1, c.max_skew + 1 + _MAX_SKEW_TRIES):
        verdict = P.what_if(ctx, P.with_spec(pod, topology_spread=_with(pod, s.index, max_skew=skew)))
        if verdict.fits:
            remedy, _ = _spread_remedy(
                ctx,
                group,
                f"Allow more skew: maxSkew {skew}",
                _with(pod, s.index, max_skew=skew),
                f"maxSkew {skew}",
            )
            out.append(remedy)
            break
    tainted = any("taint" in r for d in s.domains if d.value in s.allowed for r in d.blocked.values())
    if tainted and c.node_taints_policy != "Honor" and _supports_taints_policy(ctx):
        remedy, ok = _spread_remedy(
            ctx,
            group,
            f"Leave tainted nodes out of the count: nodeTaintsPolicy Honor for {c.topology_key}",
            _with(pod, s.index, node_taints_policy="Honor"),
            "nodeTaintsPolicy: Honor (needs Kubernetes 1.26+)",
        )
        if ok:
            out.append(remedy)
    if s.min_domains_short and c.min_domains is not None and s.domains:
        remedy, _ = _spread_remedy(
            ctx,
            group,
            f"Lower minDomains to the {len(s.domains)} domains that exist",
            _with(pod, s.index, min_domains=len(s.domains)),
            f"minDomains {len(s.domains)}",
        )
        out.append(remedy)
    capacity = _capacity(ctx, group, s)
    if capacity is not None:
        out.append(capacity)
    return out


def _supports_taints_policy(ctx: RuleContext) -> bool:
    if ctx.version is None:
        return True
    try:
        return parse_version(ctx.version) >= (1, 26, 0)
    except ValueError:
        return True


def _capacity(ctx: RuleContext, group: P.Blocked, s: ConstraintState) -> Remedy | None:
    """Room in a domain the constraint points at: uncordon a node there, or add one."""
    snap = ctx.snapshot
    for value in s.allowed:
        d = next(d for d in s.domains if d.value == value)
        for name in d.nodes:
            node = snap.nodes[name]
            if node.unschedulable:
                opened = replace(
                    node,
                    unschedulable=False,
                    taints=tuple(t for t in node.taints if t.key != UNSCHEDULABLE_TAINT.key),
                )
                verdict = P.what_if_nodes(ctx, group.pod, opened)
                if P.fits(verdict):
                    return ctx.renderer.command(
                        f"Uncordon {name} in {value} once its maintenance is finished",
                        P.node_ref(name),
                        f"kubectl uncordon {shlex.quote(name)}",
                        note=f"{name} is the way into {value}, the domain the spread constraint needs next.",
                        verified=True,
                        verification=f"re-simulated with {name} uncordoned: {P.outcome(verdict)}",
                    )
        return P.room_like(
            ctx,
            group,
            snap.nodes[d.nodes[0]],
            f"{s.key}={value}",
            f"{value} is the domain the spread constraint needs next, and none of its nodes can take the pod.",
        )
    return None
