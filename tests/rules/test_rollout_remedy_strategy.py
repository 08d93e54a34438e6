"""The rollout-surge-deadlock remedy: its patch is the strategy that was simulated,
and a remedy that frees too little is not called verified."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from analyzers.findings import Finding
from analyzers.ingest import parse_time
from analyzers.report import build_report
from analyzers.rules import rollout_surge_deadlock
from analyzers.snapshot import ClusterState
from tests.scenarios.test_golden import load_case

CASE = Path(__file__).parents[1] / "scenarios" / "rollout-surge-deadlock" / "gpu-tracker"
GPU = "nvidia.com/gpu"


def analyse(objects: list[dict[str, Any]]) -> list[Finding]:
    state = ClusterState("1.30")
    state.load(objects)
    now = parse_time("2026-11-20T10:12:00Z")
    assert now is not None
    return [
        f for f in build_report(state.snapshot(), now=now).findings if f.rule_id == "rollout-surge-deadlock"
    ]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def set_gpus(spec: dict[str, Any], n: int) -> None:
    for c in spec["containers"]:
        res = c.setdefault("resources", {})
        for part in ("requests", "limits"):
            if GPU in res.get(part, {}):
                res[part][GPU] = str(n)


def two_replicas_new_pod_needs_two_gpus() -> list[dict[str, Any]]:
    """Two old pods hold one GPU each on a two-GPU node; the new revision asks for 2."""
    objects, _ = load_case(CASE)
    objects = copy.deepcopy(objects)
    node = next(n for n in by_kind(objects, "Node") if n["metadata"]["name"] == "tracker-node")
    for part in ("capacity", "allocatable"):
        node["status"][part][GPU] = "2"
    dep = by_kind(objects, "Deployment")[0]
    dep["spec"]["replicas"] = 2
    set_gpus(dep["spec"]["template"]["spec"], 2)
    old_rs, new_rs = sorted(by_kind(objects, "ReplicaSet"), key=lambda r: r["metadata"]["name"])
    assert old_rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    old_rs["spec"]["replicas"] = 2
    set_gpus(new_rs["spec"]["template"]["spec"], 2)
    old_pod = next(
        p for p in by_kind(objects, "Pod") if p["metadata"]["name"].startswith(old_rs["metadata"]["name"])
    )
    twin = copy.deepcopy(old_pod)
    twin["metadata"]["name"] = old_pod["metadata"]["name"][:-5] + "z7m4q"
    twin["metadata"]["uid"] = "uid-twin"
    objects.append(twin)
    new_pod = next(
        p for p in by_kind(objects, "Pod") if p["metadata"]["name"].startswith(new_rs["metadata"]["name"])
    )
    set_gpus(new_pod["spec"], 2)
    new_pod["status"].pop("conditions", None)
    return objects


def strategy_remedy(finding: Finding) -> Any:
    return next(r for r in finding.remedies if "maxSurge" in r.title)


def test_the_patch_is_the_simulated_strategy_old_pod_first() -> None:
    objects, _ = load_case(CASE)
    [finding] = analyse(objects)
    remedy = strategy_remedy(finding)
    patch = yaml.safe_load(remedy.yaml)
    surge, unavailable = rollout_surge_deadlock.OLD_POD_FIRST
    assert (surge, unavailable) == (0, 1)
    assert patch["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
    }
    assert remedy.verified
    # One old pod (maxUnavailable 1) was scaled down in the simulation, named in the verification.
    assert remedy.verification.startswith(
        "re-simulated with vision-object-tracker-6d8f9c7b5-x2k9p scaled down first"
    )


def test_freeing_max_unavailable_old_pods_is_not_enough_so_the_remedy_is_unverified() -> None:
    [finding] = analyse(two_replicas_new_pod_needs_two_gpus())
    remedy = strategy_remedy(finding)
    assert not remedy.verified
    assert "still unschedulable" in remedy.verification
    # exactly one of the two old pods was let go (maxUnavailable 1), not both
    assert remedy.verification.count("vision-object-tracker-6d8f9c7b5-") == 1
    recreate = next(r for r in finding.remedies if "Recreate" in r.title)
    assert recreate.verified, recreate.verification
