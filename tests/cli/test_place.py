"""``unstick place``: the JSON contract, sequential replicas, the scheduler
configuration and its errors (one line, exit 2), on small dumps and seed 003."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.inprocess import run
from tests.simulator.builders import node, pod, taint

SEED_003 = (
    Path(__file__).parents[1] / "scenarios" / "requests-missing-load-skew" / "seed-003-cassandra-no-requests"
)


def _dump(tmp_path: Path, *objs: dict[str, Any]) -> str:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objs)}))
    return str(path)


def _config(tmp_path: Path, doc: Any) -> str:
    path = tmp_path / "sched.yaml"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return str(path)


def _cluster(tmp_path: Path) -> str:
    return _dump(
        tmp_path,
        node("big", cpu="8", memory="16Gi"),
        node("small", cpu="2", memory="16Gi"),
        node("tainted", cpu="8", memory="16Gi", taints=[taint("spot", "yes", "PreferNoSchedule")]),
        node("gpu", cpu="8", memory="16Gi", labels={"pool": "gpu"}, taints=[taint("gpu", "yes")]),
        pod("busy", node_name="big", requests={"cpu": "4", "memory": "1Gi"}),
        pod("web", requests={"cpu": "500m", "memory": "512Mi"}),
    )


def test_json_contract(tmp_path: Path) -> None:
    code, out, err = run("place", _cluster(tmp_path), "--pod", "default/web", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["pod"] == "default/web" and doc["profile"] == "default-scheduler" and doc["scored"] == "all"
    rows = {n["node"]: n for n in doc["nodes"]}
    assert rows["gpu"] == {
        "node": "gpu",
        "feasible": False,
        "reason": "node(s) had untolerated taint {gpu: yes}",
    }
    # PreferNoSchedule: TaintToleration 0 on the tainted node, 100 elsewhere (normalized, reversed).
    assert rows["tainted"]["scores"]["TaintToleration"] == 0
    assert rows["big"]["scores"]["TaintToleration"] == 100
    # LeastAllocated on big: cpu (8000-4500)*100/8000 = 43, memory (16384-1536)*100/16384 = 90 -> 66.
    assert rows["big"]["scores"]["NodeResourcesFit"] == 66
    for row in rows.values():
        if row["feasible"]:
            weights = {"TaintToleration": 3, "NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1}
            weights |= {"ImageLocality": 1, "NodeAffinity": 2, "PodTopologySpread": 2, "InterPodAffinity": 2}
            weights |= {"VolumeBinding": 1}  # StorageCapacityScoring (on in v1.37): 0 without claims
            assert row["total"] == sum(s * weights[p] for p, s in row["scores"].items())
    best = max(r["total"] for r in rows.values() if r["feasible"])
    assert doc["top"] == [n for n, r in rows.items() if r.get("total") == best]
    assert "placements" not in doc


def test_replicas_fill_the_best_node_then_spread(tmp_path: Path) -> None:
    code, out, err = run("place", _cluster(tmp_path), "--pod", "default/web", "--replicas", "3", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [p["replica"] for p in doc["placements"]] == [1, 2, 3]
    assert doc["placements"][0]["top"] == doc["top"]
    assert sum(doc["distribution"].values()) == pytest.approx(3)
    assert doc["distribution_method"] == "exact"


def test_most_allocated_packs(tmp_path: Path) -> None:
    cfg = _config(
        tmp_path,
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {
                        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit"}]}
                    },
                    "pluginConfig": [
                        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
                    ],
                }
            ],
        },
    )
    code, out, err = run(
        "place", _cluster(tmp_path), "--pod", "default/web", "--scheduler-config", cfg, "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    # Only NodeResourcesFit scores; MostAllocated prefers the node already half full.
    assert all(set(n.get("scores", {})) <= {"NodeResourcesFit"} for n in doc["nodes"])
    assert doc["top"] == ["big"]


def test_a_disabled_filter_filters_nothing(tmp_path: Path) -> None:
    cfg = _config(
        tmp_path,
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}},
                }
            ],
        },
    )
    code, out, err = run(
        "place", _cluster(tmp_path), "--pod", "default/web", "--scheduler-config", cfg, "--json"
    )
    assert code == 0, err
    rows = {n["node"]: n for n in json.loads(out)["nodes"]}
    assert rows["gpu"]["feasible"] is True


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (": [", "not YAML"),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
             "profiles": [{"schedulerName": "default-scheduler",
                           "plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}}}]},
            "profiles[0].plugins.score.enabled[0].name",
        ),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
             "profiles": [{"schedulerName": "default-scheduler",
                           "plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": -1}]}}}]},
            "profiles[0].plugins.score.enabled[0].weight",
        ),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
             "profiles": [{"schedulerName": "default-scheduler",
                           "pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": "x"}}]}]},
            "profiles[0].pluginConfig[0].args.hardPodAffinityWeight",
        ),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
             "percentageOfNodesToScore": 101},
            "percentageOfNodesToScore",
        ),
    ],
)  # fmt: skip
def test_bad_configuration_is_one_line_naming_file_and_field(tmp_path: Path, doc: Any, field: str) -> None:
    cfg = _config(tmp_path, doc)
    code, out, err = run(
        "place", _cluster(tmp_path), "--pod", "default/web", "--scheduler-config", cfg, "--json"
    )
    assert code == 2
    assert err.count("\n") == 1 and cfg in err and field in err
    assert field in json.loads(out)["error"]


def test_missing_and_terminating_pods_say_so(tmp_path: Path) -> None:
    dump = _dump(tmp_path, node("n1"), pod("gone", node_name="n1", deleting=True))
    code, _, err = run("place", dump, "--pod", "default/nope")
    assert code == 2 and "no such pod" in err and err.count("\n") == 1
    code, _, err = run("place", dump, "--pod", "default/gone")
    assert code == 2 and "terminating" in err


def test_seed_003_requestless_replicas_land_by_nonzero_defaults() -> None:
    code, out, err = run(
        "place", str(SEED_003), "--pod", "web/deploy/web-frontend", "--replicas", "20", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert sum(doc["distribution"].values()) == pytest.approx(20)
    assert len(doc["placements"]) == 20
    feasible = [n for n in doc["nodes"] if n["feasible"]]
    assert feasible and all("NodeResourcesFit" in n["scores"] for n in feasible)


def test_a_running_pod_is_scheduled_as_if_now_without_its_own_requests(tmp_path: Path) -> None:
    dump = _dump(
        tmp_path,
        node("a", cpu="4", memory="16Gi"),
        node("b", cpu="4", memory="16Gi"),
        pod("big", node_name="a", requests={"cpu": "3", "memory": "1Gi"}),
    )
    code, out, err = run("place", dump, "--pod", "default/big", "--json")
    assert code == 0, err
    doc = json.loads(out)
    rows = {n["node"]: n for n in doc["nodes"]}
    # Its own 3 cpu are taken off node a first: both nodes are empty, so they tie.
    assert rows["a"]["scores"]["NodeResourcesFit"] == rows["b"]["scores"]["NodeResourcesFit"]
    assert doc["current_node"] == "a" and doc["current_rank"] in (1, 2)
    assert sorted(doc["top"]) == ["a", "b"]
    code, out, _ = run("place", dump, "--pod", "default/big")
    assert code == 0 and "It runs on a, which would rank" in out
