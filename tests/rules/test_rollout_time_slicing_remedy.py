"""The GPU-sharing remedy of rollout-surge-deadlock is the configuration NVIDIA's
GPU Operator reads (a device-plugin config with ``sharing.timeSlicing``, selected
by ClusterPolicy ``spec.devicePlugin.config.name`` and the node label
``nvidia.com/device-plugin.config``), not a ``kubectl describe`` dressed as YAML."""

from __future__ import annotations

import json
import shlex

import yaml

from analyzers.rules.rollout_surge_deadlock import GPU_OPERATOR_NAMESPACE, TIME_SLICING_CONFIG
from tests.rules.test_rollout_remedy_strategy import CASE, analyse
from tests.scenarios.test_golden import load_case


def test_time_slicing_is_the_device_plugin_config_map_the_cluster_policy_and_the_node_label() -> None:
    objects, _ = load_case(CASE)
    [finding] = analyse(objects)
    [remedy] = [r for r in finding.remedies if "time-slicing" in r.title]
    assert remedy.kind.value == "manifest"
    config_map = yaml.safe_load(remedy.yaml)
    assert config_map["apiVersion"] == "v1" and config_map["kind"] == "ConfigMap"
    assert config_map["metadata"] == {"name": TIME_SLICING_CONFIG, "namespace": GPU_OPERATOR_NAMESPACE}
    [(key, text)] = config_map["data"].items()
    config = yaml.safe_load(text)
    assert config["version"] == "v1" and config["flags"] == {"migStrategy": "none"}
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 2}]
    steps = [shlex.split(step) for step in remedy.command.split(" && ")]
    assert steps[0] == ["kubectl", "apply", "-n", GPU_OPERATOR_NAMESPACE, "-f", "-"]
    assert steps[1][:5] == [
        "kubectl",
        "patch",
        "clusterpolicies.nvidia.com/cluster-policy",
        "--type",
        "merge",
    ]
    assert json.loads(steps[1][6]) == {"spec": {"devicePlugin": {"config": {"name": TIME_SLICING_CONFIG}}}}
    node = finding.evidence["nodes"][0]
    assert steps[2] == [
        "kubectl",
        "label",
        "node",
        node,
        f"nvidia.com/device-plugin.config={key}",
        "--overwrite",
    ]
    assert "2 nvidia.com/gpu" in remedy.title
