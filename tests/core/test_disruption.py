"""PDB arithmetic against pkg/controller/disruption/disruption.go and the eviction
decision against pkg/registry/core/pod/storage/eviction.go."""

from analyzers.disruption import MULTIPLE_PDBS_MESSAGE, budget_status, eviction_verdict
from analyzers.snapshot import ClusterSnapshot
from tests.core.helpers import deployment, node, pdb, pod, replicaset

SEL = {"matchLabels": {"app": "db"}}


def cluster(*extra, replicas=3, ready=(True, True, True)):
    objs = [
        node("n1"),
        node("n2"),
        node("n3"),
        deployment("db", replicas=replicas, labels={"app": "db"}),
        replicaset("db-5f7", "db", replicas=replicas, labels={"app": "db"}),
    ]
    for i, r in enumerate(ready):
        objs.append(
            pod(
                f"db-5f7-{i}",
                node_name=f"n{i + 1}",
                labels={"app": "db"},
                owner=("ReplicaSet", "db-5f7"),
                ready=r,
            )
        )
    return ClusterSnapshot.from_objects([*objs, *extra])


def status_of(snap, name):
    return budget_status(snap, snap.pdbs[("default", name)])


def test_disruption_go_int_minAvailable_counts_matching_pods():
    s = status_of(cluster(pdb("p", selector=SEL, min_available=2)), "p")
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (3, 2, 3, 1)


def test_disruption_go_minAvailable_equal_to_replicas_allows_nothing():
    s = status_of(cluster(pdb("p", selector=SEL, min_available=3)), "p")
    assert s.disruptions_allowed == 0


def test_disruption_go_percent_minAvailable_rounds_up_against_controller_scale():
    # 50% of 3 replicas rounds up to 2 desired healthy.
    s = status_of(cluster(pdb("p", selector=SEL, min_available="50%")), "p")
    assert (s.expected_pods, s.desired_healthy, s.disruptions_allowed) == (3, 2, 1)


def test_disruption_go_percent_maxUnavailable_rounds_up():
    # maxUnavailable 34% of 3 = 1.02 rounds up to 2, desired 1.
    s = status_of(cluster(pdb("p", selector=SEL, max_unavailable="34%")), "p")
    assert (s.desired_healthy, s.disruptions_allowed) == (1, 2)


def test_disruption_go_unready_pods_are_not_healthy():
    s = status_of(cluster(pdb("p", selector=SEL, max_unavailable=1), ready=(True, True, False)), "p")
    assert (s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (2, 2, 0)
    assert [p.name for p in s.unhealthy] == ["db-5f7-2"]


def test_disruption_go_pods_without_controller_are_left_out_of_the_scale_but_count_as_healthy():
    """getExpectedScale skips pods without a controllerRef (UnmanagedPods event);
    countHealthyPods still counts them."""
    lonely = pod("lonely", node_name="n1", labels={"app": "db"}, ready=True)
    s = status_of(cluster(lonely, pdb("p", selector=SEL, max_unavailable=1)), "p")
    assert s.error is None and s.unmanaged == ("lonely",)
    # 3 replicas expected (the lonely pod is not), 2 desired, 4 Ready pods healthy.
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (3, 2, 4, 2)
    assert s.as_dict()["unmanaged_pods"] == ["lonely"]


def test_disruption_go_only_unmanaged_pods_expect_nothing_and_allow_nothing():
    snap = ClusterSnapshot.from_objects(
        [
            node("n1"),
            pod("lonely", node_name="n1", labels={"app": "db"}, ready=True),
            pdb("p", selector=SEL, min_available="50%"),
        ]
    )
    s = status_of(snap, "p")
    assert s.error is None and s.unmanaged == ("lonely",)
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (0, 0, 1, 0)


def test_disruption_go_int_min_available_ignores_controllers():
    lonely = pod("lonely", node_name="n1", labels={"app": "db"}, ready=True)
    s = status_of(cluster(lonely, pdb("p", selector=SEL, min_available=2)), "p")
    assert s.unmanaged == () and (s.expected_pods, s.disruptions_allowed) == (4, 2)


def with_status(obj, **status):
    obj["status"] = status
    return obj


def test_disruption_go_fail_safe_sets_only_disruptions_allowed():
    """failSafe copies the PDB and sets DisruptionsAllowed to 0; the other figures
    stay what the controller last wrote."""
    orphan = pod("db-x", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "gone"), ready=True)
    budget = with_status(
        pdb("p", selector=SEL, max_unavailable=1),
        expectedPods=3,
        desiredHealthy=2,
        currentHealthy=3,
        disruptionsAllowed=1,
    )
    s = status_of(cluster(orphan, budget), "p")
    assert s.error == 'found no controllers for pod "db-x"'
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (3, 2, 3, 0)


def test_disruption_go_a_ready_pod_being_deleted_is_not_healthy():
    deleting = pod(
        "db-5f7-3",
        node_name="n1",
        labels={"app": "db"},
        owner=("ReplicaSet", "db-5f7"),
        ready=True,
        deleting=True,
    )
    s = status_of(cluster(deleting, pdb("p", selector=SEL, min_available=3)), "p")
    assert (s.current_healthy, s.disruptions_allowed) == (3, 0)
    s = status_of(cluster(deleting, pdb("p", selector=SEL, min_available=2)), "p")
    assert (s.current_healthy, s.disruptions_allowed) == (3, 1)


def test_disruption_go_disruptions_allowed_is_never_negative():
    s = status_of(cluster(pdb("p", selector=SEL, min_available=3), ready=(True, False, False)), "p")
    assert (s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (3, 1, 0)


def test_eviction_go_if_healthy_budget_evicts_an_unready_pod_when_the_budget_is_exactly_met():
    """eviction.go: ``CurrentHealthy >= DesiredHealthy && DesiredHealthy > 0``."""
    snap = cluster(pdb("p", selector=SEL, min_available=2), ready=(True, True, False))
    v = eviction_verdict(snap, snap.pods[("default", "db-5f7-2")])
    assert v.status is not None and (v.status.current_healthy, v.status.desired_healthy) == (2, 2)
    assert v.allowed and v.kind == "unhealthy-allowed"
    # One more Ready pod needed than there is: refused, and a Ready pod is refused too.
    snap = cluster(pdb("p", selector=SEL, min_available=3), ready=(True, True, False))
    assert not eviction_verdict(snap, snap.pods[("default", "db-5f7-2")]).allowed
    snap = cluster(pdb("p", selector=SEL, min_available=2), ready=(True, True, False))
    assert eviction_verdict(snap, snap.pods[("default", "db-5f7-0")]).kind == "pdb-violation"


def test_eviction_go_if_healthy_budget_needs_a_positive_desired_count():
    snap = cluster(pdb("p", selector=SEL, min_available=0), ready=(False, False, False))
    v = eviction_verdict(snap, snap.pods[("default", "db-5f7-0")])
    assert v.status is not None and v.status.desired_healthy == 0
    assert not v.allowed and v.kind == "pdb-violation"


def test_disruption_go_no_matching_pods_allows_nothing():
    s = status_of(cluster(pdb("p", selector={"matchLabels": {"app": "nothing"}}, max_unavailable=1)), "p")
    assert (s.expected_pods, s.disruptions_allowed) == (0, 0)


def test_eviction_go_pdb_violation_message():
    snap = cluster(pdb("p", selector=SEL, min_available=3))
    v = eviction_verdict(snap, snap.pods[("default", "db-5f7-0")])
    assert not v.allowed and v.kind == "pdb-violation"
    assert v.message.startswith("Cannot evict pod as it would violate the pod's disruption budget.")
    assert "needs 3 healthy pods and has 3 currently" in v.message


def test_eviction_go_more_than_one_pdb_is_refused():
    snap = cluster(pdb("p", selector=SEL, min_available=1), pdb("q", selector=SEL, max_unavailable=1))
    v = eviction_verdict(snap, snap.pods[("default", "db-5f7-0")])
    assert not v.allowed and v.message == MULTIPLE_PDBS_MESSAGE


def test_eviction_go_unready_pod_with_AlwaysAllow_is_evicted():
    snap = cluster(pdb("p", selector=SEL, min_available=3, policy="AlwaysAllow"), ready=(True, True, False))
    assert eviction_verdict(snap, snap.pods[("default", "db-5f7-2")]).allowed
    snap2 = cluster(pdb("p", selector=SEL, min_available=3), ready=(True, True, False))
    assert not eviction_verdict(snap2, snap2.pods[("default", "db-5f7-2")]).allowed


def test_eviction_go_empty_selector_matches_nothing_for_eviction():
    snap = cluster(pdb("p", selector={}, min_available=3))
    assert eviction_verdict(snap, snap.pods[("default", "db-5f7-0")]).kind == "no-pdb"
    # …while the disruption controller (policy/v1) counts every pod of the namespace.
    assert status_of(snap, "p").expected_pods == 3


def test_policy_v1beta1_empty_selector_selects_nothing():
    snap = cluster(pdb("p", selector={}, min_available=1, api_version="policy/v1beta1"))
    assert status_of(snap, "p").expected_pods == 0


def replication_controller(name, replicas):
    return {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"replicas": replicas, "selector": {"app": "db"}},
    }


def rc_pods(n, *, rc="db-rc"):
    out = []
    for i in range(n):
        p = pod(f"{rc}-{i}", node_name="n1", labels={"app": "db"}, ready=True)
        p["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "ReplicationController",
                "name": rc,
                "uid": f"uid-{rc}",
                "controller": True,
            }
        ]
        out.append(p)
    return out


def test_disruption_go_replication_controller_scale_is_its_spec_replicas():
    """getPodReplicationController: the RC's spec.replicas is the expected count."""
    snap = ClusterSnapshot.from_objects(
        [
            node("n1"),
            replication_controller("db-rc", 4),
            *rc_pods(3),
            pdb("p", selector=SEL, max_unavailable="50%"),
        ]
    )
    s = status_of(snap, "p")
    # 4 expected (not the 3 pods), 50% of 4 = 2 unavailable, so 2 desired; 3 healthy allow 1.
    assert s.error is None
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (4, 2, 3, 1)


def test_disruption_go_missing_replication_controller_fails_safe():
    snap = ClusterSnapshot.from_objects(
        [node("n1"), *rc_pods(2), pdb("p", selector=SEL, min_available="50%")]
    )
    s = status_of(snap, "p")
    assert s.error == 'found no controllers for pod "db-rc-0"' and s.disruptions_allowed == 0


# --- boundaries the mutation run found untested -----------------------------------------


def test_disruption_go_mid_rollout_counts_the_deployment_scale_once_not_its_replicasets():
    """getPodDeployment: pods of two ReplicaSets of one Deployment expect the Deployment's
    spec.replicas (4), not the ReplicaSets' sum (1 + 2)."""
    objs = [
        node("n1"),
        deployment("db", replicas=4, labels={"app": "db"}),
        replicaset("db-old", "db", replicas=1, labels={"app": "db"}),
        replicaset("db-new", "db", replicas=2, labels={"app": "db"}),
        pod("db-old-0", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "db-old"), ready=True),
        pod("db-new-0", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "db-new"), ready=True),
        pod("db-new-1", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "db-new"), ready=True),
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    s = status_of(ClusterSnapshot.from_objects(objs), "p")
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (4, 3, 3, 0)


def test_disruption_go_a_replicaset_without_a_deployment_counts_its_own_replicas():
    rs = replicaset("solo", "gone", replicas=5, labels={"app": "db"})
    del rs["metadata"]["ownerReferences"]
    objs = [
        node("n1"),
        rs,
        pod("solo-0", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "solo"), ready=True),
        pdb("p", selector=SEL, min_available="20%"),
    ]
    s = status_of(ClusterSnapshot.from_objects(objs), "p")
    assert (s.expected_pods, s.desired_healthy, s.disruptions_allowed) == (5, 1, 0)


def test_disruption_go_a_replicaset_owned_by_a_missing_deployment_is_counted_through_its_scale():
    # getPodDeployment finds no Deployment and getPodReplicaSet skips a ReplicaSet a
    # Deployment controls, but the last finder, getScaleController, reads the
    # ReplicaSet's own /scale (apps/v1 replicasets implement it): its spec.replicas
    # counts (pkg/controller/disruption/disruption.go v1.35.4, finders()).
    objs = [
        node("n1"),
        replicaset("db-5f7", "db", replicas=1, labels={"app": "db"}),
        pod("db-5f7-0", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "db-5f7"), ready=True),
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    s = status_of(ClusterSnapshot.from_objects(objs), "p")
    assert s.error is None
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (1, 0, 1, 1)


def test_disruption_go_a_replicaset_missing_from_the_dump_is_resolved_to_its_deployment_by_name():
    objs = [
        node("n1"),
        deployment("db", replicas=2, labels={"app": "db"}),
        pod("db-5f7-0", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "db-5f7"), ready=True),
        pod("db-5f7-1", node_name="n1", labels={"app": "db"}, owner=("ReplicaSet", "db-5f7"), ready=True),
        pdb("p", selector=SEL, max_unavailable="50%"),
    ]
    s = status_of(ClusterSnapshot.from_objects(objs), "p")
    assert (s.error, s.expected_pods, s.desired_healthy, s.disruptions_allowed) == (None, 2, 1, 1)
    # Without the Deployment either, the controller is not found.
    s = status_of(ClusterSnapshot.from_objects([o for o in objs if o["kind"] != "Deployment"]), "p")
    assert s.error == 'found no controllers for pod "db-5f7-0"'


def statefulset_objs(replicas, *, with_sts=True):
    objs = [node("n1"), pdb("p", selector=SEL, max_unavailable=1)]
    if with_sts:
        objs.append(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "db", "namespace": "default", "uid": "uid-db"},
                "spec": {
                    "replicas": replicas,
                    "selector": SEL,
                    "template": {"metadata": {"labels": {"app": "db"}}},
                },
            }
        )
    objs += [
        pod(f"db-{i}", node_name="n1", labels={"app": "db"}, owner=("StatefulSet", "db"), ready=True)
        for i in range(2)
    ]
    return objs


def test_disruption_go_statefulset_scale_is_its_spec_replicas():
    s = status_of(ClusterSnapshot.from_objects(statefulset_objs(3)), "p")
    assert (s.error, s.expected_pods, s.desired_healthy, s.disruptions_allowed) == (None, 3, 2, 0)
    s = status_of(ClusterSnapshot.from_objects(statefulset_objs(3, with_sts=False)), "p")
    assert s.error == 'found no controllers for pod "db-0"'


def test_disruption_go_an_owner_kind_it_cannot_scale_fails_safe():
    # getScaleController: the Scale GET answers 404 and discovery lists no
    # daemonsets/scale, so the error is `%s does not implement the scale subresource`
    # with the GroupResource (disruption.go v1.35.4).
    objs = [
        node("n1"),
        pod("w-0", node_name="n1", labels={"app": "db"}, owner=("DaemonSet", "agent"), ready=True),
        pdb("p", selector=SEL, max_unavailable=1),
    ]
    s = status_of(ClusterSnapshot.from_objects(objs), "p")
    assert s.error == "daemonsets.apps does not implement the scale subresource"
    assert s.disruptions_allowed == 0


def test_disruption_go_a_pdb_with_neither_field_expects_nothing_and_allows_nothing():
    s = status_of(cluster(pdb("p", selector=SEL)), "p")
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (0, 0, 3, 0)


def test_disruption_go_one_replica_with_max_unavailable_one_allows_one():
    """expectedCount 1 is above 0: the single healthy pod may go."""
    s = status_of(cluster(pdb("p", selector=SEL, max_unavailable=1), replicas=1, ready=(True,)), "p")
    assert (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed) == (1, 0, 1, 1)


def test_eviction_go_terminal_pending_and_terminating_pods_skip_the_budget():
    base = cluster(pdb("p", selector=SEL, min_available=3))
    for changes in ({"phase": "Succeeded"}, {"phase": "Pending"}):
        pod_obj = base.pods[("default", "db-5f7-0")]
        from dataclasses import replace

        v = eviction_verdict(base, replace(pod_obj, **changes))
        assert (v.allowed, v.kind) == (True, "ignored-pdb")
    deleting = pod(
        "db-5f7-9",
        node_name="n1",
        labels={"app": "db"},
        owner=("ReplicaSet", "db-5f7"),
        ready=True,
        deleting=True,
    )
    snap = cluster(deleting, pdb("p", selector=SEL, min_available=3))
    v = eviction_verdict(snap, snap.pods[("default", "db-5f7-9")])
    assert (v.allowed, v.kind) == (True, "ignored-pdb")
    # A Running, Ready pod of the same budget is refused.
    assert not eviction_verdict(base, base.pods[("default", "db-5f7-0")]).allowed


def test_eviction_go_no_pdb_allows():
    snap = cluster()
    v = eviction_verdict(snap, snap.pods[("default", "db-5f7-0")])
    assert (v.allowed, v.kind) == (True, "no-pdb")


def test_eviction_go_if_healthy_budget_with_one_desired_pod():
    """``DesiredHealthy > 0`` at its boundary: desired 1, current 1, an unready pod goes."""
    snap = cluster(pdb("p", selector=SEL, min_available=1), ready=(True, False, False))
    v = eviction_verdict(snap, snap.pods[("default", "db-5f7-1")])
    assert v.status is not None and (v.status.desired_healthy, v.status.current_healthy) == (1, 1)
    assert (v.allowed, v.kind) == (True, "unhealthy-allowed")
