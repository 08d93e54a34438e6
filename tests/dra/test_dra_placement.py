"""A simulated allocation is committed when a replica is bound (``unstick place``'s sequential
replicas), as kube-scheduler's PreBind writes ``status.allocation``: the devices are taken
for the next replica, and a claim shared by name carries the allocation's node selector
(createNodeSelector, structured/internal/incubating/allocator_incubating.go v0.37.2) --
the node itself for node-local devices, the slice's selector for network-attached ones --
which later pods using the claim must satisfy."""

from __future__ import annotations

from typing import Any

from analyzers.records import NodeSelector, NodeSelectorTerm, Requirement
from analyzers.simulator.scoring.placement import attempt, bind, place
from analyzers.snapshot import ClusterSnapshot
from tests.dra.test_dra_allocation import DRIVER, claim, device, device_class, exactly, node, pod, slice_

ZONE = "topology.kubernetes.io/zone"


def template_pod(name: str) -> dict[str, Any]:
    """A pod whose claim was generated from a template: owned by the pod."""
    obj = pod(name, f"{name}-gpu")
    obj["status"]["resourceClaimStatuses"] = [{"name": "r0", "resourceClaimName": f"{name}-gpu"}]
    return obj


def generated_claim(name: str, owner: str) -> dict[str, Any]:
    obj = claim(name, [exactly()])
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{owner}", "controller": True}
    ]
    return obj


def one_gpu_on_a_and_b() -> list[dict[str, Any]]:
    return [
        node("a"),
        node("b"),
        slice_("a", [device("gpu-0")]),
        slice_("b", [device("gpu-0")]),
        device_class(),
    ]


def test_each_replica_takes_its_own_device() -> None:
    """One GPU on each of a and b: the second replica cannot have a's GPU once the first holds it."""
    snap = ClusterSnapshot.from_objects(
        [*one_gpu_on_a_and_b(), generated_claim("p-gpu", "p"), template_pod("p")]
    )
    p = snap.pods[("default", "p")]
    first = attempt(snap, p)
    assert first.top == ("a", "b")
    after = bind(snap, p, "a", 1, first.verdict)
    copies = [c for c in after.resource_claims.values() if c.allocated]
    assert [(c.owner_uid, [r.device for r in c.allocation]) for c in copies] == [
        ("unstick-placement-default-p-unstick-1", ["gpu-0"])
    ]
    second = attempt(after, p, rows=False)
    assert second.top == ("b",)  # a's only GPU is held by replica 1
    assert place(snap, p, replicas=2).distribution == {"a": 1.0, "b": 1.0}


def shared(pods: int) -> list[dict[str, Any]]:
    return [claim("shared", [exactly()]), *[pod(f"p{i}", "shared") for i in range(pods)]]


def test_a_shared_claim_on_a_node_local_device_pins_later_pods_to_that_node() -> None:
    snap = ClusterSnapshot.from_objects([*one_gpu_on_a_and_b(), *shared(1)])
    p = snap.pods[("default", "p0")]
    first = attempt(snap, p)
    after = bind(snap, p, "b", 1, first.verdict)
    held = after.resource_claims[("default", "shared")]
    assert held.allocated and [r.device for r in held.allocation] == ["gpu-0"]
    assert held.allocation_node_selector == NodeSelector(
        (NodeSelectorTerm(match_fields=(Requirement("metadata.name", "In", ("b",)),)),)
    )
    assert [r.name for r in held.reserved_for] == ["p0-unstick-1"]
    second = attempt(after, p, rows=False)
    assert second.top == ("b",)
    (a_row,) = [r for r in attempt(after, p).rows if r.node == "a"]
    assert a_row.reason == "resourceclaim not available on the node"


def test_a_shared_claim_on_network_attached_devices_carries_the_slices_selector() -> None:
    """A pool published for the nodes of zone z1 (the slice's nodeSelector): the allocation may
    be used on any node of z1, not on c in z2."""
    network = slice_("a", [device("gpu-0")], name="fabric", pool="fabric")
    del network["spec"]["nodeName"]
    network["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z1"]}]}]
    }
    snap = ClusterSnapshot.from_objects(
        [
            node("a", **{ZONE: "z1"}),
            node("b", **{ZONE: "z1"}),
            node("c", **{ZONE: "z2"}),
            network,
            device_class(),
            *shared(1),
        ]
    )
    p = snap.pods[("default", "p0")]
    first = attempt(snap, p)
    assert first.top == ("a", "b")
    after = bind(snap, p, "a", 1, first.verdict)
    held = after.resource_claims[("default", "shared")]
    assert held.allocation_node_selector == NodeSelector(
        (NodeSelectorTerm(match_expressions=(Requirement(ZONE, "In", ("z1",)),)),)
    )
    assert held.allocation[0].driver == DRIVER
    rows = {r.node: r for r in attempt(after, p).rows}
    assert rows["a"].feasible and rows["b"].feasible  # the same device, reachable from both
    assert rows["c"].reason == "resourceclaim not available on the node"
