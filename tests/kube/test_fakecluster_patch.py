"""The demo's "apply this remedy" action patches the in-process cluster as the API server
would: a strategic merge patch (kubectl's default) merges the lists Kubernetes gives a
``patchMergeKey`` (containers by name, their env by name) and replaces the others whole
(tolerations and node taints carry none in k8s.io/api core/v1/types.go v0.35.4), where a
JSON merge patch replaces every list. Read back through the real kubernetes-asyncio
client over HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.fakecluster import FakeCluster
from agent.fakecluster.remedies import NotApplicable, apply_command, merge_keys
from agent.kube.gateway import Gateway

NS = "shop"


def spread(key: str, skew: int) -> dict[str, Any]:
    return {
        "topologyKey": key,
        "maxSkew": skew,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }


def web() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS, "uid": "u-web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "web:1", "env": [{"name": "A", "value": "1"}]},
                        {"name": "proxy", "image": "envoy:1"},
                    ],
                    "tolerations": [
                        {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}
                    ],
                    "topologySpreadConstraints": [spread("zone", 1), spread("host", 1)],
                },
            },
        },
    }


PATCH = {
    "spec": {
        "template": {
            "spec": {
                "containers": [{"name": "app", "image": "web:2", "env": [{"name": "B", "value": "2"}]}],
                "tolerations": [{"key": "batch", "operator": "Exists", "effect": "NoSchedule"}],
                "topologySpreadConstraints": [spread("zone", 2), spread("rack", 1)],
            }
        }
    }
}


async def template_after(cluster: FakeCluster, gateway: Gateway, patch_type: str | None) -> dict[str, Any]:
    cluster.apply(web())
    flag = f" --type {patch_type}" if patch_type else ""
    apply_command(cluster, f"kubectl patch deployment web -n {NS}{flag} -p '{json.dumps(PATCH)}'")
    got = await gateway.get("Deployment", "web", NS)
    spec: dict[str, Any] = got["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("patch_type", [None, "strategic"])
async def test_a_strategic_patch_merges_containers_by_name_and_replaces_tolerations(
    cluster: FakeCluster, gateway: Gateway, patch_type: str | None
) -> None:
    spec = await template_after(cluster, gateway, patch_type)
    app, proxy = spec["containers"]
    assert (app["name"], app["image"], proxy) == ("app", "web:2", {"name": "proxy", "image": "envoy:1"})
    # env merges by name, the patch's new item first (strategicpatch normalizeElementOrder)
    assert app["env"] == [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]
    assert spec["tolerations"] == PATCH["spec"]["template"]["spec"]["tolerations"]  # no merge key: replaced
    # merged by topologyKey: the patch's items in its order, then the original's others
    spread = [(c["topologyKey"], c["maxSkew"]) for c in spec["topologySpreadConstraints"]]
    assert spread == [("zone", 2), ("rack", 1), ("host", 1)]


async def test_a_json_merge_patch_replaces_every_list(cluster: FakeCluster, gateway: Gateway) -> None:
    spec = await template_after(cluster, gateway, "merge")
    assert spec["containers"] == PATCH["spec"]["template"]["spec"]["containers"]  # the proxy is gone
    assert spec["tolerations"] == PATCH["spec"]["template"]["spec"]["tolerations"]


async def test_a_json_patch_removes_a_pods_scheduling_gates(cluster: FakeCluster, gateway: Gateway) -> None:
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "gated", "namespace": NS},
            "spec": {
                "schedulingGates": [{"name": "example.com/quota"}],
                "containers": [{"name": "c", "image": "x"}],
            },
        }
    )
    remove = '[{"op":"remove","path":"/spec/schedulingGates"}]'
    apply_command(cluster, f"kubectl patch pod gated -n {NS} --type json -p '{remove}'")
    assert "schedulingGates" not in (await gateway.get("Pod", "gated", NS))["spec"]
    with pytest.raises(NotApplicable, match="does not exist"):  # gone now: the API server says 422 too
        apply_command(cluster, f"kubectl patch pod gated -n {NS} --type json -p '{remove}'")


async def test_a_strategic_patch_of_node_taints_replaces_them(cluster: FakeCluster, gateway: Gateway) -> None:
    from agent.fakecluster.samples import node

    base = node("n1")
    base["spec"]["taints"] = [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}]
    cluster.apply(base)
    apply_command(
        cluster, """kubectl patch node n1 -p '{"spec":{"taints":[{"key":"a","effect":"NoSchedule"}]}}'"""
    )
    assert (await gateway.get("Node", "n1"))["spec"]["taints"] == [{"key": "a", "effect": "NoSchedule"}]


def test_every_pod_template_kind_merges_its_containers_by_name() -> None:
    for kind, at in [
        ("Pod", ("spec",)),
        ("Deployment", ("spec", "template", "spec")),
        ("StatefulSet", ("spec", "template", "spec")),
        ("DaemonSet", ("spec", "template", "spec")),
        ("ReplicaSet", ("spec", "template", "spec")),
        ("Job", ("spec", "template", "spec")),
        ("CronJob", ("spec", "jobTemplate", "spec", "template", "spec")),
    ]:
        keys, _ = merge_keys(kind)
        assert keys[(*at, "containers")] == "name", kind
        assert keys[(*at, "containers", "[]", "env")] == "name", kind
        assert (*at, "tolerations") not in keys, kind
