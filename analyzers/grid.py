"""The nodes × filter plugins grid of one pending pod, as plain data.

kube-scheduler runs the Filter plugins of pkg/scheduler/apis/config/v1/
default_plugins.go in order for each node and stops at the node's first failure
(RunFilterPlugins in pkg/scheduler/framework/runtime/framework.go); only that
first failure reaches the event. unstick's simulator evaluates every plugin, so
the grid shows, for each node:

* ``pass`` — the plugin accepts the node (before the first failure);
* ``fail`` — the first failing plugin: what kube-scheduler reports;
* ``not-evaluated`` — after the first failure: kube-scheduler never ran it
  (unstick's own evaluation says it would pass);
* ``extra-fail`` — after the first failure: kube-scheduler never ran it, and
  unstick's own evaluation says it fails too (another thing to fix).

Nodes failing the same plugins for the same reasons form one row (the count and
the names), rows sorted nearest first: fewest failing plugins, then nodes
where preemption can be tried, then the most nodes. Each row carries DefaultPreemption's verdict for its nodes
(pkg/scheduler/framework/preemption/preemption.go: nodes whose first failure is
UnschedulableAndUnresolvable are "not helpful"; the others are tried). The
capacity of the nodes whose first failure is NodeResourcesFit (allocatable, requested by the
pods on the node, this pod's request) comes from the filter's own numbers, and
the real usage from metrics.k8s.io NodeMetrics where the snapshot has them.

Pure: plain dicts and lists, JSON-safe, so a finding can carry the grid in its
evidence and every view (page, terminal, API) renders the stored one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from analyzers.quantity import format_units
from analyzers.simulator import codes as C
from analyzers.simulator.engine import filter_order
from analyzers.simulator.nodeinfo import lowest_bits
from analyzers.simulator.results import NodeVerdict, PodVerdict
from analyzers.simulator.versions import wording_for

MAX_NAMES_PER_ROW = 300  # names kept per row (the count is always exact)
MAX_CAPACITY_NODES = 20  # nodes with capacity bars, nearest first
NODE_RESOURCES_FIT = "NodeResourcesFit"


def _plugins(nodes: tuple[NodeVerdict, ...], kube_version: str) -> list[str]:
    """The filter plugins as columns, in the release's order (1.37 runs NodeName first)."""
    order = [p.name for p in filter_order(wording_for(kube_version))]
    for node in nodes:
        for f in node.filters:
            if f.plugin not in order:
                order.insert(0, f.plugin)  # a PreFilter result's rejection comes first
    return order


def _preemption_of(verdict: PodVerdict, node: NodeVerdict) -> str:
    p = verdict.preemption
    if node.fits:
        return ""
    if node.node in p.candidates:
        return "candidate"
    if not p.attempted:
        return "not-attempted"
    if not p.eligible:
        return "pod-may-not-preempt"
    first = node.first
    if first is not None and first.code == C.UNRESOLVABLE:
        return "not-helpful"
    return "no-victims"


def _cells(plugins: list[str], node: NodeVerdict) -> list[dict[str, Any]]:
    failures = {f.plugin: f for f in node.filters}
    first = node.first.plugin if node.first is not None else None
    seen_first = False
    cells: list[dict[str, Any]] = []
    for plugin in plugins:
        f = failures.get(plugin)
        if plugin == first:
            seen_first = True
            cells.append({"plugin": plugin, "state": "fail", "reasons": list(f.reasons) if f else []})
        elif not seen_first:
            cells.append({"plugin": plugin, "state": "pass", "reasons": []})
        elif f is not None:
            cells.append({"plugin": plugin, "state": "extra-fail", "reasons": list(f.reasons)})
        else:
            cells.append({"plugin": plugin, "state": "not-evaluated", "reasons": []})
    return cells


def _capacity(node: NodeVerdict, usage: Mapping[str, Mapping[str, int]]) -> list[dict[str, Any]]:
    used_now = usage.get(node.node, {})
    out: list[dict[str, Any]] = []
    for f in node.filters:
        if f.plugin != NODE_RESOURCES_FIT:
            continue
        for row in f.detail.get("resources", ()):
            resource = str(row["resource"])
            out.append(
                {
                    "node": node.node,
                    "resource": resource,
                    "allocatable": int(row["allocatable"]),
                    "requested_by_others": int(row["used"]),
                    "request": int(row["requested"]),
                    "free": int(row["free"]),
                    "allocatable_text": format_units(resource, int(row["allocatable"])),
                    "requested_by_others_text": format_units(resource, int(row["used"])),
                    "request_text": format_units(resource, int(row["requested"])),
                    "free_text": format_units(resource, max(0, int(row["free"]))),
                }
            )
            if resource in used_now:  # metrics.k8s.io NodeMetrics: what the node really uses
                out[-1]["usage"] = int(used_now[resource])
                out[-1]["usage_text"] = format_units(resource, int(used_now[resource]))
    return out


class _Group:
    """Nodes that fail alike: the first one's verdict, how many, the first names and a way
    to build any member's own verdict (for its capacity numbers)."""

    __slots__ = ("count", "first", "members", "names")

    def __init__(
        self, first: NodeVerdict, count: int, names: list[str], members: list[NodeVerdict] | list[int]
    ) -> None:
        self.first = first
        self.count = count
        self.names = names
        self.members = members  # node verdicts, or indices into verdict.node_names


def _union(masks: list[int]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def _by_key(verdict: PodVerdict, nodes: list[NodeVerdict]) -> list[_Group]:
    by_key: dict[tuple[Any, ...], list[NodeVerdict]] = {}
    for node in nodes:
        key = (tuple((f.plugin, f.reasons) for f in node.filters), _preemption_of(verdict, node))
        by_key.setdefault(key, []).append(node)
    return [_Group(g[0], len(g), [n.node for n in g[:MAX_NAMES_PER_ROW]], g) for g in by_key.values()]


def _node_groups(verdict: PodVerdict) -> list[_Group]:
    """The nodes in groups that fail the same plugins for the same reasons with the same
    preemption verdict. The bit sets say which plugins reject which nodes and which nodes'
    first failures read alike; a group of those whose later plugins fail with one reason
    code each is built from its first node; a group whose nodes differ there is built node
    by node. Without bit sets, every node is built."""
    names = verdict.node_names
    if not names or len(names) != verdict.total_nodes:
        return _by_key(verdict, list(verdict.nodes))
    masks: list[tuple[int, tuple[str, ...]]] = [((1 << len(names)) - 1, ())]
    for plugin, failing in verdict.failing.items():
        split: list[tuple[int, tuple[str, ...]]] = []
        for mask, plugins in masks:
            if mask & failing:
                split.append((mask & failing, (*plugins, plugin)))
            if mask & ~failing:
                split.append((mask & ~failing, plugins))
        masks = split
    index = {name: i for i, name in enumerate(names)} if verdict.preemption.candidates else {}
    candidates = 0
    for name in verdict.preemption.candidates:
        if name in index:
            candidates |= 1 << index[name]
    out: list[_Group] = []
    for whole, plugins in masks:
        for mask in (whole & candidates, whole & ~candidates):
            if not mask:
                continue
            # Split by the first failure's texts (what the row shows; the bit sets say which
            # nodes read which), then by the later plugins' reason codes.
            parts = list(verdict.first_reasons(mask).values())
            rest = mask & ~_union(parts)
            for same_first in [*parts, rest] if rest else parts:
                for alike in _split_by_codes(verdict, same_first, plugins[1:]):
                    shown = lowest_bits(alike, MAX_NAMES_PER_ROW)
                    first = verdict.node_at(shown[0])
                    out.append(_Group(first, alike.bit_count(), [names[i] for i in shown], shown))
    return out


def _split_by_codes(verdict: PodVerdict, mask: int, plugins: tuple[str, ...]) -> list[int]:
    """``mask`` split so that each part's nodes fail each of ``plugins`` with one tuple of
    reason codes (the bit sets say which nodes fail with which)."""
    parts = [mask]
    for plugin in plugins:
        split: list[int] = []
        for part in parts:
            by_codes = list(verdict.reason_code_masks(plugin, part).values())
            rest = part & ~_union(by_codes)
            split.extend([*by_codes, rest] if rest else by_codes)
        parts = split
    return parts


# A device inventory for the nodes named, nearest first (analyzers.gpu_capacity.device_inventory
# bound to the snapshot and the pod's DeviceClasses).
Inventory = Callable[[list[str]], list[dict[str, Any]]]
DEVICE_PLUGINS = (C.DYNAMIC_RESOURCES, NODE_RESOURCES_FIT)  # where devices are what stops the pod


def build_grid(
    verdict: PodVerdict,
    pods: list[str],
    usage: Mapping[str, Mapping[str, int]] | None = None,
    inventory: Inventory | None = None,
) -> dict[str, Any]:
    """The grid of ``verdict`` (one pod's simulated scheduling), for the pods ``pods`` that share it;
    ``usage`` (node → resource → units, from NodeMetrics) adds the real usage to capacity bars;
    ``inventory`` adds the DRA devices of the pod's DeviceClasses on the nodes that fit or whose
    first failure is about devices (nearest first, at most :data:`MAX_CAPACITY_NODES`)."""
    groups = _node_groups(verdict)
    plugins = _plugins(tuple(g.first for g in groups), verdict.kube_version)
    rows: list[dict[str, Any]] = []
    members: dict[int, _Group] = {}
    victims = verdict.preemption.victims
    for group in groups:
        first = group.first
        row = {
            "count": group.count,
            "nodes": group.names,
            "fits": first.fits,
            "failing": len(first.filters),
            "first": first.first.plugin if first.first is not None else None,
            "cells": _cells(plugins, first),
            "preemption": _preemption_of(verdict, first),
            "victims": [
                {"node": name, "pods": [f"{ns}/{pod}" for ns, pod in victims[name]]}
                for name in group.names
                if name in victims
            ],
        }
        members[id(row)] = group
        rows.append(row)
    # Nearest first: nodes that fit; then fewest failing plugins; then nodes where preemption
    # could be tried (a resolvable first failure) before those where it is not helpful; then size.
    rows.sort(
        key=lambda r: (
            not r["fits"],
            r["failing"],
            r["preemption"] == "not-helpful",
            -r["count"],
            r["nodes"][:1],
        )
    )
    capacity: list[dict[str, Any]] = []
    shown = 0
    for row in rows:
        if row["first"] != NODE_RESOURCES_FIT:  # a candidate: capacity is what stops it
            continue
        for member in members[id(row)].members:
            if shown >= MAX_CAPACITY_NODES:
                break
            node = verdict.node_at(member) if isinstance(member, int) else member
            capacity.extend(_capacity(node, usage or {}))
            shown += 1
    devices: list[dict[str, Any]] = []
    if inventory is not None:
        device_nodes: list[str] = []
        for row in rows:
            if not (row["fits"] or row["first"] in DEVICE_PLUGINS):
                continue
            for member in members[id(row)].members[: MAX_CAPACITY_NODES - len(device_nodes)]:
                device_nodes.append(verdict.node_names[member] if isinstance(member, int) else member.node)
        devices = inventory(device_nodes) if device_nodes else []
    banner = None
    for kind, f in (("gated", verdict.gated), ("prefilter", verdict.prefilter)):
        if f is not None:
            banner = {"kind": kind, "plugin": f.plugin, "reasons": list(f.reasons)}
            break
    return {
        "pods": pods,
        "total_nodes": verdict.total_nodes,
        "feasible_nodes": verdict.feasible_nodes,
        "plugins": plugins,
        "banner": banner,
        "message": verdict.message,
        "preemption": {
            "attempted": verdict.preemption.attempted,
            "eligible": verdict.preemption.eligible,
            "message": verdict.preemption.message,
        },
        "rows": rows,
        "capacity": capacity,
        "devices": devices,
        **_allocations(verdict),
    }


def _allocations(verdict: PodVerdict) -> dict[str, Any]:
    """A DRA pod that fits: the devices the structured allocator picks on each feasible node
    (at most :data:`MAX_CAPACITY_NODES`, by name) and on the node kube-scheduler would
    choose (known when one node is feasible), as ``analyze --json`` reports them
    (``pods[].scheduling.nodes[].allocation``, ``pods[].scheduling.allocation``)."""
    if not verdict.allocations:
        return {}
    chosen = verdict.allocation
    return {
        "allocations": [
            {"node": node, "devices": [r.as_dict() for r in verdict.allocations[node]]}
            for node in sorted(verdict.allocations)[:MAX_CAPACITY_NODES]
        ],
        "allocation": None if chosen is None else [r.as_dict() for r in chosen],
    }


MAX_GRIDS = 3  # distinct grids per finding (pods of one template share one)
GRID_KEY = "scheduling_grid"


def grids_for(
    pods: list[str],
    verdicts: dict[str, PodVerdict],
    usage: Mapping[str, Mapping[str, int]] | None = None,
    inventory: Callable[[str], Inventory | None] | None = None,
) -> list[dict[str, Any]]:
    """One grid per distinct verdict among ``pods`` ("ns/name") that have one, at most
    :data:`MAX_GRIDS`; pods whose verdict reads the same share a grid. A pod that fits has
    a grid only when it has DRA allocations to show. ``inventory`` gives a pod's device
    inventory (None without DeviceClasses)."""
    shared: dict[str, tuple[PodVerdict, list[str]]] = {}
    for name in pods:
        verdict = verdicts.get(name)
        if verdict is None or (verdict.fits and not verdict.allocations):
            continue
        key = verdict.message
        if key in shared:
            shared[key][1].append(name)
        elif len(shared) < MAX_GRIDS:
            shared[key] = (verdict, [name])
    return [
        build_grid(verdict, names, usage, inventory(names[0]) if inventory is not None else None)
        for verdict, names in shared.values()
    ]
