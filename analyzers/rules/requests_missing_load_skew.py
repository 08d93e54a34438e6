"""requests-missing-load-skew: pods without (or with far too small) requests blind the scheduler.

kube-scheduler places pods by *requests*, never by real usage: NodeResourcesFit
filters on allocatable minus the sum of requests and scores with
LeastAllocated on the same sums (pkg/scheduler/framework/plugins/noderesources/
fit.go, least_allocated.go; for scoring a container without requests counts
as 100m cpu / 200Mi memory, pkg/scheduler/util/pod_resources.go
GetNonzeroRequests). A node whose heavy pods request nothing looks nearly
empty and keeps winning the score, so new pods pile onto the node that is
already the busiest (seed 003: Cassandra with no requests).

Fires when metrics.k8s.io shows a node's real usage of cpu or memory at or
above ``thresholds.hot_node_usage`` of allocatable while the requests on it
are at or below ``thresholds.low_requested_share``, and pods on that node use
more than they request (no request, or more than
``thresholds.under_request_factor`` times it) by at least
``thresholds.unrequested_share`` of the node. One finding per owning
workload of such pods. Without NodeMetrics and PodMetrics it says nothing.

The prediction: where the next 20 replicas of a new Deployment whose pods
request nothing would land (analyzers/simulator/scoring: filters, every score
plugin, each replica bound before the next; ties broken uniformly), today and
after the proposed requests; the evidence holds both distributions. Clusters
of more than PREDICT_MAX_NODES nodes are not predicted (said in the explanation).

Remedies: requests for the workload sized from the highest observed usage of
its pods plus ``thresholds.request_headroom`` (``kubectl set resources``;
without the headroom when that would not fit), verified by recomputing with
the new requests the hot nodes' requested share and LeastAllocated rank, by
re-predicting the next replicas' placement (verified only if fewer land on the
hot nodes), and
NodeResourcesFit (requested <= allocatable) on every node running the
workload's pods, the only filter a change of requests touches: the rollout's
re-created pods still fit where they run. And a namespace ``LimitRange``
default for containers that set none (unverified: it only affects pods
created afterwards).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from analyzers.capacity import node_capacities
from analyzers.findings import Finding, ObjectRef, Remedy, Severity
from analyzers.quantity import format_units
from analyzers.records import (
    Deployment,
    FrozenMap,
    LabelSelector,
    OwnerRef,
    Pod,
    PodSpec,
    ReplicaSet,
    StatefulSet,
)
from analyzers.rules._describe import are, names, plural
from analyzers.rules.context import RuleContext
from analyzers.snapshot import ClusterSnapshot

RULE_ID = "requests-missing-load-skew"

_RESOURCES = ("cpu", "memory")
# pkg/scheduler/util/pod_resources.go: DefaultMilliCPURequest, DefaultMemoryRequest.
_NONZERO = {"cpu": 100, "memory": 200 * 1024 * 1024}
# Pods named in the explanation (the biggest hidden users first).
_SHOWN_PODS = 5
# Rounding steps for proposed requests: 50m cpu, 64Mi memory.
_STEP = {"cpu": 50, "memory": 64 * 1024 * 1024}
# How many new request-less replicas the placement prediction follows.
PREDICTED_REPLICAS = 20
PROBE = "unstick-next-pods"
# Above this many nodes the prediction (20 sequential placements, twice) is left to
# `unstick place`: it would cost seconds per analysis pass (bench/bench_scoring.py).
PREDICT_MAX_NODES = 150


@dataclass(frozen=True, slots=True)
class _Hot:
    node: str
    resource: str
    allocatable: int
    usage: int
    requested: int

    @property
    def usage_share(self) -> float:
        return self.usage / self.allocatable

    @property
    def requested_share(self) -> float:
        return self.requested / self.allocatable


@dataclass(frozen=True, slots=True)
class _Hidden:
    """A pod whose usage the scheduler does not see."""

    pod: Pod
    resource: str
    usage: int
    request: int


def analyze(ctx: RuleContext) -> list[Finding]:
    snap = ctx.snapshot
    if not snap.node_metrics or not snap.pod_metrics:
        return []  # nothing to compare requests with: say nothing
    th = ctx.thresholds
    caps = node_capacities(snap)
    by_node = snap.pods_by_node()
    hot: list[_Hot] = []
    for name, metrics in sorted(snap.node_metrics.items()):
        cap = caps.get(name)
        if cap is None:
            continue
        for res in _RESOURCES:
            alloc = cap.allocatable(res)
            usage = metrics.usage.get(res)
            if alloc <= 0 or usage is None:
                continue
            requested = cap.requested.get(res, 0)
            if usage / alloc >= th.hot_node_usage and requested / alloc <= th.low_requested_share:
                hot.append(_Hot(name, res, alloc, usage, requested))
    if not hot:
        return []
    # Under-requested pods per (workload, hot node, resource): one big pod or many small
    # ones of a workload count when together they hide enough of the node's load.
    candidates: dict[tuple[ObjectRef, str, str], list[_Hidden]] = {}
    for h in hot:
        for pod in by_node.get(h.node, ()):
            pm = snap.pod_metrics.get(pod.key)
            if pm is None:
                continue
            usage = pm.usage.get(h.resource, 0)
            request = pod.spec.requests.get(h.resource, 0)
            if request == 0 or usage > th.under_request_factor * request:
                key = (snap.workload_of(pod).ref, h.node, h.resource)
                candidates.setdefault(key, []).append(_Hidden(pod, h.resource, usage, request))
    allocatable = {(h.node, h.resource): h.allocatable for h in hot}
    hidden: dict[ObjectRef, list[_Hidden]] = {}
    for (ref, node_name, res), items in candidates.items():
        unseen = sum(i.usage - i.request for i in items)
        if unseen >= th.unrequested_share * allocatable[(node_name, res)]:
            hidden.setdefault(ref, []).extend(items)
    findings = []
    for ref, items in sorted(hidden.items(), key=lambda kv: str(kv[0])):
        findings.append(_finding(ctx, ref, items, hot))
    return findings


def _finding(ctx: RuleContext, ref: ObjectRef, items: list[_Hidden], hot: list[_Hot]) -> Finding:
    snap = ctx.snapshot
    nodes = sorted({i.pod.node_name for i in items})
    resources = sorted({i.resource for i in items})
    hot_here = [h for h in hot if h.node in nodes]
    pods = sorted({i.pod.key for i in items})
    pod_names = [name for _, name in pods]
    workload_pods = [
        p for p in snap.pods_of_workload(ref) if p.node_name and not p.finished and p.deleted is None
    ]
    sized = _sized_requests(ctx, workload_pods, resources)

    usage_words = []
    for h in hot_here:
        usage_words.append(
            f"{h.node} uses {_q(h.resource, h.usage)} of {_q(h.resource, h.allocatable)} {h.resource} allocatable "
            f"({h.usage_share:.0%}) while the pods there request only {_q(h.resource, h.requested)} "
            f"({h.requested_share:.0%})"
        )
    per_pod: dict[str, list[_Hidden]] = {}
    for i in sorted(items, key=lambda i: (i.pod.name, i.resource)):
        per_pod.setdefault(i.pod.name, []).append(i)
    pod_words = []
    biggest = sorted(per_pod.items(), key=lambda kv: (-sum(i.usage - i.request for i in kv[1]), kv[0]))
    for name, rows in biggest[:_SHOWN_PODS]:
        used = " and ".join(f"{_q(i.resource, i.usage)} {i.resource}" for i in rows)
        if all(i.request == 0 for i in rows):
            asked = "requests nothing" if len(rows) == 1 else "requests neither"
        else:
            asked = "requests " + " and ".join(
                f"{_q(i.resource, i.request) if i.request else 'no'} {i.resource}" for i in rows
            )
        pod_words.append(f"{name} on {rows[0].pod.node_name} uses {used} and {asked}")
    if len(biggest) > _SHOWN_PODS:
        pod_words.append(f"and {len(biggest) - _SHOWN_PODS} more pod(s) like them")
    ranks = _rank_words(snap, nodes)
    kind_name = (
        f"{ref.kind} {ref.namespace}/{ref.name}" if ref.kind != "Pod" else f"Pod {ref.namespace}/{ref.name}"
    )
    explanation = (
        f"{kind_name} runs pods whose real usage kube-scheduler cannot see: {'; '.join(pod_words)}. "
        f"metrics.k8s.io shows {'; '.join(usage_words)}. kube-scheduler places pods by requests, not by real load: "
        "NodeResourcesFit filters on allocatable minus requested and scores with LeastAllocated on requests (a "
        "container without requests counts as 100m cpu / 200Mi there, pkg/scheduler/util/pod_resources.go), so "
        f"{names(nodes)} {are(len(nodes))} seen as among the emptiest nodes"
        + (f" ({ranks})" if ranks else "")
        + (
            " and keeps receiving new pods although it is the busiest."
            if len(nodes) == 1
            else " and keep receiving new pods although they are the busiest."
        )
    )
    hot_nodes = sorted({h.node for h in hot_here})
    before = predict_next(snap, ref.namespace)
    remedies, after, chosen = _remedies(ctx, ref, workload_pods, sized, hot_here, items, before)
    if before is None and len(snap.nodes) > PREDICT_MAX_NODES:
        explanation += (
            f" (Where the next pods would land is not predicted here for {len(snap.nodes)} nodes; "
            f"`unstick place` predicts it for a workload.)"
        )
    if before is not None:
        on_hot = _on(before[0], hot_nodes)
        explanation += (
            f" Predicted: {on_hot:g} of the next {PREDICTED_REPLICAS} pods without requests would land on "
            f"{names(hot_nodes)} ({_dist_words(before[0])})"
            + (
                f"; after the proposed requests {_on(after[0], hot_nodes):g} of {PREDICTED_REPLICAS}."
                if after is not None
                else "."
            )
        )
    evidence: dict[str, Any] = {
        "hot_nodes": [
            {
                "node": h.node,
                "resource": h.resource,
                "allocatable": _q(h.resource, h.allocatable),
                "usage": _q(h.resource, h.usage),
                "requested": _q(h.resource, h.requested),
                "usage_share": round(h.usage_share, 3),
                "requested_share": round(h.requested_share, 3),
                "usage_percent": int(f"{h.usage_share:.0%}"[:-1]),
                "requested_percent": int(f"{h.requested_share:.0%}"[:-1]),
            }
            for h in hot_here
        ],
        "pods": [
            {
                "pod": i.pod.name,
                "node": i.pod.node_name,
                "resource": i.resource,
                "usage": _q(i.resource, i.usage),
                "request": _q(i.resource, i.request),
            }
            for i in items
        ],
        # What the requests remedy proposes (without headroom when the headroom would not fit).
        "proposed_requests": {res: _q(res, v) for res, v in chosen.items()},
        "least_allocated_rank": _ranks(snap, nodes),
    }
    if before is not None:
        # Flat words first (a Slack message shows flat evidence), then the table.
        evidence["next_pods_on_hot_nodes"] = f"{_on(before[0], hot_nodes):g} of {PREDICTED_REPLICAS}" + (
            f" \u2192 {_on(after[0], hot_nodes):g} of {PREDICTED_REPLICAS} with the proposed requests"
            if after is not None
            else ""
        )
        evidence["next_pods_before"] = _dist_words(before[0])
        if after is not None:
            evidence["next_pods_after"] = _dist_words(after[0])
        evidence["predicted_placement"] = {
            "replicas": PREDICTED_REPLICAS,
            "hot_nodes": hot_nodes,
            "before": before[0],
            "after": after[0] if after is not None else None,
            "on_hot_nodes_before": _on(before[0], hot_nodes),
            "on_hot_nodes_after": _on(after[0], hot_nodes) if after is not None else None,
            "method": "exact" if before[1] and (after is None or after[1]) else "estimate",
            # Real CPU use (metrics.k8s.io) of the nodes the prediction names, beside the replicas.
            "cpu_use": _cpu_use(snap, sorted({*before[0], *(after[0] if after is not None else {})})),
        }
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARNING,
        subject=ref,
        title=(
            f"{ref.name} requests {'too little' if any(i.request for i in items) else 'no'} "
            f"{'/'.join(resources)}: the scheduler sees {names(nodes)} as nearly empty while "
            f"{'it runs' if len(nodes) == 1 else 'they run'} at "
            f"{max(h.usage_share for h in hot_here):.0%} real usage"
        ),
        explanation=explanation,
        evidence=evidence,
        remedies=tuple(remedies),
        cause="requests-below-usage",
        pods=tuple(f"{ns}/{name}" for ns, name in pods) if pod_names else (),
    )


def _cpu_use(snap: ClusterSnapshot, nodes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per node with NodeMetrics: its CPU use, allocatable and use as a percent of allocatable."""
    caps = node_capacities(snap)
    out: dict[str, dict[str, Any]] = {}
    for name in nodes:
        metrics, cap = snap.node_metrics.get(name), caps.get(name)
        if metrics is None or cap is None or "cpu" not in metrics.usage or cap.allocatable("cpu") <= 0:
            continue
        used, alloc = metrics.usage["cpu"], cap.allocatable("cpu")
        out[name] = {
            "usage": _q("cpu", used),
            "allocatable": _q("cpu", alloc),
            "percent": round(100 * used / alloc),
        }
    return out


def _q(resource: str, units: int) -> str:
    if units == 0:
        return "0"
    if resource == "cpu":
        return format_units("cpu", units)
    if resource == "memory":
        if units >= 2**30:
            return f"{units / 2**30:.1f}Gi"
        return f"{units / 2**20:.0f}Mi"
    return format_units(resource, units)


def _round_up(resource: str, value: float) -> int:
    step = _STEP.get(resource, 1)
    return int(math.ceil(value / step) * step)


def _sized_requests(ctx: RuleContext, pods: Sequence[Pod], resources: Sequence[str]) -> dict[str, int]:
    """The highest observed per-pod usage plus headroom, rounded up; for every resource
    the workload under-requests (never below what it requests today)."""
    snap = ctx.snapshot
    out: dict[str, int] = {}
    for res in _RESOURCES:
        usages = [m.usage.get(res, 0) for p in pods if (m := snap.pod_metrics.get(p.key)) is not None]
        if not usages:
            continue
        current = max((p.spec.requests.get(res, 0) for p in pods), default=0)
        peak = max(usages)
        if res not in resources and current and peak <= ctx.thresholds.under_request_factor * current:
            continue
        proposed = _round_up(res, peak * (1 + ctx.thresholds.request_headroom))
        if proposed > current:
            out[res] = proposed
    return out


def _scores(snap: ClusterSnapshot) -> dict[str, int]:
    """NodeResourcesFit's score (the default profile's LeastAllocated over cpu and memory,
    analyzers/simulator/scoring/fit.py) of each schedulable node for an incoming pod
    without requests (100m / 200Mi)."""
    from analyzers.simulator.nodeinfo import node_table
    from analyzers.simulator.scoring import score_pod
    from analyzers.simulator.scoring.profile import NODE_RESOURCES_FIT, Profile

    table = node_table(snap)
    nodes = [i for i, name in enumerate(table.names) if not snap.nodes[name].unschedulable]
    _, probe = _probe("default")
    phase = score_pod(snap, probe, nodes, Profile(score_plugins=((NODE_RESOURCES_FIT, 1),)))
    return {table.names[n]: phase.scores[0][k] for k, n in enumerate(phase.nodes)}


def _ranks(snap: ClusterSnapshot, nodes: Sequence[str]) -> dict[str, Any]:
    scores = _scores(snap)
    order = sorted(scores, key=lambda n: (-scores[n], n))
    return {
        n: {"score": scores[n], "rank": order.index(n) + 1, "of": len(order)} for n in nodes if n in scores
    }


def _rank_words(snap: ClusterSnapshot, nodes: Sequence[str]) -> str:
    ranks = _ranks(snap, nodes)
    if not ranks:
        return ""
    return "; ".join(
        f"{n} scores {r['score']} and ranks {_ordinal(r['rank'])} of {r['of']} nodes for a new pod by LeastAllocated"
        for n, r in ranks.items()
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _with_requests(pod: Pod, requests: Mapping[str, int]) -> Pod:
    merged = FrozenMap({**pod.spec.requests, **requests})
    without = pod.spec.containers_without_requests
    if {"cpu", "memory"} <= set(merged):
        without = 0
    nonzero = dict(pod.spec.nonzero_requests)
    if pod.spec.container_count <= 1:
        for res in _RESOURCES:
            if res in requests:
                nonzero[res] = requests[res]
    return replace(
        pod,
        spec=replace(
            pod.spec,
            requests=merged,
            containers_without_requests=without,
            nonzero_requests=FrozenMap(nonzero),
        ),
    )


Prediction = tuple[dict[str, float], bool]


def predict_next(snap: ClusterSnapshot, namespace: str) -> Prediction | None:
    """Where the next PREDICTED_REPLICAS pods of a new Deployment whose single
    container requests nothing would land: the expected replicas per node
    (ties broken uniformly) and whether that is exact. The probe's ReplicaSet is
    added to a what-if snapshot so the system default spread constraints see
    its replicas as kube-scheduler would. None when no node is feasible, or the
    cluster has more than PREDICT_MAX_NODES nodes (too slow for every pass)."""
    from analyzers.simulator.scoring.placement import place

    if len(snap.nodes) > PREDICT_MAX_NODES:
        return None
    rs, pod = _probe(namespace)
    result = place(snap.replace(rs), pod, PREDICTED_REPLICAS)
    if not result.distribution:
        return None
    return dict(result.distribution), result.exact


def _probe(namespace: str) -> tuple[ReplicaSet, Pod]:
    """A new ReplicaSet whose single container requests nothing, and its next pod."""
    labels = FrozenMap({"app": PROBE})
    spec = PodSpec(
        container_count=1,
        containers_without_requests=1,
        nonzero_requests=FrozenMap({res: _NONZERO[res] for res in _RESOURCES}),
    )
    rs = ReplicaSet(
        namespace=namespace,
        name=PROBE,
        uid=f"{PROBE}-rs",
        labels=labels,
        replicas=PREDICTED_REPLICAS,
        selector=LabelSelector(labels),
        template=spec,
        template_labels=labels,
    )
    pod = Pod(
        namespace=namespace,
        name=PROBE,
        uid=PROBE,
        labels=labels,
        spec=spec,
        owner=OwnerRef("ReplicaSet", PROBE, rs.uid, "apps/v1"),
    )
    return rs, pod


def _on(dist: Mapping[str, float], nodes: Sequence[str]) -> float:
    return round(sum(dist.get(n, 0.0) for n in nodes), 3)


def _dist_words(dist: Mapping[str, float]) -> str:
    return ", ".join(f"{n} {v:g}" for n, v in sorted(dist.items(), key=lambda kv: (-kv[1], kv[0])))


def _remedies(
    ctx: RuleContext,
    ref: ObjectRef,
    pods: Sequence[Pod],
    sized: dict[str, int],
    hot: Sequence[_Hot],
    items: Sequence[_Hidden],
    before: Prediction | None,
) -> tuple[list[Remedy], Prediction | None, dict[str, int]]:
    """The remedies, the re-predicted placement, and the requests the first remedy proposes
    (``sized`` when there is no requests remedy)."""
    out: list[Remedy] = []
    after: Prediction | None = None
    chosen = sized
    workload = ctx.snapshot.workload_of(pods[0]).record if pods else None
    if sized and isinstance(workload, Deployment | StatefulSet):
        remedy, after, chosen = _set_requests(ctx, ref, workload, pods, sized, hot, before)
        out.append(remedy)
    limit_range = _limit_range(ctx, ref, items)
    if limit_range is not None:
        out.append(limit_range)
    return out, after, chosen


def _set_requests(
    ctx: RuleContext,
    ref: ObjectRef,
    workload: Deployment | StatefulSet,
    pods: Sequence[Pod],
    sized: dict[str, int],
    hot: Sequence[_Hot],
    predicted: Prediction | None,
) -> tuple[Remedy, Prediction | None, dict[str, int]]:
    snap = ctx.snapshot
    kind = "deployment" if isinstance(workload, Deployment) else "statefulset"
    headroom = ctx.thresholds.request_headroom
    candidates = [("with headroom", sized)]
    exact = {res: _round_up(res, v / (1 + headroom)) for res, v in sized.items()}
    if exact != sized:
        candidates.append(("at observed usage, no headroom", exact))
    chosen, label, fits_text, ok_fit = sized, candidates[0][0], "", False
    rejected = ""
    for label_i, requests in candidates:
        ok_i, text_i = _still_fits(ctx, pods, requests)
        if ok_i:
            chosen, label, fits_text, ok_fit = requests, label_i, text_i, True
            break
        if not fits_text:
            fits_text = text_i
        if not rejected:
            shown = ", ".join(f"{format_units(r, v)} {r}" for r, v in sorted(requests.items()))
            rejected = f" With {headroom:.0%} headroom ({shown}) they would not fit: {text_i}."
    # The hot nodes' requested share and LeastAllocated rank with the new requests.
    delta = _delta(pods, chosen)
    share_words = []
    reflects = True
    for h in hot:
        after = h.requested + delta.get(h.node, {}).get(h.resource, 0)
        share = after / h.allocatable
        share_words.append(
            f"{h.node} {h.resource} requested {h.requested_share:.0%} \u2192 {share:.0%} (real usage {h.usage_share:.0%})"
        )
        if share < h.usage_share - 0.15:
            reflects = False
    nodes = sorted({h.node for h in hot})
    resized = snap.replace(*(_with_requests(p, chosen) for p in pods))
    before, after_ranks = _ranks(snap, nodes), _ranks(resized, nodes)
    rank_words = "; ".join(
        f"{n} LeastAllocated rank {before[n]['rank']} \u2192 {after_ranks[n]['rank']} of {after_ranks[n]['of']}"
        for n in nodes
        if n in before and n in after_ranks
    )
    request_arg = ",".join(f"{res}={format_units(res, v)}" for res, v in sorted(chosen.items()))
    multi = max((p.spec.container_count for p in pods), default=1) > 1
    command = f"kubectl set resources {kind}/{ref.name} -n {ref.namespace} --requests={request_arg}"
    note = (
        f"Sized from the highest observed usage of {ref.name}'s pods ({label}).{rejected if ok_fit else ''} "
        + (
            "The pods run several containers and metrics are summed per pod: split these requests across the "
            "containers with -c <container> instead of giving each the total."
            if multi
            else f"Changing the pod template rolls the {kind}'s pods."
        )
    )
    repredicted: Prediction | None = None
    placement_words = ""
    improves = True
    if predicted is not None:
        repredicted = predict_next(resized, ref.namespace)
        if repredicted is not None:
            b, a = _on(predicted[0], nodes), _on(repredicted[0], nodes)
            improves = a < b
            placement_words = (
                f"; re-predicted placement of the next {PREDICTED_REPLICAS} pods without requests: "
                f"{b:g} \u2192 {a:g} on {names(nodes)}"
                + ("" if improves else " (no improvement)")
            )
    verified = ok_fit and reflects and not multi and improves
    verification = (
        "recomputed with the new requests: "
        + "; ".join(share_words)
        + (f"; {rank_words}" if rank_words else "")
        + placement_words
        + f"; {fits_text}"
        + ("" if reflects else "; the requested share still lags real usage")
        + ("; not verified per container (several containers per pod)" if multi else "")
    )
    return ctx.renderer.command(
        f"Give {ref.name} requests that match its real usage: {request_arg.replace(',', ', ')}",
        ref,
        command,
        note=note,
        verified=verified,
        verification=verification,
    ), repredicted, chosen


def _delta(pods: Sequence[Pod], requests: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Per node, how much the requests grow."""
    out: dict[str, dict[str, int]] = {}
    for pod in pods:
        resized = _with_requests(pod, requests)
        row = out.setdefault(pod.node_name, {})
        for res in _RESOURCES:
            row[res] = row.get(res, 0) + resized.spec.requests.get(res, 0) - pod.spec.requests.get(res, 0)
    return out


def _still_fits(ctx: RuleContext, pods: Sequence[Pod], requests: Mapping[str, int]) -> tuple[bool, str]:
    """NodeResourcesFit recomputed for every node running the workload's pods with the new
    requests (requested + growth <= allocatable, fit.go fitsRequest): the only filter a change
    of requests touches, so every pod the rollout re-creates still fits where it runs."""
    caps = node_capacities(ctx.snapshot)
    rows = []
    for node, delta in sorted(_delta(pods, requests).items()):
        cap = caps.get(node)
        if cap is None:
            continue
        for res in _RESOURCES:
            if not delta.get(res):
                continue
            after = cap.requested.get(res, 0) + delta[res]
            alloc = cap.allocatable(res)
            if after > alloc:
                return (
                    False,
                    f"recomputed NodeResourcesFit: {node} would have {_q(res, after)} {res} requested of "
                    f"{_q(res, alloc)} allocatable, so a re-created pod would not fit there",
                )
            rows.append(f"{node} {_q(res, after)}/{_q(res, alloc)} {res}")
    return True, f"recomputed NodeResourcesFit: every pod still fits where it runs ({'; '.join(rows)})"


def _limit_range(ctx: RuleContext, ref: ObjectRef, items: Sequence[_Hidden]) -> Remedy | None:
    """A safety net for the namespace: a default request for every container that sets
    none, so no pod is invisible to the scheduler again. Sized from the median
    per-container usage of the *other* request-less pods of the namespace (the
    workload above gets its own requests), at least 100m / 128Mi."""
    snap = ctx.snapshot
    namespace = ref.namespace
    requestless = [
        p
        for p in snap.pods_in_namespace(namespace)
        if p.node_name and not p.finished and p.spec.containers_without_requests
    ]
    if not requestless:
        return None
    others = [p for p in requestless if snap.workload_of(p).ref != ref]
    defaults: dict[str, str] = {}
    for res, floor in (("cpu", 100), ("memory", 128 * 2**20)):
        usages = sorted(
            m.usage.get(res, 0) / max(p.spec.container_count, 1)
            for p in others
            if (m := snap.pod_metrics.get(p.key)) is not None
        )
        value = usages[len(usages) // 2] if usages else 0
        defaults[res] = format_units(res, max(floor, _round_up(res, value)))
    return ctx.renderer.manifest(
        f"Default requests for every container in namespace {namespace} that sets none (LimitRange)",
        ObjectRef("LimitRange", namespace, "default-requests"),
        "limitrange.yaml.j2",
        verified=False,
        verification=(
            "not re-simulated: a LimitRange only fills in requests of pods created after it "
            f"({plural(len(requestless), 'running pod')} in {namespace} without requests keep none until "
            "re-created); the defaults are a floor (the median per-container usage of the other request-less "
            f"pods, at least 100m / 128Mi), not a sizing: {ref.name} still needs its own requests"
        ),
        name="default-requests",
        namespace=namespace,
        default_request=defaults,
        default_limit={},
    )
