from __future__ import annotations

from analyzers.findings import Severity
from analyzers.rules import insufficient_resources as rule
from tests.rules.placement_fixtures import (
    analyze_one,
    bare_pod,
    deployment,
    findings,
    node,
    pod_event,
    snapshot,
    taint,
    template,
)

CP = "node-role.kubernetes.io/control-plane"


def filled(nodes: list[str], cpu: str, app: str = "busy") -> list:
    return deployment(
        app, template(app=app, requests={"cpu": cpu}), replicas=len(nodes), bound=nodes, pending=0
    )


def three_nodes(**kw):
    return [node(f"w-{i}", **kw) for i in range(3)]


def test_fragmented_when_enough_in_total_but_not_on_one_node():
    snap = snapshot(
        *three_nodes(cpu="4"),
        filled(["w-0", "w-1", "w-2"], "2500m"),
        deployment("api", template(app="api", requests={"cpu": "3"})),
    )
    [f] = analyze_one(rule, snap)
    assert f.evidence["kind"] == "fragmented"
    assert "4500m cpu free -- enough in total, but at most 1500m cpu on one node" in f.explanation
    assert f.cause == "resource:cpu"
    titles = [r.title for r in f.remedies]
    assert any("descheduler" in t for t in titles)
    lower = next(r for r in f.remedies if r.title.startswith("Lower"))
    assert (
        lower.verified
        and lower.command == "kubectl set resources deployment/api -n default --requests=cpu=1500m"
    )


def test_cluster_full_counts_every_pending_pod():
    snap = snapshot(
        *three_nodes(cpu="4"),
        filled(["w-0", "w-1", "w-2"], "3500m"),
        deployment("api", template(app="api", requests={"cpu": "1"}), replicas=2, pending=2),
    )
    [f] = analyze_one(rule, snap)
    assert f.evidence["kind"] == "cluster full"
    assert "the 2 pending pods need" in f.explanation
    assert not any("descheduler" in r.title for r in f.remedies)


def test_never_fits_and_a_bigger_synthetic_node_is_verified():
    snap = snapshot(*three_nodes(cpu="4"), deployment("api", template(app="api", requests={"cpu": "6"})))
    [f] = analyze_one(rule, snap)
    assert f.evidence["kind"] == "never fits"
    assert "6 cpu is more than any eligible node can ever offer" in f.explanation
    bigger = next(r for r in f.remedies if r.title.startswith("Add bigger nodes"))
    assert bigger.verified and "synthetic empty node" in bigger.verification


def test_gpu_shortage_lists_every_nodes_free_count():
    gpus = [node(f"gpu-{i}", extra={"nvidia.com/gpu": "2"}) for i in range(3)]
    busy = deployment(
        "inf",
        template(app="inf", requests={"nvidia.com/gpu": "1"}),
        replicas=4,
        bound=["gpu-0", "gpu-1", "gpu-1", "gpu-2"],
        pending=0,
    )
    snap = snapshot(*gpus, busy, deployment("train", template(app="train", requests={"nvidia.com/gpu": "2"})))
    [f] = analyze_one(rule, snap)
    [short] = f.evidence["shortages"]
    assert {r["node"]: r["free"] for r in short["per_node"]} == {"gpu-0": "1", "gpu-1": "0", "gpu-2": "1"}
    assert "gpu-0 1/2, gpu-2 1/2, gpu-1 0/2" in f.explanation
    lower = next(r for r in f.remedies if r.title.startswith("Lower"))
    assert "--limits=nvidia.com/gpu=1" in lower.command  # extended resources: requests == limits


def test_too_many_pods_is_not_cured_by_smaller_requests():
    snap = snapshot(
        node("w-0", pods="2"), filled(["w-0", "w-0"], "100m"), deployment("api", template(app="api"))
    )
    [f] = analyze_one(rule, snap)
    assert f.cause.startswith("resource:pods")
    assert "Too many pods" in f.explanation
    assert not any(r.title.startswith("Lower") for r in f.remedies)


def test_scale_up_under_way_makes_it_informational():
    objs = deployment("api", template(app="api", requests={"cpu": "6"}))
    pending = objs[-1]["metadata"]["name"]
    event = pod_event(
        pending,
        "TriggeredScaleUp",
        "pod triggered scale-up: [{eks-general-2c4b 3->4 (max: 10)}]",
        source="cluster-autoscaler",
    )
    snap = snapshot(*three_nodes(cpu="4"), objs, event)
    [f] = analyze_one(rule, snap)
    assert f.severity is Severity.INFO
    assert "already adding capacity" in f.explanation
    assert f.evidence["autoscaler_events"][0]["reason"] == "TriggeredScaleUp"


def test_tainted_nodes_with_room_are_mentioned():
    snap = snapshot(
        *three_nodes(cpu="2"),
        filled(["w-0", "w-1", "w-2"], "1500m"),
        node("cp-0", cpu="8", labels={CP: ""}, taints=[taint(CP)]),
        deployment("api", template(app="api", requests={"cpu": "1"})),
    )
    [f] = analyze_one(rule, snap)
    assert "cp-0 would have room but is tainted or cordoned against this pod" in f.explanation


def test_multi_container_pods_are_not_verified_per_container():
    snap = snapshot(
        *three_nodes(cpu="4"),
        filled(["w-0", "w-1", "w-2"], "2500m"),
        deployment("api", template(app="api", requests={"cpu": "1500m"}, containers=2)),
    )
    [f] = analyze_one(rule, snap)
    lower = next(r for r in f.remedies if r.title.startswith("Lower"))
    assert not lower.verified and "several containers" in lower.verification


def test_no_lowering_far_below_the_request():
    snap = snapshot(
        *three_nodes(cpu="4"),
        filled(["w-0", "w-1", "w-2"], "3800m"),
        deployment("api", template(app="api", requests={"cpu": "1"})),
    )
    [f] = analyze_one(rule, snap)
    assert not any(r.title.startswith("Lower") for r in f.remedies)  # 200m of 1 cpu is below half


def test_bare_pod_and_quiet_cluster():
    snap = snapshot(*three_nodes(cpu="4"), bare_pod("debug", template(app="debug", requests={"cpu": "6"})))
    [f] = analyze_one(rule, snap)
    assert f.subject.kind == "Pod" and not any(r.title.startswith("Lower") for r in f.remedies)
    assert findings(snapshot(*three_nodes(cpu="4"), deployment("api", template(app="api")))) == []
