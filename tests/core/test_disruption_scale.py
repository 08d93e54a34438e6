"""The disruption controller's finders (pkg/controller/disruption/disruption.go,
v1.35.4: finders(), getPodReplicationController, getPodDeployment, getPodReplicaSet,
getPodStatefulSet, getScaleController) and its test tables
(pkg/controller/disruption/disruption_test.go, v1.35.4), for owners found through
the ``/scale`` subresource: custom resources from a dump (their CRD's
specReplicasPath) or the live agent's reading, and controllerRef UIDs."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers import disruption
from analyzers.disruption import budget_status
from analyzers.records import OwnerRef, ScaleReading
from analyzers.snapshot import ClusterSnapshot, ClusterState
from tests.core.helpers import deployment, node, pdb, pod, replicaset

SEL = {"matchLabels": {"app": "db"}}
CR_UID = "b7329742-8daa-493a-8881-6ca07139172b"


def crd(
    *,
    group: str = "db.example.com",
    kind: str = "Database",
    plural: str = "databases",
    scale: dict[str, str] | None = None,
    version: str = "v1",
    served: bool = True,
) -> dict[str, Any]:
    v: dict[str, Any] = {"name": version, "served": served, "storage": True}
    if scale is not None:
        v["subresources"] = {"status": {}, "scale": scale}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [v],
        },
    }


SCALE = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}


def database(
    name: str = "orders", *, uid: str = CR_UID, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "db.example.com/v1",
        "kind": "Database",
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {"replicas": 10} if spec is None else spec,
        "status": {"replicas": 4},
    }


def owned_pod(
    name: str,
    *,
    uid: str = CR_UID,
    api_version: str = "db.example.com/v1",
    kind: str = "Database",
    owner: str = "orders",
    ready: bool = True,
) -> dict[str, Any]:
    obj = pod(name, node_name="n1", labels={"app": "db"}, ready=ready)
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": owner, "uid": uid, "controller": True}
    ]
    return obj


def with_status(
    obj: dict[str, Any], expected: int, desired: int, current: int, allowed: int
) -> dict[str, Any]:
    obj["status"] = {
        "expectedPods": expected,
        "desiredHealthy": desired,
        "currentHealthy": current,
        "disruptionsAllowed": allowed,
    }
    return obj


def status_of(objs: list[dict[str, Any]], name: str = "p", *records: Any):
    state = ClusterState()
    state.load(objs)
    for record in records:
        state.apply(record)
    snap = state.snapshot()
    assert not snap.warnings, snap.warnings
    return budget_status(snap, snap.pdbs[("default", name)])


# -- TestScaleResource: replicas 10, maxUnavailable 5, a pod count -------------------------


@pytest.mark.parametrize("pods", [4, 8])
def test_scale_resource_from_a_dumped_custom_resource_and_its_crd(pods):
    """disruption_test.go TestScaleResource: expected = the Scale's spec.replicas (10);
    desired = 10 - maxUnavailable 5; disruptionsAllowed = maxUnavailable - (replicas -
    pods) when that is positive. The Scale is what the API server builds from the CR at
    the CRD's specReplicasPath (apiextensions-apiserver scaleFromCustomResource)."""
    replicas, max_unavailable = 10, 5
    objs = [node("n1"), crd(scale=SCALE), database(), pdb("p", selector=SEL, max_unavailable=max_unavailable)]
    objs += [owned_pod(f"pod-{i}") for i in range(pods)]
    s = status_of(objs)
    allowed = max_unavailable - (replicas - pods) if replicas - pods < max_unavailable else 0
    assert (s.error, s.unknown) == (None, None)
    assert (s.disruptions_allowed, s.current_healthy, s.desired_healthy, s.expected_pods) == (
        allowed,
        pods,
        replicas - max_unavailable,
        replicas,
    )
    assert s.as_dict()["figures"] == "computed"


@pytest.mark.parametrize("pods", [4, 8])
def test_scale_resource_from_the_live_agents_scale_reading(pods):
    """TestScaleResource with the Scale the agent read from /scale (no CR, no CRD in the state)."""
    objs = [node("n1"), pdb("p", selector=SEL, max_unavailable=5)]
    objs += [owned_pod(f"pod-{i}") for i in range(pods)]
    reading = ScaleReading("default", "db.example.com", "Database", "orders", uid=CR_UID, replicas=10)
    s = status_of(objs, "p", reading)
    assert (s.error, s.expected_pods, s.desired_healthy, s.current_healthy) == (None, 10, 5, pods)
    assert s.disruptions_allowed == max(5 - (10 - pods), 0)


def test_the_spec_replicas_path_is_the_crds_own_and_may_be_nested():
    objs = [
        node("n1"),
        crd(scale={"specReplicasPath": ".spec.cluster.size", "statusReplicasPath": ".status.size"}),
        database(spec={"replicas": 99, "cluster": {"size": 3}}),
        owned_pod("pod-0"),
        pdb("p", selector=SEL, min_available="50%"),
    ]
    s = status_of(objs)
    # 50% of 3 rounds up to 2; one Ready pod: nothing allowed.
    assert (s.error, s.expected_pods, s.desired_healthy, s.disruptions_allowed) == (None, 3, 2, 0)


def test_an_absent_spec_replicas_is_zero_as_the_api_servers_scale_says():
    # scaleFromCustomResource: `!foundSpecReplicas → specReplicas = 0`; expectedCount 0
    # allows nothing (updatePdbStatus).
    objs = [
        node("n1"),
        crd(scale=SCALE),
        database(spec={}),
        owned_pod("pod-0"),
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    s = status_of(objs)
    assert (s.error, s.expected_pods, s.desired_healthy, s.disruptions_allowed) == (None, 0, 0, 0)


def test_a_spec_replicas_that_is_not_an_integer_fails_safe_with_the_accessor_error():
    # unstructured.NestedInt64 errors; the Scale GET fails, so trySync does: failSafe.
    objs = [
        node("n1"),
        crd(scale=SCALE),
        database(spec={"replicas": "3"}),
        owned_pod("pod-0"),
        with_status(pdb("p", selector=SEL, max_unavailable=1), 3, 2, 1, 1),
    ]
    s = status_of(objs)
    assert s.error == ".spec.replicas accessor error: 3 is of the type string, expected int64"
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (3, 2, 1, 0)


# -- TestScaleFinderNoResource / TestUnsupportedControllerPod (the input's side) -----------


def test_a_crd_without_a_scale_subresource_fails_safe():
    """TestScaleFinderNoResource "resource does not implement scale": an error, and
    failSafe sets only disruptionsAllowed to 0, the rest stays the last status."""
    objs = [
        node("n1"),
        crd(scale=None),
        database(),
        owned_pod("pod-0"),
        with_status(pdb("p", selector=SEL, max_unavailable=1), 10, 9, 1, 2),
    ]
    s = status_of(objs)
    assert s.error == "databases.db.example.com does not implement the scale subresource"
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (10, 9, 1, 0)
    assert s.as_dict()["figures"] == "status"


def test_a_version_the_crd_does_not_serve_is_the_rest_mappers_error():
    objs = [
        node("n1"),
        crd(scale=SCALE, served=False),
        database(),
        owned_pod("pod-0"),
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    assert status_of(objs).error == 'no matches for kind "Database" in version "db.example.com/v1"'


def test_unsupported_controller_pod_read_live_fails_safe():
    """TestUnsupportedControllerPod: a pod controlled by apps.test.io/v1 TestWorkload, a
    kind the cluster does not serve: CalculateExpectedPodCountFailed, 0 allowed. Live,
    the agent's reading carries the RESTMapper's error."""
    objs = [
        node("n1"),
        owned_pod("naked", api_version="apps.test.io/v1", kind="TestWorkload", owner="fake-controller"),
        pdb("p", selector=SEL, min_available="28%"),
    ]
    problem = 'no matches for kind "TestWorkload" in version "apps.test.io/v1"'
    reading = ScaleReading("default", "apps.test.io", "TestWorkload", "fake-controller", problem=problem)
    s = status_of(objs, "p", reading)
    assert (s.error, s.disruptions_allowed) == (problem, 0)


@pytest.mark.parametrize(
    "objs_of, reason",
    [
        (lambda: [crd(scale=SCALE)], 'Database "orders" (db.example.com) is not in the input'),
        (
            lambda: [database()],
            'no CustomResourceDefinition for kind "Database" in group "db.example.com" in the input',
        ),
    ],
    ids=["custom-resource-missing", "crd-missing"],
)
def test_a_dump_without_the_custom_resource_or_its_crd_is_unknown_and_shows_the_pdbs_status(objs_of, reason):
    """A dump that lacks what the /scale GET would read cannot say what the controller
    computed: the figures are the PDB's own status (the controller's last write), marked
    as such -- never a number unstick made up."""
    objs = [
        node("n1"),
        *objs_of(),
        owned_pod("pod-0"),
        owned_pod("pod-1"),
        with_status(pdb("p", selector=SEL, max_unavailable=1), 3, 2, 2, 0),
    ]
    s = status_of(objs)
    assert (s.error, s.unknown) == (None, reason)
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (3, 2, 2, 0)
    assert s.as_dict()["figures"] == "status" and s.as_dict()["unknown"] == reason
    # The status said 1 allowed: so does the answer (it is the controller's).
    objs[-1] = with_status(pdb("p", selector=SEL, max_unavailable=1), 3, 2, 3, 1)
    assert status_of(objs).disruptions_allowed == 1


def test_an_unknown_owner_does_not_hide_a_certain_failure():
    # Whatever the unknown owner would give, another pod's controller is not found: failSafe.
    objs = [
        node("n1"),
        owned_pod("pod-0"),  # Database, no CRD in the dump: unknown
        pod("pod-1", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "gone"), ready=True),
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    s = status_of(objs)
    assert (s.error, s.unknown) == ('found no controllers for pod "pod-1"', None)


def test_a_live_reading_the_agent_could_not_make_is_unknown():
    objs = [
        node("n1"),
        owned_pod("pod-0"),
        with_status(pdb("p", selector=SEL, max_unavailable=1), 5, 4, 5, 1),
    ]
    why = "GET /scale of Database default/orders: forbidden (grant get on */scale: rbac.scaleSubresource)"
    s = status_of(objs, "p", ScaleReading("default", "db.example.com", "Database", "orders", unknown=why))
    assert (s.unknown, s.disruptions_allowed, s.expected_pods) == (why, 1, 5)


# -- UIDs: `if X.UID != controllerRef.UID { return nil, nil }` in every finder ---------------


def test_a_custom_resource_recreated_with_another_uid_is_not_the_pods_controller():
    objs = [
        node("n1"),
        crd(scale=SCALE),
        database(uid="new-uid"),
        owned_pod("pod-0"),  # its controllerRef still names the old UID
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    assert status_of(objs).error == 'found no controllers for pod "pod-0"'
    reading = ScaleReading("default", "db.example.com", "Database", "orders", uid="new-uid", replicas=3)
    assert status_of(
        [o for o in objs if o["kind"] not in ("Database", "CustomResourceDefinition")], "p", reading
    ).error == ('found no controllers for pod "pod-0"')


def test_a_replicaset_recreated_with_another_uid_is_not_the_pods_controller():
    rs = replicaset("db-5f7", "db", replicas=3, labels={"app": "db"})
    rs["metadata"]["uid"] = "uid-recreated"
    objs = [
        node("n1"),
        deployment("db", replicas=3, labels={"app": "db"}),
        rs,
        pod("db-5f7-0", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "db-5f7"), ready=True),
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    assert status_of(objs).error == 'found no controllers for pod "db-5f7-0"'
    rs["metadata"]["uid"] = "uid-db-5f7"  # the pod's controllerRef UID
    assert (status_of(objs).error, status_of(objs).expected_pods) == (None, 3)


def test_a_deployment_recreated_with_another_uid_leaves_the_replicaset_counted_through_its_scale():
    # getPodDeployment: deployment.UID != the ReplicaSet's controllerRef UID → nil;
    # getPodReplicaSet skips a ReplicaSet a Deployment controls; getScaleController
    # reads the ReplicaSet's /scale (its UID is the pod's controllerRef's): 2, not 5.
    dep = deployment("db", replicas=5, labels={"app": "db"})
    dep["metadata"]["uid"] = "uid-recreated"
    objs = [
        node("n1"),
        dep,
        replicaset("db-5f7", "db", replicas=2, labels={"app": "db"}),
        pod("db-5f7-0", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "db-5f7"), ready=True),
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    s = status_of(objs)
    assert (s.error, s.expected_pods) == (None, 2)
    dep["metadata"]["uid"] = "uid-db"
    assert status_of(objs).expected_pods == 5


def test_an_owner_reference_that_is_not_a_controller_leaves_the_pod_unmanaged():
    # metav1.GetControllerOf returns only a reference with controller: true.
    objs = [
        node("n1"),
        crd(scale=SCALE),
        database(),
        owned_pod("pod-0"),
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    objs[3]["metadata"]["ownerReferences"][0]["controller"] = False
    s = status_of(objs)
    assert (s.error, s.unmanaged, s.expected_pods, s.disruptions_allowed) == (None, ("pod-0",), 0, 0)


# -- TestBasicFinderFunctions / TestDeploymentFinderFunction ------------------------------


def _finder_snapshot(
    rs_owner_api_version: str = "apps/v1", rs_owner_kind: str = "Deployment"
) -> ClusterSnapshot:
    rs = replicaset("rs", "dep", replicas=10)
    rs["metadata"]["ownerReferences"][0].update(apiVersion=rs_owner_api_version, kind=rs_owner_kind)
    rc = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "rc", "namespace": "default", "uid": "uid-rc"},
        "spec": {"replicas": 12},
    }
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "ss", "namespace": "default", "uid": "uid-ss"},
        "spec": {
            "replicas": 14,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"spec": {"containers": []}},
        },
    }
    lone_rs = replicaset("lone", "x", replicas=10)
    lone_rs["metadata"]["ownerReferences"] = []
    return ClusterSnapshot.from_objects([rs, rc, sts, lone_rs, deployment("dep", replicas=10)])


@pytest.mark.parametrize(
    "finder, api_version, kind, name, uid, scale",
    [
        # TestBasicFinderFunctions (disruption_test.go v1.35.4)
        (
            "_find_replica_set",
            "apps/v1",
            "ReplicaSet",
            "lone",
            "uid-lone",
            10,
        ),  # "replicaset controller with apps group"
        (
            "_find_replica_set",
            "invalid/v1",
            "ReplicaSet",
            "lone",
            "uid-lone",
            None,
        ),  # "... with invalid group"
        (
            "_find_replication_controller",
            "/v1",
            "ReplicationController",
            "rc",
            "uid-rc",
            12,
        ),  # "with empty group"
        (
            "_find_replication_controller",
            "apps/v1",
            "ReplicationController",
            "rc",
            "uid-rc",
            None,
        ),  # "invalid group"
        ("_find_stateful_set", "apps/v1", "StatefulSet", "ss", "uid-ss", 14),  # "statefulset controller ..."
        ("_find_stateful_set", "apps/v1", "ReplicaSet", "ss", "uid-ss", None),  # "... with invalid kind"
        # and every finder's UID check
        ("_find_replica_set", "apps/v1", "ReplicaSet", "lone", "uid-other", None),
        ("_find_replication_controller", "v1", "ReplicationController", "rc", "uid-other", None),
        ("_find_stateful_set", "apps/v1", "StatefulSet", "ss", "uid-other", None),
    ],
)
def test_basic_finder_functions(finder, api_version, kind, name, uid, scale):
    found = getattr(disruption, finder)(_finder_snapshot(), OwnerRef(kind, name, uid, api_version), "default")
    assert (found is None) == (scale is None)
    if found is not None:
        assert found == (uid, scale)


@pytest.mark.parametrize(
    "rs_api_version, rs_kind, dep_api_version, dep_kind, finds",
    [
        # TestDeploymentFinderFunction (disruption_test.go v1.35.4)
        ("apps/v1", "ReplicaSet", "extensions/v1", "Deployment", True),  # "happy path"
        ("invalid/v1", "ReplicaSet", "apps/v1", "Deployment", False),  # "invalid rs apiVersion"
        ("apps/v1", "InvalidKind", "apps/v1", "Deployment", False),  # "invalid rs kind"
        (
            "extensions/v1",
            "ReplicaSet",
            "deployment/v1",
            "Deployment",
            False,
        ),  # "invalid deployment apiVersion"
        ("apps/v1", "ReplicaSet", "extensions/v1", "InvalidKind", False),  # "invalid deployment kind"
    ],
)
def test_deployment_finder_function(rs_api_version, rs_kind, dep_api_version, dep_kind, finds):
    snap = _finder_snapshot(dep_api_version, dep_kind)
    found = disruption._find_deployment(snap, OwnerRef(rs_kind, "rs", "uid-rs", rs_api_version), "default")
    assert found == (("uid-dep", 10) if finds else None)


def test_an_owner_api_version_with_two_slashes_is_upstreams_parse_error():
    objs = [node("n1"), owned_pod("pod-0", api_version="a/b/c"), pdb("p", selector=SEL, max_unavailable=1)]
    assert status_of(objs).error == "unexpected GroupVersion string: a/b/c"


def test_a_custom_resource_in_a_dump_is_ingested_not_warned_about():
    state = ClusterState()
    state.load([crd(scale=SCALE), database()])
    snap = state.snapshot()
    assert not snap.warnings
    (cr,) = snap.custom_objects.values()
    assert (cr.kind, cr.namespace, cr.name, cr.uid, cr.content["spec"]["replicas"]) == (
        "Database",
        "default",
        "orders",
        CR_UID,
        10,
    )
    (definition,) = snap.crds.values()
    assert definition.version("v1").spec_replicas_path == ".spec.replicas"


def test_spec_replicas_is_converted_to_the_scales_int32():
    # scaleFromCustomResource: `Replicas: int32(specReplicas)` -- 2**32 + 3 wraps to 3.
    objs = [
        node("n1"),
        crd(scale=SCALE),
        database(spec={"replicas": 2**32 + 3}),
        owned_pod("pod-0"),
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    assert status_of(objs).expected_pods == 3


@pytest.mark.parametrize(
    "spec, problem",
    [
        (5, "spec: expected an object, found integer"),
        ({"versions": 5}, "spec.versions: expected an array, found integer"),
        ({"names": [1]}, "spec.names: expected an object, found array"),
        (
            {"versions": [{"name": "v1", "subresources": {"scale": []}}]},
            "spec.versions[0].subresources.scale: expected an object",
        ),
        (
            {"versions": [{"name": "v1", "subresources": {"scale": {"specReplicasPath": 5}}}]},
            "spec.versions[0].subresources.scale.specReplicasPath: expected a string, found integer",
        ),
    ],
)
def test_a_malformed_crd_is_one_warning_naming_the_field(spec, problem):
    state = ClusterState()
    obj = {**crd(scale=SCALE), "spec": spec}
    assert state.load([obj, database()], "dump.yaml") == 1  # the custom resource is still read
    (warning,) = state.warnings
    assert (
        warning.startswith("dump.yaml: CustomResourceDefinition databases.db.example.com: ")
        and problem in warning
    )
