"""The demo cluster's ``kubectl patch`` (agent/fakecluster/remedies.py) against the real API
server's: the same Deployment patched the same way (strategic, merge, json) on both ends up
with the same containers (names, images, env), tolerations and topology spread constraints,
in the same order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.fakecluster import FakeCluster
from agent.fakecluster.remedies import apply_command
from tests.kube.test_fakecluster_patch import PATCH, web
from tests.realcluster.conftest import Cluster

pytestmark = pytest.mark.realcluster

PATCHES = {
    "strategic": PATCH,
    "merge": PATCH,
    "json": [
        {"op": "replace", "path": "/spec/template/spec/containers/1/image", "value": "envoy:2"},
        {"op": "remove", "path": "/spec/template/spec/tolerations"},
    ],
}


def seen(deployment: dict[str, Any]) -> tuple[Any, ...]:
    spec = deployment["spec"]["template"]["spec"]
    containers = [(c["name"], c["image"], c.get("env")) for c in spec["containers"]]
    spread = [(c["topologyKey"], c["maxSkew"]) for c in spec.get("topologySpreadConstraints", [])]
    return (containers, spec.get("tolerations"), spread)


@pytest.mark.parametrize("patch_type", sorted(PATCHES))
def test_the_demo_cluster_patches_as_the_api_server_does(cluster: Cluster, patch_type: str) -> None:
    obj = web()
    obj["metadata"] = {"name": "web", "namespace": cluster.ns}
    cluster.api.create(obj)
    body = json.dumps(PATCHES[patch_type])
    cluster.plane.kubectl("-n", cluster.ns, "patch", "deployment", "web", "--type", patch_type, "-p", body)
    real = cluster.api.get(f"/apis/apps/v1/namespaces/{cluster.ns}/deployments/web")

    fake = FakeCluster()
    fake.apply({**web(), "metadata": {**web()["metadata"], "namespace": cluster.ns}})
    apply_command(fake, f"kubectl patch deployment web -n {cluster.ns} --type {patch_type} -p '{body}'")
    patched = fake.get("Deployment", "web", cluster.ns)
    assert patched is not None and seen(patched) == seen(real)
