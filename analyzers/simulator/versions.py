"""How kube-scheduler words its verdict, by version.

Every difference the simulator knows is one field of :class:`Wording`, with the
upstream change it comes from. Where a change was cherry-picked to patch
releases we follow the patch number when the caller gives one.

- TaintToleration (pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go):
  1.18-1.23 ``node(s) had taint {k: v}, that the pod didn't tolerate``; 1.24+
  ``node(s) had untolerated taint {k: v}``; ``node(s) had untolerated taint(s)``
  from kubernetes/kubernetes#134740 (1.35, cherry-picked to 1.34 by #135023 --
  we assume 1.34.2+).
- NodeAffinity (.../nodeaffinity/node_affinity.go): ``node(s) didn't match node
  selector`` (<=1.19), ``node(s) didn't match Pod's node affinity`` (1.20),
  ``node(s) didn't match Pod's node affinity/selector`` (1.21+).
- InterPodAffinity (.../interpodaffinity/filtering.go): until 1.21 the generic
  ``node(s) didn't match pod affinity/anti-affinity`` is printed next to the
  specific reason and existing pods' anti-affinity is checked first.
- VolumeBinding (.../volumebinding/binder.go): ``node(s) had volume node
  affinity conflict`` became ``node(s) didn't match PersistentVolume's node
  affinity`` in 1.33 (#129887).
- NodeResourcesFit (.../noderesources/fit.go): since 1.34 (#131345) a request
  larger than the node's allocatable is UnschedulableAndUnresolvable, so
  preemption says ``Preemption is not helpful`` for such nodes.
- FitError.Error() (pkg/scheduler/framework/types.go): the ``preemption:``
  clause exists since 1.24 (#107775); PreFilter messages are printed without a
  count since 1.26; 1.26-1.28 end a message with a PostFilter clause in ``..``
  (SeparatorFormat " %v." around a message that already ends in "."); in
  1.26-1.28 a PreFilter rejection left the node statuses empty, so preemption
  reported ``No preemption victims found for incoming pod`` for every node.
- PreFilterResult (pkg/scheduler/schedule_one.go): nodes outside a NodeAffinity
  ``matchFields metadata.name`` set are reported as ``node is filtered out by
  the prefilter result`` (1.26-1.30) and ``node(s) didn't satisfy plugin(s)
  [NodeAffinity]`` (1.31+, NodeToStatus.SetAbsentNodesStatus).
- RunPreFilterPlugins (pkg/scheduler/framework/runtime/framework.go): until
  1.29 the first rejecting PreFilter status ends PreFilter; since 1.30
  (kubernetes#119770) only an UnschedulableAndUnresolvable one does, while an
  Unschedulable one is kept (the last) and the other plugins still run.
- VolumeRestrictions PreFilter (.../volumerestrictions/volume_restrictions.go):
  with ReadWriteOncePod on by default (beta 1.27) it reads every claim of the
  pod, so a missing claim is its ``persistentvolumeclaim "<name>" not found``,
  ahead of VolumeBinding's same words.
- DynamicResources PostFilter (.../dynamicresources/dynamicresources.go): with
  DRA on by default (1.34 GA) a pod without claims adds ``no new claims to
  deallocate`` before the preemption clause (DynamicResources precedes
  DefaultPreemption, apis/config/v1/default_plugins.go applyDynamicResources),
  and a pod whose claims free nothing ``still not schedulable``. 1.37.0 drops
  both: PostFilter returns ``fwk.NewStatus(fwk.Unschedulable)`` without a
  reason (dynamicresources.go at v1.37.0 and v1.37.2; both texts are still in
  v1.36.5).
- DefaultPreemption success (pkg/scheduler/framework/preemption/preemption.go,
  Evaluator.Preempt): until 1.36 a found candidate returns a Success status
  without a message, so the FitError ends after the filter histogram; since
  1.37 (kubernetes#140180) the message is ``preemption: found a potential
  placement for pod on node %v, preempting %d victims`` (the node
  pickOneNodeForPreemption chose, its victim count).
- Filter order (pkg/scheduler/apis/config/v1/default_plugins.go): 1.37.0 moves
  NodeName ahead of NodeUnschedulable (v1.36.5 still lists NodeUnschedulable
  first); a node both cordoned and not the pod's ``spec.nodeName`` reports
  the first failing plugin's reason.
- Checked unchanged from 1.35.4 to 1.37.2: FitError.Error() (framework/types.go),
  the filter plugins' reason constants (tainttoleration, nodeaffinity,
  nodeports, noderesources/fit.go, nodeunschedulable, nodename, volumebinding,
  volumerestrictions, volumezone, nodevolumelimits, podtopologyspread,
  interpodaffinity), the preemption texts of default_preemption.go and
  preemption.go for single pods, and RunPostFilterPlugins' joining of reasons
  (framework/runtime/framework.go). New 1.36/1.37 texts that only pod groups
  (GenericWorkload, off by default) or in-place resize (DeferredPodScheduling,
  off by default) print are not simulated.
- The same PostFilter reads the state its PreFilter wrote (getStateData). DynamicResources
  is the last PreFilter plugin (inserted before DefaultPreemption, default_plugins.go
  applyDynamicResources), and RunPreFilterPlugins stops at the first
  UnschedulableAndUnresolvable PreFilter status (1.30+), so after such a rejection
  its state is missing: PostFilter returns the error ``not found``
  (kube-scheduler/framework ErrNotFound), RunPostFilterPlugins returns at once
  (DefaultPreemption, after it, never runs) and the message ends
  ``<PreFilter message>. not found`` with no preemption clause. The same in v1.34.4,
  v1.35.4, v1.36.4 and v1.37.2.
- ``deallocation of ResourceClaim completed`` is written by 1.34 and later when
  DynamicResources' PostFilter deallocates a claim (dynamicresources.go).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

DEFAULT_KUBE_VERSION = "1.33"
OLDEST = (1, 18, 0)
PREFILTER_PAST_UNSCHEDULABLE = (1, 30)

_VERSION_RE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


class VersionError(ValueError):
    pass


def parse_version(text: str) -> tuple[int, int, int]:
    """``"1.29"``, ``"v1.29.3"``, ``"1.30.2-eks-abc"``, ``"v1.31.0+k3s1"`` → (1, 29, 3)."""
    match = _VERSION_RE.match(text)
    if match is None:
        raise VersionError(f"not a Kubernetes version: {text!r} (expected e.g. 1.29 or v1.29.3)")
    major, minor, patch = match.groups()
    return (int(major), int(minor), int(patch or 0))


@dataclass(frozen=True, slots=True)
class Wording:
    """The reason texts and message layout of one kube-scheduler version."""

    version: tuple[int, int, int]
    taint_style: str  # "legacy" | "keyed" | "generic"
    node_affinity_reason: str
    interpod_generic_reason: bool
    pv_node_conflict_reason: str
    prefilter_counted: bool
    double_dot: bool
    preemption_clause: bool
    prefilter_preemption_no_victims: bool
    prefilter_result_reason: str | None
    resource_unresolvable: bool
    # DynamicResources' PostFilter texts (``no new claims to deallocate``): 1.34-1.36.
    dra_postfilter: bool
    # DynamicResources' PostFilter deallocating a claim (1.34+; the other two texts, not 1.37).
    dra_deallocation: bool = False
    # DRAExtendedResource (beta, on since 1.36; GA 1.37): an extended resource a DeviceClass
    # maps is allocated through DRA on nodes that do not advertise it.
    dra_extended_resource: bool = False
    # VolumeRestrictions' PreFilter reads the pod's claims (ReadWriteOncePod on by default, 1.27+).
    volume_restrictions_reads_claims: bool = True
    # RunPreFilterPlugins keeps an Unschedulable PreFilter status and runs the others (kubernetes#119770).
    prefilter_runs_past_unschedulable: bool = True
    # PodEligibleToPreemptOthers: only a pod terminating *by preemption* (DisruptionTarget
    # PreemptionByScheduler) on the nominated node blocks another preemption (1.27+,
    # podTerminatingByPreemption with PodDisruptionConditions on by default); before, any
    # terminating lower-priority pod did.
    terminating_by_preemption_only: bool = True
    # DefaultPreemption's success message (1.37+, kubernetes#140180).
    preemption_placement_message: bool = False
    # NodeName filters before NodeUnschedulable (default_plugins.go, 1.37+).
    node_name_before_unschedulable: bool = False
    # DynamicResources' PostFilter errs "not found" after an UnschedulableAndUnresolvable
    # PreFilter rejection (its PreFilter state was never written): 1.34+.
    dra_postfilter_state_missing_error: bool = False
    # VolumeZone has a PreFilter reading each bound claim's PV (1.27+); before, its Filter did.
    volume_zone_prefilter: bool = True

    @property
    def label(self) -> str:
        return ".".join(str(p) for p in self.version)

    def taint_reason(self, key: str, value: str) -> str:
        if self.taint_style == "generic":
            return "node(s) had untolerated taint(s)"
        if self.taint_style == "legacy":
            return f"node(s) had taint {{{key}: {value}}}, that the pod didn't tolerate"
        return f"node(s) had untolerated taint {{{key}: {value}}}"


@lru_cache(maxsize=64)
def wording_for(kube_version: str | None) -> Wording:
    """The wording of ``kube_version`` (default :data:`DEFAULT_KUBE_VERSION`).
    Versions older than 1.18 are treated as 1.18 (the first framework scheduler)."""
    v = parse_version(kube_version or DEFAULT_KUBE_VERSION)
    # Clamping OLDEST itself to OLDEST changes nothing.
    if v < OLDEST:  # pragma: no mutate
        v = OLDEST
    minor = v[:2]
    if minor >= (1, 35) or (minor == (1, 34) and v[2] >= 2):
        taint_style = "generic"
    elif minor >= (1, 24):
        taint_style = "keyed"
    else:
        taint_style = "legacy"
    if minor <= (1, 19):
        node_affinity = "node(s) didn't match node selector"
    elif minor == (1, 20):
        node_affinity = "node(s) didn't match Pod's node affinity"
    else:
        node_affinity = "node(s) didn't match Pod's node affinity/selector"
    if minor >= (1, 31):
        prefilter_result: str | None = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
    elif minor >= (1, 26):
        prefilter_result = "node is filtered out by the prefilter result"
    else:
        prefilter_result = None
    return Wording(
        version=v,
        taint_style=taint_style,
        node_affinity_reason=node_affinity,
        interpod_generic_reason=minor <= (1, 21),
        pv_node_conflict_reason=(
            "node(s) didn't match PersistentVolume's node affinity"
            if minor >= (1, 33)
            else "node(s) had volume node affinity conflict"
        ),
        prefilter_counted=minor <= (1, 25),
        double_dot=(1, 26) <= minor <= (1, 28),
        preemption_clause=minor >= (1, 24),
        prefilter_preemption_no_victims=(1, 26) <= minor <= (1, 28),
        prefilter_result_reason=prefilter_result,
        resource_unresolvable=minor >= (1, 34),
        dra_postfilter=(1, 34) <= minor <= (1, 36),
        dra_postfilter_state_missing_error=minor >= (1, 34),
        volume_zone_prefilter=minor >= (1, 27),
        dra_deallocation=minor >= (1, 34),
        dra_extended_resource=minor >= (1, 36),
        volume_restrictions_reads_claims=minor >= (1, 27),
        prefilter_runs_past_unschedulable=minor >= PREFILTER_PAST_UNSCHEDULABLE,
        terminating_by_preemption_only=minor >= (1, 27),
        preemption_placement_message=minor >= (1, 37),
        node_name_before_unschedulable=minor >= (1, 37),
    )
