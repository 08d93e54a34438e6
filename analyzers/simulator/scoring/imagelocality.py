"""ImageLocality: pkg/scheduler/framework/plugins/imagelocality/image_locality.go
(v1.37.2). For each image of the pod's init containers and containers that
the node reports in status.images, int64(size * nodesWithImage / allNodes)
(the spread factor); the sum is clamped to [23MB, 1000MB * images] and mapped
linearly onto 0-100. No PreScore, no NormalizeScore. (Image volumes, which
also count, are not modelled.)
"""

from __future__ import annotations

from analyzers.simulator.nodeinfo import NodeTable
from analyzers.simulator.scoring.framework import MAX_NODE_SCORE, PLACED_NONE, ScorePlugin, ScoreState
from analyzers.simulator.scoring.profile import IMAGE_LOCALITY

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def image_states(table: NodeTable) -> dict[str, tuple[int, int, frozenset[int]]]:
    """name -> (size, number of nodes, nodes): the scheduler cache's imageStates,
    the size being the first node's report (nodes in name order here)."""
    found: dict[str, tuple[int, int, frozenset[int]]] | None = table.memo.get("scoring.images")
    if found is None:
        sizes: dict[str, int] = {}
        where: dict[str, set[int]] = {}
        for i, node in enumerate(table.nodes):
            for names, size in node.images:
                for name in names:
                    sizes.setdefault(name, size)
                    where.setdefault(name, set()).add(i)
        found = {n: (sizes[n], len(w), frozenset(w)) for n, w in where.items()}
        table.memo["scoring.images"] = found
    return found


def calculate_priority(sum_scores: int, image_count: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * image_count
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    return MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality(ScorePlugin):
    name = IMAGE_LOCALITY
    placed = PLACED_NONE

    def score(self, st: ScoreState) -> list[int]:
        table = st.table
        images = st.pod.spec.images
        count = len(images)
        if count == 0:
            return [0] * len(st.nodes)
        states = image_states(table)
        total_nodes = table.size
        # Nodes holding none of the pod's images all score calculate_priority(0):
        # only the nodes reporting one of them are summed.
        sums: dict[int, int] = {}
        for image in images:
            state = states.get(image)
            if state is None:
                continue
            size, holders, nodes = state
            scaled = int(float(size) * (float(holders) / float(total_nodes)))
            for i in nodes:
                sums[i] = sums.get(i, 0) + scaled
        out = [calculate_priority(0, count)] * len(st.nodes)
        if sums:
            at = st.positions()
            priorities: dict[int, int] = {}
            for i, total in sums.items():
                k = at.get(i)
                if k is not None:
                    p = priorities.get(total)
                    if p is None:
                        p = priorities[total] = calculate_priority(total, count)
                    out[k] = p
        return out
