"""What NodeResourcesFit and NodeResourcesBalancedAllocation share:
pkg/scheduler/framework/plugins/noderesources/resource_allocation.go (v1.37.2)
calculatePodResourceRequest and calculateResourceAllocatableRequest.

- With ``use_requested`` False (NodeResourcesFit), cpu and memory are the
  *non-zero* requests: a container without one counts 100m / 200Mi
  (schedutil.DefaultMilliCPURequest / DefaultMemoryRequest), for the incoming
  pod and for every pod already on the node (NodeInfo.NonZeroRequested).
- With ``use_requested`` True (BalancedAllocation), the plain requests.
- A scalar resource (extended, hugepages, ...) the pod does not request is left
  out, as is any resource the node does not report allocatable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import overload

from analyzers.records import Pod
from analyzers.simulator.nodeinfo import NodeTable
from analyzers.simulator.scoring.framework import NO_PLACED
from analyzers.simulator.scoring.profile import ResourceSpec
from analyzers.snapshot import ClusterSnapshot, bound_node

NATIVE = ("cpu", "memory", "ephemeral-storage")


def pod_request(pod: Pod, resource: str, use_requested: bool) -> int:
    if not use_requested and resource in ("cpu", "memory"):
        return pod.spec.nonzero_requests.get(resource, 0)
    return pod.spec.requests.get(resource, 0)


AGGREGATES_KEY = "scoring.aggregates"


class Aggregates:
    """Per-node sums the score plugins need beyond the node table: NonZeroRequested
    (cpu, memory) and the pods with (anti-)affinity terms. A what-if snapshot
    (``snapshot.replace``) updates its parent's instead of walking every pod."""

    __slots__ = ("affinity_pods", "cpu", "memory", "names")

    def __init__(
        self,
        names: tuple[str, ...],
        cpu: list[int],
        memory: list[int],
        affinity_pods: dict[int, tuple[Pod, ...]],
    ) -> None:
        self.names = names
        self.cpu = cpu
        self.memory = memory
        self.affinity_pods = affinity_pods


def has_affinity(pod: Pod) -> bool:
    s = pod.spec
    return bool(
        s.pod_affinity or s.pod_anti_affinity or s.preferred_pod_affinity or s.preferred_pod_anti_affinity
    )


def aggregates(snapshot: ClusterSnapshot, table: NodeTable) -> Aggregates:
    def build() -> Aggregates:
        origin = snapshot.origin
        if origin is not None:
            parent: Aggregates | None = origin.parent.cached(AGGREGATES_KEY)
            if parent is not None and parent.names == table.names and not origin.changes.get("nodes"):
                cpu = list(parent.cpu)
                mem = list(parent.memory)
                aff = dict(parent.affinity_pods)
                index = table.index
                for old, new in origin.changes.get("pods", ()):
                    for pod, sign in ((old, -1), (new, 1)):
                        where = bound_node(pod)
                        i = index.get(where) if where is not None else None
                        if pod is None or i is None:
                            continue
                        nz = pod.spec.nonzero_requests
                        cpu[i] += sign * nz.get("cpu", 0)
                        mem[i] += sign * nz.get("memory", 0)
                        if has_affinity(pod):
                            if sign > 0:
                                aff[i] = (*aff.get(i, ()), pod)
                            else:
                                aff[i] = tuple(p for p in aff.get(i, ()) if p is not pod and p.key != pod.key)
                return Aggregates(table.names, cpu, mem, aff)
        cpu = [0] * table.size
        mem = [0] * table.size
        by_node: dict[int, tuple[Pod, ...]] = {}
        for i, pods in enumerate(table.pods):
            for p in pods:
                nz = p.spec.nonzero_requests
                cpu[i] += nz.get("cpu", 0)
                mem[i] += nz.get("memory", 0)
            with_aff = tuple(p for p in pods if has_affinity(p))
            if with_aff:
                by_node[i] = with_aff
        return Aggregates(table.names, cpu, mem, by_node)

    found: Aggregates = snapshot.derived(AGGREGATES_KEY, build)
    return found


class Patched(Sequence[int]):
    """A node column with a few nodes' values changed (the copies a placement bound),
    read by index without copying the column."""

    __slots__ = ("base", "changes")

    def __init__(self, base: Sequence[int], changes: dict[int, int]) -> None:
        self.base = base
        self.changes = changes

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[int]: ...
    def __getitem__(self, i: int | slice) -> int | Sequence[int]:
        if isinstance(i, slice):
            return [self[k] for k in range(len(self))[i]]
        found = self.changes.get(i)
        return self.base[i] if found is None else found

    def __len__(self) -> int:
        return len(self.base)


def reported(alloc: Sequence[int], nodes: Sequence[int]) -> bool:
    """Every node of ``nodes`` reports the resource (allocatable > 0)."""
    if len(nodes) < 64:
        return all(alloc[i] for i in nodes)
    return min(alloc, default=1) > 0 or all(alloc[i] for i in nodes)


def columns(
    snapshot: ClusterSnapshot,
    table: NodeTable,
    pod: Pod,
    resources: Sequence[ResourceSpec],
    use_requested: bool,
    placed: Mapping[int, int] = NO_PLACED,
) -> list[tuple[int, int, Sequence[int], list[int]]]:
    """Per resource kept: (pod request, weight, node allocated, node allocatable),
    the last two as per-node columns; a resource a node lacks has allocatable 0
    there (calculateNodeAllocatableRequest skips it). ``placed`` copies of ``pod``
    (per node) count among the node's pods."""
    out: list[tuple[int, int, Sequence[int], list[int]]] = []
    zeros = [0] * table.size
    for spec in resources:
        r = spec.name
        req = pod_request(pod, r, use_requested)
        if r not in NATIVE and req == 0:
            continue  # IsScalarResourceName and not requested
        if r == "pods":
            continue  # not among the scalar resources: "omitted for node score calculation"
        alloc = table.allocatable.get(r)
        if alloc is None:
            continue
        used: Sequence[int]
        if r in ("cpu", "memory") and not use_requested:
            agg = aggregates(snapshot, table)
            used = agg.cpu if r == "cpu" else agg.memory
        else:
            used = table.requested.get(r, zeros)
        if placed and req:
            used = Patched(used, {i: used[i] + copies * req for i, copies in placed.items()})
        out.append((req, spec.weight, used, alloc))
    return out
