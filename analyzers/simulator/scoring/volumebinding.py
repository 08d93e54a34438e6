"""VolumeBinding's score: pkg/scheduler/framework/plugins/volumebinding/
volume_binding.go PreScore/Score and scorer.go (v1.37.2), with the
StorageCapacityScoring feature gate on (beta and on by default since 1.37,
pkg/features/kube_features.go; alpha and off in 1.33-1.36, where the plugin has
no scorer and its PreScore always returns Skip).

PreScore: with the gate on it never returns Skip (its PreFilter leaves a state
for every pod, an empty one for a pod without claims), so every pod gets a
VolumeBinding score. Score, per node, from the bindings FindPodVolumes chose
there for the pod's unbound WaitForFirstConsumer claims:
- the node has static bindings (existing PVs): per PV storage class, the claims'
  requested storage R and the PVs' capacity C summed; the class scores the
  VolumeBindingArgs shape at R * 100 / C (100 when C is 0 or R > C; shape
  scores 0-10 scaled by 10; default shape 0% -> 10, 100% -> 0); the node's score
  is the classes' mean, math.Round;
- otherwise (claims to provision, or none): the classes' capacity comes from the
  CSIStorageCapacity objects of a CSIDriver with storageCapacity: true. The
  snapshot holds neither, so a provisioned claim has no NodeCapacity and adds no
  class, as upstream when the driver does not track capacity: the node scores 0.
No NormalizeScore (ScoreExtensions is nil); the default weight is 1 (MultiPoint,
no weight set: framework.go getValidScoreWeights).
"""

from __future__ import annotations

from analyzers.simulator.scoring.fit import MAX_CUSTOM_PRIORITY_SCORE, MAX_UTILIZATION, broken_linear
from analyzers.simulator.scoring.framework import (
    MAX_NODE_SCORE,
    PLACED_NONE,
    ScorePlugin,
    ScoreState,
    go_round,
)
from analyzers.simulator.scoring.profile import VOLUME_BINDING
from analyzers.simulator.volumes import StaticBindings, delayed_bindings, delayed_claims


def static_bindings_score(shape: tuple[tuple[int, int], ...], bindings: StaticBindings) -> int:
    """scorer.go buildScorerFunction over the static bindings of one node."""
    classes: dict[str, list[int]] = {}
    for pvc, pv in bindings:
        requested_capacity = classes.setdefault(pv.storage_class or "", [0, 0])
        requested_capacity[0] += pvc.request_bytes
        requested_capacity[1] += pv.capacity_bytes
    if not classes:
        return 0
    total = 0
    for requested, capacity in classes.values():
        if capacity == 0 or requested > capacity:
            total += broken_linear(shape, MAX_UTILIZATION)
        else:
            total += broken_linear(shape, requested * MAX_UTILIZATION // capacity)
    return go_round(total / len(classes))


# pkg/features/kube_features.go StorageCapacityScoring: on by default since v1.37.
SCORES_SINCE = (1, 37)


class VolumeBinding(ScorePlugin):
    name = VOLUME_BINDING
    placed = PLACED_NONE

    def prescore(self, st: ScoreState) -> bool:
        """Before v1.37 the gate is off by default: no scorer, PreScore returns Skip."""
        return st.release >= SCORES_SINCE

    def score(self, st: ScoreState) -> list[int]:
        delayed = delayed_claims(st.snapshot, st.pod)
        if not delayed:
            return [0] * len(st.nodes)
        shape = tuple((u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in st.profile.volume_shape)
        by_node: dict[int, int] = {}
        for part, bindings in delayed_bindings(st.table, st.snapshot, delayed):
            if not bindings:
                continue
            value = static_bindings_score(shape, bindings)
            while part:
                low = part & -part
                by_node[low.bit_length() - 1] = value
                part ^= low
        return [by_node.get(i, 0) for i in st.nodes]
