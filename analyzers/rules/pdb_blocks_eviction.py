"""pdb-blocks-eviction: a drain (or any eviction) waits on a PodDisruptionBudget that allows 0.

Fires when an eviction cannot proceed:

* a node being drained — cordoned (``spec.unschedulable``, the first step of
  ``kubectl drain``) or tainted for removal by Karpenter/cluster-autoscaler —
  still runs pods whose eviction the API would refuse now; or
* eviction failures were seen (``ctx.eviction_messages``, e.g. parsed
  ``kubectl drain`` output, or Events whose message parses as an eviction
  failure, e.g. ``Cannot evict pod as it would violate the pod's disruption
  budget.`` or Karpenter's ``pdb "<ns>/<name>" prevents pod evictions``) and
  the pod is still there and still refused. Events are triggers, not truth: a
  report whose pod is gone or evictable now is stale and ignored.

The decision is recomputed, never read from the PDB's status (which the
disruption controller may not have refreshed): ``analyzers.disruption``
follows pkg/controller/disruption/disruption.go (expected pods, desired
healthy, ``disruptionsAllowed = currentHealthy - desiredHealthy``, failSafe 0)
and pkg/registry/core/pod/storage/eviction.go (more than one PDB is a 500;
unready pods pass with ``unhealthyPodEvictionPolicy: AlwaysAllow`` or while
the budget is met). kubectl drain evicts every pod and retries a 429 every 5 s
until ``--timeout`` (none by default), skipping DaemonSet and mirror pods
(staging/src/k8s.io/kubectl/pkg/drain/drain.go, filters.go).

The explanation says *why* the budget is exhausted, first match wins:
several PDBs on the pod; a budget the controller cannot compute; a selector
that matches fewer pods than the budget needs; ``minAvailable`` equal to the
replicas (or ``maxUnavailable: 0``); replacement pods that cannot be
scheduled (with the simulator's reason, in numbers); selected pods that run
but are not Ready (IfHealthyBudget). A PDB never blocks a rolling update: the
Deployment controller deletes old pods directly, not through the Eviction API.

Subject: the workload owning the blocked pods (what the user runs and what
recurs across pod re-creation); the PDB itself when the pods have no
controller. One finding per (workload, PDB set); ``cause`` names the PDB(s)
and the root cause. Critical when a node is being drained, warning when only
eviction reports were seen (autoscaler scale-down, a manual eviction).

Remedies, each verified by recomputing the snapshot with the change applied:
room for the replacement (``kubectl uncordon`` of a node the replacement
would fit, or a node like one that fits), a relaxed budget (the smallest
``maxUnavailable`` that lets the blocked pods go), ``unhealthyPodEvictionPolicy:
AlwaysAllow`` when unready pods are refused, scaling the workload up, and for
overlapping PDBs removing the redundant one. Deleting the PDB is never the
first answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from analyzers.disruption import (
    PDB_VIOLATION_MESSAGE,
    BudgetStatus,
    EvictionVerdict,
    budget_status,
    eviction_verdict,
    scale_sources,
    selected_pods,
)
from analyzers.findings import Finding, ObjectRef, Remedy, Severity
from analyzers.messages import EVICTION, MULTIPLE_PDBS, PDB_VIOLATION, Eviction, parse_message
from analyzers.records import (
    Deployment,
    Event,
    FrozenMap,
    LabelSelector,
    Node,
    Pod,
    PodDisruptionBudget,
    ReplicaSet,
    StatefulSet,
)
from analyzers.rules._describe import (
    are,
    describe_verdict,
    draining,
    duration,
    names,
    plural,
    what_if_verdict,
)
from analyzers.rules.context import RuleContext
from analyzers.simulator.results import FilterFailure
from analyzers.snapshot import ClusterSnapshot, carry_selection, selected

RULE_ID = "pdb-blocks-eviction"

# Event reasons that carry eviction failures (Karpenter, cluster-autoscaler, node drainers).
_EVENT_REASONS = frozenset(
    {
        "EvictionBlocked",
        "DisruptionBlocked",
        "FailedDraining",
        "FailedEviction",
        "EvictionFailed",
        "DrainFailed",
    }
)
_BLOCKING_KINDS = (PDB_VIOLATION, MULTIPLE_PDBS)
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_ROLLING_UPDATE_NOTE = (
    "A PDB only guards the Eviction API (kubectl drain, cluster-autoscaler, Karpenter, the descheduler); "
    "it never blocks a rolling update: the Deployment controller deletes old pods directly and obeys its own "
    "maxUnavailable instead."
)
_MAX_PLACEMENTS = 20


@dataclass(frozen=True, slots=True)
class _Report:
    """One eviction failure someone saw (drain output, an Event)."""

    kind: str
    namespace: str
    pod: str
    pdb: str
    node: str
    text: str


@dataclass
class _Blocked:
    pod: Pod
    verdict: EvictionVerdict
    node: str
    how: str | None  # how the node is being drained, None when it is not
    messages: list[str] = field(default_factory=list)


def analyze(ctx: RuleContext) -> list[Finding]:
    snap = ctx.snapshot
    blocked: dict[tuple[str, str], _Blocked] = {}
    by_node = snap.pods_by_node()
    for node in draining_nodes(snap):
        how = draining(node)
        for pod in by_node.get(node.name, ()):
            if not _evicted_by_drain(pod):
                continue
            verdict = _eviction(snap, pod)
            if not verdict.allowed:
                blocked[pod.key] = _Blocked(pod, verdict, node.name, how)
    for report in _reports(ctx):
        for pod in _pods_of_report(snap, report):
            entry = blocked.get(pod.key)
            if entry is None:
                verdict = _eviction(snap, pod)
                if verdict.allowed:
                    continue  # a stale report: the budget allows this eviction now
                node_rec = snap.nodes.get(pod.node_name)
                how = draining(node_rec) if node_rec is not None else None
                entry = blocked[pod.key] = _Blocked(pod, verdict, pod.node_name, how)
            if report.text and report.text not in entry.messages:
                entry.messages.append(report.text)

    groups: dict[tuple[ObjectRef, tuple[str, ...]], list[_Blocked]] = {}
    for entry in blocked.values():
        pdbs = entry.verdict.pdbs
        if not pdbs:
            continue
        workload = snap.workload_of(entry.pod).ref
        subject = (
            workload
            if workload.kind != "Pod"
            else ObjectRef("PodDisruptionBudget", pdbs[0].namespace, pdbs[0].name)
        )
        groups.setdefault((subject, tuple(sorted(p.name for p in pdbs))), []).append(entry)
    findings = []
    for (subject, _), entries in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        entries.sort(key=lambda e: (e.node, e.pod.name))
        findings.append(_finding(ctx, subject, entries))
    return findings


# ---------------------------------------------------------------------------
# Triggers


def _evicted_by_drain(pod: Pod) -> bool:
    """Pods kubectl drain evicts: bound, alive, not DaemonSet-managed, not mirror pods."""
    if not pod.node_name or pod.finished or pod.deleted is not None:
        return False
    return not (pod.owner is not None and pod.owner.kind in ("DaemonSet", "Node"))


def _reports(ctx: RuleContext) -> Iterable[_Report]:
    for item in ctx.eviction_messages:
        report = _report_from_mapping(item)
        if report is not None:
            yield report
    for ev in eviction_reports(ctx.snapshot):
        e = _refused_eviction(ev)
        if e is None:  # pragma: no cover - eviction_reports holds only these
            continue
        inv = ev.involved
        namespace = e.namespace or inv.namespace or ev.namespace
        pod = e.pod or (inv.name if inv.kind == "Pod" else "")
        node = inv.name if inv.kind == "Node" else ""
        yield _Report(e.kind, namespace, pod, e.pdb or "", node, ev.message)


def _refused_eviction(ev: Event) -> Eviction | None:
    """The eviction an Event reports refused by a budget, or None."""
    lower = ev.message.lower()
    if ev.reason not in _EVENT_REASONS and "evict" not in lower and "disruption budget" not in lower:
        return None
    parsed = parse_message(ev.message)
    if parsed.kind != EVICTION or parsed.eviction is None or parsed.eviction.kind not in _BLOCKING_KINDS:
        return None
    return parsed.eviction


def reports_eviction(ev: Event) -> bool:
    """Whether this rule reads ``ev`` as a refused eviction (analyzers.scope asks)."""
    return _refused_eviction(ev) is not None


_DRAINING_KEY = f"{RULE_ID}:draining_nodes"
_REPORTS_KEY = f"{RULE_ID}:eviction_reports"


def _is_draining(node: Node) -> bool:
    return draining(node) is not None


def draining_nodes(snap: ClusterSnapshot) -> tuple[Node, ...]:
    """The nodes being drained (cordoned, or tainted for removal), in the snapshot's order;
    carried from one snapshot to the next (a pass looks at the changed nodes only)."""
    found: tuple[Node, ...] = selected(snap, _DRAINING_KEY, "nodes", _is_draining)
    return found


def eviction_reports(snap: ClusterSnapshot) -> tuple[Event, ...]:
    """The Events reporting a refused eviction, in the snapshot's order; carried too."""
    found: tuple[Event, ...] = selected(snap, _REPORTS_KEY, "events", reports_eviction)
    return found


carry_selection(_DRAINING_KEY, "nodes", _is_draining)
carry_selection(_REPORTS_KEY, "events", reports_eviction)


def _report_from_mapping(item: Mapping[str, Any]) -> _Report | None:
    """Accepts ``Eviction.as_dict()``, ``ParsedMessage.as_dict()`` or ``{"message": text}``."""
    text = str(item.get("message") or item.get("detail") or "")
    data: Mapping[str, Any] | None = None
    if isinstance(item.get("eviction"), Mapping):
        data = item["eviction"]
    elif item.get("kind") in _BLOCKING_KINDS:
        data = item
    elif text:
        parsed = parse_message(text)
        if parsed.eviction is not None:
            data = _eviction_dict(parsed.eviction)
    if data is None or data.get("kind") not in _BLOCKING_KINDS:
        return None
    return _Report(
        str(data["kind"]),
        str(data.get("namespace") or item.get("namespace") or ""),
        str(data.get("pod") or ""),
        str(data.get("pdb") or ""),
        str(item.get("node") or ""),
        text or str(data.get("detail") or PDB_VIOLATION_MESSAGE),
    )


def _eviction_dict(e: Eviction) -> dict[str, Any]:
    return e.as_dict()


def _pods_of_report(snap: ClusterSnapshot, report: _Report) -> list[Pod]:
    if report.pod:
        if report.namespace:
            pod = snap.pods.get((report.namespace, report.pod))
            candidates = [pod] if pod is not None else []
        else:  # old kubectl prints no namespace
            candidates = [p for p in snap.pods.values() if p.name == report.pod]
        return [p for p in candidates if _evicted_by_drain(p)]
    if report.pdb and report.namespace:
        pdb = snap.pdbs.get((report.namespace, report.pdb))
        if pdb is None:
            return []
        pods = [p for p in selected_pods(snap, pdb) if _evicted_by_drain(p)]
        if report.node:
            return [p for p in pods if p.node_name == report.node]
        return pods
    return []


# ---------------------------------------------------------------------------
# The finding


def _finding(ctx: RuleContext, subject: ObjectRef, entries: list[_Blocked]) -> Finding:
    snap = ctx.snapshot
    pdbs = entries[0].verdict.pdbs
    blocked_pods = [e.pod for e in entries]
    drained = sorted({e.node for e in entries if e.how is not None})
    workload = snap.workload_of(entries[0].pod)
    replicas = _replicas(workload.record)
    statuses = [_status(snap, p) for p in pdbs]
    multiple = entries[0].verdict.kind == "multiple-pdbs"
    st = statuses[0]
    pdb = pdbs[0]
    live = [p for p in st.pods if p.deleted is None and not p.finished]
    pending = sorted((p for p in live if p.unscheduled), key=lambda p: (p.created or 0.0, p.name))
    unready = [p for p in st.unhealthy if p.node_name]
    # Pods of the same workload the PDB does not select (a selector narrower than the workload's).
    unselected = [
        p
        for p in snap.pods_of_workload(workload.ref)
        if p.deleted is None
        and not p.finished
        and (pdb.selector is None or not pdb.selector.matches(p.labels))
    ]

    if multiple:
        cause = "multiple-pdbs"
    elif st.error is not None:
        cause = "budget-uncomputable"
    elif st.unmanaged and st.expected_pods <= 0:
        cause = "unmanaged-pods"
    elif unselected and st.desired_healthy >= len(live):
        cause = "selector-too-narrow"
    elif st.expected_pods > 0 and st.desired_healthy >= st.expected_pods:
        cause = "min-available-equals-replicas"
    elif pending:
        cause = "replacement-unschedulable"
    elif unready:
        cause = "unhealthy-pods"
    else:
        cause = "budget-exhausted"

    pending_info = []
    for p in pending[:5]:
        verdict = ctx.verdict(p)
        pending_info.append(
            {
                "pod": p.name,
                "age": duration(ctx.now - p.created) if p.created else None,
                "why": describe_verdict(p, verdict),
                "scheduler_message": verdict.message,
                "fits": verdict.fits,
            }
        )

    parts = [_what(entries, workload.ref), _budget_words(st, multiple, statuses)]
    parts.append(
        _why(cause, st, pdb, statuses, entries, pending, pending_info, unready, replicas, workload.ref)
    )
    if cause in ("min-available-equals-replicas", "selector-too-narrow") and pending:
        parts.append(
            f"In addition {plural(len(pending), 'selected pod')} {are(len(pending))} Pending "
            f"({pending_info[0]['why']})."
        )
    parts.append(_ROLLING_UPDATE_NOTE)
    explanation = " ".join(parts)

    remedies = _remedies(ctx, cause, workload.ref, workload.record, pdbs, statuses, entries, pending, unready)

    evidence: dict[str, Any] = {
        "cause": cause,
        # What the Eviction API answers and how often kubectl drain retries (both named in the explanation).
        "eviction_status_code": 429,
        "drain_retry_seconds": 5,
        "draining_nodes": [{"node": n, "how": next(e.how for e in entries if e.node == n)} for n in drained],
        "blocked_pods": [
            {
                "pod": e.pod.name,
                "node": e.node,
                "ready": e.pod.ready,
                "eviction": e.verdict.kind,
                "messages": e.messages,
            }
            for e in entries
        ],
        "pdbs": [
            s.as_dict() | {"status_disruptions_allowed": s.pdb.status_disruptions_allowed} for s in statuses
        ],
        "workload": workload.ref.as_dict(),
        "workload_replicas": replicas,
        "pending_replacements": pending_info,
        "unready_pods": [p.name for p in unready],
    }
    severity = Severity.CRITICAL if drained else Severity.WARNING
    where = f" on {names(drained)}" if drained else ""
    title = (
        f"Eviction of {plural(len(entries), 'pod')} of {subject.name}{where} is blocked by "
        f"PodDisruptionBudget {', '.join(p.name for p in pdbs)}: {_TITLES[cause]}"
    )
    return Finding(
        rule_id=RULE_ID,
        severity=severity,
        subject=subject,
        title=title,
        explanation=explanation,
        evidence=evidence,
        remedies=tuple(remedies),
        cause=f"{cause}:{','.join(sorted(p.name for p in pdbs))}",
        pods=tuple(f"{p.namespace}/{p.name}" for p in [*blocked_pods, *pending]),
    )


_TITLES = {
    "multiple-pdbs": "more than one PDB selects the pods",
    "budget-uncomputable": "the budget cannot be computed, so it allows 0",
    "unmanaged-pods": "its pods have no controller, so it expects none and allows 0",
    "selector-too-narrow": "its selector matches too few pods to ever allow a disruption",
    "min-available-equals-replicas": "it requires every replica to stay up, so it never allows a disruption",
    "replacement-unschedulable": "the replacement pod cannot be scheduled, so 0 disruptions are allowed",
    "unhealthy-pods": "unready pods use up the budget",
    "budget-exhausted": "0 disruptions are allowed",
}


def _replicas(record: Any) -> int | None:
    if isinstance(record, Deployment | StatefulSet | ReplicaSet):
        return record.replicas
    return None


def _what(entries: list[_Blocked], workload: ObjectRef) -> str:
    by_node: dict[str, list[_Blocked]] = {}
    for e in entries:
        by_node.setdefault(e.node, []).append(e)
    sentences = []
    for node, items in by_node.items():
        pods = names([e.pod.name for e in items])
        how = items[0].how
        owner = f" ({workload.kind} {workload.namespace}/{workload.name})" if workload.kind != "Pod" else ""
        if how == "cordoned":
            sentences.append(
                f"Node {node} is cordoned (spec.unschedulable: true, the first step of kubectl drain) and still runs "
                f"{pods}{owner}, which the Eviction API refuses to evict."
            )
        elif how is not None:
            sentences.append(
                f"Node {node} is {how} and still runs {pods}{owner}, which the Eviction API refuses to evict."
            )
        else:
            sentences.append(f"Evictions of {pods}{owner} on {node} were refused.")
    seen = [m for e in entries for m in e.messages]
    if seen:
        sentences.append(f"Seen: \u201c{seen[0].strip()}\u201d.")
    return " ".join(sentences)


def _budget_words(st: BudgetStatus, multiple: bool, statuses: Sequence[BudgetStatus]) -> str:
    if multiple:
        return ""
    pdb = st.pdb
    ref = f"PodDisruptionBudget {pdb.namespace}/{pdb.name}"
    if st.error is not None:
        return f"{ref} selects {plural(len(st.pods), 'pod')} but its budget cannot be computed: {st.error}."
    if st.unmanaged and st.expected_pods <= 0:
        return (
            f"{ref} selects {plural(len(st.pods), 'pod')}, {len(st.unmanaged)} without a controller "
            f"({names(st.unmanaged)}), so it expects {st.expected_pods} and allows "
            f"{st.disruptions_allowed} disruptions."
        )
    if pdb.max_unavailable is not None:
        rule = (
            f"maxUnavailable: {pdb.max_unavailable} of {st.expected_pods} expected pods (the replicas of their "
            f"controllers{', percentage rounded up' if isinstance(pdb.max_unavailable, str) else ''}) leaves "
            f"{st.desired_healthy} that must stay healthy"
        )
    elif isinstance(pdb.min_available, str):
        rule = (
            f"minAvailable: {pdb.min_available} of {st.expected_pods} expected pods (the replicas of their controllers, "
            f"rounded up) means {st.desired_healthy} must stay healthy"
        )
    else:
        rule = (
            f"minAvailable: {pdb.min_available} means {st.desired_healthy} of the {plural(len(st.pods), 'pod')} it "
            "selects must stay healthy"
        )
    raw = st.current_healthy - st.desired_healthy
    text = (
        f"{ref}: {rule}; {st.current_healthy} {are(st.current_healthy)} healthy (Ready) now, so disruptionsAllowed = "
        f"{st.current_healthy} \u2212 {st.desired_healthy} = {raw}"
        + (" \u2192 0" if raw < 0 else "")
        + " (pkg/controller/disruption/disruption.go)."
    )
    stale = pdb.status_disruptions_allowed
    if stale is not None and stale != st.disruptions_allowed:
        text += f" Its status still says disruptionsAllowed: {stale}, which the controller has not refreshed."
    text += (
        f" The Eviction API therefore answers 429 \u201c{PDB_VIOLATION_MESSAGE}\u201d and kubectl drain retries every "
        "5 s until its --timeout (none by default)."
    )
    return text


def _why(
    cause: str,
    st: BudgetStatus,
    pdb: PodDisruptionBudget,
    statuses: Sequence[BudgetStatus],
    entries: list[_Blocked],
    pending: list[Pod],
    pending_info: list[dict[str, Any]],
    unready: list[Pod],
    replicas: int | None,
    workload: ObjectRef,
) -> str:
    kind = workload.kind
    if cause == "multiple-pdbs":
        pdb_names = ", ".join(f"{s.pdb.name} (disruptionsAllowed {s.disruptions_allowed})" for s in statuses)
        return (
            f"{entries[0].pod.name} is selected by {len(statuses)} PodDisruptionBudgets: {pdb_names}. The eviction "
            "subresource refuses any pod with more than one PDB, whatever their budgets say (HTTP 500 \u201cThis pod "
            "has more than one PodDisruptionBudget, which the eviction subresource does not support.\u201d, "
            "pkg/registry/core/pod/storage/eviction.go)."
        )
    if cause == "budget-uncomputable":
        return (
            "A percentage or maxUnavailable needs the controller of every selected pod (Deployment, ReplicaSet, "
            "StatefulSet or a scale subresource) to know how many pods to expect; when it cannot find one the "
            "disruption controller fails safe and sets disruptionsAllowed to 0 for good."
        )
    if cause == "unmanaged-pods":
        return (
            "A percentage or maxUnavailable counts the replicas of the selected pods' controllers; the "
            "disruption controller leaves pods without a controller out of that count (its UnmanagedPods "
            "event: \u201cTo account for these pods please set .spec.minAvailable field of the PDB to an integer "
            "value\u201d), and a budget that expects no pods allows no disruption "
            "(pkg/controller/disruption/disruption.go getExpectedScale, updatePdbStatus)."
        )
    if cause == "selector-too-narrow":
        return (
            f"The selector {pdb.selector.describe() if pdb.selector else '<none>'} matches only "
            f"{plural(len(st.pods), 'pod')} while {kind} {workload.name} runs {replicas or 'more'} replicas; requiring "
            f"{st.desired_healthy} healthy of {len(st.pods)} can never leave room for an eviction."
        )
    if cause == "min-available-equals-replicas":
        if pdb.max_unavailable is not None:
            what = f"maxUnavailable: {pdb.max_unavailable}"
        else:
            what = f"minAvailable: {pdb.min_available}"
        of = (
            f"{kind} {workload.name}'s {replicas} replica(s)"
            if replicas is not None
            else f"{st.expected_pods} pod(s)"
        )
        return (
            f"{what} requires all of {of} to stay healthy, so the budget never allows a voluntary disruption, not "
            "even when every pod is Ready: a drain of any node running one of these pods can never finish."
        )
    if cause == "replacement-unschedulable":
        first = pending_info[0]
        age = f" (created {first['age']} ago)" if first["age"] else ""
        more = f" and {len(pending) - 1} more" if len(pending) > 1 else ""
        if first["fits"]:
            return (
                f"The budget is spent because {plural(len(pending), 'selected pod')} {are(len(pending))} Pending: the "
                f"replacement {first['pod']}{age}{more} could not be scheduled, but now {first['why']}; kube-scheduler "
                f"should place it on its next attempt. Until it runs and is Ready only {st.current_healthy} of "
                f"{st.expected_pods} count as healthy, so the drain waits for it."
            )
        return (
            f"The budget is spent because {plural(len(pending), 'selected pod')} {are(len(pending))} Pending: the "
            f"replacement {first['pod']}{age}{more} cannot be scheduled \u2014 {first['why']}. Until it runs and is "
            f"Ready only {st.current_healthy} of {st.expected_pods} count as healthy, so no further eviction is "
            "allowed and the drain waits forever."
        )
    if cause == "unhealthy-pods":
        policy = pdb.unhealthy_pod_eviction_policy
        return (
            f"{plural(len(unready), 'selected pod')} ({names(p.name for p in unready)}) {are(len(unready))} running but "
            f"not Ready, so {are(len(unready))} not counted as healthy. With unhealthyPodEvictionPolicy {policy} an "
            "unready pod may only be evicted while the budget is met (currentHealthy \u2265 desiredHealthy), which it "
            "is not: the drain waits until they become Ready."
        )
    missing = st.expected_pods - len([p for p in st.pods if p.deleted is None])
    extra = f" {missing} expected pod(s) do not exist yet." if missing > 0 else ""
    return (
        f"{st.current_healthy} healthy of {st.desired_healthy} required leaves no disruption to spend.{extra}"
    )


# ---------------------------------------------------------------------------
# Remedies


def _remedies(
    ctx: RuleContext,
    cause: str,
    workload_ref: ObjectRef,
    workload: Any,
    pdbs: tuple[PodDisruptionBudget, ...],
    statuses: list[BudgetStatus],
    entries: list[_Blocked],
    pending: list[Pod],
    unready: list[Pod],
) -> list[Remedy]:
    out: list[Remedy] = []
    blocked = [e.pod for e in entries]
    if cause == "multiple-pdbs":
        out.extend(_drop_overlap(ctx, pdbs, blocked))
        return out
    pdb = pdbs[0]
    if pending:
        out.extend(_room_for_replacements(ctx, pdb, pending, blocked, {e.node for e in entries}))
    if unready and pdb.unhealthy_pod_eviction_policy != "AlwaysAllow":
        remedy = _always_allow(ctx, pdb, [p for p in blocked if not p.ready], unready)
        if remedy is not None:
            out.append(remedy)
    scaled = _scale_up(ctx, workload_ref, workload, pdb, blocked, pending)
    if scaled is not None:
        out.append(scaled)
    relaxed = _relaxed_budget(ctx, pdb, statuses[0], blocked, first_answer=not out)
    if relaxed is not None:
        out.append(relaxed)
    if cause in ("budget-uncomputable", "unmanaged-pods"):
        fixed = _countable_budget(ctx, pdb, statuses[0], blocked)
        if fixed is not None:
            out.append(fixed)
    return out


def _status(snap: ClusterSnapshot, pdb: PodDisruptionBudget) -> BudgetStatus:
    """budget_status, computed once per PDB and snapshot (what-if snapshots have their own
    cache), on the namespace's view (the same pods and controllers, without the rest of the
    cluster to scan)."""
    status: BudgetStatus = snap.derived(
        f"{RULE_ID}:status:{pdb.namespace}/{pdb.name}:{id(pdb)}",
        lambda: budget_status(_view(snap, (pdb,)), pdb),
    )
    return status


def _pdbs_for(snap: ClusterSnapshot, pod: Pod) -> tuple[PodDisruptionBudget, ...]:
    """pdbs_for_pod with the PDBs indexed by namespace once per snapshot (same order, same rule:
    a nil or empty selector matches nothing)."""

    def build() -> dict[str, tuple[PodDisruptionBudget, ...]]:
        out: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in snap.pdbs.values():
            if pdb.selector is not None and not pdb.selector.is_empty:
                out.setdefault(pdb.namespace, []).append(pdb)
        return {ns: tuple(items) for ns, items in out.items()}

    index: Mapping[str, tuple[PodDisruptionBudget, ...]] = snap.derived(f"{RULE_ID}:pdbs_by_namespace", build)
    return tuple(
        p for p in index.get(pod.namespace, ()) if p.selector is not None and p.selector.matches(pod.labels)
    )


def _eviction(snap: ClusterSnapshot, pod: Pod) -> EvictionVerdict:
    """analyzers.disruption.eviction_verdict with the PDB index and budget statuses computed
    once per snapshot instead of once per pod: a drain of many nodes asks for thousands of
    pods of a few budgets."""
    return eviction_verdict(snap, pod, pdbs_for=_pdbs_for, status_of=_status)


def _all_evictable(snap: ClusterSnapshot, pods: Sequence[Pod]) -> bool:
    return all(_eviction(snap, p).allowed for p in pods)


def _is_cordon_failure(failure: FilterFailure) -> bool:
    """NodeUnschedulable, or TaintToleration on the cordon's own taint (the node
    lifecycle controller adds node.kubernetes.io/unschedulable:NoSchedule)."""
    if failure.plugin == "NodeUnschedulable":
        return True
    taint = failure.detail.get("taint") if failure.detail else None
    return (
        failure.plugin == "TaintToleration"
        and isinstance(taint, Mapping)
        and taint.get("key") == _UNSCHEDULABLE_TAINT
    )


def _uncordoned(node: Node) -> Node:
    return replace(
        node, unschedulable=False, taints=tuple(t for t in node.taints if t.key != _UNSCHEDULABLE_TAINT)
    )


def _place(
    ctx: RuleContext, snap: ClusterSnapshot, pods: Sequence[Pod], prefer: str | None = None
) -> tuple[list[Pod], list[tuple[Pod, str]], list[Pod]]:
    """Schedule pods one after another in a what-if snapshot; returns them as Ready, running
    pods, where each went, and those that do not fit."""
    running: list[Pod] = []
    placed: list[tuple[Pod, str]] = []
    unplaced: list[Pod] = []
    for pod in pods[:_MAX_PLACEMENTS]:
        verdict = what_if_verdict(ctx, pod, snap)
        if not verdict.fits:
            unplaced.append(pod)
            continue
        if len(pods) == 1 and prefer is None:
            # One pod: where exactly does not matter to the budget; skip the per-node verdicts.
            bound = replace(
                pod, node_name="what-if", phase="Running", ready=True, scheduled=None, nominated_node=""
            )
            running.append(bound)
            placed.append((pod, plural(verdict.feasible_nodes, "feasible node")))
            continue
        fitting = [n.node for n in verdict.nodes if n.fits]
        node = prefer if prefer in fitting else fitting[0]
        bound = replace(pod, node_name=node, phase="Running", ready=True, scheduled=None, nominated_node="")
        if len(pods) > 1:
            snap = snap.replace(bound)
        running.append(bound)
        placed.append((pod, node))
    unplaced.extend(pods[_MAX_PLACEMENTS:])
    return running, placed, unplaced


def _view(snap: ClusterSnapshot, pdbs: Sequence[PodDisruptionBudget]) -> ClusterSnapshot:
    """Everything the PDB arithmetic and the eviction decision read for pods of these PDBs
    (one namespace): the PDBs, the pods they select and the namespace's controllers.
    budget_status and the eviction decision give the same answers on it as on the whole
    snapshot (they read nothing else), so what-if budgets are recomputed on this view:
    a change costs a copy of a few objects instead of a re-index of every pod. A snapshot
    without nodes is a view already (or tiny): it is its own view."""
    if not snap.nodes or not pdbs:
        return snap
    namespace = pdbs[0].namespace

    def build() -> ClusterSnapshot:
        pods: dict[tuple[str, str], Pod] = {}
        for pdb in pdbs:
            if pdb.selector is None:
                continue
            for pod in _candidates(snap, namespace, pdb.selector):
                if pdb.selector.matches(pod.labels):
                    pods[pod.key] = pod
        return ClusterSnapshot.from_records(
            [*pdbs, *pods.values(), *_controllers(snap, namespace)], kube_version=snap.kube_version
        )

    key = ",".join(f"{p.name}:{id(p)}" for p in sorted(pdbs, key=lambda p: p.name))
    view: ClusterSnapshot = snap.derived(f"{RULE_ID}:view:{namespace}:{key}", build)
    return view


def _candidates(snap: ClusterSnapshot, namespace: str, selector: LabelSelector) -> Sequence[Pod]:
    """The pods of the namespace that may match: the shortest posting list of the selector's
    matchLabels in a per-namespace label index, else every pod of the namespace."""
    if not selector.match_labels:
        return snap.pods_in_namespace(namespace)

    def build() -> dict[tuple[str, str], list[Pod]]:
        index: dict[tuple[str, str], list[Pod]] = {}
        for pod in snap.pods_in_namespace(namespace):
            for item in pod.labels.items():
                index.setdefault(item, []).append(pod)
        return index

    index: Mapping[tuple[str, str], list[Pod]] = snap.derived(f"{RULE_ID}:labels:{namespace}", build)
    return min((index.get(item, []) for item in selector.match_labels.items()), key=len)


def _controllers(snap: ClusterSnapshot, namespace: str) -> list[Any]:
    def build() -> list[Any]:
        return scale_sources(snap, namespace)

    found: list[Any] = snap.derived(f"{RULE_ID}:controllers:{namespace}", build)
    return found


def _needed(snap: ClusterSnapshot, pdb: PodDisruptionBudget, pending: list[Pod]) -> list[Pod]:
    """The Pending pods that must become Ready for the budget to allow one disruption
    (desiredHealthy - currentHealthy + 1), oldest first; all of them when that is more."""
    st = _status(snap, pdb)
    need = max(1, st.desired_healthy - st.current_healthy + 1)
    return pending[:need]


def _room_for_replacements(
    ctx: RuleContext,
    pdb: PodDisruptionBudget,
    pending: list[Pod],
    blocked: list[Pod],
    draining_nodes: set[str],
) -> list[Remedy]:
    snap = ctx.snapshot
    verdict = ctx.verdict(pending[0])
    # Cordoned nodes the pending pod fails *only* because they are cordoned; never
    # the nodes being drained right now (the pod would land where it must leave).
    candidates = [
        nv.node
        for nv in verdict.nodes
        if nv.filters
        and all(_is_cordon_failure(f) for f in nv.filters)
        and nv.node not in draining_nodes
        and snap.nodes[nv.node].unschedulable
    ]
    pending = _needed(snap, pdb, pending)
    out: list[Remedy] = []
    for name in candidates[:3]:
        what_if = snap.replace(_uncordoned(snap.nodes[name]))
        running, placed, unplaced = _place(ctx, what_if, pending, prefer=name)
        after = _view(snap, (pdb,)).replace(*running)
        if unplaced:
            continue
        ok = _all_evictable(after, blocked)
        st = _status(after, pdb)
        where = ", ".join(f"{p.name} on {n}" for p, n in placed)
        out.append(
            ctx.renderer.command(
                f"Make room for the replacement: uncordon {name} (if its maintenance is done), then let the drain continue",
                ObjectRef("Node", "", name),
                f"kubectl uncordon {name}",
                note=f"{name} is cordoned; the Pending replacement fits there. Re-cordon it later if it still needs work.",
                verified=ok,
                verification=(
                    f"re-simulated with {name} schedulable: {where}; with {'it' if len(placed) == 1 else 'them'} Ready, "
                    f"{pdb.name} counts {st.current_healthy} healthy ({st.desired_healthy} required) \u2192 "
                    f"disruptionsAllowed {st.disruptions_allowed}, and the eviction of {names(p.name for p in blocked)} "
                    + ("is allowed" if ok else "is still refused")
                ),
            )
        )
        if ok:
            break
    if not any(r.verified for r in out):
        capacity = _capacity(ctx, pdb, pending, blocked, verdict_nodes=[nv for nv in verdict.nodes])
        if capacity is not None:
            out.append(capacity)
    return out


def _capacity(
    ctx: RuleContext,
    pdb: PodDisruptionBudget,
    pending: list[Pod],
    blocked: list[Pod],
    verdict_nodes: list[Any],
) -> Remedy | None:
    """A node shaped like one the pod fails only for lack of resources."""
    snap = ctx.snapshot
    shapes = [
        nv.node
        for nv in verdict_nodes
        if nv.filters
        and all(f.plugin == "NodeResourcesFit" for f in nv.filters)
        and draining(snap.nodes[nv.node]) is None
    ]
    if not shapes:
        return None
    model = snap.nodes[shapes[0]]
    clone_name = f"{model.name}-whatif"
    clone = replace(
        model,
        name=clone_name,
        uid="",
        labels=FrozenMap({**model.labels, "kubernetes.io/hostname": clone_name}),
    )
    running, placed, unplaced = _place(
        ctx, snap.replace(clone), _needed(snap, pdb, pending), prefer=clone_name
    )
    ok = not unplaced and _all_evictable(_view(snap, (pdb,)).replace(*running), blocked)
    instance = model.labels.get("node.kubernetes.io/instance-type", "")
    return ctx.renderer.command(
        f"Or add a node like {model.name}{f' ({instance})' if instance else ''} to its node group",
        ObjectRef("Node", "", model.name),
        f"kubectl get node {model.name} -L node.kubernetes.io/instance-type,topology.kubernetes.io/zone",
        note=(
            f"Add one node of {model.name}'s type, zone and labels (node group / Karpenter NodePool / "
            "cluster-autoscaler max size); the replacement then schedules and the budget recovers."
        ),
        verified=ok,
        verification=(
            f"re-simulated with an empty copy of {model.name}: "
            + (
                f"{names(p.name for p, _ in placed)} fit{'s' if len(placed) == 1 else ''} there and the eviction of "
                f"{names(p.name for p in blocked)} is then allowed"
                if ok
                else "the replacement(s) would still not all fit, or the budget would still allow 0"
            )
        ),
    )


def _always_allow(
    ctx: RuleContext, pdb: PodDisruptionBudget, blocked_unready: list[Pod], unready: list[Pod]
) -> Remedy | None:
    if not blocked_unready:
        return None
    changed = replace(pdb, unhealthy_pod_eviction_policy="AlwaysAllow")
    after = _view(ctx.snapshot, (pdb,)).replace(changed)
    ok = _all_evictable(after, blocked_unready)
    note = _version_note(ctx.version)
    return ctx.renderer.patch(
        f"Let unready pods be evicted: unhealthyPodEvictionPolicy: AlwaysAllow on {pdb.name}",
        ObjectRef("PodDisruptionBudget", pdb.namespace, pdb.name),
        {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}},
        verified=ok,
        verification=(
            f"recomputed the eviction of {names(p.name for p in blocked_unready)} (not Ready) with AlwaysAllow: "
            + ("allowed" if ok else "still refused")
            + " (pkg/registry/core/pod/storage/eviction.go: an unready pod may always be evicted under AlwaysAllow); "
            "Ready pods still need a healthy budget" + note
        ),
    )


def _version_note(version: str | None) -> str:
    match = re.match(r"v?(\d+)\.(\d+)", version or "")
    if match is None:
        return ""
    major, minor = int(match.group(1)), int(match.group(2))
    if (major, minor) < (1, 26):
        return "; the field needs Kubernetes 1.26+ (this cluster is older, it will be ignored)"
    if (major, minor) < (1, 27):
        return "; on 1.26 the PDBUnhealthyPodEvictionPolicy feature gate must be enabled"
    return ""


def _relaxed_budget(
    ctx: RuleContext, pdb: PodDisruptionBudget, st: BudgetStatus, blocked: list[Pod], *, first_answer: bool
) -> Remedy | None:
    """The smallest maxUnavailable that lets the blocked pods go, recomputed."""
    if st.error is not None:
        return None
    snap = _view(ctx.snapshot, (pdb,))
    # maxUnavailable k leaves expected - k to keep healthy; allowed = healthy - (expected - k) >= 1
    # needs k >= expected - healthy + 1 (expected from the controllers' scale). Verified below.
    probe = replace(pdb, min_available=None, max_unavailable=1)
    scale = _status(snap.replace(probe), probe)
    if scale.error is not None:
        return None
    first = max(1, scale.expected_pods - scale.current_healthy + 1)
    for k in range(first, first + 3):
        changed = replace(pdb, min_available=None, max_unavailable=k)
        after = snap.replace(changed)
        if not _all_evictable(after, blocked):
            continue
        st2 = _status(after, changed)
        already = max(st.expected_pods - st.current_healthy, 0)
        if k == 1:
            title = f"Allow one voluntary disruption at a time: maxUnavailable: 1 on {pdb.name}"
            risk = ""
        else:
            title = (
                f"Temporarily allow {k} unavailable on {pdb.name} ({already} {are(already)} already down): "
                f"maxUnavailable: {k}"
            )
            risk = (
                f"; this accepts {max(st.expected_pods - k, 0)} of {st.expected_pods} pods during the drain \u2014 "
                "restore the budget afterwards"
            )
        if not first_answer and k > 1:
            title += " (if making room is not possible)"
        return ctx.renderer.patch(
            title,
            ObjectRef("PodDisruptionBudget", pdb.namespace, pdb.name),
            {"spec": {"minAvailable": None, "maxUnavailable": k}},
            verified=True,
            verification=(
                f"recomputed {pdb.name} with maxUnavailable {k}: {st2.expected_pods} expected \u2212 {k} = "
                f"{st2.desired_healthy} must stay healthy, {st2.current_healthy} {are(st2.current_healthy)} \u2192 disruptionsAllowed "
                f"{st2.disruptions_allowed}; the eviction of {names(p.name for p in blocked)} is allowed{risk}"
            ),
        )
    return None


def _scale_up(
    ctx: RuleContext,
    ref: ObjectRef,
    workload: Any,
    pdb: PodDisruptionBudget,
    blocked: list[Pod],
    pending: list[Pod],
) -> Remedy | None:
    """One more replica: verified when the new pod fits and, Ready, the budget then allows the evictions."""
    if not isinstance(workload, Deployment | StatefulSet) or pending:
        return None  # a new pod would wait exactly like the Pending ones
    template = next((p for p in ctx.snapshot.pods_of_workload(ref) if p.node_name and p.ready), None)
    if template is None:
        return None
    new = replace(
        template,
        name=f"{ref.name}-scale-up-whatif",
        uid="",
        spec=replace(template.spec, node_name=""),
        node_name="",
        phase="Pending",
        ready=False,
        scheduled=None,
        nominated_node="",
        created=ctx.now,
    )
    bigger = replace(workload, replicas=workload.replicas + 1)
    running, placed, unplaced = _place(ctx, ctx.snapshot, [new])
    if unplaced:
        return None
    after = _view(ctx.snapshot, (pdb,)).replace(bigger, *running)
    if not _all_evictable(after, blocked):
        return None
    st = _status(after, pdb)
    kind = "deployment" if isinstance(workload, Deployment) else "statefulset"
    return ctx.renderer.command(
        f"Scale {ref.name} to {workload.replicas + 1} replicas so one pod can be spared",
        ref,
        f"kubectl scale {kind}/{ref.name} -n {ref.namespace} --replicas={workload.replicas + 1}",
        note="A HorizontalPodAutoscaler, if any, owns replicas: raise its minReplicas instead.",
        verified=True,
        verification=(
            f"re-simulated one more pod: it fits ({placed[0][1]}); with it Ready {pdb.name} counts "
            f"{st.current_healthy} healthy ({st.desired_healthy} required) \u2192 disruptionsAllowed "
            f"{st.disruptions_allowed}, so the eviction of {names(p.name for p in blocked)} is allowed"
        ),
    )


def _drop_overlap(
    ctx: RuleContext, pdbs: tuple[PodDisruptionBudget, ...], blocked: list[Pod]
) -> list[Remedy]:
    snap = ctx.snapshot
    out = []
    for redundant in pdbs:
        keep = [p for p in pdbs if p.key != redundant.key]
        after = _view(snap, pdbs).replace(remove=[("pdbs", redundant.key)])
        ok = _all_evictable(after, blocked)
        still = [
            p.name for p in keep if all(any(q.key == p.key for q in _pdbs_for(after, b)) for b in blocked)
        ]
        out.append(
            ctx.renderer.command(
                f"Remove the overlap: delete the redundant PDB {redundant.name} ({', '.join(still) or 'the other'} "
                "still protects the pods)",
                ObjectRef("PodDisruptionBudget", redundant.namespace, redundant.name),
                f"kubectl delete pdb {redundant.name} -n {redundant.namespace}",
                note="Or narrow its selector so every pod is selected by exactly one PodDisruptionBudget.",
                verified=ok,
                verification=(
                    f"recomputed the evictions without {redundant.name}: "
                    + (
                        f"{names(p.name for p in blocked)} {are(len(blocked))} then allowed by {', '.join(still)}"
                        if ok
                        else "still refused by the remaining budget"
                    )
                ),
            )
        )
    out.sort(key=lambda r: not r.verified)
    return out


def _countable_budget(
    ctx: RuleContext, pdb: PodDisruptionBudget, st: BudgetStatus, blocked: list[Pod]
) -> Remedy | None:
    """An integer minAvailable counts the selected pods directly (no controller needed)."""
    live = [p for p in st.pods if p.deleted is None and not p.finished]
    target = len(live) - 1
    if target < 0:
        return None
    changed = replace(pdb, min_available=target, max_unavailable=None)
    after = _view(ctx.snapshot, (pdb,)).replace(changed)
    ok = _all_evictable(after, blocked)
    st2 = _status(after, changed)
    return ctx.renderer.patch(
        f"Use an integer minAvailable ({target}) that the controller can count without a pod controller",
        ObjectRef("PodDisruptionBudget", pdb.namespace, pdb.name),
        {"spec": {"maxUnavailable": None, "minAvailable": target}},
        verified=ok,
        verification=(
            f"recomputed {pdb.name} with minAvailable {target}: {st2.current_healthy} healthy \u2212 "
            f"{st2.desired_healthy} = disruptionsAllowed {st2.disruptions_allowed}; eviction of "
            f"{names(p.name for p in blocked)} " + ("allowed" if ok else "still refused")
        ),
    )
