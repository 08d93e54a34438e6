"""Per-node capacity as the scheduler accounts it: allocatable minus the
requests of the pods bound to the node (NodeInfo.Requested in
pkg/scheduler/framework/types.go), for explanations in numbers. A by-name view
of the simulator's node table, which does the accounting once per snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from analyzers.records import Node
from analyzers.simulator.nodeinfo import node_table
from analyzers.snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    node: Node
    requested: Mapping[str, int]
    pod_count: int

    def allocatable(self, resource: str) -> int:
        return self.node.allocatable.get(resource, 0)

    def free(self, resource: str) -> int:
        if resource == "pods":
            return self.node.allocatable.get("pods", 0) - self.pod_count
        return self.node.allocatable.get(resource, 0) - self.requested.get(resource, 0)


def node_capacities(snapshot: ClusterSnapshot) -> Mapping[str, NodeCapacity]:
    def build() -> dict[str, NodeCapacity]:
        table = node_table(snapshot)
        return {
            node.name: NodeCapacity(
                node, {r: col[i] for r, col in table.requested.items() if col[i]}, table.pod_count[i]
            )
            for i, node in enumerate(table.nodes)
        }

    result: Mapping[str, NodeCapacity] = snapshot.derived("capacity.node_capacities", build)
    return result
