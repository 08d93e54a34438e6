"""Shared machinery of the five placement rules (node-selector-mismatch,
untolerated-taint, insufficient-resources, anti-affinity-infeasible,
topology-spread-infeasible). Not a rule (no ``RULE_ID``).

**One root cause per pod.** kube-scheduler reports, per node, the first filter
that rejected it; a pod stuck on a full cluster whose control-plane node also
has room shows both ``Insufficient cpu`` and ``untolerated taint``. The
simulator keeps *every* failing filter per node, so :func:`root_cause` can ask
the question an SRE would: which single constraint stands between the pod and
a node?

1. no node passes NodeAffinity (or its PreFilter finds the ``matchFields``
   terms conflict) → ``node-selector``;
2. a node otherwise open to the pod (its taints pass, it has room) is refused
   by a DoNotSchedule spread constraint alone → ``spread``: the constraint
   confines the pod to domains that cannot take it;
3. among the nodes that pass node affinity *and* taints/cordon ("eligible"),
   one fails only NodeResourcesFit with a request the node could hold once
   pods leave → ``resources`` (capacity is the problem) -- unless one of the
   pod's required constraints confines it (below);
4. … one fails only InterPodAffinity → ``interpod``;
5. a node passing node affinity fails only on taints or cordon → ``taint``
   (the only nodes that would fit are tainted);
6. eligible nodes fail only NodeResourcesFit with requests beyond their
   allocatable → ``resources`` (never fits), unless confined;
7. otherwise, by what every eligible node fails: spread, inter-pod affinity,
   resources (unless confined); nothing eligible at all → ``taint``.

**Confinement** (:func:`confining`): a full node counts toward "insufficient
resources" only if the pod could otherwise use it, and "the cluster is full"
is not the story while nodes with room are refused by nothing but one of the
pod's own required constraints (DoNotSchedule spread, required pod
(anti-)affinity, node affinity/selector): that constraint is the root cause,
and its rule explains where it confines the pod (:func:`confinement`) and
offers to relax it or make room where it points. A node selector confines only
among nodes of the pod's platform (``kubernetes.io/os`` and ``/arch``).

Ports, volumes, gates and PreFilter volume failures belong to other rules.

**The pod as its controller would create it now.** When a Deployment's pod
template was changed after its ReplicaSet made the pending pod (the template in
the dump differs from the ReplicaSet's), the next pod comes from the new
template: the rules judge that pod (the difference between the two templates
applied to the pending pod, so admission-injected tolerations and sidecar
requests stay). A patch remedy therefore cures the finding once applied.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, TypeVar

from analyzers.findings import ObjectRef, Remedy, RemedyKind, Severity
from analyzers.quantity import format_units
from analyzers.records import (
    DaemonSet,
    Deployment,
    Event,
    FrozenMap,
    Job,
    LabelSelector,
    Node,
    NodeSelector,
    Pod,
    PodAffinityTerm,
    PodSpec,
    ReplicaSet,
    Requirement,
    StatefulSet,
    Toleration,
    TopologySpreadConstraint,
)
from analyzers.rules._describe import names
from analyzers.rules.context import RuleContext
from analyzers.simulator import NodeVerdict, PodVerdict, node_table, simulate
from analyzers.simulator import codes as C
from analyzers.simulator.dra import claim_hold
from analyzers.simulator.interpod import existing_term_matches
from analyzers.simulator.nodeinfo import NodeTable, bits, mask_of
from analyzers.simulator.resources import checked_requests
from analyzers.snapshot import KIND_COLLECTIONS, ClusterSnapshot, Workload

T = TypeVar("T")

SELECTOR = "node-selector"
TAINT = "taint"
RESOURCES = "resources"
SPREAD = "spread"
INTERPOD = "interpod"
DRA = "dra"  # DynamicResources: no devices for the pod's claims (rules/dra_devices_unavailable.py)

_AFFINITY_PLUGINS = frozenset({C.NODE_AFFINITY, C.NODE_NAME})
_TAINT_PLUGINS = frozenset({C.TAINT_TOLERATION, C.NODE_UNSCHEDULABLE_PLUGIN})

# Added to every pod by the DefaultTolerationSeconds admission plugin
# (plugin/pkg/admission/defaulttolerationseconds/admission.go) when absent.
ADMISSION_TOLERATION_KEYS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})

# Fields of a pod template that decide placement (compared between templates).
_PLACEMENT_FIELDS = (
    "node_selector",
    "required_node_affinity",
    "pod_affinity",
    "pod_anti_affinity",
    "preferred_pod_anti_affinity",
    "topology_spread",
    "host_ports",
)


# ---------------------------------------------------------------------------
# Root cause of one verdict


class NodeViews:
    """The nodes of one verdict grouped by the set of plugins that reject them, as bit
    sets over the simulator's node order (``PodVerdict.failing``), computed once per
    verdict without building 5,000 per-node verdicts: ``matches`` are the nodes that
    pass node affinity/selector, ``usable`` those of them whose taints and cordon let
    the pod in. :meth:`node` builds one node's full verdict when its reasons are read."""

    __slots__ = ("_index", "all", "matches", "names", "parts", "usable", "verdict")

    def __init__(self, verdict: PodVerdict) -> None:
        self.verdict = verdict
        self.names = verdict.node_names
        self.all = (1 << len(self.names)) - 1
        parts: dict[frozenset[str], int] = {frozenset(): self.all} if self.names else {}
        affinity = taints = 0
        for plugin, mask in verdict.failing.items():
            split: dict[frozenset[str], int] = {}
            for plugins, m in parts.items():
                if m & mask:
                    key = plugins | {plugin}
                    split[key] = split.get(key, 0) | (m & mask)
                if m & ~mask:
                    split[plugins] = split.get(plugins, 0) | (m & ~mask)
            parts = split
            if plugin in _AFFINITY_PLUGINS:
                affinity |= mask
            if plugin in _TAINT_PLUGINS:
                taints |= mask
        self.parts = parts
        self.matches = self.all & ~affinity
        self.usable = self.matches & ~taints
        self._index: dict[str, int] | None = None

    def where(self, test: Callable[[frozenset[str]], bool], within: int = -1) -> int:
        """Nodes (of ``within``) whose set of rejecting plugins passes ``test``."""
        m = 0
        for plugins, mask in self.parts.items():
            if test(plugins):
                m |= mask
        return m & within

    def plugin_sets(self, within: int) -> set[frozenset[str]]:
        """The distinct sets of rejecting plugins among the nodes of ``within``."""
        return {plugins for plugins, mask in self.parts.items() if mask & within}

    def plugins(self, i: int) -> frozenset[str]:
        for plugins, mask in self.parts.items():
            if (mask >> i) & 1:
                return plugins
        return frozenset()

    def index(self, name: str) -> int | None:
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self.names)}
        return self._index.get(name)

    def indices(self, mask: int) -> list[int]:
        return bits(mask)

    def names_of(self, mask: int) -> list[str]:
        return [self.names[i] for i in bits(mask)]

    def node(self, i: int) -> NodeVerdict:
        return self.verdict.node_at(i)


def resource_rows(nv: NodeVerdict) -> list[Mapping[str, Any]]:
    for f in nv.filters:
        if f.plugin == C.NODE_RESOURCES_FIT:
            rows = f.detail.get("resources") if f.detail else None
            if isinstance(rows, tuple | list):
                return [r for r in rows if isinstance(r, Mapping)]
    return []


def allocatable_mask(table: NodeTable, pod: Pod) -> int:
    """Nodes whose allocatable could hold every request of ``pod`` once other pods leave."""
    m = table.all_mask & ~mask_of([i for i, a in enumerate(table.allowed_pods) if a < 1], table.size)
    for r, q in checked_requests(pod):
        col = table.allocatable.get(r)
        if col is None:
            return 0
        m &= ~mask_of([i for i, a in enumerate(col) if a < q], table.size)
    return m


def root_cause(
    verdict: PodVerdict,
    views: NodeViews | None = None,
    table: NodeTable | None = None,
    pod: Pod | None = None,
) -> str | None:
    """The one constraint family that keeps the pod off every node (module docstring).
    ``table`` and ``pod`` are the node table and pod of the verdict (needed to tell a
    node the pod could fit once pods leave)."""
    if verdict.fits or verdict.gated is not None:
        return None
    if verdict.prefilter is not None:
        if verdict.prefilter.plugin == C.DYNAMIC_RESOURCES:
            return DRA
        return SELECTOR if verdict.prefilter.plugin == C.NODE_AFFINITY else None
    if views is None:
        views = NodeViews(verdict)
    if not views.matches:
        return SELECTOR if views.names else None
    only = views.plugin_sets(views.usable)
    confined = confining(views, table)
    if confined == SPREAD:
        return SPREAD
    resources_only = views.where(lambda p: p == {C.NODE_RESOURCES_FIT}, views.usable)
    if resources_only:
        if table is None or pod is None:
            curable = any(_rows_fit(resource_rows(views.node(i))) for i in views.indices(resources_only))
        else:
            curable = bool(resources_only & allocatable_mask(table, pod))
        if curable:
            return confined or RESOURCES
    if {C.INTER_POD_AFFINITY} in only:
        return INTERPOD
    if {C.DYNAMIC_RESOURCES} in only:
        return DRA
    if views.where(lambda p: p <= _TAINT_PLUGINS, views.matches):
        return TAINT
    if {C.NODE_RESOURCES_FIT} in only:
        return confined or RESOURCES
    if not views.usable:
        return TAINT
    if any(C.POD_TOPOLOGY_SPREAD in p for p in only):
        return SPREAD
    if any(C.INTER_POD_AFFINITY in p for p in only):
        return INTERPOD
    if all(C.NODE_RESOURCES_FIT in p for p in only):
        return confined or RESOURCES
    return None


# The pod's own required constraints, by the root cause that names them, in the
# order they are asked (spread first: it also confines to tainted domains).
CONFINING_PLUGINS: Mapping[str, str] = MappingProxyType(
    {SPREAD: C.POD_TOPOLOGY_SPREAD, INTERPOD: C.INTER_POD_AFFINITY, SELECTOR: C.NODE_AFFINITY}
)
_PLATFORM_KEYS = ("kubernetes.io/os", "kubernetes.io/arch")


def room_refused_by(views: NodeViews, root: str, table: NodeTable | None = None) -> int:
    """Nodes otherwise open to the pod (taints pass, room for it) that the required
    constraint of ``root`` alone refuses. For the node selector, only nodes of a
    platform (os, arch) some matching node has: a Windows node with room does not
    make a Linux pod's selector the story."""
    plugin = CONFINING_PLUGINS[root]
    room = views.where(lambda p: p == {plugin})
    if root == SELECTOR and room and table is not None and views.matches:
        for key in _PLATFORM_KEYS:
            values = table.label_index.get(key)
            if not values:
                continue
            same = 0
            for m in values.values():
                if m & views.matches:
                    same |= m
            missing = table.all_mask & ~table.key_mask.get(key, 0)
            if missing & views.matches:
                same |= missing
            room &= same
    return room


def confining(views: NodeViews, table: NodeTable | None = None) -> str | None:
    """The root cause of the pod's required constraint that confines it: the first
    of CONFINING_PLUGINS refusing, alone, a node otherwise open to the pod."""
    if not views.matches:
        return None
    for root in CONFINING_PLUGINS:
        if room_refused_by(views, root, table):
            return root
    return None


@dataclass(frozen=True, slots=True)
class Confinement:
    """Where one of the pod's required constraints lets it go, and why none of that
    takes it: ``allowed`` maps each usable node the constraint admits to the first
    reason another filter refuses it; ``room`` are the nodes the constraint alone
    keeps the pod off."""

    plugin: str
    allowed: Mapping[str, str]
    room: tuple[str, ...]

    def words(self, what: str, where: str) -> str:
        """``what`` names the constraint (a sentence may begin with it), ``where`` the
        nodes or domains it admits."""
        if not self.room:
            return ""
        shown = sorted(self.allowed.items())
        why = "; ".join(f"{n}: {r}" for n, r in shown[:4]) + (
            f"; {len(shown) - 4} more" if len(shown) > 4 else ""
        )
        none = "which cannot take it" if len(shown) == 1 else "where no node can take it"
        lead = (
            f"{what[0].upper()}{what[1:]} confines the pod to {where}, {none} ({why})"
            if shown
            else f"{what[0].upper()}{what[1:]} admits no node that passes its other filters"
        )
        one = len(self.room) == 1
        return (
            f"{lead}; {names(list(self.room), 4)} {'has' if one else 'have'} room for it, "
            f"but {what} keeps the pod off {'it' if one else 'them'}."
        )

    def evidence(self) -> dict[str, Any]:
        return {
            "confining_plugin": self.plugin,
            "admitted_nodes_refused": dict(sorted(self.allowed.items())),
            "nodes_with_room_refused_only_by_it": list(self.room),
            "nodes_with_room_refused_only_by_it_count": len(self.room),
        }


def room_like(ctx: RuleContext, group: Blocked, template: Node, where: str, note: str) -> Remedy:
    """Capacity where a constraint points: a new empty, untainted node shaped like
    ``template`` (its labels, so its domain), verified by re-simulating the pod."""
    name = synthetic_name(template.name)
    synthetic = replace(synthetic_node(template, name), taints=())
    verdict = what_if_nodes(ctx, group.pod, synthetic)
    return ctx.renderer.command(
        f"Add a schedulable node in {where}",
        None,
        f"# add a node in {where} that the pod may use (node group of that domain, Karpenter NodePool, or IaC)",
        note=note,
        verified=fits(verdict),
        verification=f"re-simulated with a synthetic empty node {name} shaped like {template.name} "
        f"({where}, no taints): {outcome(verdict)}",
    )


def other_reason(views: NodeViews, i: int, plugin: str) -> str | None:
    """The first reason a filter other than ``plugin`` refuses node ``i`` with, or None."""
    if not (views.plugins(i) - {plugin}):
        return None
    for f in views.node(i).filters:
        if f.plugin != plugin:
            return "; ".join(f.reasons)
    return None


def confinement(views: NodeViews, root: str, allowed: int, table: NodeTable | None = None) -> Confinement:
    """The confinement of the pod by ``root``'s constraint, which admits the usable
    nodes of ``allowed``."""
    plugin = CONFINING_PLUGINS[root]
    refused: dict[str, str] = {}
    for i in views.indices(allowed & views.usable):
        reason = other_reason(views, i, plugin)
        if reason is not None:
            refused[views.names[i]] = reason
    return Confinement(
        plugin, MappingProxyType(refused), tuple(views.names_of(room_refused_by(views, root, table)))
    )


def _rows_fit(rows: list[Mapping[str, Any]]) -> bool:
    return bool(rows) and all(int(r.get("requested", 0)) <= int(r.get("allocatable", 0)) for r in rows)


# ---------------------------------------------------------------------------
# Pending pods of a workload, judged as the controller would create them now


@dataclass(frozen=True, slots=True)
class Blocked:
    """Pending pods of one workload that share a template, with their root cause.

    ``pod`` is the pod as the controller would create it now (``drifted`` when
    that differs from the pending pods' own spec); ``verdict`` is its verdict."""

    ref: ObjectRef
    workload: Workload
    pods: tuple[Pod, ...]
    pod: Pod
    verdict: PodVerdict
    root: str
    drifted: bool
    views: NodeViews

    @property
    def pod_names(self) -> tuple[str, ...]:
        return tuple(f"{p.namespace}/{p.name}" for p in self.pods)

    @property
    def template(self) -> PodSpec | None:
        return template_of(self.workload)


def blocked(ctx: RuleContext, root: str) -> list[Blocked]:
    """Every pending template whose root cause is ``root`` (classified once per snapshot)."""
    key = f"rules.placement.blocked:{ctx.version}"
    found: list[Blocked] = ctx.snapshot.derived(key, lambda: _classify(ctx))
    return [b for b in found if b.root == root]


def _classify(ctx: RuleContext) -> list[Blocked]:
    snap = ctx.snapshot
    out: list[Blocked] = []
    # Pods of one spec, labels and namespace get one verdict (bare pods of one
    # manifest, pods of one template across owners): the per-node detail is costly.
    shared: dict[tuple[Any, ...], tuple[PodVerdict, NodeViews, str | None]] = {}
    table = node_table(snap)
    for ref, pods in ctx.pending_by_workload().items():
        workload = snap.workload_of(pods[0])
        for rep in ctx.representative(pods):
            if rep.spec.scheduling_gates:
                continue  # scheduling-gated owns these
            if rep.spec.resource_claims and claim_hold(snap, rep) is not None:
                continue  # never tried: DynamicResources' PreEnqueue holds it (scheduler-silent)
            members = tuple(p for p in pods if p.spec is rep.spec and p.labels is rep.labels)
            pod, drifted = as_created_now(snap, rep, workload)
            key = (pod.namespace, pod.spec, pod.labels, pod.nominated_node)
            entry = shared.get(key)
            if entry is None:
                verdict = simulate(snap, pod, kube_version=ctx.version) if drifted else ctx.verdict(rep)
                views = NodeViews(verdict)
                if verdict.fits or verdict.gated is not None:
                    entry = (verdict, views, None)
                else:
                    entry = (verdict, views, root_cause(verdict, views, table, pod))
                shared[key] = entry
            verdict, views, root = entry
            if root is not None:
                out.append(Blocked(ref, workload, members, pod, verdict, root, drifted, views))
    return out


def template_of(workload: Workload) -> PodSpec | None:
    rec = workload.record
    if isinstance(rec, Deployment | StatefulSet | DaemonSet | Job | ReplicaSet):
        return rec.template
    return None


def as_created_now(snap: ClusterSnapshot, pod: Pod, workload: Workload) -> tuple[Pod, bool]:
    """The pod its Deployment would create now: the change between the pod's
    ReplicaSet template and the Deployment's template, applied to the pod."""
    dep = workload.record
    if not isinstance(dep, Deployment) or pod.owner is None or pod.owner.kind != "ReplicaSet":
        return pod, False
    rs = snap.replicasets.get((pod.namespace, pod.owner.name))
    if rs is None or rs.template is dep.template or rs.template == dep.template:
        return pod, False
    base, target, spec = rs.template, dep.template, pod.spec
    changes: dict[str, Any] = {}
    for name in _PLACEMENT_FIELDS:
        if getattr(base, name) != getattr(target, name):
            changes[name] = getattr(target, name)
    if set(base.tolerations) != set(target.tolerations):
        injected = tuple(
            t for t in spec.tolerations if t not in base.tolerations and t not in target.tolerations
        )
        changes["tolerations"] = tuple(target.tolerations) + injected
    if base.requests != target.requests:
        merged = dict(spec.requests)
        for res in set(base.requests) | set(target.requests):
            value = merged.get(res, 0) + target.requests.get(res, 0) - base.requests.get(res, 0)
            if value > 0:
                merged[res] = value
            else:
                merged.pop(res, None)
        changes["requests"] = FrozenMap(merged)
    if not changes:
        return pod, False
    return replace(pod, spec=replace(spec, **changes)), True


# ---------------------------------------------------------------------------
# What-if simulation


def with_spec(pod: Pod, **changes: Any) -> Pod:
    return replace(pod, spec=replace(pod.spec, **changes))


# Re-simulating a changed cluster (pods moved or changed, or a node changed for a
# pod whose filters look beyond that node) rebuilds the node table, at a cost that
# grows with the number of pods (about a second at 150,000). An analysis spends at
# most this many pod-visits on such rebuilds -- every one on a small cluster, a
# few on a very large one -- and reports the remedies it could not check as
# unverified. Rules whose main remedies do not need them may use only part of it.
FULL_RESIMULATION_POD_BUDGET = 400_000
NOT_RESIMULATED = (
    "not re-simulated: on a cluster this size the analysis spends a bounded budget on full-cluster "
    "re-simulations, and it went to other findings"
)


def _memo(ctx: RuleContext) -> dict[Any, Any]:
    memo: dict[Any, Any] = ctx.snapshot.derived(f"rules.placement.whatif:{ctx.version}", dict)
    return memo


def what_if(ctx: RuleContext, pod: Pod) -> PodVerdict:
    """The verdict of a changed pod (its spec or labels) in the unchanged cluster (memoised)."""
    memo = _memo(ctx)
    key = ("pod", pod.namespace, pod.spec, pod.labels, pod.nominated_node)
    found: PodVerdict | None = memo.get(key)
    if found is None:
        found = memo[key] = simulate(ctx.snapshot, pod, kube_version=ctx.version)
    return found


def what_if_nodes(ctx: RuleContext, pod: Pod, *nodes: Node, share: float = 1.0) -> PodVerdict | None:
    """The pod's verdict with some nodes changed or added, everything else as is.

    When the pod's filters on a node depend on that node alone (no required pod
    affinity or anti-affinity, no DoNotSchedule spread, no existing pod's
    anti-affinity matching it), the changed nodes are simulated by themselves
    with their pods: the other nodes rejected the pod before and still do, so
    the pod fits the changed cluster exactly when it fits one of these. Otherwise
    the whole changed cluster is re-simulated (budgeted, see what_if_cluster)."""
    memo = _memo(ctx)
    key = ("nodes", pod.namespace, pod.spec, pod.labels, nodes)
    if key in memo:
        found: PodVerdict | None = memo[key]
        return found
    snap = ctx.snapshot
    if _isolated(ctx, pod):
        memo[key] = simulate(_only_nodes(snap, nodes), pod, kube_version=ctx.version)
    else:
        memo[key] = what_if_cluster(ctx, pod, ("nodes", nodes), lambda: snap.replace(*nodes), share=share)
    result: PodVerdict | None = memo[key]
    return result


def what_if_cluster(
    ctx: RuleContext, pod: Pod, change: Any, build: Callable[[], ClusterSnapshot], *, share: float = 1.0
) -> PodVerdict | None:
    """The pod's verdict in a changed cluster (``change`` identifies the change); None
    when this would take the analysis past ``share`` of FULL_RESIMULATION_POD_BUDGET."""
    memo = _memo(ctx)
    key = ("cluster", pod.namespace, pod.spec, pod.labels, change)
    if key in memo:
        found: PodVerdict | None = memo[key]
        return found
    spent = memo.get("spent", 0)
    cost = max(len(ctx.snapshot.pods), 1)
    if spent + cost > FULL_RESIMULATION_POD_BUDGET * share:
        return None
    memo["spent"] = spent + cost
    memo[key] = simulate(build(), pod, kube_version=ctx.version)
    result: PodVerdict | None = memo[key]
    return result


def _isolated(ctx: RuleContext, pod: Pod) -> bool:
    spec = pod.spec
    if spec.pod_affinity or spec.pod_anti_affinity:
        return False
    if any(c.when_unsatisfiable == "DoNotSchedule" for c in spec.topology_spread):
        return False
    ns = ctx.snapshot.namespaces.get(pod.namespace)
    ns_labels: Mapping[str, str] = ns.labels if ns is not None else {}
    for group in node_table(ctx.snapshot).anti_affinity_groups:
        for term in group.terms:
            if existing_term_matches(term, group.namespace, pod, ns_labels):
                return False
    return True


def _only_nodes(snap: ClusterSnapshot, nodes: Sequence[Node]) -> ClusterSnapshot:
    by_node = snap.pods_by_node()
    collections: dict[str, Mapping[Any, Any]] = {
        name: getattr(snap, name) for name in KIND_COLLECTIONS.values()
    }
    collections["nodes"] = MappingProxyType({n.name: n for n in nodes})
    collections["pods"] = MappingProxyType({p.key: p for n in nodes for p in by_node.get(n.name, ())})
    return ClusterSnapshot(
        collections, kube_version=snap.kube_version, collected=snap.collected, uncollected=snap.uncollected
    )


def fits(verdict: PodVerdict | None) -> bool:
    return verdict is not None and verdict.fits


def fitting_nodes(verdict: PodVerdict) -> list[str]:
    return [nv.node for nv in verdict.nodes if nv.fits]


def outcome(verdict: PodVerdict | None) -> str:
    """``it fits on a, b and 2 more`` or ``still unschedulable: 0/5 nodes are available: …``.

    Names are listed for small verdicts only (the what-ifs of changed nodes, small
    clusters): listing them needs every node's verdict, costly on a large cluster."""
    if verdict is None:
        return NOT_RESIMULATED
    small = verdict.total_nodes <= 50
    if verdict.fits:
        if small:
            return f"it fits on {names(fitting_nodes(verdict))}"
        return f"it fits on {verdict.feasible_nodes} of {verdict.total_nodes} nodes"
    if small and verdict.total_nodes < 3 and verdict.nodes and verdict.nodes[0].filters:
        # A what-if of the changed nodes alone: say what they still fail.
        return "still unschedulable there: " + "; ".join(
            f"{nv.node}: {'; '.join(r for f in nv.filters for r in f.reasons)}" for nv in verdict.nodes
        )
    return f"still unschedulable: {verdict.message}"


def with_labels(node: Node, set_labels: Mapping[str, str], remove: Iterable[str] = ()) -> Node:
    labels = {k: v for k, v in node.labels.items() if k not in set(remove)}
    labels.update(set_labels)
    return replace(node, labels=FrozenMap(labels))


def synthetic_node(
    template: Node,
    name: str,
    *,
    allocatable: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
) -> Node:
    """A new, empty node shaped like ``template`` (labels and taints copied, hostname its own)."""
    new_labels = dict(template.labels)
    if "kubernetes.io/hostname" in new_labels:
        new_labels["kubernetes.io/hostname"] = name
    new_labels.update(labels or {})
    alloc = FrozenMap(dict(allocatable)) if allocatable is not None else template.allocatable
    return replace(
        template,
        name=name,
        uid=f"unstick-synthetic-{name}",
        labels=FrozenMap(new_labels),
        allocatable=alloc,
        capacity=alloc,
        unschedulable=False,
    )


def synthetic_name(template: str) -> str:
    """``ip-10-0-11-40-copy`` for ``ip-10-0-11-40.eu-west-1.compute.internal``."""
    return f"{template.split('.', 1)[0]}-copy"


def human(resource: str, units: int) -> str:
    """A readable quantity: ``7910m``, ``29.9Gi``, ``2``."""
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        if units >= 2**30 and units % 2**30:
            return f"{units / 2**30:.1f}Gi"
        if 2**20 <= units < 2**30 and units % 2**20:
            return f"{units / 2**20:.0f}Mi"
    return format_units(resource, units)


def daemonset_requests(snap: ClusterSnapshot, node_name: str) -> dict[str, int]:
    """What the DaemonSet pods on a node request: a new node of the pool pays the same."""
    out: dict[str, int] = {}
    for pod in snap.pods_by_node().get(node_name, ()):
        if pod.owner is not None and pod.owner.kind == "DaemonSet":
            for res, value in pod.spec.requests.items():
                out[res] = out.get(res, 0) + value
    return out


# ---------------------------------------------------------------------------
# Autoscaler evidence

# cluster-autoscaler: processors/status/eventing_scale_up_processor.go
# (TriggeredScaleUp "pod triggered scale-up: [...]", NotTriggerScaleUp "pod didn't
# trigger scale-up: ..."); Karpenter: Nominated "Pod should schedule on: nodeclaim/...".
AUTOSCALER_REASONS = ("TriggeredScaleUp", "NotTriggerScaleUp", "Nominated")


def autoscaler_events(snap: ClusterSnapshot, pods: Sequence[Pod]) -> list[Event]:
    """The newest autoscaler event of each reason about the pods (newest last)."""
    newest: dict[str, Event] = {}
    for pod in pods:
        for ev in snap.events_for("Pod", pod.namespace, pod.name):
            if ev.reason in AUTOSCALER_REASONS:
                seen = newest.get(ev.reason)
                if seen is None or (ev.last_seen or 0.0) >= (seen.last_seen or 0.0):
                    newest[ev.reason] = ev
    return sorted(newest.values(), key=lambda e: e.last_seen or 0.0)


def scale_up_in_progress(events: Sequence[Event]) -> Event | None:
    """The newest event saying capacity is being added, when no later refusal followed."""
    if not events:
        return None
    last = events[-1]
    return last if last.reason in ("TriggeredScaleUp", "Nominated") else None


def autoscaler_words(events: Sequence[Event]) -> str:
    if not events:
        return ""
    parts = [f"{ev.source or 'autoscaler'} {ev.reason}: {ev.message!r}" for ev in events]
    return " Autoscaler events for the pod: " + "; ".join(parts) + "."


# ---------------------------------------------------------------------------
# API-shaped YAML from records (for patches)


def requirement_yaml(req: Requirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": req.key, "operator": req.operator}
    if req.values:
        out["values"] = list(req.values)
    return out


def node_selector_yaml(selector: NodeSelector) -> dict[str, Any]:
    terms = []
    for term in selector.terms:
        t: dict[str, Any] = {}
        if term.match_expressions:
            t["matchExpressions"] = [requirement_yaml(r) for r in term.match_expressions]
        if term.match_fields:
            t["matchFields"] = [requirement_yaml(r) for r in term.match_fields]
        terms.append(t)
    return {"nodeSelectorTerms": terms}


def label_selector_yaml(selector: LabelSelector) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if selector.match_labels:
        out["matchLabels"] = dict(selector.match_labels)
    if selector.match_expressions:
        out["matchExpressions"] = [requirement_yaml(r) for r in selector.match_expressions]
    return out


def affinity_term_yaml(term: PodAffinityTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if term.label_selector is not None:
        out["labelSelector"] = label_selector_yaml(term.label_selector)
    if term.namespaces:
        out["namespaces"] = list(term.namespaces)
    if term.namespace_selector is not None:
        out["namespaceSelector"] = label_selector_yaml(term.namespace_selector)
    if term.match_label_keys:
        out["matchLabelKeys"] = list(term.match_label_keys)
    if term.mismatch_label_keys:
        out["mismatchLabelKeys"] = list(term.mismatch_label_keys)
    out["topologyKey"] = term.topology_key
    return out


def spread_yaml(c: TopologySpreadConstraint) -> dict[str, Any]:
    out: dict[str, Any] = {"maxSkew": c.max_skew, "topologyKey": c.topology_key}
    out["whenUnsatisfiable"] = c.when_unsatisfiable
    if c.label_selector is not None:
        out["labelSelector"] = label_selector_yaml(c.label_selector)
    if c.min_domains is not None:
        out["minDomains"] = c.min_domains
    if c.node_affinity_policy != "Honor":
        out["nodeAffinityPolicy"] = c.node_affinity_policy
    if c.node_taints_policy != "Ignore":
        out["nodeTaintsPolicy"] = c.node_taints_policy
    if c.match_label_keys:
        out["matchLabelKeys"] = list(c.match_label_keys)
    return out


def toleration_yaml(t: Toleration) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if t.key:
        out["key"] = t.key
    out["operator"] = t.operator or "Equal"
    if t.value and t.operator != "Exists":
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


# ---------------------------------------------------------------------------
# Remedies on the owning workload's pod template


def template_remedy(
    ctx: RuleContext,
    group: Blocked,
    title: str,
    spec_patch: dict[str, Any],
    *,
    verified: bool,
    verification: str,
) -> Remedy:
    """A change of the pod template of the pods' owner, as the owner's kind takes it.

    Deployments and DaemonSets roll their pods. A StatefulSet (OrderedReady)
    waits for a pod of the old revision instead of replacing it, and a bare
    ReplicaSet never replaces existing pods, so the command also deletes the
    pending pods. A Job's template is immutable: the Job must be re-created.
    A bare pod's placement fields are immutable except for added tolerations."""
    r = ctx.renderer
    ref = group.ref
    pending = " ".join(shlex.quote(p.name) for p in group.pods)
    ns = shlex.quote(ref.namespace)
    if ref.kind in ("Deployment", "DaemonSet"):
        return r.patch(
            title,
            ref,
            {"spec": {"template": {"spec": spec_patch}}},
            verified=verified,
            verification=verification,
        )
    if ref.kind in ("StatefulSet", "ReplicaSet"):
        remedy = r.patch(
            title,
            ref,
            {"spec": {"template": {"spec": spec_patch}}},
            verified=verified,
            verification=verification,
        )
        why = (
            "a StatefulSet waits for its pending pod of the old revision instead of replacing it"
            if ref.kind == "StatefulSet"
            else "a ReplicaSet does not replace existing pods when its template changes"
        )
        return replace(
            remedy,
            command=f"{remedy.command} && kubectl delete pod -n {ns} {pending}",
            verification=f"{verification}; then the pending pod(s) are deleted ({why})",
        )
    if ref.kind == "Pod":
        pod_patch = {"spec": spec_patch}
        text = r.render("patch.yaml.j2", patch=pod_patch)
        payload = shlex.quote(_json(pod_patch))
        name = shlex.quote(ref.name)
        if set(spec_patch) == {"tolerations"}:
            # Adding tolerations is an allowed pod update (ValidatePodUpdate).
            command = f"kubectl patch pod {name} -n {ns} --type strategic -p {payload}"
        else:
            command = (
                f"kubectl get pod {name} -n {ns} -o json"
                f" | kubectl patch --local -f - --type strategic -p {payload} -o json"
                " | kubectl replace --force -f -"
            )
            verification += "; a pod's placement fields are immutable, so the command re-creates it"
        return Remedy(title, RemedyKind.PATCH, ref, text, command, verified, verification)
    # Job (its pod template is immutable) and owners not in the dump.
    text = r.render("patch.yaml.j2", patch={"spec": {"template": {"spec": spec_patch}}})
    command = (
        f"# {ref.kind} {ref.name}: the pod template cannot be patched in place; re-create the {ref.kind}"
        f" (or fix the template it comes from, e.g. a CronJob's jobTemplate) with this change"
    )
    return Remedy(title, RemedyKind.COMMAND, ref, text, command, verified, verification)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))


def pending_words(group: Blocked, now: float) -> str:
    """``3 pods (web-7c9d-abcde, …) pending for 12m``."""
    from analyzers.rules._describe import duration, plural

    oldest = min((p.created for p in group.pods if p.created is not None), default=None)
    age = f" pending for {duration(now - oldest)}" if oldest is not None and now >= oldest else " pending"
    return f"{plural(len(group.pods), 'pod')} ({names([p.name for p in group.pods])}){age}"


def kind_word(ref: ObjectRef) -> str:
    return f"{ref.kind} {ref.namespace}/{ref.name}" if ref.namespace else f"{ref.kind} {ref.name}"


def replicas_of(workload: Workload) -> int | None:
    rec = workload.record
    if isinstance(rec, Deployment | StatefulSet | ReplicaSet):
        return rec.replicas
    if isinstance(rec, Job):
        return rec.parallelism
    return None


def merge_by_cause(items: Iterable[tuple[str, Blocked, T]]) -> list[tuple[str, list[tuple[Blocked, T]]]]:
    """(cause, group, analysis) triples merged per (workload, cause), in first-seen order:
    a workload gets one finding per root cause, however many templates share it."""
    out: dict[tuple[ObjectRef, str], list[tuple[Blocked, T]]] = {}
    for cause, group, analysis in items:
        out.setdefault((group.ref, cause), []).append((group, analysis))
    return [(cause, found) for (_, cause), found in out.items()]


def all_pods(found: Sequence[tuple[Blocked, Any]]) -> tuple[str, ...]:
    return tuple(name for group, _ in found for name in group.pod_names)


def severity(ctx: RuleContext, group: Blocked, *, capacity_coming: bool = False) -> Severity:
    """CRITICAL when a Deployment or StatefulSet has no ready pod left (the service is
    down), INFO when capacity is on its way (autoscaler scale-up, preemption), else WARNING."""
    if capacity_coming or group.verdict.preemption.candidates:
        return Severity.INFO
    if group.ref.kind in ("Deployment", "StatefulSet"):
        pods = ctx.snapshot.pods_of_workload(group.ref)
        if not any(p.ready and p.deleted is None for p in pods):
            return Severity.CRITICAL
    return Severity.WARNING


def preemption_words(verdict: PodVerdict) -> str:
    if verdict.preemption.candidates:
        return (
            f" kube-scheduler can preempt lower-priority pods on {names(list(verdict.preemption.candidates))}"
            " (DefaultPreemption), so the pod should be placed once they have exited."
        )
    return ""


def node_ref(name: str) -> ObjectRef:
    return ObjectRef("Node", "", name)


def other_nodes_words(verdict: PodVerdict, exclude: Iterable[str], limit: int = 3) -> str:
    """The remaining nodes by their first failing filter: ``worker-1 and worker-2: Insufficient cpu``."""
    skip = set(exclude)
    within = (1 << len(verdict.node_names)) - 1
    for i, name in enumerate(verdict.node_names):
        if name in skip:
            within &= ~(1 << i)
    merged: dict[str, int] = {}
    for reasons, mask in verdict.first_reasons(within).items():
        merged["; ".join(reasons)] = merged.get("; ".join(reasons), 0) | mask
    by_reason = {reason: [verdict.node_names[i] for i in bits(mask)] for reason, mask in merged.items()}
    parts = [
        f"{names(nodes, limit)}: {reason}"
        for reason, nodes in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]
    return "; ".join(parts)


def requests_gpu(pod: Pod) -> str | None:
    """The GPU-like extended resource the pod requests (nvidia.com/gpu, amd.com/gpu, MIG slices)."""
    for res, value in sorted(pod.spec.requests.items()):
        if value > 0 and "/" in res and ("gpu" in res.lower() or "/mig-" in res):
            return res
    return None
