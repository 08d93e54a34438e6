"""node-selector-mismatch: the pod's nodeSelector or required node affinity matches no node.

NodeAffinity (pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go,
component-helpers/scheduling/corev1/nodeaffinity) admits a node only when it
carries every ``nodeSelector`` label *and* matches one of the required
``nodeSelectorTerms`` (terms ORed, expressions ANDed). A node failing it is
UnschedulableAndUnresolvable: preemption cannot help, and the pod waits until a
node with the labels appears. The usual causes are a typo in a key or value
(``gpu-typ`` for ``gpu-type``, ``A100`` for ``a100``), a node that was replaced
(``kubernetes.io/hostname`` of a node that no longer exists), a label nobody
put on the new node pool, or two constraints no single node satisfies.

Remedies: the nearest existing label (difflib over the label keys, then over
the values of that key across nodes) as a selector fix on the owning
workload, verified by re-simulating the pod with the fixed selector; or
``kubectl label node``, verified by re-simulating with that node labelled.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from analyzers.findings import Finding, Remedy
from analyzers.records import FrozenMap, Node, NodeSelector, NodeSelectorTerm, Pod, Requirement
from analyzers.rules import _placement as P
from analyzers.rules._describe import names, plural
from analyzers.rules.context import RuleContext
from analyzers.simulator import codes as C
from analyzers.simulator import node_table
from analyzers.simulator.nodeinfo import NodeTable, bits, lowest_bits, mask_of
from analyzers.simulator.selectors import requirement_errors

RULE_ID = "node-selector-mismatch"

# Labels the kubelet or the cloud provider sets: never relabel a node by hand for these.
_SYSTEM_KEYS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "node.kubernetes.io/instance-type",
        "metadata.name",
    }
)
_SYSTEM_PREFIXES = ("beta.kubernetes.io/", "failure-domain.beta.kubernetes.io/")
_MAX_LABEL_TRIES = 2
_MAX_LABEL_LOOKS = 50


def system_key(key: str) -> bool:
    return key in _SYSTEM_KEYS or key.startswith(_SYSTEM_PREFIXES)


@dataclass(slots=True)
class Clause:
    """One constraint of the pod: a nodeSelector pair, or an expression of a required term."""

    term: int | None  # None: nodeSelector; else the index of the nodeSelectorTerm
    index: int  # position in the term's matchExpressions (matchFields follow them)
    req: Requirement
    matched: int  # nodes it matches on its own
    # (key, value, nodes carrying it, the wanted value it replaces)
    suggestions: list[tuple[str, str, int, str]] = field(default_factory=list)

    @property
    def is_field(self) -> bool:
        return self.req.key == "metadata.name"

    def text(self) -> str:
        r = self.req
        if self.term is None:
            return f"nodeSelector {r.key}={r.values[0]}"
        where = "matchFields" if self.is_field else "required node affinity"
        if r.operator in ("In", "NotIn"):
            return f"{where} {r.key} {r.operator} [{', '.join(r.values)}]"
        if r.operator in ("Gt", "Lt"):
            return f"{where} {r.key} {r.operator} {r.values[0] if r.values else ''}"
        return f"{where} {r.key} {r.operator}"


@dataclass(slots=True)
class Analysis:
    clauses: list[Clause]
    culprits: list[Clause]
    conflict: str  # why no node matches when every clause matches some node on its own
    total: int


def analyze(ctx: RuleContext) -> list[Finding]:
    table = node_table(ctx.snapshot)
    items = []
    confined = []
    for group in P.blocked(ctx, P.SELECTOR):
        if group.ref.kind == "DaemonSet":
            continue  # the DaemonSet controller pins its pods to nodes itself
        views = group.views
        if views.matches and group.verdict.prefilter is None:
            # Some nodes match: the selector confines the pod to nodes that cannot take it.
            found = P.confinement(views, P.SELECTOR, views.matches, table)
            if found.room:
                confined.append(("selector-confines:" + _constraint_words(group.pod), group, found))
            continue
        analysis = _analyse(table, group.pod)
        cause = "selector:" + "+".join(sorted({c.req.key for c in analysis.culprits}) or ["conflict"])
        items.append((cause, group, analysis))
    out = [_finding(ctx, cause, found) for cause, found in P.merge_by_cause(items)]
    out += [_confined_finding(ctx, cause, found) for cause, found in P.merge_by_cause(confined)]
    return out


def _confined_finding(ctx: RuleContext, cause: str, found: list[tuple[P.Blocked, P.Confinement]]) -> Finding:
    group, conf = found[0]
    table = node_table(ctx.snapshot)
    pod = group.pod
    what = _constraint_words(pod)
    admitted = sorted(conf.allowed)
    parts = [
        f"{P.kind_word(group.ref)} has {P.pending_words(group, ctx.now)}.",
        conf.words(
            what,
            plural(len(admitted), "node") + f" ({names(admitted, 4)})",
        ),
        "kube-scheduler's NodeAffinity filter (pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go) "
        "admits a node only if it carries every nodeSelector label and matches at least one required "
        "nodeSelectorTerm; a node it admits still needs room (NodeResourcesFit) and tolerated taints.",
        P.preemption_words(group.verdict).strip(),
    ]
    if group.drifted:
        parts.append("(Judged on the pod template the Deployment would create now.)")
    remedies: list[Remedy] = []
    relax = _relax_to_room(ctx, group, table, conf)
    if relax is not None:
        remedies.append(relax)
    if admitted:
        template = ctx.snapshot.nodes[admitted[0]]
        pairs = ", ".join(f"{k}={v}" for k, v in sorted(pod.spec.node_selector.items()))
        remedies.append(
            P.room_like(
                ctx,
                group,
                template,
                pairs or f"the pool of {template.name}",
                f"{what[0].upper()}{what[1:]} admits only {names(admitted, 4)}, and none of them can take the pod.",
            )
        )
    remedies.sort(key=lambda r: not r.verified)
    evidence: dict[str, Any] = {
        "node_selector": dict(pod.spec.node_selector),
        "required_node_affinity": (
            P.node_selector_yaml(pod.spec.required_node_affinity) if pod.spec.required_node_affinity else None
        ),
        "admitted_node_count": len(admitted),
        **conf.evidence(),
        "scheduler_message": group.verdict.message,
        "pending_pods": [p.name for g, _ in found for p in g.pods],
        "pending_pod_count": sum(len(g.pods) for g, _ in found),
    }
    return Finding(
        rule_id=RULE_ID,
        severity=P.severity(ctx, group),
        subject=group.ref,
        title=f"{group.ref.name}: {what[4:] if what.startswith('its ') else what} confines it to "
        f"{plural(len(admitted), 'node')} that cannot take it",
        explanation=" ".join(p for p in parts if p),
        evidence=evidence,
        remedies=tuple(remedies),
        cause=cause,
        pods=P.all_pods(found),
    )


def _without_clause(pod: Pod, clause: Clause) -> tuple[dict[str, Any], dict[str, Any]]:
    """(changes for the PodSpec record, the pod-spec part of the patch) dropping ``clause``."""
    spec = pod.spec
    if clause.term is None:
        selector = {k: v for k, v in spec.node_selector.items() if k != clause.req.key}
        return {"node_selector": FrozenMap(selector)}, {"nodeSelector": {clause.req.key: None}}
    assert spec.required_node_affinity is not None
    terms = list(spec.required_node_affinity.terms)
    term = terms[clause.term]
    exprs, fields = list(term.match_expressions), list(term.match_fields)
    if clause.is_field:
        del fields[clause.index - len(exprs)]
    else:
        del exprs[clause.index]
    terms[clause.term] = NodeSelectorTerm(tuple(exprs), tuple(fields))
    kept = tuple(t for t in terms if t.match_expressions or t.match_fields)
    affinity = NodeSelector(kept) if kept else None
    body = P.node_selector_yaml(affinity) if affinity is not None else None
    return (
        {"required_node_affinity": affinity},
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": body}}},
    )


def _relax_to_room(
    ctx: RuleContext, group: P.Blocked, table: NodeTable, conf: P.Confinement
) -> Remedy | None:
    """Drop the first clause (not of a kubelet or cloud label) whose removal lets the pod
    onto a node with room, verified by re-simulating."""
    tried = 0
    for clause in _analyse(table, group.pod).clauses:
        if system_key(clause.req.key) or tried >= _MAX_LABEL_TRIES:
            continue
        room_values = {ctx.snapshot.nodes[n].labels.get(clause.req.key) for n in conf.room}
        changes, patch = _without_clause(group.pod, clause)
        tried += 1
        verdict = P.what_if(ctx, P.with_spec(group.pod, **changes))
        if not verdict.fits:
            continue
        others = sorted(str(v) for v in room_values if v is not None)
        return P.template_remedy(
            ctx,
            group,
            f"Let it use the nodes with room: drop {clause.text()}",
            patch,
            verified=True,
            verification=f"re-simulated {group.pods[0].name} without {clause.text()}: {P.outcome(verdict)}"
            + (f" (the nodes with room have {clause.req.key} {names(others, 3)})" if others else ""),
        )
    return None


# ---------------------------------------------------------------------------
# Which clause matches nothing, and what is nearest


def _analyse(table: NodeTable, pod: Pod) -> Analysis:
    spec = pod.spec
    clauses = [
        Clause(None, i, Requirement(k, "In", (v,)), table.labels_mask({k: v}).bit_count())
        for i, (k, v) in enumerate(sorted(spec.node_selector.items()))
    ]
    terms = spec.required_node_affinity.terms if spec.required_node_affinity is not None else ()
    for t, term in enumerate(terms):
        for i, r in enumerate(term.match_expressions):
            # A requirement labels.NewRequirement refuses matches nothing (its whole term does not).
            matched = 0 if requirement_errors(r) else table.requirement_mask(r).bit_count()
            clauses.append(Clause(t, i, r, matched))
        for i, r in enumerate(term.match_fields, start=len(term.match_expressions)):
            clauses.append(Clause(t, i, r, table.field_requirement_mask(r).bit_count()))
    sel = [c for c in clauses if c.term is None]
    culprits = [c for c in sel if c.matched == 0]
    conflict = ""
    sel_mask = table.labels_mask(spec.node_selector) if spec.node_selector else table.all_mask
    if sel and not culprits and not sel_mask:
        culprits = list(sel)
        conflict = f"each of {names([c.text() for c in sel], 5)} matches some node, but no node has them all"
    term_masks = [table.term_mask(term) for term in terms]
    if terms and not any(m & sel_mask for m in term_masks):
        for t in range(len(terms)):
            in_term = [c for c in clauses if c.term == t]
            zero = [c for c in in_term if c.matched == 0]
            if zero:
                culprits.extend(zero)
            elif not term_masks[t]:
                culprits.extend(in_term)
                conflict = (
                    conflict
                    or "the expressions of the required term each match some node, but no node matches them all"
                )
            elif sel_mask and sel:
                culprits.extend(in_term)
                conflict = "the nodeSelector and the required node affinity each match nodes, but never the same node"
    for c in culprits:
        _suggest(table, c)
    return Analysis(clauses, culprits, conflict, table.size)


def _suggest(table: NodeTable, clause: Clause) -> None:
    """Nearest existing labels for an In/Exists clause: close keys (a typo in the key),
    then close values of the key, then the wanted value under another key."""
    req = clause.req
    if req.operator not in ("In", "Exists"):
        return
    if clause.is_field:
        nodes = {name: 1 << i for i, name in enumerate(table.names)}
        keys: Mapping[str, Mapping[str, int]] = {"metadata.name": nodes}
    else:
        keys = table.label_index
    wanted = req.values if req.operator == "In" else ()
    candidate_keys = [req.key] if req.key in keys else []
    candidate_keys += [
        k for k in difflib.get_close_matches(req.key, list(keys), n=3, cutoff=0.75) if k not in candidate_keys
    ]
    candidate_keys += [k for k in keys if k.lower() == req.key.lower() and k not in candidate_keys]
    seen: set[tuple[str, str]] = set()
    for key in candidate_keys:
        values = keys[key]
        if req.operator == "Exists":
            if key != req.key:
                best = max(values, key=lambda v: values[v].bit_count())
                _add(clause, seen, key, best, values, "")
            continue
        for want in wanted:
            close = [v for v in values if v == want or v.lower() == want.lower()]
            close += difflib.get_close_matches(want, list(values), n=2, cutoff=0.6)
            for v in close:
                if (key, v) != (req.key, want):
                    _add(clause, seen, key, v, values, want)
    if not clause.suggestions and not clause.is_field:
        for key, values in keys.items():
            for want in wanted:
                if want in values and key != req.key and len(want) > 2:
                    _add(clause, seen, key, want, values, want)
    clause.suggestions.sort(key=lambda s: (-(s[0] == req.key or s[1] in wanted), -s[2], s[0], s[1]))
    del clause.suggestions[3:]


def _add(
    clause: Clause, seen: set[tuple[str, str]], key: str, value: str, values: Mapping[str, int], source: str
) -> None:
    if (key, value) not in seen:
        seen.add((key, value))
        clause.suggestions.append((key, value, values[value].bit_count(), source))


# ---------------------------------------------------------------------------
# The finding


def _finding(ctx: RuleContext, cause: str, found: list[tuple[P.Blocked, Analysis]]) -> Finding:
    group, analysis = found[0]
    table = node_table(ctx.snapshot)
    verdict = group.verdict
    pod = group.pod
    parts = [
        f"{P.kind_word(group.ref)} has {P.pending_words(group, ctx.now)}: "
        + _constraint_words(pod)
        + f" matches none of the {plural(analysis.total, 'node')}."
    ]
    for c in analysis.culprits:
        parts.append(_clause_words(table, c))
    if analysis.conflict:
        parts.append(analysis.conflict[0].upper() + analysis.conflict[1:] + ".")
    if verdict.prefilter is not None:
        parts.append(
            "Its required terms pin the pod by node name (matchFields metadata.name) and the names of the terms "
            f"do not intersect: NodeAffinity's PreFilter rejects the pod outright ({verdict.prefilter.reasons[0]})."
        )
    parts.append(
        "kube-scheduler's NodeAffinity filter (pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go) "
        "admits a node only if it carries every nodeSelector label and matches at least one required "
        "nodeSelectorTerm; every node fails it (\"node(s) didn't match Pod's node affinity/selector\"), which is "
        "UnschedulableAndUnresolvable: preemption cannot help, and the pod waits until a matching node appears."
    )
    if group.drifted:
        parts.append("(Judged on the pod template the Deployment would create now.)")
    events = P.autoscaler_events(ctx.snapshot, group.pods)
    explanation = " ".join(parts) + P.autoscaler_words(events)
    remedies = _selector_fixes(ctx, group, analysis)
    label = _label_command(ctx, group, analysis, remedies)
    if label is not None:
        remedies.append(label)
    remedies.sort(key=lambda r: not r.verified)
    evidence: dict[str, Any] = {
        "nodes": analysis.total,
        "node_selector": dict(pod.spec.node_selector),
        "required_node_affinity": (
            P.node_selector_yaml(pod.spec.required_node_affinity) if pod.spec.required_node_affinity else None
        ),
        "clauses": [
            {
                "constraint": c.text(),
                "nodes_matching": c.matched,
                "nearest": [{"label": f"{k}={v}", "nodes": n} for k, v, n, _ in c.suggestions],
                **_key_values(table, c),
            }
            for c in analysis.clauses
        ],
        "culprits": [c.text() for c in analysis.culprits],
        "scheduler_message": verdict.message,
        "pending_pods": [p.name for g, _ in found for p in g.pods],
        "pending_pod_count": sum(len(g.pods) for g, _ in found),
        "autoscaler_events": [{"reason": e.reason, "message": e.message} for e in events],
    }
    first = analysis.culprits[0].text() if analysis.culprits else _constraint_words(pod)
    return Finding(
        rule_id=RULE_ID,
        severity=P.severity(ctx, group),
        subject=group.ref,
        title=f"{group.ref.name}: {first} matches no node",
        explanation=explanation,
        evidence=evidence,
        remedies=tuple(remedies),
        cause=cause,
        pods=P.all_pods(found),
    )


def _constraint_words(pod: Pod) -> str:
    spec = pod.spec
    parts = []
    if spec.node_selector:
        parts.append("nodeSelector " + ",".join(f"{k}={v}" for k, v in sorted(spec.node_selector.items())))
    if spec.required_node_affinity is not None:
        parts.append("required node affinity")
    return "its " + " together with ".join(parts) if parts else "its node affinity"


def _key_values(table: NodeTable, c: Clause) -> dict[str, Any]:
    """Every value the clause's label key has on the nodes, with its node count (most
    nodes first), and why the clause does not parse when it does not."""
    out: dict[str, Any] = {}
    if not c.is_field:
        values = table.label_index.get(c.req.key, {})
        ordered = sorted(values.items(), key=lambda kv: (-kv[1].bit_count(), kv[0]))
        out["key_values"] = [{"value": v, "nodes": m.bit_count()} for v, m in ordered]
        out["values_not_shown"] = max(0, len(values) - _SHOWN_VALUES)
        errors = requirement_errors(c.req) if c.term is not None else []
        if errors:
            out["parse_error"] = "; ".join(errors)
    return out


_SHOWN_VALUES = 4


def _clause_words(table: NodeTable, c: Clause) -> str:
    key = c.req.key
    errors = requirement_errors(c.req) if c.term is not None and not c.is_field else []
    if errors:
        return (
            f"{c.text()} is not a valid selector ({'; '.join(errors)}): labels.NewRequirement refuses it, so its "
            "term matches no node whatever the labels (component-helpers nodeaffinity.go)."
        )
    if c.is_field:
        text = f"{c.text()}: no node has that name"
    elif key not in table.label_index:
        text = f"{c.text()}: no node has a label {key}"
    else:
        values = table.label_index[key]
        shown = sorted(values.items(), key=lambda kv: (-kv[1].bit_count(), kv[0]))[:_SHOWN_VALUES]
        have = ", ".join(f"{key}={v} ({m.bit_count()})" for v, m in shown)
        extra = len(values) - _SHOWN_VALUES
        more = f" and {extra} more values" if extra > 0 else ""
        text = f"{c.text()} matches {plural(c.matched, 'node')}; nodes have {have}{more}"
    if c.suggestions:
        near = "; ".join(
            f"{k}={v} on {plural(n, 'node')}"
            + (f" ({names(_nodes_with(table, k, v, c.is_field))})" if n <= 3 else "")
            for k, v, n, _ in c.suggestions
        )
        text += f". Nearest existing: {near}"
    return text + "."


def _nodes_with(table: NodeTable, key: str, value: str, is_field: bool) -> list[str]:
    return [table.names[i] for i in bits(_mask_with(table, key, value, is_field))]


def _mask_with(table: NodeTable, key: str, value: str, is_field: bool) -> int:
    """The nodes carrying label ``key=value`` (named ``value`` for a field clause)."""
    if is_field:
        i = table.index.get(value)
        return 0 if i is None else 1 << i
    return table.label_index.get(key, {}).get(value, 0)


# ---------------------------------------------------------------------------
# Remedies


def _fixed_spec(
    pod: Pod, fixes: list[tuple[Clause, tuple[str, str, int, str]]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(changes for the PodSpec record, the pod-spec part of the patch)."""
    spec = pod.spec
    selector = dict(spec.node_selector)
    sel_patch: dict[str, Any] = {}
    terms = list(spec.required_node_affinity.terms) if spec.required_node_affinity is not None else []
    term_changed = False
    for clause, (key, value, _, source) in fixes:
        if clause.term is None:
            old = clause.req.key
            selector.pop(old, None)
            selector[key] = value
            if key != old:
                sel_patch[old] = None
            sel_patch[key] = value
            continue
        term = terms[clause.term]
        exprs, fields = list(term.match_expressions), list(term.match_fields)
        req = clause.req
        if req.operator == "Exists":
            new = Requirement(key, "Exists")
        elif key == req.key:
            new = Requirement(
                key, "In", tuple(dict.fromkeys(value if v == source else v for v in req.values))
            )
        else:
            new = Requirement(key, "In", (value,))
        if clause.is_field:
            fields[clause.index - len(exprs)] = new
        else:
            exprs[clause.index] = new
        terms[clause.term] = NodeSelectorTerm(tuple(exprs), tuple(fields))
        term_changed = True
    changes: dict[str, Any] = {}
    patch: dict[str, Any] = {}
    if sel_patch:
        changes["node_selector"] = FrozenMap(selector)
        patch["nodeSelector"] = sel_patch
    if term_changed:
        affinity = NodeSelector(tuple(terms))
        changes["required_node_affinity"] = affinity
        patch["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": P.node_selector_yaml(affinity)}
        }
    return changes, patch


def _selector_fixes(ctx: RuleContext, group: P.Blocked, analysis: Analysis) -> list[Remedy]:
    with_hints = [c for c in analysis.culprits if c.suggestions]
    if not with_hints:
        return []
    plans: list[list[tuple[Clause, tuple[str, str, int, str]]]] = [
        [(c, c.suggestions[0]) for c in with_hints]
    ]
    if len(with_hints) == 1:
        plans += [[(with_hints[0], s)] for s in with_hints[0].suggestions[1:2]]
    out = []
    for plan in plans:
        changes, patch = _fixed_spec(group.pod, plan)
        if not patch:
            continue
        verdict = P.what_if(ctx, P.with_spec(group.pod, **changes))
        what = ", ".join(f"{c.text()} → {k}={v}" for c, (k, v, _, _) in plan)
        out.append(
            P.template_remedy(
                ctx,
                group,
                f"Select the existing label instead: {what}",
                patch,
                verified=verdict.fits,
                verification=f"re-simulated {group.pods[0].name} with the fixed selector: {P.outcome(verdict)}",
            )
        )
    return out


def _label_changes(node: Node, pod: Pod) -> tuple[dict[str, str], list[str]] | None:
    """Labels to set and to remove so that ``node`` matches the pod's node constraints."""
    spec = pod.spec
    to_set = {k: v for k, v in spec.node_selector.items() if node.labels.get(k) != v}
    best: tuple[dict[str, str], list[str]] | None = None
    terms = spec.required_node_affinity.terms if spec.required_node_affinity is not None else ()
    for term in terms:
        if term.match_fields and not all(r.matches({"metadata.name": node.name}) for r in term.match_fields):
            continue
        t_set: dict[str, str] = {}
        t_remove: list[str] = []
        ok = True
        for req in term.match_expressions:
            labels = {k: v for k, v in {**node.labels, **to_set, **t_set}.items() if k not in t_remove}
            if req.matches(labels):
                continue
            if req.operator == "In" and req.values:
                t_set[req.key] = req.values[0]
            elif req.operator == "Exists":
                t_set[req.key] = "true"
            elif req.operator in ("DoesNotExist", "NotIn"):
                t_remove.append(req.key)
            else:
                ok = False
                break
        if ok and (best is None or len(t_set) + len(t_remove) < len(best[0]) + len(best[1])):
            best = (t_set, t_remove)
    if terms and best is None:
        return None
    t_set, t_remove = best if best is not None else ({}, [])
    to_set.update(t_set)
    if not to_set and not t_remove:
        return None
    if any(system_key(k) for k in [*to_set, *t_remove]):
        return None
    return to_set, t_remove


def _label_candidates(
    table: NodeTable, views: P.NodeViews, analysis: Analysis, limit: int = _MAX_LABEL_LOOKS
) -> list[str]:
    """The first ``limit`` nodes that fail nothing but NodeAffinity (labelled,
    they would take the pod): those carrying a nearest existing label first, in the
    order of the suggestions (they are likely the intended ones), then the others by
    name. Read a few bits at a time: at 5,000 nodes most of them qualify."""
    only_affinity = views.where(lambda p: p == {C.NODE_AFFINITY})
    order: dict[int, None] = {}
    for c in analysis.culprits:
        for k, v, _, _ in c.suggestions:
            # A suggestion's nodes past its first ``limit`` come after as many others.
            wanted = _mask_with(table, k, v, c.is_field) & only_affinity
            order.update(dict.fromkeys(lowest_bits(wanted, limit)))
    chosen = list(order)[:limit]
    rest = only_affinity & ~mask_of(chosen, table.size)
    chosen += lowest_bits(rest, limit - len(chosen))
    return [table.names[i] for i in chosen]


def _label_command(
    ctx: RuleContext, group: P.Blocked, analysis: Analysis, fixes: list[Remedy]
) -> Remedy | None:
    snap = ctx.snapshot
    tried = 0
    for name in _label_candidates(node_table(snap), group.views, analysis):
        node = snap.nodes.get(name)
        change = _label_changes(node, group.pod) if node is not None else None
        if node is None or change is None:
            continue
        if tried == _MAX_LABEL_TRIES:
            break
        tried += 1
        to_set, to_remove = change
        relabelled = P.with_labels(node, to_set, to_remove)
        verdict = P.what_if_nodes(ctx, group.pod, relabelled, share=0.5)
        if not P.fits(verdict):
            continue
        args = [f"{k}={v}" for k, v in sorted(to_set.items())] + [f"{k}-" for k in to_remove]
        overwrite = any(k in node.labels for k in to_set)
        command = (
            f"kubectl label node {shlex.quote(name)} "
            + " ".join(shlex.quote(a) for a in args)
            + (" --overwrite" if overwrite else "")
        )
        note = (
            f"Only if {name} is meant to run {group.ref.name}: the label makes it match the pod's selector."
            + (" Prefer fixing the selector when the label in it is a typo." if fixes else "")
            + " Labels set by hand are lost when the node is replaced; set them in the node pool's template."
        )
        return ctx.renderer.command(
            f"Label node {name}: {' '.join(args)}",
            P.node_ref(name),
            command,
            note=note,
            verified=True,
            verification=f"re-simulated with {name} labelled {' '.join(args)}: {P.outcome(verdict)}",
        )
    return None
