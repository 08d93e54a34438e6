"""Fuzz `unstick analyze` with objects whose fields have the wrong type.

A small cluster (a Node, a pending Pod, its Deployment and a PDB, with the
fields kubectl prints) is analysed once as is; then one field at any depth of
one object is replaced by a value of another JSON type. `analyze` runs
in-process (agent.cli.main) and must never raise: it exits 0 or 2, prints
only `unstick: warning|error:` lines on stderr, and either names the field it
refused, or the field was one it does not read and the analysis is exactly
the one of the intact cluster.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.inprocess import run

NOW = "2026-11-20T10:30:00Z"
TIME = "2026-11-20T10:00:00Z"

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "gpu-1",
        "uid": "n-1",
        "labels": {"kubernetes.io/hostname": "gpu-1", "topology.kubernetes.io/zone": "a"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        "creationTimestamp": "2026-11-01T00:00:00Z",
    },
    "spec": {
        "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        "unschedulable": False,
        "podCIDR": "10.0.0.0/24",
    },
    "status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1", "pods": "110"},
        "allocatable": {"cpu": "7800m", "memory": "30Gi", "nvidia.com/gpu": "1", "pods": "110"},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": TIME,
                "lastTransitionTime": "2026-11-01T00:01:00Z",
            }
        ],
        "nodeInfo": {"kubeletVersion": "v1.31.2", "osImage": "Ubuntu 24.04"},
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
    },
}
TEMPLATE_SPEC = {
    "containers": [
        {
            "name": "trainer",
            "image": "trainer:2",
            "resources": {
                "requests": {"cpu": "500m", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"},
            },
            "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}],
        }
    ],
    "nodeSelector": {"kubernetes.io/hostname": "gpu-1"},
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
                        ]
                    }
                ]
            }
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "trainer"}},
                }
            ]
        },
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        }
    ],
    "priority": 0,
    "schedulerName": "default-scheduler",
    "restartPolicy": "Always",
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "trainer",
        "namespace": "ml",
        "uid": "d-1",
        "generation": 4,
        "labels": {"app": "trainer"},
        "annotations": {"deployment.kubernetes.io/revision": "4"},
        "creationTimestamp": "2026-11-10T00:00:00Z",
    },
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "trainer"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
        "progressDeadlineSeconds": 600,
        "template": {"metadata": {"labels": {"app": "trainer"}}, "spec": TEMPLATE_SPEC},
    },
    "status": {
        "replicas": 1,
        "updatedReplicas": 0,
        "readyReplicas": 0,
        "observedGeneration": 4,
        "conditions": [
            {
                "type": "Progressing",
                "status": "True",
                "reason": "ReplicaSetUpdated",
                "lastTransitionTime": TIME,
            }
        ],
    },
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "trainer-7c9d-q7wz4",
        "namespace": "ml",
        "uid": "p-1",
        "labels": {"app": "trainer", "pod-template-hash": "7c9d"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "trainer-7c9d",
                "uid": "rs-1",
                "controller": True,
            }
        ],
        "creationTimestamp": "2026-11-20T09:50:00Z",
    },
    "spec": TEMPLATE_SPEC,
    "status": {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
                "lastTransitionTime": "2026-11-20T09:50:01Z",
            }
        ],
        "qosClass": "Burstable",
    },
}
PDB = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {
        "name": "trainer",
        "namespace": "ml",
        "uid": "b-1",
        "creationTimestamp": "2026-11-10T00:00:00Z",
    },
    "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "trainer"}}},
    "status": {"expectedPods": 1, "desiredHealthy": 1, "currentHealthy": 0, "disruptionsAllowed": 0},
}
OBJECTS = (NODE, POD, DEPLOYMENT, PDB)


def paths(value: Any, prefix: str = "") -> Iterator[tuple[str, tuple[Any, ...]]]:
    """Every field and list item below ``value``: (the path as unstick's
    messages write it, the keys that reach it)."""
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{prefix}.{k}" if prefix else k
            yield p, (k,)
            for sub, keys in paths(v, p):
                yield sub, (k, *keys)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            p = f"{prefix}[{i}]"
            yield p, (i,)
            for sub, keys in paths(v, p):
                yield sub, (i, *keys)


ALL_PATHS = [(index, path, keys) for index, o in enumerate(OBJECTS) for path, keys in paths(o)]


def json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


NUMERIC = re.compile(r"^[0-9.]+(%|[A-Za-z]{0,2})$")

# Values no field takes in place of a value of another JSON type: a number
# replaces only a non-number (a quantity or an int-or-percent may be "1" or 1).
WRONG = (
    {"unexpected": 1},
    [1, "two"],
    True,
    7,
    "seven",
)


def analyze(folder: Path) -> tuple[int, str, str]:
    """`unstick analyze FOLDER --json` in-process; any exception is a failure of the test."""
    return run("analyze", str(folder), "--json", "--now", NOW)


def write(folder: Path, objects: tuple[Any, ...]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cluster.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    )


_INTACT: list[str] = []


def intact_output(tmp_path_factory: Any) -> str:
    if not _INTACT:
        base = tmp_path_factory.mktemp("intact")
        write(base, OBJECTS)
        _INTACT.append(analyze(base)[1])
    return _INTACT[0]


def test_the_intact_cluster_is_analysed_without_warnings(tmp_path: Path) -> None:
    write(tmp_path, OBJECTS)
    code, out, err = analyze(tmp_path)
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert [p["name"] for p in doc["pods"]] == ["trainer-7c9d-q7wz4"]
    assert doc["deployments"] and doc["pdbs"]


@settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(target=st.sampled_from(ALL_PATHS), wrong=st.sampled_from(WRONG))
def test_a_field_of_the_wrong_type_is_named_or_harmless(
    tmp_path_factory: Any, target: tuple[int, str, tuple[Any, ...]], wrong: Any
) -> None:
    index, path, keys = target
    objects = copy.deepcopy(OBJECTS)
    parent = objects[index]
    for key in keys[:-1]:
        parent = parent[key]
    original = parent[keys[-1]]
    if json_kind(original) == json_kind(wrong) or (isinstance(wrong, int) and NUMERIC.match(str(original))):
        return  # not a wrong type: a quantity or an int-or-percent may be a number
    parent[keys[-1]] = wrong

    expected = intact_output(tmp_path_factory)
    folder = tmp_path_factory.mktemp("mutated")
    write(folder, objects)

    code, out, err = analyze(folder)
    assert code in (0, 2), err
    lines = err.splitlines()
    assert all(line.startswith(("unstick: warning: ", "unstick: error: ")) for line in lines), err
    assert "internal error" not in err and "Traceback" not in err, err
    named = [line for line in lines if f": {path}: " in line or line.endswith(f": {path}")]
    if named:
        assert len(named) == 1 and "cluster.json" in named[0], err
        return
    # Not named: unstick does not read the field, so nothing may change.
    assert not lines, f"{path} = {wrong!r} gave warnings that do not name it:\n{err}"
    assert code == 0 and out == expected, f"{path} = {wrong!r} changed the analysis without a warning"
