from __future__ import annotations

import yaml

from analyzers.rules import untolerated_taint as rule
from tests.rules.placement_fixtures import (
    analyze_one,
    bare_pod,
    deployment,
    findings,
    node,
    snapshot,
    taint,
    template,
)

CP = "node-role.kubernetes.io/control-plane"


def test_gpu_pool_toleration_keeps_the_templates_own_tolerations():
    existing = {"key": "example.com/spot", "operator": "Exists", "effect": "NoSchedule"}
    snap = snapshot(
        node("w-0"),
        node("gpu-0", extra={"nvidia.com/gpu": "1"}, taints=[taint("nvidia.com/gpu", "present")]),
        deployment("train", template(app="train", requests={"nvidia.com/gpu": "1"}, tolerations=[existing])),
    )
    [f] = analyze_one(rule, snap)
    assert "GPU pool taint" in f.explanation and "expected to tolerate it" in f.explanation
    [patch] = [r for r in f.remedies if r.kind == "patch"]
    assert patch.verified
    tolerations = yaml.safe_load(patch.yaml)["spec"]["template"]["spec"]["tolerations"]
    assert tolerations == [
        existing,
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    ]
    # The admission-added not-ready/unreachable tolerations stay out of the template patch.
    assert all(t["key"] != "node.kubernetes.io/not-ready" for t in tolerations)
    assert f.cause == "taint:nvidia.com/gpu"


def test_control_plane_is_never_tolerated():
    snap = snapshot(
        node("w-0", cpu="2"),
        node("cp-0", cpu="16", labels={CP: ""}, taints=[taint(CP)]),
        deployment("batch", template(app="batch", requests={"cpu": "8"})),
    )
    [f] = analyze_one(rule, snap)
    assert "do not tolerate it" in f.explanation
    assert not any(r.kind == "patch" for r in f.remedies)
    [capacity] = f.remedies
    assert capacity.verified and "synthetic" in capacity.verification


def test_not_ready_node_needs_repair_not_a_toleration():
    snap = snapshot(
        node(
            "w-0", labels={"pool": "db"}, taints=[taint("node.kubernetes.io/not-ready", effect="NoSchedule")]
        ),
        node("w-1"),
        deployment("db", template(app="db", node_selector={"pool": "db"})),
    )
    [f] = analyze_one(rule, snap)
    assert "not something to tolerate" in f.explanation
    assert not any(r.kind == "patch" for r in f.remedies)
    [repair] = f.remedies
    assert not repair.verified
    assert repair.command == "kubectl describe node w-0"
    assert "w-0 healthy: it fits on w-0" in repair.verification


def test_dedicated_pool_toleration_says_it_does_not_attract():
    snap = snapshot(
        node("w-0", cpu="1"),
        node("batch-0", cpu="8", taints=[taint("dedicated", "batch")]),
        deployment("etl", template(app="etl", requests={"cpu": "4"})),
    )
    [f] = analyze_one(rule, snap)
    [patch] = [r for r in f.remedies if r.kind == "patch"]
    assert patch.verified and "only permits" in patch.verification


def test_cordoned_node_is_uncordoned_not_tolerated():
    snap = snapshot(
        node(
            "w-0",
            labels={"pool": "ingress"},
            unschedulable=True,
            taints=[taint("node.kubernetes.io/unschedulable")],
        ),
        node("w-1"),
        deployment("lb", template(app="lb", node_selector={"pool": "ingress"})),
    )
    [f] = analyze_one(rule, snap)
    assert "cordoned" in f.explanation
    [uncordon] = f.remedies
    assert uncordon.command == "kubectl uncordon w-0" and uncordon.verified


def test_bare_pod_gets_tolerations_patched_in_place():
    snap = snapshot(
        node("t-0", taints=[taint("dedicated", "tools")]), bare_pod("toolbox", template(app="toolbox"))
    )
    [f] = analyze_one(rule, snap)
    [patch] = [r for r in f.remedies if r.kind == "patch"]
    assert patch.command.startswith("kubectl patch pod toolbox -n default --type strategic")
    # A pod's tolerations may only be added to: the patch lists the pod's own first.
    keys = [t["key"] for t in yaml.safe_load(patch.yaml)["spec"]["tolerations"]]
    assert keys[-1] == "dedicated" and "node.kubernetes.io/not-ready" in keys


def test_quiet_when_tolerated():
    snap = snapshot(
        node("gpu-0", extra={"nvidia.com/gpu": "1"}, taints=[taint("nvidia.com/gpu", "present")]),
        deployment(
            "train",
            template(
                app="train",
                requests={"nvidia.com/gpu": "1"},
                tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            ),
        ),
    )
    assert findings(snap) == []


def test_job_template_is_immutable_so_the_remedy_is_a_recreate():
    job_tpl = template(app="etl")
    job_tpl["spec"]["restartPolicy"] = "Never"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "etl-2891", "namespace": "default", "uid": "uid-job"},
        "spec": {"parallelism": 1, "completions": 1, "template": job_tpl},
    }
    pod = bare_pod("etl-2891-x7k2p", job_tpl)
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "etl-2891", "uid": "uid-job", "controller": True}
    ]
    snap = snapshot(node("b-0", taints=[taint("dedicated", "batch")]), job, pod)
    [f] = analyze_one(rule, snap)
    assert f.subject.kind == "Job"
    [remedy] = f.remedies
    assert remedy.kind == "command" and "cannot be patched in place" in remedy.command
    assert remedy.verified and "key: dedicated" in remedy.yaml
