from __future__ import annotations

import yaml

from analyzers.findings import Severity
from analyzers.rules import node_selector_mismatch as rule
from tests.rules.placement_fixtures import (
    analyze_one,
    bare_pod,
    deployment,
    findings,
    node,
    snapshot,
    statefulset,
    template,
)

Z = "topology.kubernetes.io/zone"


def gpu_nodes():
    return [node(f"gpu-{i}", labels={"gpu-type": "a100"}, extra={"nvidia.com/gpu": "4"}) for i in range(2)]


def test_typo_in_the_key_suggests_the_existing_label_and_a_verified_patch():
    snap = snapshot(
        node("w-0"),
        *gpu_nodes(),
        deployment("trainer", template(app="trainer", node_selector={"gpu-typ": "a100"})),
    )
    [f] = analyze_one(rule, snap)
    assert f.rule_id == "node-selector-mismatch"
    assert f.subject.kind == "Deployment" and f.subject.name == "trainer"
    assert f.severity is Severity.CRITICAL  # no replica of trainer is ready
    assert "no node has a label gpu-typ" in f.explanation
    assert "gpu-type=a100 on 2 nodes" in f.explanation
    assert f.cause == "selector:gpu-typ"
    patch = next(r for r in f.remedies if r.kind == "patch")
    assert patch.verified
    assert yaml.safe_load(patch.yaml) == {
        "spec": {"template": {"spec": {"nodeSelector": {"gpu-typ": None, "gpu-type": "a100"}}}}
    }
    label = next(r for r in f.remedies if r.kind == "command")
    assert label.verified and label.command.startswith("kubectl label node gpu-0 gpu-typ=a100")


def test_value_differing_in_case_is_found():
    snap = snapshot(
        *gpu_nodes(), deployment("trainer", template(app="trainer", node_selector={"gpu-type": "A100"}))
    )
    [f] = analyze_one(rule, snap)
    assert "gpu-type=a100" in f.explanation
    assert any(r.verified and "gpu-type: a100" in r.yaml for r in f.remedies)


def test_required_affinity_value_is_replaced_inside_its_term():
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "gpu-type", "operator": "In", "values": ["a10O"]},
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        ]
                    }
                ]
            }
        }
    }
    nodes = [node(f"gpu-{i}", labels={"gpu-type": "a100", "kubernetes.io/os": "linux"}) for i in range(2)]
    snap = snapshot(*nodes, deployment("trainer", template(app="trainer", affinity=affinity)))
    [f] = analyze_one(rule, snap)
    patch = next(r for r in f.remedies if r.kind == "patch")
    assert patch.verified
    terms = yaml.safe_load(patch.yaml)["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "gpu-type", "operator": "In", "values": ["a100"]},
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            ]
        }
    ]


def test_labels_that_exist_but_never_together():
    nodes = [node("a-0", labels={Z: "zone-a"}), node("b-gpu", labels={Z: "zone-b", "gpu": "true"})]
    snap = snapshot(
        *nodes, deployment("job", template(app="job", node_selector={Z: "zone-a", "gpu": "true"}))
    )
    [f] = analyze_one(rule, snap)
    assert "matches some node, but no node has them all" in f.explanation
    assert f.cause == "selector:gpu+topology.kubernetes.io/zone"


def test_hostname_of_a_replaced_node_is_never_relabelled():
    nodes = [node("ip-10-0-1-23.ec2.internal"), node("ip-10-0-1-87.ec2.internal")]
    snap = snapshot(
        *nodes,
        deployment(
            "cache",
            template(app="cache", node_selector={"kubernetes.io/hostname": "ip-10-0-1-24.ec2.internal"}),
        ),
    )
    [f] = analyze_one(rule, snap)
    assert not any(r.command.startswith("kubectl label") for r in f.remedies)
    assert "kubernetes.io/hostname=ip-10-0-1-23.ec2.internal" in f.explanation


def test_fingerprint_is_stable_when_pods_are_recreated():
    a = snapshot(
        *gpu_nodes(), deployment("trainer", template(app="trainer", node_selector={"gpu-typ": "a100"}))
    )
    objs = deployment("trainer", template(app="trainer", node_selector={"gpu-typ": "a100"}), pending=3)
    for o in objs:
        if o["kind"] == "Pod":
            o["metadata"]["name"] += "-recreated"
    b = snapshot(*gpu_nodes(), objs)
    [fa], [fb] = analyze_one(rule, a), analyze_one(rule, b)
    assert fa.fingerprint == fb.fingerprint
    assert fa.pods != fb.pods


def test_bare_pod_is_recreated_with_the_fix():
    snap = snapshot(*gpu_nodes(), bare_pod("debug", template(app="debug", node_selector={"gpu-typ": "a100"})))
    [f] = analyze_one(rule, snap)
    patch = next(r for r in f.remedies if r.kind == "patch")
    assert f.subject.kind == "Pod"
    assert yaml.safe_load(patch.yaml) == {"spec": {"nodeSelector": {"gpu-typ": None, "gpu-type": "a100"}}}
    assert "kubectl replace --force -f -" in patch.command


def test_statefulset_fix_also_deletes_the_stuck_pod():
    snap = snapshot(
        *gpu_nodes(),
        statefulset("db", template(app="db", node_selector={"gpu-typ": "a100"}), replicas=1, bound=[]),
    )
    [f] = analyze_one(rule, snap)
    patch = next(r for r in f.remedies if r.kind == "patch")
    assert patch.command.endswith("&& kubectl delete pod -n default db-0")
    assert "waits for its pending pod" in patch.verification


def test_quiet_when_the_selector_matches():
    snap = snapshot(
        *gpu_nodes(), deployment("trainer", template(app="trainer", node_selector={"gpu-type": "a100"}))
    )
    assert findings(snap) == []
