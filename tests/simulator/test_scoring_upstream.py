"""Kubernetes' own score-plugin unit tests (v1.37.2), ported as data
(tests/simulator/upstream/scoring/*.yaml) and run through the Score phase with
only that plugin enabled, plus the Score phase's own rules."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from analyzers.simulator.nodeinfo import node_table
from analyzers.simulator.scoring import score_pod
from analyzers.simulator.scoring.fit import broken_linear
from analyzers.simulator.scoring.framework import go_div, go_round, num_feasible_nodes_to_find
from analyzers.simulator.scoring.profile import DEFAULT_PROFILE
from analyzers.snapshot import ClusterSnapshot

DATA = Path(__file__).parent / "upstream" / "scoring"
CASES = yaml.safe_load((DATA / "noderesources.yaml").read_text())


def _pod(name: str, containers: list[dict[str, str]], node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": f"c{i}", "image": "x", "resources": {"requests": r}} for i, r in enumerate(containers)
        ]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def _node(name: str, capacity: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": capacity},
    }


@pytest.mark.parametrize("case", CASES, ids=[c["source"] for c in CASES])
def test_upstream_noderesources_scores(case: dict[str, Any]) -> None:
    objs = [_node(n, cap) for n, cap in case["nodes"].items()]
    objs += [_pod(f"e{i}", containers, node) for i, (node, containers) in enumerate(case["existing"])]
    objs.append(_pod("incoming", case["pod"]))
    snap = ClusterSnapshot.from_objects(objs)
    if case["strategy"] == "Balanced":
        profile = replace(DEFAULT_PROFILE, score_plugins=(("NodeResourcesBalancedAllocation", 1),))
    else:
        profile = replace(
            DEFAULT_PROFILE, score_plugins=(("NodeResourcesFit", 1),), fit_strategy=case["strategy"]
        )
    table = node_table(snap)
    phase = score_pod(snap, snap.pods[("default", "incoming")], list(range(table.size)), profile)
    got = {table.names[n]: phase.scores[0][k] for k, n in enumerate(phase.nodes)}
    assert got == case["expected"]


def test_go_arithmetic_truncates_toward_zero_and_rounds_half_away() -> None:
    assert go_div(-7, 2) == -3 and go_div(7, 2) == 3 and go_div(-7, -2) == 3
    assert go_round(2.5) == 3 and go_round(-2.5) == -3 and go_round(0.49) == 0


def test_broken_linear_shape_interpolates_with_go_division() -> None:
    # requested_to_capacity_ratio.go: shape {0: 10, 100: 0} scaled by 10.
    shape = ((0, 100), (100, 0))
    assert broken_linear(shape, 0) == 100
    assert broken_linear(shape, 33) == 67  # 100 + (-100 * 33) / 100 truncates toward zero
    assert broken_linear(shape, 150) == 0


@pytest.mark.parametrize(
    ("pct", "nodes", "want"),
    [
        (None, 50, 50),
        (None, 1000, 420),
        (None, 5000, 500),
        (None, 6000, 300),
        (100, 5000, 5000),
        (10, 500, 100),
    ],
)
def test_num_feasible_nodes_to_find(pct: int | None, nodes: int, want: int) -> None:
    # schedule_one.go: 1000 nodes -> 50 - 8 = 42%; 5000 -> 10%; 6000 -> 2% -> at least 5% = 300.
    assert num_feasible_nodes_to_find(pct, nodes) == want


PLUGIN_CASES = yaml.safe_load((DATA / "plugins.yaml").read_text()) + yaml.safe_load(
    (DATA / "volumebinding.yaml").read_text()
)


def _volume_objects(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The StorageClasses (WaitForFirstConsumer, no provisioner), PVs (Available) and
    claims (Pending) of a VolumeBinding case; the claims become the incoming pod's volumes."""
    if "claims" not in case:
        return []
    classes = sorted({c for _, c, _ in case["claims"]} | {c for _, c, _, _ in case.get("pvs", [])})
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": c},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
        for c in classes
    ]
    for name, cls, gib, affinity in case.get("pvs", []):
        terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": v} for k, v in affinity.items()]}]
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {
                    "storageClassName": cls,
                    "capacity": {"storage": f"{gib}Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "nodeAffinity": {"required": {"nodeSelectorTerms": terms}},
                },
                "status": {"phase": "Available"},
            }
        )
    for name, cls, gib in case["claims"]:
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "storageClassName": cls,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": f"{gib}Gi"}},
                },
                "status": {"phase": "Pending"},
            }
        )
    return objs


@pytest.mark.parametrize(
    "case", PLUGIN_CASES, ids=[c["source"].rsplit(" ", 1)[0][-60:] for c in PLUGIN_CASES]
)
def test_upstream_plugin_scores_through_a_scheduler_configuration(case: dict[str, Any]) -> None:
    """Each case with only its plugin enabled at the score point, by a
    KubeSchedulerConfiguration parsed as ``--scheduler-config`` parses it."""
    from analyzers.simulator.schedconfig import parse_config

    profile_doc: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": case["plugin"]}]}},
    }
    if "args" in case:
        profile_doc["pluginConfig"] = [{"name": case["plugin"], "args": case["args"]}]
    profile = parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [profile_doc],
        }
    )["default-scheduler"]
    assert [n for n, _ in profile.score_plugins] == [case["plugin"]]
    objs: list[dict[str, Any]] = []
    for n in case["nodes"]:
        obj = _node(n["name"], {"cpu": "4", "memory": "8Gi", "pods": "110"})
        obj["metadata"]["labels"] = n.get("labels", {})
        if n.get("taints"):
            obj["spec"] = {"taints": n["taints"]}
        if n.get("images"):
            obj["status"]["images"] = [
                {"names": names, "sizeBytes": mib * 2**20} for names, mib in n["images"]
            ]
        objs.append(obj)
    for k, (where, labels, *spec) in enumerate(case.get("existing", [])):
        existing = _pod(f"e{k}", [], where)
        existing["metadata"]["labels"] = labels
        if spec:
            existing["spec"].update(spec[0])
        objs.append(existing)
    incoming = _pod("incoming", [])
    incoming["spec"].update(case.get("pod", {}))
    incoming["metadata"]["labels"] = case.get("pod_labels", {})
    if "claims" in case:
        incoming["spec"]["volumes"] = [
            {"name": name, "persistentVolumeClaim": {"claimName": name}} for name, _, _ in case["claims"]
        ]
    objs.append(incoming)
    objs += _volume_objects(case)
    snap = ClusterSnapshot.from_objects(objs)
    table = node_table(snap)
    infeasible = {n["name"] for n in case["nodes"] if n.get("feasible") is False}
    feasible = [i for i, name in enumerate(table.names) if name not in infeasible]
    phase = score_pod(snap, snap.pods[("default", "incoming")], feasible, profile)
    got = {table.names[n]: phase.scores[0][k] for k, n in enumerate(phase.nodes)}
    assert got == case["expected"]


def test_volume_binding_scores_every_pod_with_storage_capacity_scoring_on() -> None:
    """volume_binding.go PreScore (v1.37.2): with StorageCapacityScoring on (the default)
    a pod without claims is not skipped: it scores 0 on every node (weight 1)."""
    snap = ClusterSnapshot.from_objects(
        [_node("n1", {"cpu": "4", "memory": "8Gi"}), _pod("incoming", [{"cpu": "1"}])]
    )
    phase = score_pod(snap, snap.pods[("default", "incoming")], [0], DEFAULT_PROFILE)
    assert "VolumeBinding" not in phase.skipped
    assert phase.node_scores(0)["VolumeBinding"] == 0
    assert dict(zip(phase.plugins, phase.weights, strict=True))["VolumeBinding"] == 1


def test_volume_binding_a_claim_to_provision_scores_zero_without_storage_capacity() -> None:
    """A node where the claim is provisioned has no static binding; its capacity would
    come from CSIStorageCapacity, which the snapshot lacks: no class, score 0 -- while a
    node with a matching PV scores from it."""
    case = {
        "claims": [["pvc-a", "wait-sc", 50]],
        "pvs": [["pv-a", "wait-sc", 100, {"kubernetes.io/hostname": ["n1"]}]],
    }
    objs = [_node(n, {"cpu": "4", "memory": "8Gi"}) for n in ("n1", "n2")]
    incoming = _pod("incoming", [])
    incoming["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": "pvc-a"}}]
    objs += [incoming, *_volume_objects(case)]
    objs[-3]["provisioner"] = "example.com/csi"  # the class can provision anywhere
    snap = ClusterSnapshot.from_objects(objs)
    phase = score_pod(snap, snap.pods[("default", "incoming")], [0, 1], DEFAULT_PROFILE)
    k = phase.plugins.index("VolumeBinding")
    assert phase.scores[k] == (50, 0)


# --- Releases whose score code differs (docs/placement.md "Releases") ---------------------


def _balanced_phase(kube_version: str | None) -> Any:
    from tests.simulator.builders import snapshot as build

    objs = [_node("n1", {"cpu": "4", "memory": "8Gi"}), _pod("e", [{"cpu": "3", "memory": "1Gi"}], "n1")]
    objs.append(_pod("incoming", [{"cpu": "0", "memory": "3Gi"}]))
    snap = build(*objs, kube_version=kube_version)
    profile = replace(DEFAULT_PROFILE, score_plugins=(("NodeResourcesBalancedAllocation", 1),))
    return score_pod(snap, snap.pods[("default", "incoming")], [0], profile)


@pytest.mark.parametrize(
    ("kube_version", "want"),
    [
        # Without the pod: cpu 3/4, memory 1/8 -> std 0.3125 -> 68; with it: 3/4, 4/8 -> std 0.125 -> 87.
        ("1.34.7", 87),  # balanced_allocation.go v1.34.7/v1.35.4: balanced(with) alone
        ("1.35.4", 87),
        ("1.36.0", 50 + (50 + 87 - 68) // 2),  # since v1.36.0: the change the pod makes = 84
        ("1.37.2", 84),
        (None, 84),  # no release in the dump: v1.37's code
    ],
)
def test_balanced_allocation_formula_by_release(kube_version: str | None, want: int) -> None:
    assert _balanced_phase(kube_version).scores[0] == (want,)


@pytest.mark.parametrize(("kube_version", "scored"), [("1.36.5", False), ("1.37.0", True)])
def test_volume_binding_scores_only_from_1_37(kube_version: str, scored: bool) -> None:
    """StorageCapacityScoring is off by default before v1.37 (alpha 1.33-1.36): no scorer,
    PreScore returns Skip, the pod has no VolumeBinding score at all."""
    from tests.simulator.builders import snapshot as build

    snap = build(_node("n1", {"cpu": "4", "memory": "8Gi"}), _pod("incoming", []), kube_version=kube_version)
    phase = score_pod(snap, snap.pods[("default", "incoming")], [0], DEFAULT_PROFILE)
    assert ("VolumeBinding" in phase.plugins) is scored
    assert ("VolumeBinding" in phase.skipped) is not scored
