"""A watch update is decoded against the record already held for the object
(``Decoder.decode(obj, known=...)``, which ``ClusterState.apply_object``
uses): unchanged parts are reused and an unchanged object comes back as the
held record itself. Whatever changed, the result must equal a fresh decode —
a stale reuse (or a stale PodSpec cache entry) fails these tests."""

from __future__ import annotations

import copy
import dataclasses
import datetime
from collections.abc import Callable
from typing import Any

import pytest

from analyzers.ingest import _SPEC_PARTS, Decoder
from analyzers.records import (
    Condition,
    Event,
    InvolvedObject,
    Node,
    Pod,
    make_condition,
    make_event,
    make_involved,
    make_node,
    make_pod,
)
from analyzers.snapshot import COLLECTIONS, KIND_COLLECTIONS, ClusterState
from tests.core.helpers import node, pod

Obj = dict[str, Any]
Mutation = Callable[[Obj], None]


def rich_pod() -> Obj:
    """A pod using every field the Pod record and its PodSpec read."""
    p = pod(
        "web-1",
        node_name="n1",
        labels={"app": "web", "tier": "front"},
        requests={"cpu": "500m", "memory": "1Gi"},
        limits={"cpu": "1"},
        owner=("ReplicaSet", "web-7d9"),
        spec_extra={
            "initContainers": [
                {"name": "init", "image": "x", "resources": {"requests": {"cpu": "100m"}}},
            ],
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}
            ],
            "nodeSelector": {"pool": "web"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
                        ]
                    }
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": "web"}},
                        }
                    ]
                },
            },
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }
            ],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
                {"name": "kube-api-access-x1", "projected": {"sources": []}},
            ],
            "priorityClassName": "high",
            "priority": 1000,
            "preemptionPolicy": "PreemptLowerPriority",
            "hostname": "web-1",
        },
    )
    p["metadata"]["resourceVersion"] = "100"
    p["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "other": "x"}
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "protocol": "TCP"}]
    p["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    p["status"]["conditions"][0].update(lastTransitionTime="2026-11-20T10:00:00Z")
    p["status"]["containerStatuses"] = [{"name": "main", "restartCount": 0, "ready": True}]
    return p


def _set(path: str, value: Any) -> Mutation:
    def mutate(obj: Obj) -> None:
        *parents, last = path.split(".")
        target: Any = obj
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


def _drop(path: str) -> Mutation:
    def mutate(obj: Obj) -> None:
        *parents, last = path.split(".")
        target: Any = obj
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        del target[last]

    return mutate


POD_CHANGES: dict[str, Mutation] = {
    # spec: every part of the PodSpec
    "resize cpu request": _set("spec.containers.0.resources.requests.cpu", "750m"),
    "limits": _set("spec.containers.0.resources.limits", {"cpu": "2", "memory": "2Gi"}),
    "host port": _set("spec.containers.0.ports", [{"containerPort": 80, "hostPort": 80}]),
    "second container": lambda p: p["spec"]["containers"].append({"name": "side", "image": "s"}),
    "init request": _set("spec.initContainers.0.resources.requests.cpu", "3"),
    "init becomes a sidecar": _set("spec.initContainers.0.restartPolicy", "Always"),
    "toleration added": lambda p: p["spec"]["tolerations"].append({"key": "gpu", "operator": "Exists"}),
    "node selector": _set("spec.nodeSelector.pool", "batch"),
    "node affinity": _set(
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.0"
        ".matchExpressions.0.values",
        ["c"],
    ),
    "anti-affinity dropped": _drop("spec.affinity.podAntiAffinity"),
    "spread skew": _set("spec.topologySpreadConstraints.0.maxSkew", 2),
    "scheduling gate": _set("spec.schedulingGates", [{"name": "wait"}]),
    "scheduler": _set("spec.schedulerName", "other-scheduler"),
    "priority class": _set("spec.priorityClassName", "low"),
    "priority": _set("spec.priority", 0),
    "preemption policy": _set("spec.preemptionPolicy", "Never"),
    "overhead": _set("spec.overhead", {"cpu": "100m"}),
    "pod-level resources": _set("spec.resources", {"requests": {"cpu": "4"}}),
    "claim renamed": _set("spec.volumes.0.persistentVolumeClaim.claimName", "data-web-2"),
    "claim added": lambda p: p["spec"]["volumes"].append(
        {"name": "logs", "persistentVolumeClaim": {"claimName": "logs-web-1"}}
    ),
    "node name": _set("spec.nodeName", "n2"),
    "unscheduled": _drop("spec.nodeName"),
    # status
    "phase": _set("status.phase", "Succeeded"),
    "scheduled condition status": _set("status.conditions.0.status", "False"),
    "scheduled condition reason": _set("status.conditions.0.reason", "Unschedulable"),
    "scheduled condition message": _set("status.conditions.0.message", "0/3 nodes are available"),
    "not ready": _set("status.conditions.1.status", "False"),
    "nominated": _set("status.nominatedNodeName", "n3"),
    # metadata
    "label value": _set("metadata.labels.tier", "back"),
    "label added": _set("metadata.labels.extra", "1"),
    "labels removed": _drop("metadata.labels"),
    "label without value": _set("metadata.labels.tier", None),
    "owner renamed": _set("metadata.ownerReferences.0.name", "web-8e1"),
    "owner re-created": _set("metadata.ownerReferences.0.uid", "uid-other"),
    "owner dropped": _drop("metadata.ownerReferences"),
    "deleting": _set("metadata.deletionTimestamp", "2026-11-20T11:00:00Z"),
    "kept annotation": lambda p: p["metadata"]["annotations"].update(
        {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    ),
    "karpenter annotation": lambda p: p["metadata"]["annotations"].update(
        {"karpenter.sh/do-not-disrupt": "true"}
    ),
    "re-created under the same name": _set("metadata.uid", "uid-new"),
    "created": _set("metadata.creationTimestamp", "2026-11-20T09:00:00Z"),
    "image (ImageLocality scores it)": _set("spec.containers.0.image", "example/app:2"),
}

# Changes to fields no record keeps: the held record comes back as is.
POD_NON_CHANGES: dict[str, Mutation] = {
    "restart count": _set("status.containerStatuses.0.restartCount", 3),
    "resource version": _set("metadata.resourceVersion", "101"),
    "env": _set("spec.containers.0.env", []),
    "other annotation": lambda p: p["metadata"]["annotations"].update(other="y"),
    "hostname": _set("spec.hostname", "web-1b"),
    "token volume": _set("spec.volumes.1.name", "kube-api-access-x2"),
    # A bound pod's PodScheduled=True is one shared record: only a False one's time is read.
    "scheduled condition time": _set("status.conditions.0.lastTransitionTime", "2026-11-20T10:05:00Z"),
}


def _changed(mutation: Mutation, obj: Obj) -> Obj:
    changed = copy.deepcopy(obj)
    mutation(changed)
    return changed


@pytest.mark.parametrize("name", list(POD_CHANGES))
def test_a_changed_pod_decodes_as_a_fresh_decode_would(name: str) -> None:
    state = ClusterState()
    held = state.apply_object(rich_pod())
    changed = _changed(POD_CHANGES[name], rich_pod())
    got = state.apply_object(changed)
    want = Decoder().decode(copy.deepcopy(changed))
    assert got == want
    assert got != held, f"{name} should change the record"
    assert state.snapshot().pods[("default", "web-1")] == want
    # and back again: the held (changed) record must not stick either
    again = state.apply_object(rich_pod())
    assert again == held and again == Decoder().decode(rich_pod())


@pytest.mark.parametrize("name", list(POD_NON_CHANGES))
def test_a_pod_update_that_changes_nothing_kept_returns_the_held_record(name: str) -> None:
    state = ClusterState()
    held = state.apply_object(rich_pod())
    changed = _changed(POD_NON_CHANGES[name], rich_pod())
    got = state.apply_object(changed)
    assert got is held
    assert got == Decoder().decode(changed)


NODE_CHANGES: dict[str, Mutation] = {
    "label": _set("metadata.labels.pool", "gpu"),
    "capacity": _set("status.capacity", {"cpu": "8", "memory": "32Gi", "pods": "110"}),
    "allocatable": _set("status.allocatable", {"cpu": "3500m", "memory": "15Gi", "pods": "110"}),
    "taint added": _set("spec.taints", [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
    "cordoned": _set("spec.unschedulable", True),
    "not ready": _set("status.conditions.0.status", "False"),
    "ready reason": _set("status.conditions.0.reason", "KubeletNotReady"),
    "condition added": lambda n: n["status"]["conditions"].append(
        {"type": "MemoryPressure", "status": "True"}
    ),
    "conditions reordered": lambda n: n["status"]["conditions"].insert(
        0, {"type": "DiskPressure", "status": "False"}
    ),
    "re-created": _set("metadata.uid", "uid-new"),
    "created": _set("metadata.creationTimestamp", "2026-11-20T09:00:00Z"),
    "images (ImageLocality scores them)": _set("status.images", [{"names": ["x"], "sizeBytes": 1}]),
    "an image's size": _set("status.images.0.sizeBytes", 7),
    "an image's size as a string": _set("status.images.0.sizeBytes", "7"),
    "an image's names": lambda n: n["status"]["images"][0]["names"].reverse(),
    "an image's name dropped": lambda n: n["status"]["images"][0]["names"].pop(),
    "image added": lambda n: n["status"]["images"].append({"names": ["y:1"], "sizeBytes": 2}),
    "images reordered": lambda n: n["status"]["images"].reverse(),
    "images gone": _drop("status.images"),
}


def rich_node() -> Obj:
    n = node("n1", taints=[{"key": "dedicated", "value": "web", "effect": "NoSchedule"}])
    n["metadata"]["creationTimestamp"] = "2026-11-20T08:00:00Z"
    n["status"]["conditions"][0].update(lastHeartbeatTime="2026-11-20T10:00:00Z", reason="KubeletReady")
    n["status"]["images"] = [
        {"names": ["registry.k8s.io/pause@sha256:4ba3", "registry.k8s.io/pause:3.9"], "sizeBytes": 321520},
        {"names": ["example/app:1"], "sizeBytes": 50_000_000},
    ]
    return n


@pytest.mark.parametrize("name", list(NODE_CHANGES))
def test_a_changed_node_decodes_as_a_fresh_decode_would(name: str) -> None:
    state = ClusterState()
    held = state.apply_object(rich_node())
    changed = _changed(NODE_CHANGES[name], rich_node())
    got = state.apply_object(changed)
    assert got == Decoder().decode(copy.deepcopy(changed))
    assert got != held
    assert state.apply_object(rich_node()) == held


def test_a_node_heartbeat_returns_the_held_record() -> None:
    state = ClusterState()
    held = state.apply_object(rich_node())
    beat = rich_node()
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-20T10:00:40Z"
    assert state.apply_object(beat) is held


def test_node_capacity_memo_tells_maps_apart() -> None:
    d = Decoder()
    small, big = d.node(node("a", cpu="4")), d.node(node("b", cpu="64"))
    assert small.allocatable["cpu"] == 4000 and big.allocatable["cpu"] == 64000
    assert d.node(node("c", cpu="4")).allocatable is small.allocatable
    # JSON keeps 4 and "4" apart: an integer quantity is read as its own key.
    n = node("d")
    n["status"]["capacity"] = n["status"]["allocatable"] = {"cpu": 4, "memory": "16Gi"}
    assert d.node(n).allocatable == Decoder().node(copy.deepcopy(n)).allocatable


def _spec_with_every_part() -> Obj:
    spec = rich_pod()["spec"]
    spec["nodeName"] = "n1"
    return spec


def test_every_part_of_the_spec_key_reaches_the_pod_spec() -> None:
    # The PodSpec is built from the key's parts only (_spec_view); a part that
    # is in the key but never read would still be correct, a field read but
    # not in the key would make pods share a wrong PodSpec. Changing each
    # part must change the PodSpec, through the cache, as a fresh decode does.
    base = _spec_with_every_part()
    changes: dict[str, Mutation] = {
        "containers": _set("containers.0.resources.requests.cpu", "9"),
        "initContainers": _set("initContainers.0.resources.requests.cpu", "9"),
        "nodeName": _set("nodeName", "n9"),
        "volumes": _set("volumes.0.persistentVolumeClaim.claimName", "other"),
        "affinity": _drop("affinity.nodeAffinity"),
        "nodeSelector": _set("nodeSelector", {"x": "y"}),
        "tolerations": _set("tolerations", []),
        "topologySpreadConstraints": _set("topologySpreadConstraints.0.topologyKey", "rack"),
        "schedulingGates": _set("schedulingGates", [{"name": "g"}]),
        "schedulerName": _set("schedulerName", "s2"),
        "priorityClassName": _set("priorityClassName", "p2"),
        "priority": _set("priority", 7),
        "preemptionPolicy": _set("preemptionPolicy", "Never"),
        "overhead": _set("overhead", {"memory": "1Mi"}),
        "resources": _set("resources", {"requests": {"memory": "8Gi"}}),
        "resourceClaims": _set("resourceClaims", [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
    }
    assert set(changes) == set(_SPEC_PARTS)
    cached = Decoder()
    before = cached.pod_spec(copy.deepcopy(base))
    for name, mutate in changes.items():
        changed = copy.deepcopy(base)
        mutate(changed)
        got = cached.pod_spec(changed)
        assert got == Decoder().pod_spec(copy.deepcopy(changed)), name
        assert got != before, f"{name} does not reach the PodSpec"


def test_pods_of_one_template_share_a_spec_despite_per_pod_fields() -> None:
    d = Decoder()
    a, b = rich_pod(), rich_pod()
    b["metadata"]["name"] = "web-2"
    b["spec"].update(hostname="web-2", nodeName="n2")
    b["spec"]["volumes"][1]["name"] = "kube-api-access-y2"
    assert d.pod(a).spec is d.pod(b).spec
    # The image is a scheduling field (ImageLocality): another image, another spec.
    b["spec"]["containers"][0]["image"] = "example/app:2"
    assert d.pod(b).spec.images[-1] == "example/app:2"
    assert d.pod(a).spec is not d.pod(b).spec


def test_a_spec_that_is_not_json_is_decoded_uncached() -> None:
    spec = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        "nodeSelector": {"since": datetime.date(2026, 11, 20)},  # as YAML reads an unquoted date
    }
    got = Decoder().pod_spec(spec)
    assert got.node_selector == {"since": "2026-11-20"} and got.requests["cpu"] == 1000


def test_fast_constructors_build_equal_values() -> None:
    cond = make_condition("Ready", "True", "KubeletReady", "ok", 1.5)
    assert cond == Condition("Ready", "True", "KubeletReady", "ok", 1.5)
    involved = make_involved("Pod", "ns", "p", "u")
    assert involved == InvolvedObject("Pod", "ns", "p", "u")
    ev = make_event("ns", "e", "u", involved, "FailedScheduling", "m", "Warning", 3, 1.0, 2.0, "s")
    slow = Event(
        "ns",
        "e",
        "u",
        InvolvedObject("Pod", "ns", "p", "u"),
        "FailedScheduling",
        "m",
        "Warning",
        3,
        1.0,
        2.0,
        "s",
    )
    pod_record = Decoder().decode(rich_pod())
    node_record = Decoder().decode(rich_node())
    assert isinstance(pod_record, Pod) and isinstance(node_record, Node)
    pod_fields = [getattr(pod_record, f.name) for f in dataclasses.fields(Pod)]
    node_fields = [getattr(node_record, f.name) for f in dataclasses.fields(Node)]
    for fast, plain in (
        (cond, Condition("Ready", "True", "KubeletReady", "ok", 1.5)),
        (involved, slow.involved),
        (ev, slow),
        (make_pod(*pod_fields), Pod(*pod_fields)),
        (make_node(*node_fields), Node(*node_fields)),
    ):
        assert fast == plain and hash(fast) == hash(plain) and repr(fast) == repr(plain)
        # every field is set (a field added to the record but not to its fast constructor fails here)
        assert all(hasattr(fast, f.name) for f in dataclasses.fields(fast))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.count = 4  # type: ignore[misc]


def test_each_kind_is_held_where_its_record_type_is() -> None:
    # apply_object stores a decoded record in the collection of the object's
    # kind; ClusterState.apply uses the record's type. They must agree.
    assert {cls.__name__: name for cls, name in COLLECTIONS.items()} == KIND_COLLECTIONS


def test_a_pod_status_naming_its_generated_resource_claim_is_a_new_record() -> None:
    """status.resourceClaimStatuses decides DynamicResources' PreEnqueue: a watch
    MODIFIED that only adds it must not return the held record."""
    state = ClusterState()
    obj = rich_pod()
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    held = state.apply_object(copy.deepcopy(obj))
    assert held.resource_claim_statuses == {}
    obj.setdefault("status", {})["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-1"}]
    now = state.apply_object(copy.deepcopy(obj))
    assert now is not held and now.resource_claim_statuses == {"gpu": "p-gpu-1"}
    assert state.apply_object(copy.deepcopy(obj)) is now


def test_a_pending_pods_scheduled_condition_time_changes_the_record() -> None:
    """When the pod started waiting (``agent.pipeline.pending_since``) is read from a False
    PodScheduled condition's transition time: that one is kept, and its change re-decoded."""
    pending = rich_pod()
    pending["status"]["conditions"][0].update(status="False", reason="Unschedulable", message="0/3 nodes")
    state = ClusterState()
    held = state.apply_object(pending)
    changed = _changed(_set("status.conditions.0.lastTransitionTime", "2026-11-20T10:05:00Z"), pending)
    got = state.apply_object(changed)
    assert got != held and got == Decoder().decode(copy.deepcopy(changed))
    assert got.scheduled is not None and got.scheduled.last_transition != held.scheduled.last_transition  # type: ignore[union-attr]
