"""Reading Kubernetes JSON/YAML into records and snapshots."""

import json

import pytest

from analyzers.ingest import Decoder, InputError, parse_documents
from analyzers.quantity import QuantityError, format_units, to_units
from analyzers.snapshot import ClusterSnapshot, ClusterState
from tests.core.helpers import deployment, node, pod, replicaset


@pytest.mark.parametrize(
    ("resource", "text", "units"),
    [
        ("cpu", "500m", 500),
        ("cpu", "2", 2000),
        ("cpu", "0.1", 100),
        ("cpu", "1.0001", 1001),
        ("memory", "1Gi", 2**30),
        ("memory", "128M", 128_000_000),
        ("memory", "1e3", 1000),
        ("nvidia.com/gpu", "1", 1),
        ("memory", "100m", 1),
        ("cpu", 1, 1000),
        ("pods", "110", 110),
    ],
)
def test_quantity_matches_MilliValue_and_Value_rounding_up(resource, text, units):
    # staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go: Value()/MilliValue() round up.
    assert to_units(resource, text) == units


def test_quantity_rejects_garbage_and_formats_back():
    with pytest.raises(QuantityError):
        to_units("cpu", "lots")
    assert format_units("cpu", 1500) == "1500m" and format_units("cpu", 2000) == "2"
    assert format_units("memory", 2 * 2**30) == "2Gi"


def test_requests_default_from_limits_and_init_containers_take_the_max():
    # component-helpers/resource/helpers.go PodRequests; core/v1 defaults copy limits into requests.
    spec = {
        "containers": [
            {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
        ],
        "initContainers": [
            {"name": "migrate", "resources": {"requests": {"cpu": "3"}}},
            {
                "name": "proxy",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            },
            {"name": "late-init", "resources": {"requests": {"memory": "2Gi"}}},
        ],
        "overhead": {"cpu": "50m"},
    }
    got = Decoder().pod_spec(spec)
    # containers 1250m + sidecar 100m = 1350m; init max(3000, 100m+0) = 3000 → 3000 + overhead 50.
    assert got.requests["cpu"] == 3050
    # memory: containers 1Gi + sidecar 64Mi; late init 2Gi + sidecar 64Mi is larger.
    assert got.requests["memory"] == 2 * 2**30 + 64 * 2**20
    assert got.requests["nvidia.com/gpu"] == 1
    assert got.containers_without_requests == 0


def test_pods_of_one_template_share_one_interned_spec():
    d = Decoder()
    a = d.pod(pod("a", requests={"cpu": "1"}, labels={"app": "x"}))
    b = d.pod(pod("b", requests={"cpu": "1"}, labels={"app": "x"}))
    assert a.spec is b.spec and a.labels is b.labels


def test_list_items_without_kind_take_it_from_the_list():
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "PodList",
            "items": [{"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": []}}],
        }
    )
    (obj,) = parse_documents(text)
    assert obj["kind"] == "Pod"


def test_multi_document_yaml_and_json_streams():
    yaml_text = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: b}}\n"
    assert [o["metadata"]["name"] for o in parse_documents(yaml_text)] == ["a", "b"]
    stream = json.dumps(node("x")) + "\n" + json.dumps(node("y"))
    assert [o["metadata"]["name"] for o in parse_documents(stream)] == ["x", "y"]


def test_bad_documents_name_the_source_and_line():
    with pytest.raises(InputError, match=r"dump.json: invalid JSON at line 1"):
        list(parse_documents('{"kind": "Pod",', "dump.json"))
    with pytest.raises(InputError, match=r"dump.yaml: invalid YAML at line 2"):
        list(parse_documents("kind: Pod\n  bad: [\n", "dump.yaml"))
    with pytest.raises(InputError, match="expected a Kubernetes object"):
        list(parse_documents("[1, 2]", "x"))


def test_malformed_objects_become_warnings_and_the_rest_is_used():
    state = ClusterState()
    bad_pod = pod("broken", requests={"cpu": "a lot"})
    used = state.load(
        [
            node("n1"),
            bad_pod,
            {"kind": "Widget", "metadata": {"name": "w"}},
            {"kind": "Service", "metadata": {"name": "s"}},
        ],
        "dump.yaml",
    )
    assert used == 1
    assert any("Pod default/broken" in w and "invalid quantity" in w for w in state.warnings)
    assert any("Widget" in w for w in state.warnings)
    assert not any(
        "Service" in w for w in state.warnings
    )  # known kinds we do not analyse are skipped quietly


def test_core_and_events_k8s_io_events_read_alike():
    core = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1", "namespace": "ml", "uid": "u1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ml"},
        "reason": "FailedScheduling",
        "message": "0/3 nodes are available",
        "type": "Warning",
        "count": 7,
        "firstTimestamp": "2026-11-20T10:00:00Z",
        "lastTimestamp": "2026-11-20T10:05:00Z",
        "source": {"component": "default-scheduler"},
    }
    new = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e2", "namespace": "ml", "uid": "u2"},
        "regarding": {"kind": "Pod", "name": "p", "namespace": "ml"},
        "reason": "FailedScheduling",
        "note": "0/3 nodes are available",
        "type": "Warning",
        "eventTime": "2026-11-20T10:00:00.000000Z",
        "series": {"count": 4, "lastObservedTime": "2026-11-20T10:06:00.000000Z"},
        "reportingController": "default-scheduler",
    }
    d = Decoder()
    a, b = d.event(core), d.event(new)
    assert (a.count, a.message, a.source) == (7, "0/3 nodes are available", "default-scheduler")
    assert (b.count, b.message, b.involved.name) == (4, "0/3 nodes are available", "p")
    assert b.last_seen is not None and a.last_seen is not None and b.last_seen > a.last_seen


def test_metrics_api_objects_sum_containers():
    pm = {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "PodMetrics",
        "metadata": {"name": "c-0", "namespace": "db"},
        "timestamp": "2026-11-20T10:00:00Z",
        "window": "30s",
        "containers": [
            {"name": "a", "usage": {"cpu": "1500m", "memory": "2Gi"}},
            {"name": "b", "usage": {"cpu": "250000000n", "memory": "1Gi"}},
        ],
    }
    got = Decoder().pod_metrics(pm)
    assert got.usage["cpu"] == 1750 and got.usage["memory"] == 3 * 2**30


def test_owner_chain_pod_replicaset_deployment():
    snap = ClusterSnapshot.from_objects(
        [
            deployment("web"),
            replicaset("web-7d9", "web"),
            pod("web-7d9-abc", owner=("ReplicaSet", "web-7d9"), labels={"app": "web"}),
        ]
    )
    p = snap.pods[("default", "web-7d9-abc")]
    assert str(snap.workload_of(p).ref) == "Deployment/default/web"
    assert snap.pods_of_workload(snap.workload_of(p).ref) == (p,)


def test_owner_chain_guesses_the_deployment_when_the_replicaset_is_not_in_the_dump():
    snap = ClusterSnapshot.from_objects(
        [deployment("web"), pod("web-7d9-abc", owner=("ReplicaSet", "web-7d9"))]
    )
    assert snap.workload_of(snap.pods[("default", "web-7d9-abc")]).ref.kind == "Deployment"


def test_snapshot_is_immutable_and_state_updates_one_object_at_a_time():
    state = ClusterState()
    state.apply_object(node("n1"))
    first = state.snapshot()
    assert state.snapshot() is first  # cached until something changes
    state.apply_object(node("n2"))
    second = state.snapshot()
    assert len(first.nodes) == 1 and len(second.nodes) == 2
    assert state.delete("Node", "", "n1") and len(state.snapshot().nodes) == 1
    with pytest.raises(AttributeError):
        second.nodes = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        second.nodes["x"] = None  # type: ignore[index]


def test_replace_builds_a_what_if_copy_without_touching_the_original():
    snap = ClusterSnapshot.from_objects([node("n1"), pod("p", node_name="n1")])
    bigger = Decoder().node(node("n1", cpu="64"))
    what_if = snap.replace(bigger, remove=[("pods", ("default", "p"))])
    assert what_if.nodes["n1"].allocatable["cpu"] == 64000 and not what_if.pods
    assert snap.nodes["n1"].allocatable["cpu"] == 4000 and snap.pods
