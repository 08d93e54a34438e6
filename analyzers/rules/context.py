"""What every rule receives: the snapshot, the time, the cluster's version,
the remedy renderer, thresholds, and memoised simulator verdicts.

Rules are pure functions ``analyze(ctx) -> list[Finding]``: no awaits, no clock
reads (``ctx.now`` is the time of the analysis), no globals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from analyzers.findings import ObjectRef
from analyzers.records import NodeSelector, Pod
from analyzers.remedies import RemedyRenderer
from analyzers.simulator import PodVerdict, simulate
from analyzers.simulator.scoring.profile import Profile
from analyzers.snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class Thresholds:
    # A pod behind schedulingGates for longer than this is reported.
    gated_after_seconds: float = 300.0
    # A pending pod with no PodScheduled condition and no scheduling event after this long.
    silent_after_seconds: float = 60.0
    # A pending pod whose newest FailedScheduling is a kube-scheduler error, after this long.
    erroring_after_seconds: float = 300.0
    # Node real usage (metrics.k8s.io) at or above this share of allocatable is "hot".
    hot_node_usage: float = 0.75
    # …while requests on it are at or below this share: the scheduler sees it as empty.
    low_requested_share: float = 0.40
    # A container using more than this multiple of its request counts as far under-requested.
    under_request_factor: float = 3.0
    # Headroom added on top of observed usage when sizing requests.
    request_headroom: float = 0.25
    # A pod's usage beyond its request must be at least this share of the node's
    # allocatable for it to count as one of the pods the scheduler cannot see.
    unrequested_share: float = 0.10
    # insufficient-resources proposes lowering a request only down to this share of it.
    min_request_fraction: float = 0.5
    # The Score-phase rules judge a workload's pod placed at most this long ago
    # (besides its pending pods): "why did it land there" is asked soon after.
    recent_placement_seconds: float = 1800.0


@dataclass
class RuleContext:
    snapshot: ClusterSnapshot
    now: float
    renderer: RemedyRenderer = field(default_factory=RemedyRenderer)
    thresholds: Thresholds = field(default_factory=Thresholds)
    kube_version: str | None = None
    # Eviction failures seen outside the cluster's events (e.g. `kubectl drain` output), parsed.
    eviction_messages: tuple[Mapping[str, Any], ...] = ()
    # The cluster's KubeSchedulerConfiguration profiles by schedulerName (--scheduler-config);
    # None: kube-scheduler's default configuration (one profile, default-scheduler).
    profiles: Mapping[str, Profile] | None = None
    _verdicts: dict[Any, tuple[Any, Any, PodVerdict]] = field(default_factory=dict, repr=False)
    _pending: dict[ObjectRef, tuple[Pod, ...]] | None = field(default=None, repr=False)

    @property
    def version(self) -> str | None:
        return self.kube_version or self.snapshot.kube_version

    def verdict(self, pod: Pod, snapshot: ClusterSnapshot | None = None) -> PodVerdict:
        """The simulated scheduling verdict of a pod (memoised for the context's snapshot).

        The memo is keyed by the identity of the pod's spec and labels and keeps
        references to them, so an id can never be reused by another object.
        Everything else the simulator reads of a pod is in the key too
        (namespace, node name, nominated node), not its name: the pending pods
        of one template share one simulation, each getting the verdict under
        its own key."""
        disabled = self.disabled_filters(pod)
        added = self.added_affinity(pod)
        timeout = self.dra_filter_timeout(pod)
        if snapshot is not None and snapshot is not self.snapshot:
            return simulate(
                snapshot,
                pod,
                kube_version=self.version,
                disabled=disabled,
                added_affinity=added,
                dra_filter_timeout=timeout,
            )
        key = (pod.namespace, id(pod.spec), id(pod.labels), pod.node_name, pod.nominated_node)
        hit = self._verdicts.get(key)
        if hit is not None and hit[0] is pod.spec and hit[1] is pod.labels:
            verdict = hit[2]
            return verdict if verdict.pod == pod.key else replace(verdict, pod=pod.key)
        verdict = simulate(
            self.snapshot,
            pod,
            kube_version=self.version,
            disabled=disabled,
            added_affinity=added,
            dra_filter_timeout=timeout,
        )
        self._verdicts[key] = (pod.spec, pod.labels, verdict)
        return verdict

    def served(self, scheduler_name: str) -> bool:
        """Whether a profile of kube-scheduler answers to ``scheduler_name``."""
        if self.profiles is None:
            return scheduler_name == "default-scheduler"
        return scheduler_name in self.profiles

    def disabled_filters(self, pod: Pod) -> frozenset[str]:
        """The filter plugins the pod's profile disables (none by default)."""
        if self.profiles is None:
            return frozenset()
        profile = self.profiles.get(pod.spec.scheduler_name)
        return profile.disabled_filters if profile is not None else frozenset()

    def added_affinity(self, pod: Pod) -> NodeSelector | None:
        """The required node affinity the pod's profile enforces (NodeAffinityArgs addedAffinity)."""
        if self.profiles is None:
            return None
        profile = self.profiles.get(pod.spec.scheduler_name)
        return profile.added_required if profile is not None else None

    def dra_filter_timeout(self, pod: Pod) -> float | None:
        """The pod's profile's DynamicResourcesArgs.filterTimeout in seconds (None: not configured)."""
        if self.profiles is None:
            return None
        profile = self.profiles.get(pod.spec.scheduler_name)
        return profile.dra_filter_timeout if profile is not None else None

    def pending_by_workload(self) -> Mapping[ObjectRef, tuple[Pod, ...]]:
        """Unscheduled pods of kube-scheduler, grouped by owning workload (oldest first)."""
        if self._pending is None:
            groups: dict[ObjectRef, list[Pod]] = {}
            for pod in self.snapshot.unscheduled_pods():
                if not self.served(pod.spec.scheduler_name):
                    continue
                groups.setdefault(self.snapshot.workload_of(pod).ref, []).append(pod)
            self._pending = {
                ref: tuple(sorted(pods, key=lambda p: (p.created or 0.0, p.name)))
                for ref, pods in sorted(groups.items(), key=lambda kv: str(kv[0]))
            }
        return self._pending

    def representative(self, pods: tuple[Pod, ...]) -> list[Pod]:
        """One pod per distinct spec/labels among a workload's pending pods: pods of
        one template get the same verdict, so they share one simulation."""
        seen: set[tuple[int, int]] = set()
        out = []
        for pod in pods:
            key = (id(pod.spec), id(pod.labels))
            if key not in seen:
                seen.add(key)
                out.append(pod)
        return out
