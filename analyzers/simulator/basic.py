"""The node-only filter plugins: NodeUnschedulable, NodeName, TaintToleration,
NodeAffinity, and NodePorts (which looks at the node's used host ports).

Upstream (kubernetes/kubernetes, pkg/scheduler/framework/plugins/):
- nodeunschedulable/node_unschedulable.go: ``node(s) were unschedulable``,
  UnschedulableAndUnresolvable, unless the pod tolerates
  ``node.kubernetes.io/unschedulable:NoSchedule``.
- nodename/node_name.go: ``node(s) didn't match the requested node name``,
  UnschedulableAndUnresolvable.
- tainttoleration/taint_toleration.go: the first NoSchedule/NoExecute taint
  the pod does not tolerate (v1helper.FindMatchingUntoleratedTaint),
  UnschedulableAndUnresolvable; PreferNoSchedule only scores.
- nodeaffinity/node_affinity.go: nodeSelector AND required node affinity
  (terms ORed, expressions ANDed; matchFields metadata.name), reason
  ``node(s) didn't match Pod's node affinity/selector``, UnschedulableAndUnresolvable;
  PreFilter: terms that all name nodes via ``matchFields metadata.name In``
  narrow the candidate nodes (PreFilterResult), an empty intersection is
  ``pod affinity terms conflict``.
- nodeports/node_ports.go + framework/types.go HostPortInfo.CheckConflict:
  ``node(s) didn't have free ports for the requested pod ports``, Unschedulable;
  hostIP 0.0.0.0 conflicts with every IP of the same protocol and port.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from analyzers.records import Pod, Taint, Toleration
from analyzers.simulator import codes as C
from analyzers.simulator.framework import Cycle, Outcome, Plugin, detail, failure
from analyzers.simulator.nodeinfo import WILDCARD_IP, host_port_triples, mask_of
from analyzers.simulator.results import FilterFailure

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_NAME = "node(s) didn't match the requested node name"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_AFFINITY_CONFLICT = "pod affinity terms conflict"
# node_affinity.go errReasonEnforced (v1.37.2): a node the profile's NodeAffinityArgs
# addedAffinity refuses.
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"


def tolerates(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def first_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    for taint in taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return taint
    return None


class NodeUnschedulable(Plugin):
    name = C.NODE_UNSCHEDULABLE_PLUGIN

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        mask = cycle.table.unschedulable_mask
        if not mask or tolerates(cycle.pod.spec.tolerations, UNSCHEDULABLE_TAINT):
            return None
        out = Outcome(self.name)
        out.add_group(
            mask, failure(self.name, C.UNRESOLVABLE, (REASON_UNSCHEDULABLE,), (C.NODE_UNSCHEDULABLE,))
        )
        return out


class NodeName(Plugin):
    name = C.NODE_NAME

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        wanted = cycle.pod.spec.node_name or cycle.pod.node_name
        if not wanted:
            return None
        table = cycle.table
        i = table.index.get(wanted)
        mask = table.all_mask & ~(1 << i) if i is not None else table.all_mask
        out = Outcome(self.name)
        out.add_group(
            mask,
            failure(
                self.name,
                C.UNRESOLVABLE,
                (REASON_NODE_NAME,),
                (C.NODE_NAME_MISMATCH,),
                detail(node_name=wanted),
            ),
        )
        return out


class TaintToleration(Plugin):
    name = C.TAINT_TOLERATION

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        tolerations = cycle.pod.spec.tolerations
        out = Outcome(self.name)
        for taints, mask in cycle.table.taint_groups.items():
            taint = first_untolerated(taints, tolerations)
            if taint is not None:
                out.add_group(
                    mask,
                    failure(
                        self.name,
                        C.UNRESOLVABLE,
                        (cycle.wording.taint_reason(taint.key, taint.value),),
                        (C.UNTOLERATED_TAINT,),
                        detail(taint=detail(key=taint.key, value=taint.value, effect=taint.effect)),
                    ),
                )
        cycle.tolerated_mask = cycle.table.all_mask & ~out.mask
        return out if out.mask else None


def prefilter_node_names(pod: Pod) -> set[str] | None:
    """NodeAffinity's PreFilterResult: the node names every term pins with
    ``matchFields metadata.name In`` (None: all nodes are candidates)."""
    selector = pod.spec.required_node_affinity
    if selector is None or not selector.terms:
        return None
    names: set[str] | None = None
    for term in selector.terms:
        term_names: set[str] | None = None
        for req in term.match_fields:
            if req.key == "metadata.name" and req.operator == "In":
                s = set(req.values)
                term_names = s if term_names is None else term_names & s
        if term_names is None:
            return None
        names = term_names if names is None else names | term_names
    return names


class NodeAffinity(Plugin):
    name = C.NODE_AFFINITY

    def prefilter(self, cycle: Cycle) -> FilterFailure | None:
        names = prefilter_node_names(cycle.pod)
        cycle.state["prefilter_node_names"] = names
        if names is not None and not names:
            return failure(
                self.name, C.UNRESOLVABLE, (REASON_AFFINITY_CONFLICT,), (C.NODE_AFFINITY_MISMATCH,)
            )
        return None

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        """node_affinity.go Filter (v1.37.2): the profile's addedAffinity first
        (errReasonEnforced), then the pod's nodeSelector and required affinity
        (ErrReasonPod); both UnschedulableAndUnresolvable."""
        spec = cycle.pod.spec
        table = cycle.table
        ok = table.all_mask
        if spec.node_selector:
            ok &= table.labels_mask(spec.node_selector)
        if spec.required_node_affinity is not None:
            ok &= table.selector_mask(spec.required_node_affinity)
        # The pod's own terms only: PodTopologySpread's nodeAffinityPolicy reads
        # GetRequiredNodeAffinity(pod), not the scheduler-enforced terms.
        cycle.affinity_mask = ok
        enforced = table.all_mask
        if cycle.added_affinity is not None:
            enforced = table.selector_mask(cycle.added_affinity)
        refused = table.all_mask & ~enforced
        fail = table.all_mask & ~ok & enforced
        if not fail and not refused:
            return None
        out = Outcome(self.name)
        for mask, reason in ((refused, REASON_ENFORCED), (fail, cycle.wording.node_affinity_reason)):
            if mask:
                out.add_group(
                    mask, failure(self.name, C.UNRESOLVABLE, (reason,), (C.NODE_AFFINITY_MISMATCH,))
                )
        return out


def wanted_ports(pod: Pod) -> list[tuple[str, str, int]]:
    return host_port_triples(pod)


def port_conflicts(
    wanted: Sequence[tuple[str, str, int]], used: frozenset[tuple[str, str, int]] | set[tuple[str, str, int]]
) -> list[tuple[str, str, int]]:
    """HostPortInfo.CheckConflict for every wanted port; the conflicting ones."""
    bad = []
    for ip, proto, port in wanted:
        if ip == WILDCARD_IP:
            if any(p == port and pr == proto for _, pr, p in used):
                bad.append((ip, proto, port))
        elif (WILDCARD_IP, proto, port) in used or (ip, proto, port) in used:
            bad.append((ip, proto, port))
    return bad


class NodePorts(Plugin):
    name = C.NODE_PORTS_PLUGIN

    def _fail(self, conflicts: list[tuple[str, str, int]]) -> FilterFailure:
        return failure(
            self.name,
            C.UNSCHEDULABLE,
            (REASON_PORTS,),
            (C.NODE_PORTS,),
            detail(ports=tuple(detail(host_ip=ip, protocol=pr, port=p) for ip, pr, p in conflicts)),
        )

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        wanted = wanted_ports(cycle.pod)
        if not wanted:
            return None
        table = cycle.table
        failing = [i for i, used in table.used_ports.items() if port_conflicts(wanted, used)]
        if not failing:
            return None
        out = Outcome(self.name)
        out.add_group(
            mask_of(failing, table.size),
            failure(self.name, C.UNSCHEDULABLE, (REASON_PORTS,), (C.NODE_PORTS,)),
        )
        out.make = lambda i: self._fail(port_conflicts(wanted, table.used_ports[i]))
        return out

    def filter_node(self, cycle: Cycle, i: int, removed: Sequence[Pod]) -> FilterFailure | None:
        """The node in preemption's dry run (SelectVictimsOnNode): every pod of lower
        priority removed, then those not in ``removed`` added back. NodeInfo.UsedPorts
        is a set (kube-scheduler framework/types.go HostPortInfo.Remove, v0.35.4): a
        removed pod takes its ports out even when a pod that stays holds them too
        (pods bound without the scheduler can share a host port)."""
        wanted = wanted_ports(cycle.pod)
        if not wanted:
            return None
        table = cycle.table
        if not removed:
            used = _ports_of(table.pods[i])
        else:
            lower = [
                p for p, prio in zip(table.pods[i], table.priorities[i], strict=True) if prio < cycle.priority
            ]
            gone = {id(p) for p in removed}
            used = (_ports_of(table.pods[i]) - _ports_of(lower)) | _ports_of(
                p for p in lower if id(p) not in gone
            )
        conflicts = port_conflicts(wanted, used)
        return self._fail(conflicts) if conflicts else None


def _ports_of(pods: Iterable[Pod]) -> set[tuple[str, str, int]]:
    return {triple for p in pods for triple in host_port_triples(p)}
