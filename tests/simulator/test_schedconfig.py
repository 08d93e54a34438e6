"""KubeSchedulerConfiguration parsing: mergePluginSet's semantics, pluginConfig args,
percentageOfNodesToScore, and validation errors naming the field."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from analyzers.simulator import simulate
from analyzers.simulator.schedconfig import ConfigError, parse_config, profile_for
from analyzers.simulator.scoring.profile import DEFAULT_SCORE_PLUGINS
from tests.simulator.builders import node, pod, pod_of, snapshot


def config(*profiles: dict[str, Any], **top: Any) -> dict[str, Any]:
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", **top}
    if profiles:
        doc["profiles"] = list(profiles)
    return doc


def test_no_profiles_is_the_default_profile() -> None:
    (prof,) = parse_config(config()).values()
    assert prof.scheduler_name == "default-scheduler" and prof.score_plugins == DEFAULT_SCORE_PLUGINS


def test_score_point_disable_star_then_enable_keeps_only_the_enabled() -> None:
    prof = parse_config(
        config(
            {
                "schedulerName": "s",
                "plugins": {
                    "score": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": "ImageLocality", "weight": 5}],
                    }
                },
            }
        )
    )["s"]
    assert prof.score_plugins == (("ImageLocality", 5),)


def test_enabling_a_default_plugin_reweights_it_in_place_and_weight_zero_means_one() -> None:
    prof = parse_config(
        config(
            {
                "schedulerName": "s",
                "plugins": {
                    "score": {
                        "enabled": [
                            {"name": "NodeAffinity", "weight": 9},
                            {"name": "TaintToleration", "weight": 0},
                        ]
                    }
                },
            }
        )
    )["s"]
    weights = dict(prof.score_plugins)
    assert weights["NodeAffinity"] == 9 and weights["TaintToleration"] == 1
    assert [n for n, _ in prof.score_plugins] == [n for n, _ in DEFAULT_SCORE_PLUGINS]


def test_multipoint_disable_removes_score_and_filter() -> None:
    prof = parse_config(
        config({"schedulerName": "s", "plugins": {"multiPoint": {"disabled": [{"name": "TaintToleration"}]}}})
    )["s"]
    assert "TaintToleration" not in dict(prof.score_plugins)
    assert "TaintToleration" in prof.disabled_filters


def test_percentage_profile_wins_over_top_level() -> None:
    profiles = parse_config(
        config(
            {"schedulerName": "a"},
            {"schedulerName": "b", "percentageOfNodesToScore": 30},
            percentageOfNodesToScore=70,
        )
    )
    assert profiles["a"].percentage_of_nodes_to_score == 70
    assert profiles["b"].percentage_of_nodes_to_score == 30


def test_args_are_read() -> None:
    prof = parse_config(
        config(
            {
                "schedulerName": "s",
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "scoringStrategy": {
                                "type": "RequestedToCapacityRatio",
                                "resources": [{"name": "nvidia.com/gpu", "weight": 3}],
                                "requestedToCapacityRatio": {
                                    "shape": [
                                        {"utilization": 0, "score": 0},
                                        {"utilization": 100, "score": 10},
                                    ]
                                },
                            }
                        },
                    },
                    {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 0}},
                    {
                        "name": "PodTopologySpread",
                        "args": {
                            "defaultingType": "List",
                            "defaultConstraints": [
                                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
                            ],
                        },
                    },
                ],
            }
        )
    )["s"]
    assert prof.fit_strategy == "RequestedToCapacityRatio" and prof.shape == ((0, 0), (100, 10))
    assert [(r.name, r.weight) for r in prof.fit_resources] == [("nvidia.com/gpu", 3)]
    assert prof.hard_pod_affinity_weight == 0
    assert [c.topology_key for c in prof.default_constraints()] == ["zone"]


def test_profile_for_a_scheduler_name_not_configured_is_none() -> None:
    profiles = parse_config(config({"schedulerName": "gpu"}))
    assert profile_for(profiles, "default-scheduler") is None
    assert profile_for(None, "default-scheduler") is not None
    assert profile_for(None, "other") is None


def test_v1beta3_only_before_1_29() -> None:
    doc = config()
    doc["apiVersion"] = "kubescheduler.config.k8s.io/v1beta3"
    assert parse_config(doc, kube_version=(1, 28))
    with pytest.raises(ConfigError) as err:
        parse_config(doc, kube_version=(1, 29))
    assert err.value.field == "apiVersion"


@pytest.mark.parametrize(
    ("profile", "field"),
    [
        ({"schedulerName": ""}, "profiles[0].schedulerName"),
        ({"schedulerName": "s", "plugins": {"score": {"enabled": [{"name": "Nope"}]}}}, "profiles[0].plugins.score.enabled[0].name"),
        ({"schedulerName": "s", "plugins": {"scoring": {}}}, "profiles[0].plugins.scoring"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Random"}}}]}, "profiles[0].pluginConfig[0].args.scoringStrategy.type"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio"}}}]}, "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]}}}}]}, "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "NodeResourcesBalancedAllocation", "args": {"resources": [{"name": "cpu", "weight": 2}]}}]}, "profiles[0].pluginConfig[0].args.resources[0].weight"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 101}}]}, "profiles[0].pluginConfig[0].args.hardPodAffinityWeight"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}]}, "profiles[0].pluginConfig[0].args.defaultingType"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}]}, "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "InterPodAffinity", "args": {"kind": "NodeAffinityArgs"}}]}, "profiles[0].pluginConfig[0].args"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "VolumeBinding", "args": {"shape": [{"utilization": 0, "score": 11}]}}]}, "profiles[0].pluginConfig[0].args.shape[0].score"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": -1}}]}, "profiles[0].pluginConfig[0].args.bindTimeoutSeconds"),
        ({"schedulerName": "s", "pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": {}}}}}]}, "profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),
    ],
)  # fmt: skip
def test_invalid_configurations_name_the_field(profile: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(config(profile))
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_duplicate_scheduler_names_are_refused() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(config({"schedulerName": "a"}, {"schedulerName": "a"}))
    assert err.value.field == "profiles[1].schedulerName"


# --- NodeAffinityArgs addedAffinity.required in the Filter -----------------------------
# Rows of pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go (v1.37.2)
# TestNodeAffinity, "Matches added affinity but not Pod's node affinity" and "Doesn't
# match added affinity", run through the profile a KubeSchedulerConfiguration builds.

ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
POD_AFFINITY = "node(s) didn't match Pod's node affinity/selector"


def added_required_profile(term: dict[str, Any]) -> Any:
    return parse_config(
        config(
            {
                "schedulerName": "s",
                "pluginConfig": [
                    {
                        "name": "NodeAffinity",
                        "args": {
                            "addedAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                            }
                        },
                    }
                ],
            }
        )
    )["s"]


def zone_affinity(zone: str) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]
            }
        }
    }


def filter_reasons(prof: Any, affinity: dict[str, Any] | None) -> dict[str, tuple[str, ...]]:
    snap = snapshot(
        node("node1", labels={"zone": "bar"}),
        node("node2", labels={"zone": "foo"}),
        pod("p", affinity=affinity),
    )
    v = simulate(
        snap, pod_of(snap, "p"), disabled=prof.disabled_filters, added_affinity=prof.added_required
    )
    out = {}
    for name in ("node1", "node2"):
        nv = v.node(name)
        assert nv is not None
        out[name] = tuple(r for f in nv.filters for r in f.reasons)
    return out


def test_added_required_affinity_refuses_with_its_own_reason() -> None:
    prof = added_required_profile({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["bar"]}]})
    assert filter_reasons(prof, None) == {"node1": (), "node2": (ENFORCED,)}


def test_matches_added_affinity_but_not_the_pods_own_affinity() -> None:
    prof = added_required_profile(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node2"]}]}
    )
    # node2 passes the added terms and fails the pod's (ErrReasonPod); node1 fails the
    # added terms first (errReasonEnforced), whatever the pod says.
    assert filter_reasons(prof, zone_affinity("bar")) == {"node1": (ENFORCED,), "node2": (POD_AFFINITY,)}


def test_added_required_affinity_is_nothing_when_node_affinity_is_disabled() -> None:
    prof = added_required_profile({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["bar"]}]})
    prof = replace(prof, disabled_filters=frozenset({"NodeAffinity"}))
    assert filter_reasons(prof, None) == {"node1": (), "node2": ()}


def test_volume_binding_shape_is_refused_before_1_37() -> None:
    """StorageCapacityScoring is off by default before v1.37: a shape is a validation error."""
    doc = config({"schedulerName": "s", "pluginConfig": [{"name": "VolumeBinding", "args": {"shape": []}}]})
    with pytest.raises(ConfigError) as err:
        parse_config(doc, kube_version=(1, 36))
    assert err.value.field == "profiles[0].pluginConfig[0].args.shape"
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    doc["profiles"][0]["pluginConfig"][0]["args"]["shape"] = shape
    assert parse_config(doc)["s"].volume_shape == ((0, 0), (100, 10))
