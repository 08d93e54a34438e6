"""The differential generator (tests/realcluster/generator.py) covers the ground issue 22
names, and the simulator judges every case it makes without failing (offline: the
real-scheduler comparison is tests/realcluster/test_differential.py)."""

from __future__ import annotations

import copy
import random
from typing import Any

from analyzers.simulator import simulate
from analyzers.snapshot import ClusterSnapshot
from tests.realcluster.generator import (
    FINALIZER,
    NAMESPACE,
    PRIORITY_CLASSES,
    Case,
    daemon_set_of,
    label_zones_of,
    make_case,
)

SEED = 20261127
CASES = 60


def _cases() -> list[Case]:
    rng = random.Random(SEED)
    return [make_case(rng, i) for i in range(CASES)]


def test_the_generator_covers_the_missed_ground() -> None:
    cases = _cases()
    pooled = [c for c in cases if c.pooled]
    assert pooled and all(20 <= len(c.nodes) <= 120 for c in pooled)
    assert {n["metadata"]["labels"]["pool"] for c in pooled for n in c.nodes} >= {"general", "compute"}
    for c in cases:
        per_node = len(c.daemon_pods) // max(1, len(c.daemon_sets))
        assert len(c.daemon_pods) == len(c.daemon_sets) * len(c.nodes) and (not c.daemon_sets or per_node)
        names = {d["metadata"]["name"] for d in c.daemon_sets}
        assert all(daemon_set_of(p) in names for p in c.daemon_pods)
        for pdb in c.pdbs:
            assert isinstance(pdb["spec"]["minAvailable"], int)
        if c.in_flight:
            assert all(p["metadata"].get("finalizers") == [FINALIZER] for p in c.existing)
        held = set(c.terminating)
        assert all(
            FINALIZER in p["metadata"].get("finalizers", ())
            for p in c.existing
            if p["metadata"]["name"] in held
        )
        sizes = [
            o["spec"]["capacity"]["storage"]
            for o in c.storage
            if o["kind"] == "PersistentVolume" and not o["metadata"]["labels"]
        ]
        assert len(sizes) == len(set(sizes)), "WaitForFirstConsumer volumes of one case have distinct sizes"
    assert (
        any(c.in_flight for c in cases) and any(c.terminating for c in cases) and any(c.pdbs for c in cases)
    )
    assert any(p["spec"].get("volumes") for c in cases for p in c.probes)
    assert any("__" in v for c in cases for v in label_zones_of(c))
    assert sum(len(c.probes) for c in cases) >= 300


def _objects(case: Case) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in PRIORITY_CLASSES.items()
    ]
    objs += copy.deepcopy(case.nodes)
    for obj in copy.deepcopy([*case.storage, *case.daemon_pods, *case.existing, *case.pdbs, *case.probes]):
        if obj["kind"] not in ("PersistentVolume", "StorageClass"):
            obj["metadata"]["namespace"] = "default"
        ref = obj.get("spec", {}).get("claimRef")
        if ref is not None and ref["namespace"] == NAMESPACE:
            ref["namespace"] = "default"
        objs.append(obj)
    return objs


def test_the_simulator_judges_every_generated_probe() -> None:
    judged = 0
    for case in _cases()[:20]:
        snap = ClusterSnapshot.from_objects(_objects(case), kube_version="1.37.2")
        for probe in case.probes:
            verdict = simulate(snap, snap.pods[("default", probe["metadata"]["name"])])
            assert verdict.total_nodes == len(case.nodes)
            assert verdict.fits or verdict.message.startswith(f"0/{len(case.nodes)} nodes are available: ")
            judged += 1
    assert judged >= 150
