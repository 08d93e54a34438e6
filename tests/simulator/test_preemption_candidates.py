"""How many candidate nodes DefaultPreemption's dry run collects before it stops
(kubernetes v1.35.4): calculateNumCandidates in
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go --
``numNodes * MinCandidateNodesPercentage / 100``, at least
MinCandidateNodesAbsolute (defaults 10 % and 100, pkg/scheduler/apis/config/v1/defaults.go),
at most the number of potential nodes -- and DryRunPreemption in
pkg/scheduler/framework/preemption/preemption.go, which stops only once it holds that many
candidates *and* one of them violates no PodDisruptionBudget (``nvcSize > 0 &&
nvcSize+vcSize >= candidatesNum``). Upstream starts at a random offset; the simulator
walks the nodes in name order, so the counts below are exact."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.simulator import simulate
from tests.simulator.builders import node as make_node
from tests.simulator.builders import pod, pod_of, snapshot


def full_nodes(count: int, *, start: int = 0, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """``count`` one-cpu nodes, each full with one priority-0 pod: every node is a candidate."""
    objs: list[dict[str, Any]] = []
    for i in range(start, start + count):
        name = f"n{i:04d}"
        objs.append(make_node(name, cpu="1"))
        objs.append(pod(f"low-{name}", node_name=name, requests={"cpu": "1"}, priority=0, labels=labels))
    return objs


@pytest.mark.parametrize(
    ("nodes", "candidates"),
    [
        (50, 50),  # fewer potential nodes than the absolute minimum: all of them
        (150, 100),  # 10 % is 15: the absolute minimum, 100
        (1010, 101),  # 10 % of 1010
    ],
)
def test_the_dry_run_stops_at_the_number_of_candidates_it_needs(nodes: int, candidates: int) -> None:
    snap = snapshot(*full_nodes(nodes), pod("p", requests={"cpu": "1"}, priority=1000))
    v = simulate(snap, pod_of(snap, "p"), kube_version="1.35")
    assert len(v.preemption.candidates) == candidates
    assert v.preemption.candidates[:2] == ("n0000", "n0001") and v.preemption.message == ""


def test_it_goes_on_until_one_candidate_violates_no_budget() -> None:
    # The first 120 nodes' victims are covered by a budget that allows no disruption.
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded", "namespace": "default"},
        "spec": {"minAvailable": "100%", "selector": {"matchLabels": {"app": "guarded"}}},
        "status": {"disruptionsAllowed": 0},
    }
    objs = [*full_nodes(120, labels={"app": "guarded"}), *full_nodes(30, start=120), pdb]
    snap = snapshot(*objs, pod("p", requests={"cpu": "1"}, priority=1000))
    v = simulate(snap, pod_of(snap, "p"), kube_version="1.35")
    # 100 candidates were not enough: none of them spared every budget; n0120 is the first that does.
    assert len(v.preemption.candidates) == 121
    assert v.preemption.candidates[0] == "n0120"  # non-violating candidates first
    assert v.preemption.candidates[1:3] == ("n0000", "n0001")
