"""Kubernetes' allocator table (allocator_testing.go, v0.37.2), the cases ported as
data in tests/dra/data/allocator_cases.yaml, run against unstick's allocator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from analyzers.records import (
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
    FrozenMap,
    Node,
    NodeSelector,
    NodeSelectorTerm,
    Requirement,
    ResourceSlice,
)
from analyzers.simulator.dra.allocator import (
    AllocatedState,
    AllocationError,
    Allocator,
    ClaimToAllocate,
    InvalidPools,
)

TABLE = yaml.safe_load((Path(__file__).parent / "data" / "allocator_cases.yaml").read_text())
KINDS = ("string", "int", "bool", "version")


def _device(d: dict[str, Any]) -> Device:
    attrs = {}
    for name, value in (d.get("attributes") or {}).items():
        ((kind, v),) = value.items()
        attrs[name] = (kind, str(v) if kind in ("string", "version") else v)
    return Device(
        d["name"], FrozenMap(attrs), FrozenMap({k: str(v) for k, v in (d.get("capacity") or {}).items()})
    )


def _slice(s: dict[str, Any]) -> ResourceSlice:
    selector = None
    if "selector" in s:
        reqs = tuple(Requirement(k, "In", (v,)) for k, v in s["selector"].items())
        selector = NodeSelector((NodeSelectorTerm(reqs),))
    return ResourceSlice(
        s["name"],
        s["driver"],
        s["pool"],
        s.get("generation", 1),
        s.get("count", 1),
        node_name=s.get("node", ""),
        all_nodes=bool(s.get("all")),
        node_selector=selector,
        devices=tuple(_device(d) for d in s.get("devices") or ()),
    )


def _claim(c: dict[str, Any]) -> ClaimToAllocate:
    requests = tuple(
        DeviceRequest(
            r["name"],
            DeviceSubRequest(
                r["name"],
                r["class"],
                tuple(r.get("selectors") or ()),
                "All" if r.get("all") else "ExactCount",
                r.get("count", 1),
            ),
        )
        for r in c["requests"]
    )
    constraints = tuple(DeviceConstraint((), attr) for attr in c.get("constraints") or ())
    return ClaimToAllocate("default", c["name"], ClaimSpec(requests, constraints))


@pytest.mark.parametrize("name", sorted(TABLE["cases"]))
@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "general-search"])
def test_kubernetes_allocator_case(name: str, fast: bool) -> None:
    case = {**TABLE["defaults"], **TABLE["cases"][name]}
    classes = {
        cls: DeviceClass(cls, (f'device.driver == "{driver}"',))
        for cls, driver in (case.get("classes") or {}).items()
    }
    allocated = AllocatedState(frozenset(tuple(d) for d in case.get("allocated") or ()))
    n = case["node"]
    node = Node(n["name"], "uid", FrozenMap(n.get("labels") or {}), FrozenMap({}))
    allocator = Allocator(allocated, classes, [_slice(s) for s in case["slices"]])
    allocator.use_fast_path = fast
    claims = [_claim(c) for c in case["claims"]]
    expect = case["expect"]
    if isinstance(expect, dict):
        with pytest.raises((AllocationError, InvalidPools), match=expect["error"]):
            allocator.allocate(node, claims)
        return
    found = allocator.allocate(node, claims)
    if expect is None:
        assert found is None
        return
    assert found is not None
    assert [[[r.request, r.driver, r.pool, r.device] for r in per_claim] for per_claim in found] == expect
