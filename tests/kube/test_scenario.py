"""Scenario files: initial objects plus a timeline, played against the fake
endpoint at a chosen speed, and watched through the real gateway."""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path
from typing import Any

import pytest

from agent.fakecluster import Scenario, ScenarioError, ScenarioPlayer
from agent.kube.gateway import Gateway
from agent.kube.kinds import EVENT, POD
from agent.kube.watcher import Watcher

OBJECTS = """\
apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  labels: {gpu: "true"}
status:
  allocatable: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "1", pods: "110"}
---
apiVersion: v1
kind: List
items:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: trainer, namespace: ml}
    spec:
      replicas: 1
      selector: {matchLabels: {app: trainer}}
      template:
        metadata: {labels: {app: trainer}}
        spec:
          nodeSelector: {gpu: "true"}
          containers:
            - name: main
              image: trainer:1
              resources: {limits: {nvidia.com/gpu: "1"}}
  - apiVersion: v1
    kind: Pod
    metadata: {name: trainer-old-abcde, namespace: ml, labels: {app: trainer}}
    spec: {nodeName: gpu-1, containers: [{name: main, image: trainer:1}]}
    status: {phase: Running}
"""

SCENARIO = """\
name: gpu-rollout-deadlock
description: A rollout that needs a second GPU on a one-GPU node.
speed: 2
objects:
  - objects.yaml
timeline:
  - at: 2
    apply:
      - apiVersion: v1
        kind: Pod
        metadata: {name: trainer-new-fghij, namespace: ml, labels: {app: trainer}}
        spec: {containers: [{name: main, image: trainer:2}]}
        status: {phase: Pending}
  - at: 3s
    events:
      - involvedObject: {kind: Pod, namespace: ml, name: trainer-new-fghij}
        reason: FailedScheduling
        type: Warning
        source: default-scheduler
        message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
  - at: 1m
    events:
      - involvedObject: {kind: Pod, namespace: ml, name: trainer-new-fghij}
        reason: FailedScheduling
        message: "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
  - at: 1m30s
    delete:
      - {kind: Pod, namespace: ml, name: trainer-old-abcde}
"""


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "gpu"
    folder.mkdir()
    (folder / "objects.yaml").write_text(OBJECTS)
    (folder / "scenario.yaml").write_text(SCENARIO)
    return folder


def test_load_scenario_folder(scenario_dir: Path) -> None:
    scenario = Scenario.load(scenario_dir)
    assert scenario.name == "gpu-rollout-deadlock"
    assert [o["kind"] for o in scenario.objects] == ["Node", "Deployment", "Pod"]
    assert [s.at for s in scenario.timeline] == [2.0, 3.0, 60.0, 90.0]
    assert scenario.speed == 2.0
    assert scenario.duration == 90.0


def test_plain_object_files_are_scenarios(scenario_dir: Path) -> None:
    scenario = Scenario.load(scenario_dir / "objects.yaml")
    assert scenario.name == "objects"
    assert len(scenario.objects) == 3 and scenario.timeline == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("timeline:\n  - apply: []\n", "a step needs 'at'"),
        ("timeline:\n  - at: soon\n", "'at' must be seconds"),
        ("timeline:\n  - at: 1\n    events: [{reason: X}]\n", "an event needs involvedObject"),
        ("objects: []\nbogus: 1\n", "unknown keys ['bogus']"),
        ("objects:\n  - {metadata: {name: x}}\n", "object without kind/apiVersion"),
    ],
)
def test_bad_scenarios_say_why(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match=re.escape(message)):
        Scenario.load(path)


async def test_player_waits_offsets_divided_by_speed(scenario_dir: Path) -> None:
    scenario = Scenario.load(scenario_dir)
    cluster = scenario.cluster()
    now = [0.0]
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    player = ScenarioPlayer(cluster, scenario, sleep=fake_sleep, clock=lambda: now[0])
    await player.play()
    assert waits == [1.0, 0.5, 28.5, 15.0]  # offsets 2, 3, 60, 90 at speed 2
    assert player.done
    assert cluster.get("Pod", "trainer-old-abcde", "ml") is None
    [failed] = cluster.objects("Event")
    assert failed["count"] == 2  # the repeat bumped the same Event
    assert failed["involvedObject"]["uid"] == cluster.get("Pod", "trainer-new-fghij", "ml")["metadata"]["uid"]  # type: ignore[index]


async def test_scenario_unfolds_through_the_watcher(scenario_dir: Path, tmp_path: Path, sink: Any) -> None:
    scenario = Scenario.load(scenario_dir)
    cluster = scenario.cluster()
    async with cluster:
        path = cluster.write_kubeconfig(tmp_path / "kc")
        async with Gateway(path) as gw:
            watcher = Watcher(gw, sink, kinds=[POD, EVENT], namespaces=["ml"])
            task = asyncio.create_task(watcher.run())
            try:
                await asyncio.wait_for(watcher.wait_synced(), 5)
                await cluster.wait_for_watches("Pod")
                await cluster.wait_for_watches("Event")
                await ScenarioPlayer(cluster, scenario, speed=math.inf).play()
                await sink.wait_for(lambda s: len(s.deltas) == 5)
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

    def of(kind: str) -> list[tuple[str, str]]:
        return [(d.type, d.object["metadata"]["name"]) for d in sink.deltas if d.kind == kind]

    assert of("Pod") == [
        ("ADDED", "trainer-old-abcde"),
        ("ADDED", "trainer-new-fghij"),
        ("DELETED", "trainer-old-abcde"),
    ]
    events = [d for d in sink.deltas if d.kind == "Event"]
    assert [d.type for d in events] == ["ADDED", "MODIFIED"]
    assert [d.object["count"] for d in events] == [1, 2]
    assert events[0].object["reason"] == "FailedScheduling"
