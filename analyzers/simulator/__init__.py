"""The filter simulator: kube-scheduler's verdict for a pod, in its own words.

For a pending pod of a snapshot, or a hypothetical pod (e.g. one built from a
Deployment template), every node is evaluated with the in-tree filter plugins
in kube-scheduler's default order (SchedulingGates at PreEnqueue,
NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
NodeResourcesFit, VolumeBinding, PodTopologySpread, InterPodAffinity), with
their exact reason strings and status codes; DefaultPreemption runs as the
PostFilter; and the aggregate ``0/N nodes are available: ...`` message is
rendered as the cluster's version of kube-scheduler prints it.

    from analyzers.simulator import simulate
    verdict = simulate(snapshot, pod, kube_version="1.29")
    verdict.message          # "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, ..."
    verdict.reason_counts    # {"insufficient-resource": 1, "node-affinity-mismatch": 9}
    verdict.preemption       # PreemptionVerdict(eligible=True, candidates=(), message="preemption: ...")
    verdict.nodes            # per node, every failing filter in order (built on first access)
    verdict.failing          # plugin -> bit set of the nodes it rejects (no per-node objects)
    verdict.node_at(i)       # one node's verdict alone; reason_codes_on / first_reasons tally by bit set

Per-node aggregates (the NodeTable) are computed once per snapshot
(``snapshot.derived``) and shared by every simulated pod; a what-if snapshot
made by ``snapshot.replace`` derives its table from its parent's.
"""

from analyzers.simulator.engine import simulate, simulate_pending
from analyzers.simulator.nodeinfo import NodeTable, node_table
from analyzers.simulator.results import FilterFailure, NodeVerdict, PodVerdict, PreemptionVerdict
from analyzers.simulator.versions import (
    DEFAULT_KUBE_VERSION,
    VersionError,
    Wording,
    parse_version,
    wording_for,
)

__all__ = [
    "DEFAULT_KUBE_VERSION",
    "FilterFailure",
    "NodeTable",
    "NodeVerdict",
    "PodVerdict",
    "PreemptionVerdict",
    "VersionError",
    "Wording",
    "node_table",
    "parse_version",
    "simulate",
    "simulate_pending",
    "wording_for",
]
