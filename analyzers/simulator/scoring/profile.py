"""A scheduling profile as the Score phase needs it: which score plugins run,
with which weights and args, which filters are disabled, and how many nodes
are scored. Built from a KubeSchedulerConfiguration by
:mod:`analyzers.simulator.schedconfig`, or the default profile of v1.37.2.

Defaults (v1.37.2):
- plugins and weights: pkg/scheduler/apis/config/v1/default_plugins.go
  (TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1, VolumeBinding 1 (no
  weight set: 1; it scores since StorageCapacityScoring is on), PodTopologySpread 2,
  InterPodAffinity 2, NodeResourcesBalancedAllocation 1, ImageLocality 1; with
  DynamicResources 2, which scores only pods with claims -- not modelled, see
  docs/placement.md);
- args: pkg/scheduler/apis/config/v1/defaults.go (NodeResourcesFitArgs
  LeastAllocated over cpu and memory, weight 1 each; BalancedAllocation over cpu
  and memory; InterPodAffinityArgs hardPodAffinityWeight 1;
  PodTopologySpreadArgs defaultingType System; VolumeBindingArgs shape
  0% -> 10, 100% -> 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyzers.records import NodeSelector, NodeSelectorTerm, TopologySpreadConstraint

TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_RESOURCES_FIT = "NodeResourcesFit"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
INTER_POD_AFFINITY = "InterPodAffinity"
BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
IMAGE_LOCALITY = "ImageLocality"
VOLUME_BINDING = "VolumeBinding"

# Score plugins of the default profile in upstream's MultiPoint order, with their weights.
DEFAULT_SCORE_PLUGINS: tuple[tuple[str, int], ...] = (
    (TAINT_TOLERATION, 3),
    (NODE_AFFINITY, 2),
    (NODE_RESOURCES_FIT, 1),
    (VOLUME_BINDING, 1),
    (POD_TOPOLOGY_SPREAD, 2),
    (INTER_POD_AFFINITY, 2),
    (BALANCED_ALLOCATION, 1),
    (IMAGE_LOCALITY, 1),
)

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"

# podtopologyspread/plugin.go systemDefaultConstraints (v1.37.2).
SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(
        max_skew=3, topology_key="kubernetes.io/hostname", when_unsatisfiable="ScheduleAnyway"
    ),
    TopologySpreadConstraint(
        max_skew=5, topology_key="topology.kubernetes.io/zone", when_unsatisfiable="ScheduleAnyway"
    ),
)


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
# pkg/scheduler/apis/config/v1/defaults.go SetDefaults_VolumeBindingArgs (v1.37.2, gate on).
DEFAULT_VOLUME_SHAPE = ((0, 10), (100, 0))


@dataclass(frozen=True, slots=True)
class Profile:
    scheduler_name: str = "default-scheduler"
    score_plugins: tuple[tuple[str, int], ...] = DEFAULT_SCORE_PLUGINS
    # Filter (and PreFilter) plugins this profile disables.
    disabled_filters: frozenset[str] = frozenset()
    fit_strategy: str = LEAST_ALLOCATED
    fit_resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    # RequestedToCapacityRatio shape: (utilization 0-100, score 0-10), ascending.
    shape: tuple[tuple[int, int], ...] = ()
    # VolumeBindingArgs shape (StorageCapacityScoring): (utilization 0-100, score 0-10).
    volume_shape: tuple[tuple[int, int], ...] = DEFAULT_VOLUME_SHAPE
    balanced_resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False
    added_required: NodeSelector | None = None
    added_preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    spread_defaulting_type: str = "System"
    spread_default_constraints: tuple[TopologySpreadConstraint, ...] = ()
    # None: not set in the profile (the top-level value, then the adaptive default, applies).
    percentage_of_nodes_to_score: int | None = None
    # DynamicResourcesArgs.filterTimeout in seconds (0: no timeout); None: not configured, the
    # release's default applies (analyzers.simulator.dra.plugin.filter_timeout).
    dra_filter_timeout: float | None = None
    extra: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def weights(self) -> dict[str, int]:
        return dict(self.score_plugins)

    def default_constraints(self) -> tuple[TopologySpreadConstraint, ...]:
        if self.spread_defaulting_type == "System":
            return SYSTEM_DEFAULT_CONSTRAINTS
        return self.spread_default_constraints


DEFAULT_PROFILE = Profile()
