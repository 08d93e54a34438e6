"""The simulator's results: frozen, slotted values (with ``as_dict`` for JSON)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from analyzers.records import EMPTY_MAP, FrozenMap


@dataclass(frozen=True, slots=True)
class FilterFailure:
    """One plugin's rejection of one node (or of the pod, at PreEnqueue/PreFilter).

    ``reasons`` are kube-scheduler's texts for this version; ``reason_codes`` the
    canonical codes, one per reason; ``detail`` structured numbers or objects
    behind the reason (e.g. ``{"resources": [{"resource": "nvidia.com/gpu",
    "requested": 1, "used": 1, "free": 0, "allocatable": 1}]}``, the taint, the
    missing label)."""

    plugin: str
    code: str  # "Unschedulable" | "UnschedulableAndUnresolvable"
    reasons: tuple[str, ...]
    reason_codes: tuple[str, ...]
    detail: FrozenMap[Any] = EMPTY_MAP

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "plugin": self.plugin,
            "code": self.code,
            "reasons": list(self.reasons),
            "reason_codes": list(self.reason_codes),
        }
        if self.detail:
            out["detail"] = _plain(self.detail)
        return out


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One node: every failing filter in kube-scheduler's order (the first is the
    one kube-scheduler reports); empty when the pod fits the node."""

    node: str
    fits: bool
    filters: tuple[FilterFailure, ...] = ()

    @property
    def first(self) -> FilterFailure | None:
        return self.filters[0] if self.filters else None

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "fits": self.fits, "filters": [f.as_dict() for f in self.filters]}


@dataclass(frozen=True, slots=True)
class PreemptionVerdict:
    """What DefaultPreemption (the PostFilter) would do.

    ``attempted`` is False when no PostFilter runs (the pod fits, is gated, or the
    version prints no preemption clause). ``candidates`` are nodes where evicting
    lower-priority pods makes the pod fit, with their ``victims`` (a read-only mapping,
    node -> (namespace, name) of each victim; the simulator may work a node's out only
    when it is first read); ``message`` is
    the PostFilter text exactly as appended to the event (``preemption: ...``,
    with ``no new claims to deallocate, `` in front on DRA-enabled versions), or
    "" when preemption found a candidate (kube-scheduler then prints no clause)."""

    attempted: bool
    eligible: bool
    candidates: tuple[str, ...] = ()
    victims: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=lambda: EMPTY_MAP)
    message: str = ""
    reasons: Mapping[str, int] = field(default_factory=lambda: EMPTY_MAP)
    reason_counts: Mapping[str, int] = field(default_factory=lambda: EMPTY_MAP)

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempted": self.attempted,
            "eligible": self.eligible,
            "candidates": list(self.candidates),
            "victims": {node: [f"{ns}/{name}" for ns, name in pods] for node, pods in self.victims.items()},
            "message": self.message,
            "reasons": dict(self.reasons),
            "reason_counts": dict(self.reason_counts),
        }


class NodeBreakdown(Protocol):
    """Per-node detail behind a verdict, computed on demand from the simulator's bit
    sets (analyzers.simulator.engine.Breakdown): the aggregate message needs only counts."""

    def nodes(self) -> tuple[NodeVerdict, ...]: ...

    def node(self, i: int) -> NodeVerdict: ...

    def reason_codes_on(self, plugin: str, within: int) -> dict[tuple[str, ...], int]: ...

    def reason_code_masks(self, plugin: str, within: int) -> dict[tuple[str, ...], int]: ...

    def first_reasons(self, within: int) -> dict[tuple[str, ...], int]: ...


class _NoNodes:
    def nodes(self) -> tuple[NodeVerdict, ...]:
        return ()

    def node(self, i: int) -> NodeVerdict:
        raise IndexError(i)

    def reason_codes_on(self, plugin: str, within: int) -> dict[tuple[str, ...], int]:
        return {}

    def reason_code_masks(self, plugin: str, within: int) -> dict[tuple[str, ...], int]:
        return {}

    def first_reasons(self, within: int) -> dict[tuple[str, ...], int]:
        return {}


@dataclass(frozen=True, slots=True)
class PodVerdict:
    """kube-scheduler's verdict for one pod, simulated.

    ``fits`` is True when some node passes every filter and the pod is not
    gated (kube-scheduler would bind it now). ``message`` is the rendered
    ``0/N nodes are available: ...`` text ("" when it fits; the PodScheduled
    condition message for a gated pod). ``reasons`` counts nodes per reason text
    of the filter part (each node once, under its first failing filter), and
    ``reason_counts`` the same per canonical code, summed (a node failing cpu
    and memory counts twice, as the message prints it); a PreFilter rejection
    counts every node. ``nodes`` is built on first access.

    ``failing`` maps each plugin that rejects some node to the bit set of those
    nodes (bit ``i`` = ``node_names[i]``, the simulator's node order), in filter
    order, a PreFilter rejection first (covering every node): enough to group the
    nodes by the plugins that reject them without building per-node verdicts;
    :meth:`node_at` builds one node's verdict."""

    pod: tuple[str, str]
    kube_version: str
    total_nodes: int
    fits: bool
    feasible_nodes: int
    message: str
    reasons: Mapping[str, int]
    reason_counts: Mapping[str, int]
    preemption: PreemptionVerdict
    gated: FilterFailure | None = None
    prefilter: FilterFailure | None = None
    failing: Mapping[str, int] = field(default_factory=lambda: EMPTY_MAP, repr=False, compare=False)
    node_names: tuple[str, ...] = field(default=(), repr=False, compare=False)
    _breakdown: NodeBreakdown = field(default_factory=_NoNodes, repr=False, compare=False)
    # DynamicResources: node -> the devices the structured allocator picks there (feasible
    # nodes of a pod that fits); None for a pod without ResourceClaims.
    allocations: Mapping[str, tuple[Any, ...]] | None = field(default=None, compare=False)
    # node -> ((claim to allocate, its results), ...): what PreBind would write on that node
    # (analyzers.simulator.dra.plugin.commit_allocation); not in as_dict.
    claim_allocations: Mapping[str, tuple[Any, ...]] | None = field(default=None, compare=False, repr=False)

    @property
    def allocation(self) -> tuple[Any, ...] | None:
        """The devices on the node kube-scheduler would choose: known when one node is
        feasible (which of several it picks depends on scores, not simulated here)."""
        if not self.allocations or len(self.allocations) != 1:
            return None
        return next(iter(self.allocations.values()))

    @property
    def nodes(self) -> tuple[NodeVerdict, ...]:
        return self._breakdown.nodes()

    def node(self, name: str) -> NodeVerdict | None:
        return next((n for n in self.nodes if n.node == name), None)

    def node_at(self, i: int) -> NodeVerdict:
        """The verdict of node ``node_names[i]`` (built alone unless all are built)."""
        return self._breakdown.node(i)

    def reason_codes_on(self, plugin: str, within: int) -> dict[tuple[str, ...], int]:
        """How many nodes of ``within`` (a bit set over ``node_names``) ``plugin``'s
        Filter rejects with each tuple of reason codes."""
        return self._breakdown.reason_codes_on(plugin, within)

    def reason_code_masks(self, plugin: str, within: int) -> dict[tuple[str, ...], int]:
        """The nodes of ``within`` (bit sets) ``plugin``'s Filter rejects, by the tuple of
        reason codes it rejects them with."""
        return self._breakdown.reason_code_masks(plugin, within)

    def first_reasons(self, within: int) -> dict[tuple[str, ...], int]:
        """The nodes of ``within`` (bit sets) by the reasons of their first failing filter,
        what kube-scheduler reports for each node."""
        return self._breakdown.first_reasons(within)

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.pod[0],
            "name": self.pod[1],
            "kube_version": self.kube_version,
            "total_nodes": self.total_nodes,
            "fits": self.fits,
            "feasible_nodes": self.feasible_nodes,
            "gated": self.gated.as_dict() if self.gated else None,
            "prefilter": self.prefilter.as_dict() if self.prefilter else None,
            "nodes": [self._node_dict(n) for n in self.nodes],
            "message": self.message,
            "reasons": dict(self.reasons),
            "reason_counts": dict(self.reason_counts),
            "preemption": self.preemption.as_dict(),
            **(
                {}
                if self.allocations is None
                else {
                    "allocation": None if self.allocation is None else [r.as_dict() for r in self.allocation]
                }
            ),
        }

    def _node_dict(self, n: NodeVerdict) -> dict[str, Any]:
        out = n.as_dict()
        if self.allocations is not None:
            found = self.allocations.get(n.node)
            out["allocation"] = None if found is None else [r.as_dict() for r in found]
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value
