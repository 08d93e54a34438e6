"""A filter plugin whose reasons differ node by node (``Outcome.add_node``) beside nodes that
fail alike (``add_group``): each node is counted once, under its own reasons, in the message
histogram (FitError.Error(), pkg/scheduler/framework/types.go, counts every reason of each
node's status), its status code decides whether preemption may help there
(nodesWherePreemptionMightHelp, pkg/scheduler/framework/preemption/preemption.go: only
Unschedulable nodes are tried), and the nominated node's code decides PodEligibleToPreemptOthers
(plugins/defaultpreemption/default_preemption.go, v1.35.4: an UnschedulableAndUnresolvable
nominated node makes the pod eligible again). No in-tree plugin of the simulator reports per-node
reasons today; these tests hold the framework to that contract for the one that will."""

from __future__ import annotations

import pytest

from analyzers.simulator import codes as C
from analyzers.simulator import engine, simulate
from analyzers.simulator.framework import Cycle, Outcome, Plugin, failure
from analyzers.simulator.nodeinfo import mask_of
from analyzers.simulator.results import PodVerdict
from tests.simulator.builders import node, pod, pod_of, snapshot

NAME = "PerNodeReasons"
GROUPED = range(1, 11)
GROUP, EVEN, ODD = "node(s) failed alike", "node(s) with an even index", "node(s) with an odd index"


class PerNodeReasons(Plugin):
    """Nodes 1-10 fail alike (UnschedulableAndUnresolvable); every other node fails with a reason
    of its own: even indices Unschedulable, odd ones UnschedulableAndUnresolvable."""

    name = NAME

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        out = Outcome(self.name)
        size = cycle.table.size
        out.add_group(mask_of(GROUPED, size), failure(self.name, C.UNRESOLVABLE, (GROUP,), ("group",)))
        for i in range(size):  # 1-10 are in the group already: their own reasons are ignored
            if i % 2:
                out.add_node(i, C.UNRESOLVABLE, (ODD,), ("odd",))
            else:
                out.add_node(i, C.UNSCHEDULABLE, (EVEN,), ("even",))
        return out


def run(size: int, monkeypatch: pytest.MonkeyPatch, version: str = "1.33", **pod_fields: str) -> PodVerdict:
    monkeypatch.setattr(engine, "FILTERS", (*engine.FILTERS, PerNodeReasons()))
    objs = [node(f"n{i:03d}") for i in range(size)]
    objs.append(pod("victim", node_name="n012", priority=0, deleting=True))
    snap = snapshot(*objs, pod("p", priority=100, **pod_fields))
    return simulate(snap, pod_of(snap, "p"), kube_version=version)


@pytest.mark.parametrize("size", [30, 80])  # 80: more than 64 nodes with reasons of their own
def test_each_node_counts_once_under_its_own_reasons(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    v = run(size, monkeypatch)
    evens = [i for i in range(size) if i not in GROUPED and i % 2 == 0]
    odds = [i for i in range(size) if i not in GROUPED and i % 2]
    even, odd = len(evens), len(odds)
    assert dict(v.reasons) == {GROUP: 10, EVEN: even, ODD: odd}
    assert dict(v.reason_counts) == {"group": 10, "even": even, "odd": odd}
    assert v.message.startswith(f"0/{size} nodes are available: 10 {GROUP}, {even} {EVEN}, {odd} {ODD}.")
    # Only the even (Unschedulable) nodes are tried by preemption; none has a victim but n012.
    no_victims = "No preemption victims found for incoming pod"
    assert v.preemption.reasons[no_victims] == even - 1
    assert v.preemption.reasons["Preemption is not helpful for scheduling"] == 10 + odd
    everything = (1 << size) - 1
    assert v.reason_codes_on(NAME, everything) == {("group",): 10, ("even",): even, ("odd",): odd}
    firsts = v.first_reasons(everything)
    assert firsts == {
        (GROUP,): mask_of(GROUPED, size),
        (EVEN,): mask_of(evens, size),
        (ODD,): mask_of(odds, size),
    }
    assert v.first_reasons(mask_of([0, 3, 11], size)) == {(EVEN,): 1, (GROUP,): 1 << 3, (ODD,): 1 << 11}
    assert v.node_at(11).filters == (failure(NAME, C.UNRESOLVABLE, (ODD,), ("odd",)),)
    assert v.node_at(7).filters[0].reasons == (GROUP,)  # its own reasons were ignored
    assert [n.filters[0].reasons for n in v.nodes[10:13]] == [(GROUP,), (ODD,), (EVEN,)]
    assert v.nodes[0].filters[0].reasons == (EVEN,)


@pytest.mark.parametrize(("nominated", "eligible"), [("n012", False), ("n013", True)])
def test_the_nominated_nodes_own_code_decides_eligibility(
    nominated: str, eligible: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A terminating lower-priority pod runs on n012 (Unschedulable here): nominated there, the pod
    # waits for it; nominated on n013 (UnschedulableAndUnresolvable), it may preempt again. (1.25:
    # before PodDisruptionConditions was on by default, any terminating pod is waited for.)
    v = run(30, monkeypatch, version="1.25", nominated=nominated)
    not_eligible = "preemption: not eligible due to a terminating pod on the nominated node."
    assert (v.preemption.message != not_eligible) is eligible
