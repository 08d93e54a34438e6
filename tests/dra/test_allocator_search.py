"""The allocator's search without recursion (one ExactCount request on plain pools)
against the general backtracking search (allocateOne's port) on random clusters:
the same devices or the same refusal, node by node."""

from __future__ import annotations

import random

from analyzers.ingest_dra import varying_entries
from analyzers.records import (
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceSubRequest,
    FrozenMap,
    Node,
    ResourceSlice,
)
from analyzers.simulator.dra.allocator import AllocatedState, Allocator, ClaimToAllocate

DRIVERS = ("a.example.com", "b.example.com")


def _cluster(rng: random.Random) -> tuple[list[ResourceSlice], AllocatedState, dict[str, DeviceClass]]:
    slices = []
    in_use = set()
    for driver in DRIVERS:
        for k in range(rng.randint(1, 3)):
            # one model for the whole slice (the fast path then evaluates one device of it:
            # ResourceSlice.varying) or a model per device; a unique attribute on each
            uniform = rng.choice(["x", "y"]) if rng.random() < 0.5 else None
            devices = tuple(
                Device(
                    f"dev-{i}",
                    FrozenMap(
                        {
                            "model": ("string", uniform or rng.choice(["x", "y"])),
                            "uuid": ("string", f"u{k}-{i}"),
                        }
                    ),
                )
                for i in range(rng.randint(0, 5))
            )
            pool = f"pool-{rng.randint(0, 1)}"
            count = rng.choice([1, 1, 1, 2])
            slices.append(
                ResourceSlice(
                    f"{driver}-{k}",
                    driver,
                    pool,
                    1,
                    count,
                    node_name="n",
                    devices=devices,
                    plain=rng.random() < 0.7,
                    varying=varying_entries(devices) if rng.random() < 0.7 else None,
                )
            )
            for d in devices:
                if rng.random() < 0.4:
                    in_use.add((driver, pool, d.name))
    classes = {
        "any": DeviceClass("any"),
        "a": DeviceClass("a", (f'device.driver == "{DRIVERS[0]}"',)),
    }
    return slices, AllocatedState(frozenset(in_use)), classes


def test_fast_path_equals_the_general_search() -> None:
    rng = random.Random(23)
    node = Node("n", "uid-n", FrozenMap({}), FrozenMap({}))
    compared = 0
    for _ in range(300):
        slices, state, classes = _cluster(rng)
        sub = DeviceSubRequest(
            "gpu",
            rng.choice(["any", "a"]),
            (f'device.attributes["{rng.choice(DRIVERS)}"].model == "x"',) if rng.random() < 0.3 else (),
            count=rng.randint(1, 4),
        )
        claim = ClaimToAllocate("ns", "c", ClaimSpec((DeviceRequest("gpu", sub),)))
        results = []
        for fast in (True, False):
            alloc = Allocator(state, classes, slices)
            alloc.use_fast_path = fast
            try:
                results.append(("ok", alloc.allocate(node, [claim])))
            except Exception as exc:  # the same error either way
                results.append(("error", str(exc)))
        assert results[0] == results[1]
        compared += 1
    assert compared == 300


def test_varying_entries_names_what_differs_between_devices() -> None:
    devices = (
        Device(
            "a", FrozenMap({"model": ("string", "x"), "uuid": ("string", "1")}), FrozenMap({"mem": "1Gi"})
        ),
        Device(
            "b", FrozenMap({"model": ("string", "x"), "uuid": ("string", "2")}), FrozenMap({"mem": "1Gi"})
        ),
        Device("c", FrozenMap({"model": ("string", "x")}), FrozenMap({"mem": "1Gi"})),
    )
    assert varying_entries(devices) == {(True, "uuid")}
    assert varying_entries(devices[:1]) == frozenset()
