"""Preemption's dry runs per group of equal nodes (analyzers/simulator/preemption.py,
_DryRunGroups) give exactly what one dry run per node gives (SelectVictimsOnNode on
every node, pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go at
v1.37.2): the same candidates in the same order, the same victims per node, the same
stop (numCandidates), the same node named by pickOneNodeForPreemption. The per-node
path (``GROUP_DRY_RUNS = False``) is the oracle."""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.simulator import preemption, simulate
from analyzers.simulator.results import PodVerdict
from analyzers.snapshot import ClusterSnapshot
from tests.simulator.builders import node, pod, pod_of, snapshot

Obj = dict[str, Any]
CREATED = ("2024-01-01T00:00:00Z", "2024-01-01T00:00:05Z", "2024-01-02T00:00:00Z")

AWAY_FROM_P = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "p"}}}
        ]
    }
}
# A bound pod: (priority, cpu, memory, app label, created, host port). Priority 5000 is
# above the pod's: never a victim, but it takes room and counts as a pod.
CHOICES: tuple[tuple[object, ...], ...] = (
    (0, 5, 10, 5000),
    ("250m", "500m", "1", "1500m"),
    ("", "1Gi", "6Gi"),
    ("", "a", "b"),
    CREATED,
    (0, 0, 8080),
)
NODE_CHOICES: tuple[tuple[str, ...], ...] = (("1", "2", "3", "4"), ("2", "3", "110"), ("z1", "z2"))

cluster = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 2**32),
        "nodes": st.sampled_from([3, 12, 40, 130]),
        "variety": st.integers(1, 6),  # how many kinds of node the cluster draws from
        "pdb_allowed": st.sampled_from([None, 0, 1]),
        "nominated": st.sampled_from([0, 0, 1]),
        "cpu": st.sampled_from(["500m", "1", "1500m", "2"]),
        "memory": st.sampled_from(["", "", "2Gi"]),
        "priority": st.sampled_from([8, 1000]),
        "port": st.sampled_from([0, 0, 8080]),
        "spread": st.sampled_from([False, False, True]),
        "anti": st.sampled_from([False, False, True]),
        "existing_anti": st.sampled_from([False, False, True]),  # victims keeping the pod away
    }
)


def kinds(rng: random.Random, count: int) -> list[tuple[list[str], list[list[object]]]]:
    """``count`` kinds of node, each the one before with one thing changed: nodes that
    differ in one respect only, as the grouping key must tell apart."""
    node_fields = [rng.choice(c) for c in NODE_CHOICES]
    pods = [[rng.choice(c) for c in CHOICES] for _ in range(rng.randint(0, 3))]
    out = [(node_fields, pods)]
    for _ in range(count - 1):
        node_fields, pods = list(node_fields), [list(p) for p in pods]
        what = rng.randrange(4)
        if what == 0:
            f = rng.randrange(len(NODE_CHOICES))
            node_fields[f] = rng.choice(NODE_CHOICES[f])
        elif what == 1 and pods:
            f = rng.randrange(len(CHOICES))
            rng.choice(pods)[f] = rng.choice(CHOICES[f])
        elif what == 2 and pods:
            pods.pop(rng.randrange(len(pods)))
        else:
            pods.append([rng.choice(c) for c in CHOICES])
        out.append((node_fields, pods))
    return out


def build(c: dict[str, Any]) -> ClusterSnapshot:
    rng = random.Random(c["seed"])
    drawn = kinds(rng, c["variety"])
    objs: list[Obj] = []
    for i in range(c["nodes"]):
        (cpu, max_pods, zone), bound = rng.choice(drawn)
        name = f"n{i:04d}"
        objs.append(node(name, cpu=cpu, pods=max_pods, labels={"zone": zone}))
        for k, (prio, vcpu, memory, app, created, port) in enumerate(bound):
            assert isinstance(prio, int) and isinstance(port, int)
            objs.append(
                pod(
                    f"v{k}-{name}",
                    node_name=name,
                    requests={"cpu": str(vcpu), **({"memory": str(memory)} if memory else {})},
                    priority=prio,
                    labels={"app": str(app)} if app else None,
                    created=str(created),
                    host_ports=[{"containerPort": port, "hostPort": port}] if port else None,
                    affinity=AWAY_FROM_P if c["existing_anti"] and app == "b" else None,
                )
            )
    if c["pdb_allowed"] is not None:
        objs.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "guard", "namespace": "default"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
                "status": {"disruptionsAllowed": c["pdb_allowed"]},
            }
        )
    if c["nominated"]:
        objs.append(pod("held", requests={"cpu": "500m"}, priority=3000, nominated="n0001"))
    extra: Obj = {}
    if c["spread"]:
        extra["spread"] = [
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "a"}},
            }
        ]
    if c["anti"]:
        extra["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "b"}}}
                ]
            }
        }
    if c["port"]:
        extra["host_ports"] = [{"containerPort": c["port"], "hostPort": c["port"]}]
    requests = {"cpu": c["cpu"], **({"memory": c["memory"]} if c["memory"] else {})}
    objs.append(pod("p", requests=requests, priority=c["priority"], labels={"app": "p"}, **extra))
    return snapshot(*objs)


def verdicts(snap: ClusterSnapshot, monkeypatch: pytest.MonkeyPatch) -> tuple[PodVerdict, PodVerdict]:
    target = pod_of(snap, "p")
    with monkeypatch.context() as m:
        m.setattr(preemption, "GROUP_DRY_RUNS", False)
        per_node = simulate(snap, target, kube_version="1.37")
    with monkeypatch.context() as m:
        m.setattr(preemption, "CLASSES_FOR_ONE_NODE_IN", snap_size(snap))  # grouped whatever the share
        grouped = simulate(snap, target, kube_version="1.37")
    return per_node, grouped


def snap_size(snap: ClusterSnapshot) -> int:
    return max(len(snap.nodes), 1)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(c=cluster)
def test_grouped_dry_runs_answer_as_one_per_node(c: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    per_node, grouped = verdicts(build(c), monkeypatch)
    assert grouped.preemption == per_node.preemption
    assert grouped == per_node


def counting_dry_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    real = preemption._dry_run

    def counted(cycle: Any, plugins: Any, i: int, lower: Any) -> Any:
        seen.append(i)
        return real(cycle, plugins, i, lower)

    monkeypatch.setattr(preemption, "_dry_run", counted)
    return seen


def test_equal_nodes_share_one_dry_run_and_each_names_its_own_victims(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 300 full nodes, three kinds of victims interleaved: three dry runs, 100 candidates.
    objs: list[Obj] = []
    for i in range(300):
        name = f"n{i:04d}"
        objs.append(node(name, cpu="2"))
        objs.append(pod(f"low-{name}", node_name=name, requests={"cpu": "1500m"}, priority=i % 3))
        objs.append(pod(f"high-{name}", node_name=name, requests={"cpu": "100m"}, priority=5000))
    snap = snapshot(*objs, pod("p", requests={"cpu": "1"}, priority=1000))
    seen = counting_dry_runs(monkeypatch)
    v = simulate(snap, pod_of(snap, "p"), kube_version="1.37")
    assert seen == [0, 1, 2]
    assert len(v.preemption.candidates) == 100
    assert v.preemption.victims["n0042"] == (("default", "low-n0042"),)
    # pickOneNodeForPreemption: the lowest victim priority (0) wins; the first such node.
    assert v.preemption.message.startswith("preemption: found a potential placement for pod on node n0000,")


def test_a_node_with_a_nominated_pod_runs_its_own_dry_run(monkeypatch: pytest.MonkeyPatch) -> None:
    objs: list[Obj] = []
    for i in range(4):
        name = f"n{i:04d}"
        objs.append(node(name, cpu="2"))
        objs.append(pod(f"low-{name}", node_name=name, requests={"cpu": "1500m"}, priority=0))
    objs.append(pod("held", requests={"cpu": "100m"}, priority=3000, nominated="n0002"))
    snap = snapshot(*objs, pod("p", requests={"cpu": "1"}, priority=1000))
    seen = counting_dry_runs(monkeypatch)
    simulate(snap, pod_of(snap, "p"), kube_version="1.37")
    assert seen == [0, 2]


def low(name: str, node_name: str, cpu: str, created: str, **fields: Any) -> Obj:
    """A bound pod of priority 0: a victim for the pod "p"."""
    return pod(name, node_name=node_name, requests={"cpu": cpu}, priority=0, created=created, **fields)


def two_nodes(
    early: dict[str, Any] | None = None,
    late: dict[str, Any] | None = None,
    *,
    extra: list[Obj] | None = None,
    **pod_extra: Any,
) -> ClusterSnapshot:
    """Nodes n0 and n1 alike in every figure the grouping key holds, each with an early
    victim of 500m and a later one of 1 CPU; on n0 they have ``early``'s and ``late``'s
    extra fields. On n1 the early one is reprieved first and the later one goes; on n0
    the extra fields make the early one the victim instead."""
    objs: list[Obj] = []
    for i, (early_fields, late_fields) in enumerate(((early or {}, late or {}), ({}, {}))):
        name = f"n{i}"
        objs.append(node(name, cpu="2"))
        objs.append(low(f"early-{name}", name, "500m", CREATED[0], **early_fields))
        objs.append(low(f"late-{name}", name, "1", CREATED[1], **late_fields))
    objs.append(pod("p", requests={"cpu": "1"}, priority=1000, labels={"app": "p"}, **pod_extra))
    return snapshot(*objs, *(extra or ()))


HOSTNAME_SPREAD = {
    "maxSkew": 1,
    "topologyKey": "kubernetes.io/hostname",
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "p"}},
}
GUARD_A = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "guard", "namespace": "default"},
    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
    "status": {"disruptionsAllowed": 0},
}


@pytest.mark.parametrize(
    "snap",
    [
        # the later victim is covered by a budget: it is reprieved first, the earlier one goes
        pytest.param(two_nodes(late={"labels": {"app": "a"}}, extra=[GUARD_A]), id="pdb"),
        # the earlier victim holds the host port the pod wants
        pytest.param(
            two_nodes(
                {"host_ports": [{"containerPort": 80, "hostPort": 80}]},
                host_ports=[{"containerPort": 80, "hostPort": 80}],
            ),
            id="host-port",
        ),
        # the earlier victim keeps the pod away (required anti-affinity of an existing pod)
        pytest.param(two_nodes({"affinity": AWAY_FROM_P}), id="existing-anti-affinity"),
        # the earlier victim matches the pod's spread constraint (an empty node n2 counts 0)
        pytest.param(
            two_nodes({"labels": {"app": "p"}}, extra=[node("n2", cpu="500m")], spread=[HOSTNAME_SPREAD]),
            id="spread",
        ),
    ],
)
def test_nodes_the_key_cannot_tell_apart_keep_their_own_answers(
    snap: ClusterSnapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_node, grouped = verdicts(snap, monkeypatch)
    assert per_node.preemption.victims["n1"] == (("default", "late-n1"),)
    assert per_node.preemption.victims["n0"] == (("default", "early-n0"),)
    assert grouped == per_node


def test_the_loop_runs_past_num_candidates_to_the_first_node_violating_no_pdb(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 120 nodes whose victim a budget covers, then 30 whose victim none does: the dry
    # runs do not stop at the 100th candidate but at the first that violates no PDB.
    objs: list[Obj] = [GUARD_A]
    for i in range(150):
        name = f"n{i:04d}"
        objs.append(node(name, cpu="2"))
        guarded = {"app": "a"} if i < 120 else {"app": "free"}
        objs.append(pod(f"low-{name}", node_name=name, requests={"cpu": "1500m"}, priority=0, labels=guarded))
    snap = snapshot(*objs, pod("p", requests={"cpu": "1"}, priority=1000))
    per_node, grouped = verdicts(snap, monkeypatch)
    assert grouped == per_node
    # The victims worked out on reading hash, pickle and serialise as the eager mapping.
    assert hash(grouped.preemption) == hash(per_node.preemption)
    assert pickle.loads(pickle.dumps(grouped.preemption)) == per_node.preemption
    assert grouped.preemption.as_dict() == per_node.preemption.as_dict()
    assert grouped.preemption.candidates == ("n0120", *(f"n{i:04d}" for i in range(120)))
    assert grouped.preemption.message.startswith(
        "preemption: found a potential placement for pod on node n0120,"
    )


@pytest.mark.parametrize(
    ("starts", "chosen"),
    [
        # n0 and n1 differ in memory (two victim classes, one answer): the later start wins
        (("2024-01-01T00:00:00Z", "2024-01-01T00:00:09Z", "2024-01-01T00:00:05Z"), "n1"),
        # equal starts: the first node wins, whichever class it is in
        (("2024-01-01T00:00:09Z", "2024-01-01T00:00:09Z", "2024-01-01T00:00:09Z"), "n0"),
        (("2024-01-01T00:00:00Z", "2024-01-01T00:00:05Z", "2024-01-01T00:00:05Z"), "n1"),
    ],
)
def test_equal_answers_of_several_classes_are_ranked_together_by_start(
    starts: tuple[str, ...], chosen: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs: list[Obj] = []
    for i, (memory, created) in enumerate(zip(("16Gi", "8Gi", "16Gi"), starts, strict=True)):
        name = f"n{i}"
        objs.append(node(name, cpu="2", memory=memory))
        objs.append(
            pod(f"low-{name}", node_name=name, requests={"cpu": "1500m"}, priority=0, created=created)
        )
    snap = snapshot(*objs, pod("p", requests={"cpu": "1"}, priority=1000))
    per_node, grouped = verdicts(snap, monkeypatch)
    assert grouped == per_node
    assert grouped.preemption.message.startswith(
        f"preemption: found a potential placement for pod on node {chosen},"
    )


@pytest.mark.parametrize(
    ("first", "second", "victims"),
    [
        # 2 CPUs: both 1500m pods go; 3 CPUs: the more important one is reprieved
        (dict(cpu="2"), dict(cpu="3"), ((("default", "a-n0"), ("default", "b-n0")), (("default", "b-n1"),))),
        # 3 allowed pods: evicting one leaves room for the pod; 1: both go (Too many pods)
        (
            dict(cpu="3", pods="1"),
            dict(cpu="3", pods="3"),
            ((("default", "a-n0"), ("default", "b-n0")), (("default", "b-n1"),)),
        ),
    ],
)
def test_nodes_alike_but_in_one_figure_answer_apart(
    first: dict[str, str],
    second: dict[str, str],
    victims: tuple[tuple[tuple[str, str], ...], ...],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objs: list[Obj] = []
    for i, figures in enumerate((first, second)):
        name = f"n{i}"
        objs.append(node(name, **figures))
        for k, created in enumerate(CREATED[:2]):
            objs.append(low(f"{'ab'[k]}-{name}", name, "1500m", created))
    snap = snapshot(*objs, pod("p", requests={"cpu": "1"}, priority=1000))
    per_node, grouped = verdicts(snap, monkeypatch)
    assert dict(per_node.preemption.victims) == {"n0": victims[0], "n1": victims[1]}
    assert grouped == per_node
