"""DRASchedulerFilterTimeout through the scheduler-config path: the cluster's
KubeSchedulerConfiguration (DynamicResourcesArgs.filterTimeout) sets how far the simulator
searches one node before it says kube-scheduler may time out there; ``0`` means the
scheduler never times out, and the simulator's own limit is then worded as its own.

The search below takes 7 allocateOne steps on node a (a count of 2 whose matchAttribute no
two devices share), so at 20,000 steps a second 300us stops it and 350us does not."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.rules import dra_devices_unavailable
from analyzers.rules.context import RuleContext
from analyzers.simulator.dra import plugin
from analyzers.simulator.schedconfig import ConfigError, parse_config
from analyzers.snapshot import ClusterSnapshot
from tests.dra.test_dra_allocation import DRIVER, claim, device, device_class, exactly, node, pod, slice_

TIMED_OUT = 'running "DynamicResources" filter plugin: node a: timed out trying to allocate devices'
NO_FIT = "0/1 nodes are available: 1 cannot allocate all claims."


def config(filter_timeout: str | None) -> dict[str, Any]:
    args: dict[str, Any] = {"kind": "DynamicResourcesArgs"}
    if filter_timeout is not None:
        args["filterTimeout"] = filter_timeout
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [{"name": "DynamicResources", "args": args}],
            }
        ],
    }


def context(filter_timeout: str | None, kube_version: str = "v1.37.2") -> RuleContext:
    snap = ClusterSnapshot.from_objects(
        [
            node("a"),
            slice_("a", [device(f"gpu-{i}", numa=i) for i in range(6)]),
            device_class(),
            claim(
                "c",
                [exactly(count=2)],
                constraints=[{"requests": ["gpu"], "matchAttribute": f"{DRIVER}/numa"}],
            ),
            pod("p", "c"),
        ]
    )
    minor = tuple(int(p) for p in kube_version.lstrip("v").split(".")[:2])
    profiles = parse_config(config(filter_timeout), kube_version=(minor[0], minor[1]))
    return RuleContext(snapshot=snap, now=0.0, kube_version=kube_version, profiles=profiles)


def verdict(filter_timeout: str | None, kube_version: str = "v1.37.2") -> Any:
    ctx = context(filter_timeout, kube_version)
    return ctx.verdict(ctx.snapshot.pods[("default", "p")])


def explanation(filter_timeout: str | None) -> str:
    [finding] = dra_devices_unavailable.analyze(context(filter_timeout))
    return finding.explanation


def test_a_configured_timeout_shorter_than_the_search_is_the_schedulers_timeout() -> None:
    v = verdict("300us")
    assert not v.fits
    assert v.message == TIMED_OUT
    [failed] = v.node("a").filters
    note = failed.detail["filter_timeout"]
    assert "unstick stopped after 6 allocation steps" in note
    assert "300ms" not in note and "300µs filterTimeout" in note  # as Go's Duration.String() writes it
    assert "depends on its wall clock" in note


def test_the_finding_says_the_timeout_depends_on_the_schedulers_wall_clock() -> None:
    said = explanation("300us")
    assert "may time out searching for devices" in said
    assert "whether kube-scheduler times out depends on its wall clock" in said
    assert "the configured filterTimeout of 300µs" in said  # the cluster's value, not the default's
    assert "may time out" not in explanation("350us")


def test_a_configured_timeout_longer_than_the_search_lets_it_finish() -> None:
    v = verdict("350us")
    assert v.message.startswith(NO_FIT)


def test_the_default_timeout_is_ten_seconds() -> None:
    assert plugin.filter_timeout(None, (1, 37, 2)) == 10.0
    assert plugin.search_bound(10.0) == 200_000
    assert verdict(None).message.startswith(NO_FIT)


def test_no_timeout_searches_on_and_unstick_stops_in_its_own_words(monkeypatch: pytest.MonkeyPatch) -> None:
    assert verdict("0").message.startswith(NO_FIT)
    monkeypatch.setattr(plugin, "SAFETY_STEPS", 3)
    v = verdict("0")
    assert not v.fits
    assert v.message == (
        "unstick stopped searching for devices on node a after 3 allocation steps "
        "(kube-scheduler has no filterTimeout here and searches on)"
    )
    assert "timed out" not in v.message
    said = explanation("0")
    assert "unstick stopped searching for devices on node a" in said
    assert "what kube-scheduler concludes there is not known" in said
    assert "time out" not in said


def test_before_1_34_there_is_no_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """DRASchedulerFilterTimeout arrived (beta, on) in 1.34: before it the search is not bounded."""
    assert plugin.filter_timeout(None, (1, 33, 0)) == 0.0
    monkeypatch.setattr(plugin, "SAFETY_STEPS", 3)
    assert verdict(None, "v1.33.0").message.startswith("unstick stopped searching")


@pytest.mark.parametrize(
    ("value", "version", "error"),
    [
        ("-1s", (1, 37), "Invalid value: -1s: must be zero or positive"),
        ("10", (1, 37), 'time: invalid duration "10"'),
        ("1x", (1, 37), 'time: invalid duration "1x"'),
        ("10s", (1, 33), "Forbidden: DRASchedulingFilterTimeout feature gate is disabled"),
    ],
)
def test_invalid_filter_timeouts_are_refused(value: str, version: tuple[int, int], error: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(config(value), kube_version=version)
    assert info.value.args[0].endswith(error) or error in str(info.value)
    assert "profiles[0].pluginConfig[0].args.filterTimeout" in str(info.value)


@pytest.mark.parametrize(
    ("text", "seconds"), [("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("1.5h", 5400.0), ("0", 0.0)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_config(config(text))["default-scheduler"].dra_filter_timeout == pytest.approx(seconds)
