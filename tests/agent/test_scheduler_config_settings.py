"""``watch --scheduler-config`` / ``UNSTICK_SCHEDULER_CONFIG``: the live pipeline gets the
cluster's profiles, validated for the release its API server runs; a file no release accepts
is one settings error naming the file and field."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from agent.demo import SCENARIOS
from agent.fakecluster.scenario import Scenario
from agent.kube.gateway import Gateway
from agent.pipeline import analyse
from agent.runner import AgentHost, ClusterAgent
from agent.scheduler_config import SchedulerConfigError
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
    from_flag = AgentSettings.from_args(parse("--scheduler-config", str(path)), {}).scheduler_config
    from_env = AgentSettings.from_args(parse(), {"UNSTICK_SCHEDULER_CONFIG": str(path)}).scheduler_config
    assert from_flag is not None and set(from_flag.profiles("1.30")) == {"default-scheduler", "gpu-packing"}
    assert from_env is not None and from_env.profiles("1.30") == from_flag.profiles("1.30")
    assert AgentSettings.from_args(parse(), {}).scheduler_config is None
    # The profiles wait for the cluster's release: the pipeline's configuration has none yet.
    assert AgentSettings.from_args(parse("--scheduler-config", str(path)), {}).pipeline_config().scheduler_profiles is None


V1BETA3 = CONFIG.replace("kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3")
# VolumeBinding's shape needs StorageCapacityScoring, on by default from 1.37 only.
SHAPE = CONFIG.replace(
    "- schedulerName: gpu-packing",
    "- schedulerName: gpu-packing\n  pluginConfig:\n  - name: VolumeBinding\n    args:\n"
    "      shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]",
)


@pytest.mark.parametrize(
    ("text", "accepted", "refused", "field"),
    [(V1BETA3, "1.28", "1.29", "apiVersion"), (SHAPE, "1.37", "1.36", "shape")],
)
def test_what_is_valid_depends_on_the_release(tmp_path: Path, text: str, accepted: str, refused: str, field: str) -> None:
    """A file valid for some release is taken at start-up; the cluster's release decides."""
    path = tmp_path / "sched.yaml"
    path.write_text(text)
    config = AgentSettings.from_args(parse("--scheduler-config", str(path)), {}).scheduler_config
    assert config is not None
    assert set(config.profiles(accepted)) == {"default-scheduler", "gpu-packing"}
    with pytest.raises(SchedulerConfigError) as err:
        config.profiles(refused)
    message = str(err.value)
    assert str(path) in message and field in message and f"(Kubernetes {refused})" in message
    # With --kube-version the release is known at start-up: refused there, one settings error.
    with pytest.raises(SettingsError) as bad:
        AgentSettings.from_args(parse("--scheduler-config", str(path), "--kube-version", refused), {})
    (line,) = bad.value.errors
    assert field in line and "\n" not in line


async def test_the_live_agent_validates_for_its_api_servers_release(tmp_path: Path) -> None:
    """ClusterAgent.connect reads the API server's release, then the profiles for it."""
    scenario = Scenario.load(SCENARIOS / "gpu-rollout-deadlock")
    major, minor = (int(x) for x in scenario.server_version.removeprefix("v").split(".")[:2])
    release = f"{major}.{minor}"
    assert (major, minor) >= (1, 29), "the scenario's release refuses v1beta3"
    fake = scenario.cluster()
    await fake.start()
    host = await AgentHost.open(f"sqlite+aiosqlite:///{tmp_path}/db.sqlite")

    async def connect(cluster: str, text: str) -> ClusterAgent:
        path = tmp_path / f"{cluster}.yaml"
        path.write_text(text)
        settings = AgentSettings.from_args(parse("--scheduler-config", str(path)), {})
        return await ClusterAgent.connect(
            cluster=cluster,
            gateway=Gateway(str(fake.write_kubeconfig(tmp_path / f"{cluster}.kubeconfig"))),
            sessions=host.sessions,
            config=settings.pipeline_config(),
            renderer=host.renderer,
            scheduler_config=settings.scheduler_config,
        )

    try:
        with pytest.raises(SchedulerConfigError, match=rf"apiVersion.*\(Kubernetes {release}\)"):
            await connect("c1", V1BETA3)
        agent = await connect("c2", CONFIG)
        host.agents.append(agent)
        assert set(agent.pipeline.config.scheduler_profiles or {}) == {"default-scheduler", "gpu-packing"}
    finally:
        await host.close()
        await fake.stop()


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
    config = AgentSettings.from_args(parse("--scheduler-config", str(path)), {}).scheduler_config
    assert config is not None
    profiles = config.profiles("1.30")
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
