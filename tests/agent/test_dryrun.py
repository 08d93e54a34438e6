"""Which remedies --verify-with-dry-run sends, and as which request (the dry runs
themselves are checked against the real API server in tests/realcluster)."""

from __future__ import annotations

import json
from dataclasses import replace

import yaml

from agent.dryrun import DryRun, dry_runs, patch_of, recreated_pod, strategic_merge
from analyzers.findings import ObjectRef, Remedy
from analyzers.remedies import RemedyRenderer

DEPLOY = ObjectRef("Deployment", "shop", "web")


def test_an_in_place_patch_is_sent_with_its_type() -> None:
    r = RemedyRenderer()
    strategic = r.patch("t", DEPLOY, {"spec": {"replicas": 2}}, verified=True, verification="v")
    merge = r.patch(
        "t", DEPLOY, {"spec": {"replicas": 2}}, verified=True, verification="v", patch_type="merge"
    )
    assert patch_of(strategic) == ({"spec": {"replicas": 2}}, "strategic")
    assert patch_of(merge) == ({"spec": {"replicas": 2}}, "merge")


def test_commands_and_re_created_pods_are_not_sent_as_patches() -> None:
    r = RemedyRenderer()
    command = r.command(
        "t", DEPLOY, "kubectl scale deployment/web -n shop --replicas=3", verified=True, verification="v"
    )
    pod = r.patch(
        "t",
        ObjectRef("Pod", "shop", "p"),
        {"spec": {"nodeSelector": {"a": "b"}}},
        verified=True,
        verification="v",
    )
    recreate = type(pod)(
        pod.title,
        pod.kind,
        pod.target,
        pod.yaml,
        "kubectl get pod p -n shop -o json | kubectl patch --local -f - -p '{}' -o json"
        " | kubectl replace --force -f -",
        True,
        "v",
    )
    assert patch_of(command) is None
    assert patch_of(recreate) is None
    assert patch_of(pod) is not None  # a direct pod patch (e.g. added tolerations) is sent


# -- what else is dry-run: re-created bare pods and manifests (create) --------------------------------

POD = ObjectRef("Pod", "shop", "p")


def recreate_remedy(patch: dict[str, object]) -> Remedy:
    pod = RemedyRenderer().patch("t", POD, patch, verified=True, verification="v")
    return replace(
        pod,
        command="kubectl get pod p -n shop -o json | kubectl patch --local -f - --type strategic"
        f" -p {json.dumps(patch)!r} -o json | kubectl replace --force -f -",
    )


def test_a_re_created_pod_is_dry_run_as_a_create_of_the_patched_pod() -> None:
    patch = {"spec": {"nodeSelector": {"gpu-type": "a10g", "gpu-typ": None}}}
    assert dry_runs(recreate_remedy(patch)) == [DryRun("recreate", "Pod", "shop", "p", patch)]


def test_manifests_are_dry_run_per_document_in_the_remedy_namespace() -> None:
    r = RemedyRenderer()
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"}, "spec": {}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": {}}
    two = replace(
        r.manifest(
            "t",
            ObjectRef("PersistentVolumeClaim", "shop", "data"),
            "object.yaml.j2",
            verified=True,
            verification="v",
            obj=pv,
        ),
        yaml=yaml.safe_dump_all([pv, claim]),
    )
    runs = dry_runs(two)
    assert runs is not None
    assert [(d.how, d.kind, d.namespace, d.name) for d in runs] == [
        ("apply", "PersistentVolume", None, "pv-1"),
        ("apply", "PersistentVolumeClaim", "shop", "data"),
    ]
    assert runs[1].body["metadata"]["namespace"] == "shop"  # kubectl apply -n would put it there


def test_manifests_of_unknown_kinds_or_versions_are_not_sent() -> None:
    r = RemedyRenderer()
    snapshot = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": "s"},
    }
    old_pv = {"apiVersion": "v2", "kind": "PersistentVolume", "metadata": {"name": "x"}}
    for obj in (snapshot, old_pv):
        m = r.manifest("t", None, "object.yaml.j2", verified=True, verification="v", obj=obj)
        assert dry_runs(m) is None, obj


def test_strategic_merge_follows_the_pod_merge_keys() -> None:
    pod = {
        "metadata": {"name": "p", "finalizers": ["a"]},
        "spec": {
            "nodeSelector": {"gpu-typ": "a10g", "zone": "a"},
            "tolerations": [{"key": "x", "operator": "Exists"}],
            "topologySpreadConstraints": [
                {"topologyKey": "zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"},
                {"topologyKey": "host", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"},
            ],
            "containers": [
                {"name": "app", "image": "a:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "s:1"},
            ],
        },
    }
    patch = {
        "metadata": {"finalizers": ["b", "a"]},
        "spec": {
            "nodeSelector": {"gpu-typ": None, "gpu-type": "a10g"},
            "tolerations": [{"key": "y", "operator": "Exists"}],
            "topologySpreadConstraints": [
                {"topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
                {"topologyKey": "rack", "maxSkew": 2, "whenUnsatisfiable": "DoNotSchedule"},
            ],
            "containers": [{"name": "app", "env": [{"name": "B", "value": "2"}]}],
        },
    }
    merged = strategic_merge(pod, patch)
    spec = merged["spec"]
    assert spec["nodeSelector"] == {"zone": "a", "gpu-type": "a10g"}  # null deletes, maps merge
    assert spec["tolerations"] == [{"key": "y", "operator": "Exists"}]  # no merge key: replaced
    assert [
        (c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"]) for c in spec["topologySpreadConstraints"]
    ] == [  # as the API server orders a merged list (tests/realcluster/test_patch_semantics.py)
        ("zone", 1, "ScheduleAnyway"),
        ("rack", 2, "DoNotSchedule"),
        ("host", 1, "DoNotSchedule"),
    ]
    app, side = spec["containers"]
    assert app["image"] == "a:1" and [e["name"] for e in app["env"]] == ["B", "A"]
    assert side == {"name": "side", "image": "s:1"}
    assert merged["metadata"]["finalizers"] == ["b", "a"]
    assert pod["spec"]["nodeSelector"] == {"gpu-typ": "a10g", "zone": "a"}  # the original is untouched


def test_the_re_created_pod_drops_what_kubectl_replace_force_does_not_send() -> None:
    current = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "shop",
            "uid": "u",
            "resourceVersion": "41",
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"nodeSelector": {"gpu-typ": "a10g"}, "containers": [{"name": "app", "image": "a:1"}]},
        "status": {"phase": "Pending"},
    }
    pod = recreated_pod(current, {"spec": {"nodeSelector": {"gpu-typ": None, "gpu-type": "a10g"}}})
    assert pod["metadata"] == {"namespace": "shop", "uid": "u", "generateName": "p-"}
    assert pod["spec"]["nodeSelector"] == {"gpu-type": "a10g"}
    assert current["metadata"]["resourceVersion"] == "41"
