"""``watch --scheduler-config`` / ``UNSTICK_SCHEDULER_CONFIG``: the live pipeline gets the
cluster's profiles; a bad file is one settings error naming the file and field."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from agent.pipeline import analyse
from agent.settings import AgentSettings, SettingsError, add_agent_arguments
from analyzers.remedies import RemedyRenderer
from analyzers.snapshot import ClusterSnapshot
from tests.simulator.builders import node, pod

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: gpu-packing
"""


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_agent_arguments(parser)
    return parser.parse_args(argv)


def test_flag_and_environment_load_the_profiles(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(CONFIG)
    from_flag = AgentSettings.from_args(parse("--scheduler-config", str(path)), {}).pipeline_config()
    from_env = AgentSettings.from_args(parse(), {"UNSTICK_SCHEDULER_CONFIG": str(path)}).pipeline_config()
    assert from_flag.scheduler_profiles is not None and set(from_flag.scheduler_profiles) == {
        "default-scheduler",
        "gpu-packing",
    }
    assert from_env.scheduler_profiles == from_flag.scheduler_profiles
    assert AgentSettings.from_args(parse(), {}).pipeline_config().scheduler_profiles is None


def test_a_bad_file_is_a_settings_error(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(CONFIG.replace("profiles:", "percentageOfNodesToScore: -1\nprofiles:"))
    with pytest.raises(SettingsError) as err:
        AgentSettings.from_args(parse("--scheduler-config", str(path)), {})
    (message,) = err.value.errors
    assert str(path) in message and "percentageOfNodesToScore" in message


def test_the_pass_serves_the_configured_scheduler_names(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(CONFIG)
    profiles = AgentSettings.from_args(parse("--scheduler-config", str(path)), {}).scheduler_profiles
    gpu = pod("gpu-job", requests={"cpu": "100m"})
    gpu["spec"]["schedulerName"] = "gpu-packing"
    snap = ClusterSnapshot.from_objects([node("n1", cpu="0"), gpu])
    plan = {"full": True, "known": frozenset(), "carried": frozenset(), "always": frozenset(), "batch": 16}
    plain, _ = analyse(snap, None, now=0.0, kube_version=None, renderer=RemedyRenderer(), **plan)
    served, _ = analyse(
        snap, None, now=0.0, kube_version=None, renderer=RemedyRenderer(), profiles=profiles, **plan
    )
    assert [p.pod.name for p in plain.pods] == []
    assert [p.pod.name for p in served.pods] == ["gpu-job"]
