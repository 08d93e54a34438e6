"""The scheduling cycle for one pod: its state, and what a filter plugin returns.

A plugin is evaluated for all nodes at once (``filter_all``, bit sets) and,
for preemption's dry run, for one node with some pods removed
(``filter_node``), mirroring the framework's Filter and
PreFilterExtensions.RemovePod (pkg/scheduler/framework/interface.go).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from analyzers.records import EMPTY_MAP, FrozenMap, NodeSelector, Pod
from analyzers.simulator.nodeinfo import NodeTable, bits, has
from analyzers.simulator.results import FilterFailure
from analyzers.simulator.versions import Wording
from analyzers.snapshot import ClusterSnapshot


def failure(
    plugin: str,
    code: str,
    reasons: tuple[str, ...],
    reason_codes: tuple[str, ...],
    detail: FrozenMap[Any] = EMPTY_MAP,
) -> FilterFailure:
    """A FilterFailure. A plugin makes one per group of nodes failing alike, and
    every node of the group shares it."""
    return FilterFailure(plugin, code, reasons, reason_codes, detail)


def detail(**items: Any) -> FrozenMap[Any]:
    return FrozenMap(items)


class Outcome:
    """One filter plugin's result over all nodes: disjoint groups of nodes sharing
    one failure (status code and reasons), plus nodes whose reasons are their own.
    When ``make`` is set it builds each node's full failure (with its detail)
    lazily; the groups and ``varying`` then serve only the counting."""

    __slots__ = ("_cache", "groups", "make", "mask", "plugin", "varying")

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.groups: list[tuple[int, FilterFailure]] = []
        # node -> (code, reasons, reason codes); ``make`` builds the full failure with detail.
        self.varying: dict[int, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
        self.make: Callable[[int], FilterFailure] | None = None
        self.mask = 0
        self._cache: dict[int, FilterFailure] = {}

    def add_group(self, mask: int, fail: FilterFailure) -> None:
        mask &= ~self.mask
        if mask:
            self.groups.append((mask, fail))
            self.mask |= mask

    def add_node(self, i: int, code: str, reasons: tuple[str, ...], reason_codes: tuple[str, ...]) -> None:
        if not has(self.mask, i):
            self.varying[i] = (code, reasons, reason_codes)
            self.mask |= 1 << i

    def failure(self, i: int) -> FilterFailure | None:
        if not has(self.mask, i):
            return None
        if self.make is None:
            for m, f in self.groups:
                if has(m, i):
                    return f
        found = self._cache.get(i)
        if found is None:
            if self.make is not None:
                found = self.make(i)
            else:
                code, reasons, codes = self.varying[i]
                found = failure(self.plugin, code, reasons, codes)
            self._cache[i] = found
        return found

    def code_of(self, i: int) -> str | None:
        for m, f in self.groups:
            if has(m, i):
                return f.code
        v = self.varying.get(i)
        return v[0] if v is not None else None

    def count(self, within: int, reasons: dict[str, int], codes: dict[str, int]) -> None:
        """Add the reasons of the nodes in ``within`` (each node once) to the tallies."""
        for m, f in self.groups:
            c = (m & within).bit_count()
            if c:
                # Each failure carries one code per reason: "strict" never fires.
                for r, rc in zip(f.reasons, f.reason_codes, strict=True):  # pragma: no mutate
                    reasons[r] = reasons.get(r, 0) + c
                    codes[rc] = codes.get(rc, 0) + c
        if self.varying:
            sel = self.varying
            idx = bits(within & ~self._group_mask()) if len(sel) > 64 else [i for i in sel if has(within, i)]
            for i in idx:
                entry = sel.get(i)
                if entry is None:
                    continue
                for r, rc in zip(entry[1], entry[2], strict=True):
                    reasons[r] = reasons.get(r, 0) + 1
                    codes[rc] = codes.get(rc, 0) + 1

    def _group_mask(self) -> int:
        m = 0
        for g, _ in self.groups:
            m |= g
        return m


@dataclass(slots=True)
class Cycle:
    """What one scheduling attempt of ``pod`` knows (CycleState, roughly)."""

    snapshot: ClusterSnapshot
    table: NodeTable
    pod: Pod
    wording: Wording
    priority: int
    namespace_labels: Mapping[str, str]
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    # Nodes passing NodeAffinity (nodeSelector + required affinity); set by that plugin.
    affinity_mask: int = -1
    # Nodes whose NoSchedule/NoExecute taints the pod tolerates; set by TaintToleration.
    tolerated_mask: int = -1
    state: dict[str, Any] = field(default_factory=dict)
    # The profile's NodeAffinityArgs addedAffinity required terms (None: not configured).
    added_affinity: NodeSelector | None = None
    # The profile's DynamicResourcesArgs.filterTimeout in seconds (None: not configured).
    dra_filter_timeout: float | None = None


class Plugin:
    """Base of the filter plugins. ``name`` is kube-scheduler's plugin name."""

    name = ""

    def prefilter(self, cycle: Cycle) -> FilterFailure | None:
        """A rejection of the pod as a whole (PreFilter), or None."""
        return None

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        """The failures over all nodes; None when the plugin has nothing to say."""
        return None

    def filter_node(self, cycle: Cycle, i: int, removed: Sequence[Pod]) -> FilterFailure | None:
        """Node ``i`` with the pods ``removed`` gone (preemption's dry run). Plugins
        whose verdict does not depend on the pods of the node reuse ``filter_all``."""
        outcome = cycle.outcomes.get(self.name)
        return outcome.failure(i) if outcome is not None else None
