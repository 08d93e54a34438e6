"""Per-node capacity as the scheduler accounts it: allocatable minus the
requests of the pods bound to the node (NodeInfo.Requested in
pkg/scheduler/framework/types.go), for explanations in numbers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from analyzers.records import Node
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
        by_node = snapshot.pods_by_node()
        out: dict[str, NodeCapacity] = {}
        for name, node in snapshot.nodes.items():
            requested: dict[str, int] = {}
            pods = by_node.get(name, ())
            for pod in pods:
                for res, value in pod.spec.requests.items():
                    requested[res] = requested.get(res, 0) + value
            out[name] = NodeCapacity(node, requested, len(pods))
        return out

    result: Mapping[str, NodeCapacity] = snapshot.derived("capacity.node_capacities", build)
    return result
