"""anti-affinity-infeasible: required pod (anti-)affinity leaves the pod no node.

InterPodAffinity (pkg/scheduler/framework/plugins/interpodaffinity/filtering.go)
checks, per node, the topology domain the node is in (its value of the term's
``topologyKey``):

- the pod's required **anti-affinity**: no pod matching the term may run in the
  domain (``node(s) didn't match pod anti-affinity rules``, Unschedulable);
- existing pods' required anti-affinity against this pod (``node(s) didn't
  satisfy existing pods anti-affinity rules``);
- the pod's required **affinity**: a matching pod must run in the domain
  (``node(s) didn't match pod affinity rules``, UnschedulableAndUnresolvable).

The classic case is more replicas than domains: 4 replicas with required
anti-affinity on ``kubernetes.io/hostname`` over 3 usable nodes -- the 4th can
never be placed (preemption only helps against lower-priority pods).

Remedies: the term as *preferred* anti-affinity (patch), or
``topologySpreadConstraints`` with ``whenUnsatisfiable: ScheduleAnyway`` in its
place (patch), both verified by re-simulating the pod; more domains (verified
with a synthetic node); or as many replicas as there are domains.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from analyzers.findings import Finding, ObjectRef, Remedy
from analyzers.records import LabelSelector, Pod, PodAffinityTerm, Requirement, TopologySpreadConstraint
from analyzers.rules import _placement as P
from analyzers.rules._describe import names, plural
from analyzers.rules.context import RuleContext
from analyzers.simulator import PodVerdict, node_table
from analyzers.simulator import codes as C
from analyzers.simulator.interpod import existing_term_matches
from analyzers.snapshot import ClusterSnapshot

RULE_ID = "anti-affinity-infeasible"

ANTI = "anti-affinity"
EXISTING = "existing-anti-affinity"
AFFINITY = "affinity"
_KIND_OF_CODE = {
    C.POD_ANTI_AFFINITY_MISMATCH: ANTI,
    C.EXISTING_POD_ANTI_AFFINITY: EXISTING,
    C.POD_AFFINITY_MISMATCH: AFFINITY,
}


@dataclass(slots=True)
class TermState:
    term: PodAffinityTerm
    usable_domains: list[str]  # domains (values of the key) of the usable nodes
    occupied: dict[str, list[str]]  # domain -> matching pods (namespace/name) in it
    nodes_without_key: list[str] = field(default_factory=list)
    # The term admits some usable nodes, but none of them can take the pod (confinement).
    confined: P.Confinement | None = None
    admitted_domains: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Existing:
    """Bound pods whose required anti-affinity repels the pending pod."""

    pods: list[Pod]
    term: PodAffinityTerm
    domains: list[str]


@dataclass(slots=True)
class Analysis:
    kind: str
    usable: list[str]
    terms: list[TermState]
    existing: list[Existing]
    replicas: int | None
    # Existing pods' anti-affinity repels the pod from the nodes with room; the
    # usable nodes it does not repel cannot take it.
    confined: P.Confinement | None = None


def analyze(ctx: RuleContext) -> list[Finding]:
    items = []
    for group in P.blocked(ctx, P.INTERPOD):
        analysis = _analyse(ctx, group)
        if analysis is None:
            continue
        keys = sorted(
            {t.term.topology_key for t in analysis.terms} | {e.term.topology_key for e in analysis.existing}
        )
        items.append((f"{analysis.kind}:{'+'.join(keys)}", group, analysis))
    return [_finding(ctx, cause, found) for cause, found in P.merge_by_cause(items)]


# ---------------------------------------------------------------------------
# Analysis


def _term_namespaces(snap: ClusterSnapshot, term: PodAffinityTerm, owner_ns: str) -> frozenset[str] | None:
    """The namespaces a term covers (None: all), as interpod.resolve_term does."""
    if term.namespace_selector is not None and term.namespace_selector.is_empty:
        return None
    out = set(term.namespaces)
    if not out and term.namespace_selector is None:
        out.add(owner_ns)
    if term.namespace_selector is not None:
        out.update(ns.name for ns in snap.namespaces.values() if term.namespace_selector.matches(ns.labels))
    return frozenset(out)


def _selector(term: PodAffinityTerm, pod: Pod) -> LabelSelector | None:
    sel = term.label_selector
    extra = tuple(Requirement(k, "In", (pod.labels[k],)) for k in term.match_label_keys if k in pod.labels)
    extra += tuple(
        Requirement(k, "NotIn", (pod.labels[k],)) for k in term.mismatch_label_keys if k in pod.labels
    )
    if sel is not None and extra:
        sel = LabelSelector(sel.match_labels, sel.match_expressions + extra)
    return sel


def _occupied(snap: ClusterSnapshot, term: PodAffinityTerm, pod: Pod) -> dict[str, list[str]]:
    namespaces = _term_namespaces(snap, term, pod.namespace)
    sel = _selector(term, pod)
    out: dict[str, list[str]] = {}
    if sel is None:
        return out
    # Only nodes running a matching pod: the node table groups bound pods by namespace
    # and labels, so the selector is tried once per group, not once per pod.
    table = node_table(snap)
    hosts = {
        table.names[i]
        for ns, groups in table.pod_groups.items()
        if namespaces is None or ns in namespaces
        for g in groups
        if sel.matches(g.labels)
        for i in g.node_counts
    }
    for node_name, pods in snap.pods_by_node().items():
        node = snap.nodes.get(node_name)
        if node_name not in hosts or node is None or term.topology_key not in node.labels:
            continue
        for q in pods:
            if (namespaces is None or q.namespace in namespaces) and sel.matches(q.labels):
                out.setdefault(node.labels[term.topology_key], []).append(f"{q.namespace}/{q.name}")
    return out


def _analyse(ctx: RuleContext, group: P.Blocked) -> Analysis | None:
    snap = ctx.snapshot
    pod = group.pod
    views = group.views
    failing = views.where(lambda p: C.INTER_POD_AFFINITY in p, views.usable)
    codes: Counter[str] = Counter()
    for reason_codes, nodes in group.verdict.reason_codes_on(C.INTER_POD_AFFINITY, failing).items():
        for c in reason_codes:
            k = _KIND_OF_CODE.get(c)
            if k and not (
                k == AFFINITY and C.POD_AFFINITY_MISMATCH in reason_codes and len(reason_codes) > 1
            ):
                codes[k] += nodes
    if not codes:
        return None
    kind = max(codes, key=lambda k: (codes[k], k == ANTI, k == EXISTING))
    usable_names = views.names_of(views.usable)
    terms: list[TermState] = []
    existing: list[Existing] = []
    if kind in (ANTI, AFFINITY):
        source = pod.spec.pod_anti_affinity if kind == ANTI else pod.spec.pod_affinity
        for term in source:
            domains, missing = [], []
            for name in usable_names:
                node = snap.nodes[name]
                value = node.labels.get(term.topology_key)
                if value is None:
                    missing.append(name)
                elif value not in domains:
                    domains.append(value)
            occupied = _occupied(snap, term, pod)
            state = TermState(term, domains, occupied, missing)
            admitted = [d for d in domains if (d in occupied) == (kind == AFFINITY)]
            if admitted:
                # The term admits usable nodes: it blocks only by confining the pod to
                # nodes another filter refuses, while nodes it refuses have room.
                mask = _admitting_nodes(snap, views, term.topology_key, admitted, with_missing=kind == ANTI)
                found = P.confinement(views, P.INTERPOD, mask, node_table(snap))
                if found.room and len(found.allowed) == (mask & views.usable).bit_count():
                    state.confined = found
                    state.admitted_domains = admitted
            if not admitted or state.confined is not None:
                terms.append(state)
        if not terms:
            return None
    else:
        existing = _existing(ctx, group, usable_names)
        if not existing:
            return None
        repelled = 0
        for e in existing:
            repelled |= _admitting_nodes(snap, views, e.term.topology_key, e.domains, with_missing=False)
        allowed = views.usable & ~repelled
        if allowed:
            found = P.confinement(views, P.INTERPOD, allowed, node_table(snap))
            if not found.room or len(found.allowed) != allowed.bit_count():
                return None
            return Analysis(kind, usable_names, terms, existing, P.replicas_of(group.workload), found)
    return Analysis(kind, usable_names, terms, existing, P.replicas_of(group.workload))


def _admitting_nodes(
    snap: ClusterSnapshot, views: P.NodeViews, key: str, domains: Sequence[str], *, with_missing: bool
) -> int:
    """Nodes in the ``domains`` (values of ``key``), and those without the key when
    ``with_missing`` (an anti-affinity term does not constrain them)."""
    wanted = set(domains)
    mask = 0
    for i, name in enumerate(views.names):
        node = snap.nodes.get(name)
        if node is None:
            continue
        value = node.labels.get(key)
        if (value is None and with_missing) or (value is not None and value in wanted):
            mask |= 1 << i
    return mask


def _existing(ctx: RuleContext, group: P.Blocked, usable: Sequence[str]) -> list[Existing]:
    snap = ctx.snapshot
    ns = snap.namespaces.get(group.pod.namespace)
    ns_labels: Mapping[str, str] = ns.labels if ns is not None else {}
    usable_set = set(usable)
    found: dict[tuple[str, PodAffinityTerm], Existing] = {}
    table = node_table(snap)
    hosts = {table.names[i] for g in table.anti_affinity_groups for i in g.node_counts}
    for node_name, pods in snap.pods_by_node().items():
        node = snap.nodes.get(node_name)
        if node_name not in hosts or node is None:
            continue
        for q in pods:
            for term in q.spec.pod_anti_affinity:
                value = node.labels.get(term.topology_key)
                if value is None or not existing_term_matches(term, q.namespace, group.pod, ns_labels):
                    continue
                blocked = [n for n in usable_set if snap.nodes[n].labels.get(term.topology_key) == value]
                if not blocked:
                    continue
                owner = snap.workload_of(q).ref
                entry = found.setdefault((str(owner), term), Existing([], term, []))
                entry.pods.append(q)
                if value not in entry.domains:
                    entry.domains.append(value)
    return list(found.values())


# ---------------------------------------------------------------------------
# Words


def _sel_text(term: PodAffinityTerm) -> str:
    return term.label_selector.describe() if term.label_selector is not None else "<nothing>"


def _domain_word(key: str, count: int) -> str:
    if key == "kubernetes.io/hostname":
        return plural(count, "node")
    if key in ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"):
        return plural(count, "zone")
    return plural(count, f"{key} domain")


def _finding(ctx: RuleContext, cause: str, found: list[tuple[P.Blocked, Analysis]]) -> Finding:
    group, a = found[0]
    parts = [f"{P.kind_word(group.ref)} has {P.pending_words(group, ctx.now)}."]
    confined = [s for s in a.terms if s.confined is not None]
    if confined:
        for s in confined:
            assert s.confined is not None
            key = s.term.topology_key
            kind = "podAntiAffinity" if a.kind == ANTI else "podAffinity"
            unit = _domain_word(key, 1).split(" ", 1)[1]
            rule = (
                f"no two matching pods may share a {unit}"
                if a.kind == ANTI
                else f"it may only run {'on' if unit == 'node' else 'in'} a {unit} that already holds a matching pod"
            )
            where = (
                f"{key} {names(s.admitted_domains, 4)}"
                if s.admitted_domains and key != "kubernetes.io/hostname"
                else names(sorted(s.confined.allowed), 4)
            )
            parts.append(
                f"It has a required {kind} term ({_sel_text(s.term)}, topologyKey {key}): {rule}. "
                + s.confined.words(f"the {kind} term", where)
            )
    elif a.kind == ANTI:
        for s in a.terms:
            key = s.term.topology_key
            per_domain = "; ".join(
                f"{d}: {names([p.split('/', 1)[1] for p in s.occupied.get(d, [])], 2)}"
                for d in s.usable_domains[:6]
            )
            want = f"wants {plural(a.replicas, 'replica')} with" if a.replicas is not None else "has"
            parts.append(
                f"It {want} a required podAntiAffinity term ({_sel_text(s.term)}, topologyKey {key}): no two "
                f"matching pods may share a {_domain_word(key, 1).split(' ', 1)[1]}. "
                + (
                    f"Each of the {plural(len(a.usable), 'node')} passing its node affinity and taints already "
                    f"runs a matching pod ({per_domain})."
                    if key == "kubernetes.io/hostname"
                    else f"The {plural(len(a.usable), 'node')} passing its node affinity and taints span "
                    f"{_domain_word(key, len(s.usable_domains))}, and every one already holds a matching pod "
                    f"({per_domain})."
                )
            )
            if a.replicas is not None and a.replicas > len(s.usable_domains):
                parts.append(
                    f"{a.replicas} replicas > {_domain_word(key, len(s.usable_domains))}: "
                    f"{a.replicas - len(s.usable_domains)} of them can never be placed."
                )
            if s.nodes_without_key:
                parts.append(
                    f"{names(s.nodes_without_key)} lack the label {key} and so are not constrained by it."
                )
    elif a.kind == AFFINITY:
        for s in a.terms:
            key = s.term.topology_key
            where = (
                "no pod matching it runs anywhere in its namespaces"
                if not s.occupied
                else f"matching pods run only in {key} {names(sorted(s.occupied))}, where none of the usable nodes are"
            )
            parts.append(
                f"It has a required podAffinity term ({_sel_text(s.term)}, topologyKey {key}): it may only run in a "
                f"{_domain_word(key, 1).split(' ', 1)[1]} that already holds a matching pod, and {where}."
            )
    else:
        for e in a.existing:
            owners = sorted({str(ctx.snapshot.workload_of(q).ref) for q in e.pods})
            parts.append(
                f"Running pods of {names(owners)} ({names([q.name for q in e.pods], 2)}) declare a required "
                f"podAntiAffinity term ({_sel_text(e.term)}, topologyKey {e.term.topology_key}) that matches this pod, "
                f"so it may not join them in {e.term.topology_key} {names(e.domains)}"
                + ("." if a.confined is not None else " -- which covers every usable node.")
            )
        if a.confined is not None:
            parts.append(a.confined.words("their anti-affinity", names(sorted(a.confined.allowed), 4)))
    rest = P.other_nodes_words(group.verdict, a.usable)
    if rest:
        parts.append(f"The other nodes: {rest}.")
    parts.append(
        "InterPodAffinity (pkg/scheduler/framework/plugins/interpodaffinity/filtering.go) rejects a node whose "
        "topology domain holds a pod matching a required anti-affinity term (of the pod or of a pod already there), "
        "or lacks a pod a required affinity term asks for."
    )
    parts.append(P.preemption_words(group.verdict).strip())
    remedies = _remedies(ctx, group, a)
    remedies.sort(key=lambda r: not r.verified)
    evidence: dict[str, Any] = {
        "kind": a.kind,
        "replicas": a.replicas,
        "usable_nodes": a.usable,
        "terms": [
            {
                "term": P.affinity_term_yaml(s.term),
                "usable_domains": s.usable_domains,
                "occupied": s.occupied,
                "nodes_without_key": s.nodes_without_key,
                "usable_domain_count": len(s.usable_domains),
                **(
                    {"admitted_domains": s.admitted_domains, **s.confined.evidence()}
                    if s.confined is not None
                    else {}
                ),
                "never_placed": (
                    a.replicas - len(s.usable_domains)
                    if a.replicas is not None and a.replicas > len(s.usable_domains)
                    else 0
                ),
            }
            for s in a.terms
        ],
        "existing": [
            {
                "pods": [f"{q.namespace}/{q.name}" for q in e.pods],
                "term": P.affinity_term_yaml(e.term),
                "domains": e.domains,
            }
            for e in a.existing
        ],
        **(a.confined.evidence() if a.confined is not None else {}),
        "scheduler_message": group.verdict.message,
        "pending_pods": [p.name for g, _ in found for p in g.pods],
        "pending_pod_count": sum(len(g.pods) for g, _ in found),
    }
    what = {
        ANTI: "required pod anti-affinity",
        AFFINITY: "required pod affinity",
        EXISTING: "other pods' anti-affinity",
    }[a.kind]
    return Finding(
        rule_id=RULE_ID,
        severity=P.severity(ctx, group),
        subject=group.ref,
        title=f"{group.ref.name}: {what} cannot be met"
        + (" where the pod could run" if confined or a.confined is not None else "")
        + (
            f" ({a.replicas} replicas, {len(a.terms[0].usable_domains)} domains)"
            if a.kind == ANTI and a.replicas
            else ""
        ),
        explanation=" ".join(p for p in parts if p),
        evidence=evidence,
        remedies=tuple(remedies),
        cause=cause,
        pods=P.all_pods(found),
    )


# ---------------------------------------------------------------------------
# Remedies


def _remedies(ctx: RuleContext, group: P.Blocked, a: Analysis) -> list[Remedy]:
    out: list[Remedy] = []
    if a.kind == ANTI:
        out.append(_preferred_anti(ctx, group, a))
        spread = _spread_instead(ctx, group, a)
        if spread is not None:
            out.append(spread)
        out.append(_more_domains(ctx, group, a))
        scale = _scale_to_domains(ctx, group, a)
        if scale is not None:
            out.append(scale)
    elif a.kind == AFFINITY:
        out.append(_preferred_affinity(ctx, group, a))
        room = _room_in_admitted_domain(ctx, group, a)
        if room is not None:
            out.append(room)
    else:
        out.extend(_relax_existing(ctx, group, a))
    return out


def _after_rollout(
    ctx: RuleContext, group: P.Blocked, changes: dict[str, Any]
) -> tuple[PodVerdict | None, str]:
    """The pending pod with ``changes``, once the workload's running pods carry them too
    (the state the rollout converges to: old pods with a self-matching required term
    would otherwise keep repelling the new ones)."""
    snap = ctx.snapshot
    own = [
        q
        for q in snap.pods_of_workload(group.ref)
        if q.node_name and not q.finished and q.spec.pod_anti_affinity == group.pod.spec.pod_anti_affinity
    ]
    pod = P.with_spec(group.pod, **changes)
    if not own or group.ref.kind == "Pod":
        return P.what_if(ctx, pod), ""
    change = ("rollout", str(group.ref), tuple(sorted(changes.items())))
    verdict = P.what_if_cluster(
        ctx, pod, change, lambda: snap.replace(*[replace(q, spec=replace(q.spec, **changes)) for q in own])
    )
    return verdict, f" and {group.ref.name}'s running pods re-created from the new template"


def _transition_caveat(ctx: RuleContext, group: P.Blocked, a: Analysis) -> str:
    term = a.terms[0].term
    if term.label_selector is None or not term.label_selector.matches(group.pod.labels):
        return ""
    return (
        f"; while the rollout runs, the old pods' required term still repels the new ones and every "
        f"{_domain_word(term.topology_key, 1).split(' ', 1)[1]} with room holds an old pod, so delete one old pod once the "
        "template is patched to let the first new pod in"
    )


def _weighted(terms: Sequence[PodAffinityTerm]) -> list[dict[str, Any]]:
    return [{"weight": 100, "podAffinityTerm": P.affinity_term_yaml(t)} for t in terms]


def _preferred_anti(ctx: RuleContext, group: P.Blocked, a: Analysis) -> Remedy:
    pod = group.pod
    culprits = [s.term for s in a.terms]
    remaining = tuple(t for t in pod.spec.pod_anti_affinity if t not in culprits)
    preferred = tuple(pod.spec.preferred_pod_anti_affinity) + tuple(culprits)
    changes = {"pod_anti_affinity": remaining, "preferred_pod_anti_affinity": preferred}
    verdict, converged = _after_rollout(ctx, group, changes)
    patch = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [P.affinity_term_yaml(t) for t in remaining]
                or None,
                "preferredDuringSchedulingIgnoredDuringExecution": _weighted(preferred),
            }
        }
    }
    note = (
        " (existing preferred terms are re-listed with weight 100: unstick does not read their weights)"
        if pod.spec.preferred_pod_anti_affinity
        else ""
    )
    return P.template_remedy(
        ctx,
        group,
        "Make the anti-affinity preferred: spread when possible, co-locate when not",
        patch,
        verified=P.fits(verdict),
        verification=f"re-simulated {group.pods[0].name} with the term as preferred (weight 100, scoring only)"
        f"{converged}: {P.outcome(verdict)}{note}{_transition_caveat(ctx, group, a)}",
    )


def _spread_instead(ctx: RuleContext, group: P.Blocked, a: Analysis) -> Remedy | None:
    pod = group.pod
    term = a.terms[0].term
    if term.label_selector is None or any(
        c.topology_key == term.topology_key for c in pod.spec.topology_spread
    ):
        return None
    culprits = [s.term for s in a.terms]
    remaining = tuple(t for t in pod.spec.pod_anti_affinity if t not in culprits)
    new = TopologySpreadConstraint(
        max_skew=1,
        topology_key=term.topology_key,
        when_unsatisfiable="ScheduleAnyway",
        label_selector=term.label_selector,
        match_label_keys=term.match_label_keys,
    )
    spread = (*pod.spec.topology_spread, new)
    verdict, converged = _after_rollout(
        ctx, group, {"pod_anti_affinity": remaining, "topology_spread": spread}
    )
    patch = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [P.affinity_term_yaml(t) for t in remaining]
                or None
            }
        },
        "topologySpreadConstraints": [P.spread_yaml(c) for c in spread],
    }
    caveat = (
        "; note: spread constraints count pods of the pod's own namespace only, the term named others"
        if term.namespaces or term.namespace_selector is not None
        else ""
    )
    return P.template_remedy(
        ctx,
        group,
        f"Replace it with topologySpreadConstraints (maxSkew 1 over {term.topology_key}, ScheduleAnyway)",
        patch,
        verified=P.fits(verdict),
        verification=f"re-simulated {group.pods[0].name} with the spread constraint instead of the term "
        f"(ScheduleAnyway only scores){converged}: {P.outcome(verdict)}{caveat}{_transition_caveat(ctx, group, a)}",
    )


def _more_domains(ctx: RuleContext, group: P.Blocked, a: Analysis) -> Remedy:
    snap = ctx.snapshot
    s = a.terms[0]
    key = s.term.topology_key
    template = snap.nodes[a.usable[0]] if a.usable else next(iter(snap.nodes.values()))
    name = P.synthetic_name(template.name)
    labels = {} if key == "kubernetes.io/hostname" else {key: f"{template.labels.get(key, 'new')}-new"}
    synthetic = P.synthetic_node(template, name, labels=labels)
    verdict = P.what_if_nodes(ctx, group.pod, synthetic)
    where = "a node" if key == "kubernetes.io/hostname" else f"a node in a new {key} domain"
    return ctx.renderer.command(
        f"Add {where} the pod may use (shaped like {template.name})",
        None,
        "# add a node to the pool that serves this workload (node group size, Karpenter NodePool, or your IaC)",
        note=f"Each {key} domain holds one matching pod under required anti-affinity; one more domain, one more replica.",
        verified=P.fits(verdict),
        verification=f"re-simulated with a synthetic empty node {name} shaped like {template.name}"
        + (f" ({key}={labels[key]})" if labels else "")
        + f": {P.outcome(verdict)}",
    )


def _room_in_admitted_domain(ctx: RuleContext, group: P.Blocked, a: Analysis) -> Remedy | None:
    """Capacity where a confining podAffinity term points: a node in a domain that
    holds a matching pod (not for topologyKey hostname: a new node is a new domain)."""
    s = next((s for s in a.terms if s.confined is not None and s.admitted_domains), None)
    key = s.term.topology_key if s is not None else ""
    if s is None or s.confined is None or key == "kubernetes.io/hostname":
        return None
    template = ctx.snapshot.nodes[sorted(s.confined.allowed)[0]]
    return P.room_like(
        ctx,
        group,
        template,
        f"{key}={template.labels.get(key, '')}",
        f"The required podAffinity term admits only {key} {names(s.admitted_domains)}, where the pods it must join "
        "run, and no node there has room.",
    )


def _scale_to_domains(ctx: RuleContext, group: P.Blocked, a: Analysis) -> Remedy | None:
    s = a.terms[0]
    domains = len(s.usable_domains)
    if (
        a.replicas is None
        or a.replicas <= domains
        or domains == 0
        or group.ref.kind not in ("Deployment", "StatefulSet")
    ):
        return None
    running = [
        p
        for p in ctx.snapshot.pods_of_workload(group.ref)
        if p.node_name and not p.finished and p.deleted is None
    ]
    ok = len(running) <= domains
    how = (
        "a ReplicaSet deletes unscheduled pods first (pkg/controller/replicaset/replica_set.go getPodsToDelete, "
        "ranked by controller.ActivePods)"
        if group.ref.kind == "Deployment"
        else "a StatefulSet removes the highest ordinals first"
    )
    return ctx.renderer.command(
        f"Run as many replicas as there are domains: {domains}",
        group.ref,
        f"kubectl scale {group.ref.kind.lower()}/{shlex.quote(group.ref.name)} -n {shlex.quote(group.ref.namespace)} "
        f"--replicas={domains}",
        note="If a HorizontalPodAutoscaler manages the replicas, lower its maxReplicas instead.",
        verified=ok,
        verification=f"{plural(len(running), 'pod')} of {group.ref.name} run in {plural(domains, 'usable domain')}; "
        f"scaled to {domains}, the pending pods go away ({how})",
    )


def _preferred_affinity(ctx: RuleContext, group: P.Blocked, a: Analysis) -> Remedy:
    pod = group.pod
    culprits = [s.term for s in a.terms]
    remaining = tuple(t for t in pod.spec.pod_affinity if t not in culprits)
    verdict = P.what_if(ctx, P.with_spec(pod, pod_affinity=remaining))
    patch = {
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [P.affinity_term_yaml(t) for t in remaining]
                or None,
                "preferredDuringSchedulingIgnoredDuringExecution": _weighted(culprits),
            }
        }
    }
    return P.template_remedy(
        ctx,
        group,
        "Make the pod affinity preferred (or first deploy the pods it must join)",
        patch,
        verified=verdict.fits,
        verification=f"re-simulated {group.pods[0].name} with the affinity term as preferred: {P.outcome(verdict)} "
        "(this patch replaces any preferred podAffinity terms the template had)",
    )


def _relax_existing(ctx: RuleContext, group: P.Blocked, a: Analysis) -> list[Remedy]:
    snap = ctx.snapshot
    out = []
    for e in a.existing[:2]:
        owner = snap.workload_of(e.pods[0]).ref
        template = group.template
        if owner == group.ref and template is not None and e.term not in template.pod_anti_affinity:
            out.append(_delete_old_pod(ctx, group, e))
            continue
        changed = [
            replace(
                q,
                spec=replace(
                    q.spec,
                    pod_anti_affinity=tuple(t for t in q.spec.pod_anti_affinity if t != e.term),
                    preferred_pod_anti_affinity=(*q.spec.preferred_pod_anti_affinity, e.term),
                ),
            )
            for q in snap.pods_of_workload(owner)
        ]
        verdict = P.what_if_cluster(
            ctx, group.pod, ("relax", str(owner), e.term), partial(snap.replace, *changed)
        )
        remaining = [t for t in e.pods[0].spec.pod_anti_affinity if t != e.term]
        preferred = [*e.pods[0].spec.preferred_pod_anti_affinity, e.term]
        patch = {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        P.affinity_term_yaml(t) for t in remaining
                    ]
                    or None,
                    "preferredDuringSchedulingIgnoredDuringExecution": _weighted(preferred),
                }
            }
        }
        body = {"spec": {"template": {"spec": patch}}} if owner.kind != "Pod" else {"spec": patch}
        remedy = ctx.renderer.patch(
            f"Relax {owner.kind} {owner.name}'s anti-affinity against {group.ref.name} to preferred",
            owner,
            body,
            verified=P.fits(verdict),
            verification=f"re-simulated {group.pods[0].name} with {owner.name}'s pods re-created with the term "
            f"as preferred: {P.outcome(verdict)} (takes effect once {owner.name}'s pods have rolled)",
        )
        if owner.kind == "Pod":
            # A pod's affinity is immutable (ValidatePodUpdate): the API server refuses this PATCH
            # (found by the real-control-plane dry run), so re-create the bare pod with the change.
            name, ns = shlex.quote(owner.name), shlex.quote(owner.namespace)
            remedy = replace(
                remedy,
                command=f"kubectl get pod {name} -n {ns} -o json"
                f" | kubectl patch --local -f - --type strategic -p {shlex.quote(json.dumps(body))} -o json"
                " | kubectl replace --force -f -",
                verification=f"{remedy.verification}; a pod's affinity is immutable, so the command re-creates it",
            )
        out.append(remedy)
    return out


def _delete_old_pod(ctx: RuleContext, group: P.Blocked, e: Existing) -> Remedy:
    """The template no longer has the term, but running pods of the old revision still
    carry it: the rollout waits for a domain without an old pod."""
    victim = sorted(e.pods, key=lambda q: (q.created or 0.0, q.name))[-1]
    verdict = P.what_if_cluster(
        ctx, group.pod, ("delete", victim.key), lambda: ctx.snapshot.replace(remove=[("pods", victim.key)])
    )
    return ctx.renderer.command(
        f"Delete one old pod ({victim.name}) so the first pod of the new template can take its place",
        ObjectRef("Pod", victim.namespace, victim.name),
        f"kubectl delete pod {shlex.quote(victim.name)} -n {shlex.quote(victim.namespace)}",
        note=f"{group.ref.name}'s template no longer has the required term, but its old pods still do and repel "
        "the new ones; each deleted old pod frees a domain. Mind PodDisruptionBudgets (kubectl drain-style "
        "eviction respects them, delete does not).",
        verified=P.fits(verdict),
        verification=f"re-simulated without {victim.name}: {P.outcome(verdict)}",
    )
