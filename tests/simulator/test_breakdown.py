"""The per-node questions a verdict answers from its bit sets (PodVerdict.failing,
node_at, reason_codes_on, first_reasons) must agree with the per-node verdicts
built the slow way (PodVerdict.nodes), for every pending pod of every golden
scenario: the placement rules read the fast answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.simulator import simulate
from analyzers.snapshot import ClusterSnapshot, ClusterState

from ..scenarios.test_golden import CASES, load_case

SCENARIOS = Path(__file__).parent.parent / "scenarios"


def _snapshot(case: Path) -> ClusterSnapshot:
    objects, expected = load_case(case)
    state = ClusterState(expected.get("kube_version"))
    state.load(objects)
    return state.snapshot()


PENDING = [c for c in CASES if _snapshot(c).unscheduled_pods()]


def test_the_scenarios_have_pending_pods_to_check() -> None:
    assert len(PENDING) >= 15


@pytest.mark.parametrize("case", PENDING, ids=[str(c.relative_to(SCENARIOS)) for c in PENDING])
def test_bit_set_answers_match_per_node_verdicts(case: Path) -> None:
    snap = _snapshot(case)
    for pod in sorted(snap.unscheduled_pods(), key=lambda p: p.key):
        fast, slow = simulate(snap, pod), simulate(snap, pod)  # one read fast, one read slow
        nodes = slow.nodes
        everything = (1 << len(nodes)) - 1
        assert fast.node_names == tuple(nv.node for nv in nodes)
        # failing: each plugin's bit set is exactly the nodes with a failure of that plugin
        for plugin in {f.plugin for nv in nodes for f in nv.filters} | set(fast.failing):
            expected = sum(
                1 << i for i, nv in enumerate(nodes) if any(f.plugin == plugin for f in nv.filters)
            )
            assert fast.failing.get(plugin, 0) == expected, plugin
        # node_at builds the same node verdict alone
        for i in range(len(nodes)):
            assert fast.node_at(i) == nodes[i]
        # reason_codes_on tallies what the per-node failures say; reason_code_masks names the nodes
        for plugin in fast.failing:
            tally: dict[tuple[str, ...], int] = {}
            which: dict[tuple[str, ...], int] = {}
            for i, nv in enumerate(nodes):
                for f in nv.filters:
                    if f.plugin == plugin:
                        tally[f.reason_codes] = tally.get(f.reason_codes, 0) + 1
                        which[f.reason_codes] = which.get(f.reason_codes, 0) | (1 << i)
            assert fast.reason_codes_on(plugin, everything) == tally
            assert fast.reason_code_masks(plugin, everything) == which
            assert fast.reason_codes_on(plugin, 0) == {}
        # first_reasons groups nodes by what kube-scheduler reports for each
        firsts: dict[tuple[str, ...], int] = {}
        for i, nv in enumerate(nodes):
            if nv.filters:
                firsts[nv.filters[0].reasons] = firsts.get(nv.filters[0].reasons, 0) | (1 << i)
        assert fast.first_reasons(everything) == firsts
