"""coordination.k8s.io/v1 Leases through the gateway against the fake API endpoint: the API
server's create/update rules (resourceVersion-guarded updates, 409 on a stale one)."""

from __future__ import annotations

import pytest

from agent.fakecluster import FakeCluster
from agent.kube.errors import BadRequest, Conflict, MethodNotAllowed, NotFound
from agent.kube.gateway import Gateway
from agent.kube.kinds import LEASE


def lease(name: str = "unstick-leader", namespace: str = "unstick", holder: str = "a") -> dict[str, object]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": 0},
    }


async def test_create_get_update_with_optimistic_concurrency(gateway: Gateway, cluster: FakeCluster) -> None:
    created = await gateway.create(LEASE, lease())
    assert created["kind"] == "Lease" and created["metadata"]["uid"]
    rv = created["metadata"]["resourceVersion"]
    got = await gateway.get(LEASE, "unstick-leader", "unstick")
    assert got["spec"]["holderIdentity"] == "a" and got["metadata"]["resourceVersion"] == rv

    mine = {**got, "spec": {**got["spec"], "holderIdentity": "b"}}
    updated = await gateway.replace(LEASE, mine)
    assert int(updated["metadata"]["resourceVersion"]) > int(rv)
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert cluster.get("Lease", "unstick-leader", "unstick")["spec"]["holderIdentity"] == "b"  # type: ignore[index]

    # The same stale copy a second time: someone (we) wrote since; the API server says 409.
    with pytest.raises(Conflict) as stale:
        await gateway.replace(LEASE, {**got, "spec": {**got["spec"], "holderIdentity": "c"}})
    assert "the object has been modified" in str(stale.value)
    assert cluster.get("Lease", "unstick-leader", "unstick")["spec"]["holderIdentity"] == "b"  # type: ignore[index]

    with pytest.raises(Conflict) as exists:
        await gateway.create(LEASE, lease(holder="z"))
    assert exists.value.reason == "AlreadyExists"


async def test_update_rules(gateway: Gateway) -> None:
    with pytest.raises(NotFound):  # Leases do not allow create-on-update
        await gateway.replace(
            LEASE, {**lease(), "metadata": {"name": "x", "namespace": "unstick", "resourceVersion": "1"}}
        )
    await gateway.create(LEASE, lease())
    with pytest.raises(BadRequest) as unconditional:  # 422: no resourceVersion, no unconditional update
        await gateway.replace(LEASE, lease())
    assert unconditional.value.status == 422
    with pytest.raises(Conflict):  # a made-up version
        await gateway.replace(
            LEASE,
            {
                **lease(),
                "metadata": {"name": "unstick-leader", "namespace": "unstick", "resourceVersion": "999"},
            },
        )


async def test_only_leases_are_writable(gateway: Gateway) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": {}}
    with pytest.raises(MethodNotAllowed):
        await gateway.create("Pod", pod)


async def test_discovery_lists_leases_with_their_verbs(gateway: Gateway) -> None:
    doc = await gateway.get_json("/apis/coordination.k8s.io/v1")
    (leases,) = [r for r in doc["resources"] if r["name"] == "leases"]
    assert {"get", "create", "update"} <= set(leases["verbs"]) and leases["namespaced"]
