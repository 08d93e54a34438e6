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

from collections.abc import Sequence

from analyzers.records import Pod
from analyzers.simulator.nodeinfo import NodeTable
from analyzers.simulator.scoring.profile import ResourceSpec

NATIVE = ("cpu", "memory", "ephemeral-storage")


def pod_request(pod: Pod, resource: str, use_requested: bool) -> int:
    if not use_requested and resource in ("cpu", "memory"):
        return pod.spec.nonzero_requests.get(resource, 0)
    return pod.spec.requests.get(resource, 0)


def nonzero_requested(table: NodeTable) -> dict[str, list[int]]:
    """NodeInfo.NonZeroRequested per node (cpu, memory), memoised on the table."""
    found: dict[str, list[int]] | None = table.memo.get("scoring.nonzero")
    if found is None:
        cpu = [0] * table.size
        mem = [0] * table.size
        for i, pods in enumerate(table.pods):
            for p in pods:
                nz = p.spec.nonzero_requests
                cpu[i] += nz.get("cpu", 0)
                mem[i] += nz.get("memory", 0)
        found = {"cpu": cpu, "memory": mem}
        table.memo["scoring.nonzero"] = found
    return found


def columns(
    table: NodeTable, pod: Pod, resources: Sequence[ResourceSpec], use_requested: bool
) -> list[tuple[int, int, list[int], list[int]]]:
    """Per resource kept: (pod request, weight, node allocated, node allocatable),
    the last two as per-node columns; a resource a node lacks has allocatable 0
    there (calculateNodeAllocatableRequest skips it)."""
    out = []
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
        if r in ("cpu", "memory") and not use_requested:
            used = nonzero_requested(table)[r]
        else:
            used = table.requested.get(r, zeros)
        out.append((req, spec.weight, used, alloc))
    return out
