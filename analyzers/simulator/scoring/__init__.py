"""kube-scheduler's Score phase, plugin by plugin (v1.37.2): PreScore, Score and
NormalizeScore of each in-tree score plugin of the default profile, weights
and the weighted total, the nodes the scheduler looks at, and placement of
one or more replicas (:mod:`analyzers.simulator.scoring.placement`).

    from analyzers.simulator.scoring import score_pod
    phase = score_pod(snapshot, pod, feasible_node_indices, profile)
    phase.top()                # nodes sharing the best total
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from analyzers.records import EMPTY_MAP, Pod
from analyzers.simulator.nodeinfo import node_table
from analyzers.simulator.scoring.balanced import NodeResourcesBalancedAllocation
from analyzers.simulator.scoring.fit import NodeResourcesFit
from analyzers.simulator.scoring.framework import (
    MAX_NODE_SCORE,
    PhaseResult,
    ScoreError,
    ScorePlugin,
    ScoreState,
    num_feasible_nodes_to_find,
    run_score_plugins,
)
from analyzers.simulator.scoring.imagelocality import ImageLocality
from analyzers.simulator.scoring.interpodaffinity import InterPodAffinity
from analyzers.simulator.scoring.nodeaffinity import NodeAffinity
from analyzers.simulator.scoring.podtopologyspread import PodTopologySpread
from analyzers.simulator.scoring.profile import DEFAULT_PROFILE, Profile
from analyzers.simulator.scoring.tainttoleration import TaintToleration
from analyzers.simulator.scoring.volumebinding import VolumeBinding
from analyzers.snapshot import ClusterSnapshot

SCORE_PLUGINS: dict[str, ScorePlugin] = {
    p.name: p
    for p in (
        TaintToleration(),
        NodeAffinity(),
        NodeResourcesFit(),
        VolumeBinding(),
        PodTopologySpread(),
        InterPodAffinity(),
        NodeResourcesBalancedAllocation(),
        ImageLocality(),
    )
}


def score_pod(
    snapshot: ClusterSnapshot,
    pod: Pod,
    nodes: Sequence[int],
    profile: Profile = DEFAULT_PROFILE,
    *,
    placed: Mapping[int, int] | None = None,
) -> PhaseResult:
    """The Score phase of ``pod`` over the feasible ``nodes`` (indices of the
    snapshot's node table). ``placed``: copies of ``pod`` already bound, per node
    index, counted as pods of those nodes (placement's later replicas). Raises
    :class:`ScoreError` on a plugin's Error. A list ``nodes`` is kept, not copied
    (memos recognise a placement's list by identity): do not modify it afterwards."""
    return run_score_plugins(profile_plugins(profile), score_state(snapshot, pod, nodes, profile, placed))


def profile_plugins(profile: Profile) -> list[tuple[ScorePlugin, int]]:
    """The profile's score plugins (those modelled), with their weights, in its order."""
    return [(SCORE_PLUGINS[name], w) for name, w in profile.score_plugins if name in SCORE_PLUGINS]


def score_state(
    snapshot: ClusterSnapshot,
    pod: Pod,
    nodes: Sequence[int],
    profile: Profile,
    placed: Mapping[int, int] | None = None,
) -> ScoreState:
    table = node_table(snapshot)
    ns = snapshot.namespaces.get(pod.namespace)
    return ScoreState(
        snapshot=snapshot,
        table=table,
        pod=pod,
        profile=profile,
        nodes=nodes if isinstance(nodes, list) else list(nodes),  # a placement's list is kept: memos know it
        namespace_labels=ns.labels if ns is not None else EMPTY_MAP,
        placed=placed or {},
    )


__all__ = [
    "DEFAULT_PROFILE",
    "MAX_NODE_SCORE",
    "SCORE_PLUGINS",
    "PhaseResult",
    "Profile",
    "ScoreError",
    "num_feasible_nodes_to_find",
    "score_pod",
]
