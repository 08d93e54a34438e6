"""Which remedies --verify-with-dry-run sends, and as which patch type (the dry runs
themselves are checked against the real API server in tests/realcluster)."""

from __future__ import annotations

from agent.dryrun import patch_of
from analyzers.findings import ObjectRef
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
