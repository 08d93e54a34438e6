"""NodeResourcesFit's filter (pkg/scheduler/framework/plugins/noderesources/fit.go,
fitsRequest).

- ``Too many pods`` when the node already has ``allocatable.pods`` pods
  (checked whatever the pod requests);
- ``Insufficient <resource>`` for cpu, memory, ephemeral-storage and every
  scalar resource (hugepages-*, extended resources such as nvidia.com/gpu) the
  pod requests (a zero request is skipped) when the request exceeds
  allocatable minus the sum of the requests of the pods bound to the node (the
  real requests, not the non-zero defaults used for scoring);
- reasons in fitsRequest's order (pods, cpu, memory, ephemeral-storage, then
  scalars -- a Go map, so random upstream; sorted here);
- status Unschedulable; since 1.34 UnschedulableAndUnresolvable when some
  request exceeds the node's whole allocatable (#131345).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from analyzers.records import Pod
from analyzers.simulator import codes as C
from analyzers.simulator.dra.plugin import delegated_resources
from analyzers.simulator.framework import Cycle, Outcome, Plugin, detail, failure
from analyzers.simulator.nodeinfo import ResourceColumns, pods_on
from analyzers.simulator.results import FilterFailure

TOO_MANY_PODS = "Too many pods"
_NATIVE = ("cpu", "memory", "ephemeral-storage")


def is_scalar(resource: str) -> bool:
    """schedutil.IsScalarResourceName: extended (domain-prefixed), hugepages-*,
    kubernetes.io/-prefixed native and attachable-volumes-* resources."""
    return "/" in resource or resource.startswith(("hugepages-", "attachable-volumes-"))


def checked_requests(pod: Pod) -> list[tuple[str, int]]:
    """The (resource, request) pairs fitsRequest compares, in its order."""
    req = pod.spec.requests
    out = [(r, req[r]) for r in _NATIVE if req.get(r, 0) > 0]
    out.extend((r, q) for r, q in sorted(req.items()) if q > 0 and is_scalar(r))
    return out


class NodeResourcesFit(Plugin):
    name = C.NODE_RESOURCES_FIT

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        table = cycle.table
        out = resource_outcome(cycle, table.resource_columns(), table.all_mask)
        if out is not None:
            out.make = lambda i: (
                self._node_failure(cycle, i, ()) or failure(self.name, C.UNSCHEDULABLE, (), ())
            )
        return out

    def filter_node(self, cycle: Cycle, i: int, removed: Sequence[Pod]) -> FilterFailure | None:
        return self._node_failure(cycle, i, removed)

    @staticmethod
    def _requests(cycle: Cycle) -> list[tuple[str, int]]:
        """checked_requests of the cycle's pod, computed once per cycle (it is
        asked for every node when per-node verdicts or preemption run)."""
        cached = cycle.state.get("noderesourcesfit.requests")
        # A cycle has one pod: the check only guards the cache, a recomputation gives the same list.
        if cached is None or cached[0] is not cycle.pod:  # pragma: no mutate
            cached = cycle.state["noderesourcesfit.requests"] = (cycle.pod, checked_requests(cycle.pod))
        requests: list[tuple[str, int]] = cached[1]
        return requests

    def _node_failure(self, cycle: Cycle, i: int, removed: Sequence[Pod]) -> FilterFailure | None:
        table = cycle.table
        reasons: list[str] = []
        rcodes: list[str] = []
        rows = []
        hard = False
        pods = len(pods_on(table, i, removed))
        allowed = table.allowed_pods[i]
        if pods + 1 > allowed:
            reasons.append(TOO_MANY_PODS)
            rcodes.append(C.TOO_MANY_PODS)
            rows.append(
                detail(resource="pods", requested=1, used=pods, free=allowed - pods, allocatable=allowed)
            )
        delegated = delegated_resources(cycle)
        for r, q in self._requests(cycle):
            alloc = table.allocatable.get(r)
            a = alloc[i] if alloc is not None else 0
            if a == 0 and r in delegated:
                continue  # DynamicResources allocates it on this node (shouldDelegateResourceToDRA)
            used = table.requested[r][i] if r in table.requested else 0
            for p in removed:
                used -= p.spec.requests.get(r, 0)
            if q > a - used:
                reasons.append(f"Insufficient {r}")
                rcodes.append(C.INSUFFICIENT_RESOURCE)
                rows.append(detail(resource=r, requested=q, used=used, free=a - used, allocatable=a))
                if cycle.wording.resource_unresolvable and q > a:
                    hard = True
        if not reasons:
            return None
        return failure(
            self.name,
            C.UNRESOLVABLE if hard else C.UNSCHEDULABLE,
            tuple(reasons),
            tuple(rcodes),
            detail(resources=tuple(rows)),
        )


def resource_outcome(cycle: Cycle, columns: ResourceColumns, within: int) -> Outcome | None:
    """fitsRequest over the nodes of ``within`` given each node's free resources and
    the pods it can still take (``columns``: the node table's, or those left after
    evicting victims)."""
    table = cycle.table
    name = C.NODE_RESOURCES_FIT
    unresolvable_ok = cycle.wording.resource_unresolvable
    lists: list[tuple[str, str, int]] = []  # (reason, code, mask)
    unresolvable = 0
    # allowed - count < 1, i.e. count + 1 > allowed
    too_many = columns.pods_left.below(1) & within
    if too_many:
        lists.append((TOO_MANY_PODS, C.TOO_MANY_PODS, too_many))
    delegated = delegated_resources(cycle)
    for r, q in checked_requests(cycle.pod):
        col = columns.free(r)
        if col is None:
            if r in delegated:
                continue  # no node advertises it: DynamicResources allocates it everywhere
            failing_mask = within
            if unresolvable_ok:
                unresolvable = within
        else:
            failing_mask = col.below(q) & within
            if r in delegated:  # nodes that do not advertise it leave it to DynamicResources
                alloc = table.allocatable_column(r)
                failing_mask &= ~(alloc.below(1) & ~alloc.below(0))  # allocatable 0
            if unresolvable_ok and failing_mask:
                unresolvable |= table.allocatable_column(r).below(q) & failing_mask
        if failing_mask:
            lists.append((f"Insufficient {r}", C.INSUFFICIENT_RESOURCE, failing_mask))
    if not lists:
        return None
    out = Outcome(name)
    # Every combination of failing reasons is one group (a node failing cpu and
    # memory prints both); few resources fail at once, so the subsets are few.
    k = len(lists)
    # Every combination below keeps only nodes of one of its lists: a stray start bit never survives.
    any_mask = 0  # pragma: no mutate
    for _, _, m in lists:
        any_mask |= m
    for size in range(k, 0, -1):
        for combo in combinations(range(k), size):
            m = any_mask
            for j in range(k):
                m = m & lists[j][2] if j in combo else m & ~lists[j][2]
                if not m:
                    break
            if not m:
                continue
            reasons = tuple(lists[j][0] for j in combo)
            rcodes = tuple(lists[j][1] for j in combo)
            hard = m & unresolvable
            if hard:
                out.add_group(hard, failure(name, C.UNRESOLVABLE, reasons, rcodes))
            # add_group ignores an empty mask, so testing it is only a shortcut.
            if m & ~hard:  # pragma: no mutate
                out.add_group(m & ~hard, failure(name, C.UNSCHEDULABLE, reasons, rcodes))
    return out
