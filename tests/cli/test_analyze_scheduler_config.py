"""``unstick analyze --scheduler-config``: the cluster's profiles decide which pods
kube-scheduler serves and which filters run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.cli.inprocess import run
from tests.simulator.builders import node, pod, taint


def _write(tmp_path: Path, name: str, doc: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if name.endswith(".json") else yaml.safe_dump(doc))
    return str(path)


def _dump(tmp_path: Path) -> str:
    items = [
        node("n1", taints=[taint("dedicated", "gpu")]),
        pod("web", requests={"cpu": "100m"}, created="2026-11-18T03:00:00Z"),
        pod("gpu-job", requests={"cpu": "100m"}, created="2026-11-18T03:00:00Z"),
    ]
    items[2]["spec"]["schedulerName"] = "gpu-packing"
    return _write(tmp_path, "dump.json", {"apiVersion": "v1", "kind": "List", "items": items})


def _config(profiles: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": profiles,
    }


def _pods(out: str) -> dict[str, Any]:
    return {f"{p['namespace']}/{p['name']}": p for p in json.loads(out)["pods"]}


def test_default_configuration_serves_only_default_scheduler(tmp_path: Path) -> None:
    code, out, err = run("analyze", _dump(tmp_path), "--json", "--now", "2026-11-18T03:30:00Z")
    assert code in (0, 1), err
    pods = _pods(out)
    assert "default/web" in pods and "default/gpu-job" not in pods
    assert "untolerated taint" in pods["default/web"]["scheduling"]["message"]


def test_profiles_serve_their_scheduler_names_and_disable_filters(tmp_path: Path) -> None:
    cfg = _write(
        tmp_path,
        "sched.yaml",
        _config(
            [
                {"schedulerName": "default-scheduler"},
                {
                    "schedulerName": "gpu-packing",
                    "plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}},
                },
            ]
        ),
    )
    code, out, err = run(
        "analyze", _dump(tmp_path), "--json", "--now", "2026-11-18T03:30:00Z", "--scheduler-config", cfg
    )
    assert code in (0, 1), err
    pods = _pods(out)
    assert "untolerated taint" in pods["default/web"]["scheduling"]["message"]
    # The gpu-packing profile ignores taints: the simulator finds the node feasible.
    assert pods["default/gpu-job"]["scheduling"]["fits"] is True


def test_a_bad_configuration_is_one_line_exit_2(tmp_path: Path) -> None:
    cfg = _write(tmp_path, "sched.yaml", _config([{"schedulerName": "s", "percentageOfNodesToScore": 200}]))
    code, _, err = run("analyze", _dump(tmp_path), "--scheduler-config", cfg)
    assert code == 2 and err.count("\n") == 1
    assert "profiles[0].percentageOfNodesToScore" in err and cfg in err


def test_the_dumps_release_decides_what_the_file_may_say(tmp_path: Path) -> None:
    """v1beta3 is served up to 1.28: the same file is the cluster's profiles for a 1.28 dump
    and one clear line (exit 2) for a 1.30 one — not refused for every dump, nor taken for all."""
    cfg = _write(
        tmp_path,
        "sched.yaml",
        {**_config([{"schedulerName": "default-scheduler"}, {"schedulerName": "gpu-packing"}]),
         "apiVersion": "kubescheduler.config.k8s.io/v1beta3"},
    )
    common = ("analyze", _dump(tmp_path), "--json", "--now", "2026-11-18T03:30:00Z", "--scheduler-config", cfg)
    code, out, err = run(*common, "--kube-version", "1.28")
    assert code in (0, 1), err
    assert "default/gpu-job" in _pods(out)  # its profile serves it
    code, out, err = run(*common, "--kube-version", "1.30")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and cfg in err and "apiVersion" in err and "(Kubernetes 1.30)" in err
