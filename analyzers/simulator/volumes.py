"""VolumeBinding, the basics (pkg/scheduler/framework/plugins/volumebinding/
volume_binding.go and binder.go).

PreFilter (UnschedulableAndUnresolvable):
- a missing claim: ``persistentvolumeclaim "<name>" not found``;
- a Lost claim: ``persistentvolumeclaim "<name>" bound to non-existent persistentvolume "<pv>"``;
- an unbound claim of Immediate binding (or pre-bound via spec.volumeName but
  not yet bound): ``pod has unbound immediate PersistentVolumeClaims``.

Filter (UnschedulableAndUnresolvable), per node (FindPodVolumes):
- a bound claim's PV whose node affinity excludes the node:
  ``node(s) had volume node affinity conflict`` (1.33+: ``node(s) didn't match
  PersistentVolume's node affinity``); a bound PV that does not exist:
  ``node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)``;
- a WaitForFirstConsumer claim with neither an available matching PV
  (class, capacity, access modes, claimRef, node affinity) nor a provisioner
  that may provision there (``kubernetes.io/no-provisioner`` never does;
  allowedTopologies must match the node; a claim already given a selected
  node only fits that node): ``node(s) didn't find available persistent
  volumes to bind``.
Storage capacity (CSIStorageCapacity, CSIDriver storageCapacity) is not modelled. A pod's WaitForFirstConsumer
claims are matched as binder.go findMatchingVolumes does: smallest claim first, each to
the smallest matching volume not already chosen for another claim of the pod.

VolumeZone (pkg/scheduler/framework/plugins/volumezone/volume_zone.go) is here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzers.messages.reasons import VOLUME_ZONE
from analyzers.records import PersistentVolume, PersistentVolumeClaim, Pod
from analyzers.simulator import codes as C
from analyzers.simulator.framework import Cycle, Outcome, Plugin, detail, failure
from analyzers.simulator.nodeinfo import NodeTable, has
from analyzers.simulator.results import FilterFailure
from analyzers.snapshot import ClusterSnapshot

REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
NO_PROVISIONER = "kubernetes.io/no-provisioner"


@dataclass(slots=True)
class _Claims:
    bound: list[PersistentVolumeClaim]
    delayed: list[PersistentVolumeClaim]


def _pv_mask(table: NodeTable, pv: PersistentVolume) -> int:
    """Nodes a PV's node affinity admits (component-helpers/storage/volume
    CheckNodeAffinity: the same parsing as NodeAffinity, node names unseen)."""
    return table.all_mask if pv.node_affinity is None else table.selector_mask(pv.node_affinity, named=False)


# Kinds a dump may lack altogether (ClusterSnapshot.lacks): then what a pod's claims
# need of them is unknown and not checked, never called missing.
PVC_KIND = "PersistentVolumeClaim"
PV_KIND = "PersistentVolume"
STORAGE_CLASS_KIND = "StorageClass"
VOLUME_KINDS = (PVC_KIND, PV_KIND, STORAGE_CLASS_KIND)


def unchecked_volume_kinds(snapshot: ClusterSnapshot) -> list[str]:
    """The volume kinds the input lacked although a pending pod mounts a claim: what
    that pod's volumes need of them was not checked."""
    if not any(pod.spec.pvc_names for pod in snapshot.unscheduled_pods()):
        return []
    return [kind for kind in VOLUME_KINDS if snapshot.lacks(kind)]


def claim_not_found(plugin: str, name: str) -> FilterFailure:
    """The PVC lister's NotFound error as a PreFilter rejection (UnschedulableAndUnresolvable)."""
    return failure(
        plugin,
        C.UNRESOLVABLE,
        (f'persistentvolumeclaim "{name}" not found',),
        (C.PVC_NOT_FOUND,),
        detail(claim=name),
    )


def _partition(within: int, masks: list[int]) -> list[int]:
    """``within`` split into the coarsest sets of nodes on which every mask agrees."""
    parts = [within] if within else []
    for m in masks:
        refined = []
        for part in parts:
            inside, outside = part & m, part & ~m
            if inside:
                refined.append(inside)
            if outside:
                refined.append(outside)
        parts = refined
    return parts


def _find_matching_volume(
    pvc: PersistentVolumeClaim,
    volumes: list[PersistentVolume],
    admits: dict[str, bool],
    chosen: set[str],
) -> PersistentVolume | None:
    """component-helpers/storage/volume FindMatchingVolume on the scheduler's path
    (v1.35.4 and v1.37.2), ``volumes`` being the PVs of the claim's class: a volume
    pre-bound to the claim (claimRef) decides alone -- no match where its node affinity
    excludes the node; otherwise the smallest Available volume with enough capacity,
    no claimRef to another claim, node affinity admitting the node and every requested
    access mode, not already chosen for another claim of the pod (``chosen``). Volume
    modes, claim selectors and VolumeAttributesClasses are not modelled."""
    smallest: PersistentVolume | None = None
    for pv in volumes:
        if pv.name in chosen:
            continue
        if pv.claim is not None and pv.claim != pvc.key:
            continue
        if pv.capacity_bytes < pvc.request_bytes:
            continue
        valid = admits[pv.name]
        if pv.claim == pvc.key:
            return pv if valid else None
        if pv.phase != "Available" or not valid:
            continue
        if not all(m in pv.access_modes for m in pvc.access_modes):
            continue
        if smallest is None or pv.capacity_bytes < smallest.capacity_bytes:
            smallest = pv
    return smallest


def delayed_binding_mask(cycle: Cycle, delayed: list[PersistentVolumeClaim]) -> int:
    """Nodes where every WaitForFirstConsumer claim of the pod can be bound or provisioned
    (:func:`delayed_bindings`)."""
    ok = 0
    for part, bindings in delayed_bindings(cycle.table, cycle.snapshot, delayed):
        if bindings is not None:
            ok |= part
    return ok


StaticBindings = list[tuple[PersistentVolumeClaim, PersistentVolume]]


def delayed_bindings(
    table: NodeTable, snap: ClusterSnapshot, delayed: list[PersistentVolumeClaim]
) -> list[tuple[int, StaticBindings | None]]:
    """FindPodVolumes per node (pkg/scheduler/framework/plugins/volumebinding/binder.go,
    v1.35.4 and v1.37.2): groups of nodes, each with the static bindings (claim, PV)
    its nodes get, or None where a claim can be neither bound nor provisioned. A claim
    with a selected node fits that node only and is provisioned; the others, smallest
    request first (findMatchingVolumes sorts byPVCSize; stable for a pod's few claims),
    each take the smallest matching volume not already chosen for another of the pod's
    claims (FindMatchingVolume's excluded volumes); a claim left without one must be
    provisioned (checkVolumeProvisions: a provisioner other than
    ``kubernetes.io/no-provisioner``, the class's allowedTopologies matching the node).
    Storage capacity is not modelled. Nodes outside every group fit nowhere.

    Nodes are grouped by which volumes and topologies admit them, and each group is
    decided once. PVs are tried in name order; upstream lists them from its cache in
    no fixed order, which only matters between equally small matching volumes."""
    within = table.all_mask
    for pvc in delayed:
        if pvc.selected_node:
            i = table.index.get(pvc.selected_node)
            within &= 1 << i if i is not None else 0
    if not within:
        return []
    classes = sorted({pvc.storage_class or "" for pvc in delayed})
    by_class: dict[str, list[PersistentVolume]] = {c: [] for c in classes}
    for pv in sorted(snap.pvs.values(), key=lambda v: v.name):
        if pv.storage_class in by_class:
            by_class[pv.storage_class].append(pv)
    pv_masks = {pv.name: _pv_mask(table, pv) for pvs in by_class.values() for pv in pvs}
    provisionable: dict[str, int] = {}
    for c in classes:
        cls = snap.storage_classes.get(c)
        if cls is None or not cls.provisioner or cls.provisioner == NO_PROVISIONER:
            provisionable[c] = 0
        elif cls.allowed_topologies is None:
            provisionable[c] = table.all_mask
        else:
            provisionable[c] = table.selector_mask(cls.allowed_topologies)
    ordered = sorted(delayed, key=lambda c: c.request_bytes)
    out: list[tuple[int, StaticBindings | None]] = []
    for part in _partition(within, [*pv_masks.values(), *provisionable.values()]):
        rep = (part & -part).bit_length() - 1
        admits = {name: has(m, rep) for name, m in pv_masks.items()}
        chosen: set[str] = set()
        bindings: StaticBindings = []
        fits = True
        for pvc in ordered:
            c = pvc.storage_class or ""
            if not pvc.selected_node:
                found = _find_matching_volume(pvc, by_class[c], admits, chosen)
                if found is not None:
                    chosen.add(found.name)
                    bindings.append((pvc, found))
                    continue
            if not has(provisionable[c], rep):
                fits = False
                break
        out.append((part, bindings if fits else None))
    return out


class VolumeRestrictions(Plugin):
    """VolumeRestrictions' PreFilter, the part the simulator models
    (pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions.go,
    v1.27.16 to v1.35.4, readWriteOncePodPVCsForPod): it reads every claim of the
    pod, so a missing one is its UnschedulableAndUnresolvable rejection, with the
    lister's NotFound text -- before VolumeBinding (default plugin order) says the
    same. Disk and ReadWriteOncePod conflicts are not modelled."""

    name = C.VOLUME_RESTRICTIONS_PLUGIN

    def prefilter(self, cycle: Cycle) -> FilterFailure | None:
        pod = cycle.pod
        if not cycle.wording.volume_restrictions_reads_claims:
            return None
        for name in pod.spec.pvc_names:
            if (pod.namespace, name) not in cycle.snapshot.pvcs and not cycle.snapshot.lacks(PVC_KIND):
                return claim_not_found(self.name, name)
        return None


CLAIM_BOUND = "bound"
CLAIM_DELAYED = "delayed"  # unbound, of a WaitForFirstConsumer class
CLAIM_IMMEDIATE = "immediate"  # unbound, of Immediate binding (or pre-bound, not yet bound)
CLAIM_UNKNOWN = "unknown"  # its class is not in the input: its binding mode is unknown


def claim_kind(snap: ClusterSnapshot, pvc: PersistentVolumeClaim) -> str:
    """How VolumeBinding's PreFilter (GetPodVolumeClaims) sorts a claim of the pod."""
    if pvc.volume_name and pvc.phase == "Bound":
        return CLAIM_BOUND
    cls = snap.storage_classes.get(pvc.storage_class or "") if pvc.storage_class else None
    if cls is None and pvc.storage_class and snap.lacks(STORAGE_CLASS_KIND):
        return CLAIM_UNKNOWN
    if cls is not None and cls.binding_mode == "WaitForFirstConsumer" and not pvc.volume_name:
        return CLAIM_DELAYED
    return CLAIM_IMMEDIATE


def delayed_claims(snap: ClusterSnapshot, pod: Pod) -> list[PersistentVolumeClaim]:
    """The pod's unbound WaitForFirstConsumer claims that are in the input."""
    out = []
    for name in pod.spec.pvc_names:
        pvc = snap.pvcs.get((pod.namespace, name))
        if pvc is not None and claim_kind(snap, pvc) == CLAIM_DELAYED:
            out.append(pvc)
    return out


class VolumeBinding(Plugin):
    name = C.VOLUME_BINDING

    def prefilter(self, cycle: Cycle) -> FilterFailure | None:
        pod = cycle.pod
        if not pod.spec.pvc_names:
            return None
        snap = cycle.snapshot
        claims = _Claims([], [])
        unbound_immediate = []
        for name in pod.spec.pvc_names:
            pvc = snap.pvcs.get((pod.namespace, name))
            if pvc is None:
                if snap.lacks(PVC_KIND):
                    continue  # the input carries no claims: unknown, not missing (its constraints unchecked)
                return claim_not_found(self.name, name)
            if pvc.phase == "Lost":
                return failure(
                    self.name,
                    C.UNRESOLVABLE,
                    (
                        f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{pvc.volume_name}"',
                    ),
                    (C.PVC_LOST,),
                    detail(claim=name, volume=pvc.volume_name),
                )
        for name in pod.spec.pvc_names:
            pvc = snap.pvcs.get((pod.namespace, name))
            if pvc is None:
                continue  # not in the input (see above)
            kind = claim_kind(snap, pvc)
            if kind == CLAIM_BOUND:
                claims.bound.append(pvc)
            elif kind == CLAIM_DELAYED:
                claims.delayed.append(pvc)
            elif kind == CLAIM_IMMEDIATE:
                unbound_immediate.append(name)
        if unbound_immediate:
            return failure(
                self.name,
                C.UNRESOLVABLE,
                (REASON_UNBOUND_IMMEDIATE,),
                (C.VOLUME_UNBOUND_PVC,),
                detail(claims=tuple(unbound_immediate)),
            )
        cycle.state["claims"] = claims
        return None

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        claims: _Claims | None = cycle.state.get("claims")
        if claims is None:
            return None
        table = cycle.table
        snap = cycle.snapshot
        all_mask = table.all_mask
        conflict_fail = 0  # bound PV's node affinity excludes the node
        missing_pv = False
        conflict_pvs: list[str] = []
        for pvc in claims.bound:
            pv = snap.pvs.get(pvc.volume_name)
            if pv is None:
                missing_pv = missing_pv or not snap.lacks(PV_KIND)  # no PV in the input: unknown
                continue
            m = all_mask & ~_pv_mask(table, pv)
            if m:
                conflict_fail |= m
                conflict_pvs.append(pv.name)
        bind_fail = 0
        unbindable: list[str] = []
        if claims.delayed:
            bind_fail = all_mask & ~delayed_binding_mask(cycle, claims.delayed)
            unbindable = [c.name for c in claims.delayed]
        if not (conflict_fail or bind_fail or missing_pv):
            return None
        out = Outcome(self.name)
        wording = cycle.wording
        missing = all_mask if missing_pv else 0
        # binder.go appends: node conflict, bind conflict, (not enough space), PV not exist.
        parts = [
            (conflict_fail, wording.pv_node_conflict_reason, C.VOLUME_NODE_AFFINITY_CONFLICT),
            (bind_fail, REASON_BIND_CONFLICT, C.VOLUME_NO_PV),
            (missing, REASON_PV_NOT_EXIST, C.PVC_LOST),
        ]
        any_mask = conflict_fail | bind_fail | missing
        # The flags are only tested for truth (so "(0, 2)" would agree), and the tuples are of one length.
        for a in (0, 1):  # pragma: no mutate
            for b in (0, 1):  # pragma: no mutate
                for c in (0, 1):  # pragma: no mutate
                    m = any_mask
                    for flag, (pm, _, _) in zip((a, b, c), parts, strict=True):  # pragma: no mutate
                        m = m & pm if flag else m & ~pm
                    if not m:
                        continue
                    chosen = [p for flag, p in zip((a, b, c), parts, strict=True) if flag]
                    out.add_group(
                        m,
                        failure(
                            self.name,
                            C.UNRESOLVABLE,
                            tuple(p[1] for p in chosen),
                            tuple(p[2] for p in chosen),
                            detail(volumes=tuple(conflict_pvs), claims=tuple(unbindable)),
                        ),
                    )
        return out


# volume_zone.go topologyLabels, in upstream's order (v1.35.4 and v1.37.2).
ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
REGION_BETA = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (ZONE_BETA, REGION_BETA, ZONE, REGION)
GA_LABEL = {ZONE_BETA: ZONE, REGION_BETA: REGION}
MULTI_ZONE_DELIMITER = "__"  # k8s.io/cloud-provider/volume LabelMultiZoneDelimiter
REASON_ZONE_CONFLICT = "node(s) had no available volume zone"


def label_zones(value: str) -> frozenset[str] | None:
    """A PV zone label's set of zones (cloud-provider volume/helpers LabelZonesToSet:
    split on ``__``, each part trimmed); None when a part is empty -- upstream then
    ignores the label."""
    parts = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
    if any(not z for z in parts):
        return None
    return frozenset(parts)


def pv_topologies(pv: PersistentVolume) -> list[tuple[str, frozenset[str]]]:
    """(label key, zones) for each topology label the PV carries (getPVTopologies)."""
    out = []
    for key in TOPOLOGY_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        zones = label_zones(value)
        if zones is not None:
            out.append((key, zones))
    return out


class VolumeZone(Plugin):
    """VolumeZone (pkg/scheduler/framework/plugins/volumezone/volume_zone.go, the same
    in v1.35.4 and v1.37.2; the default plugin after VolumeBinding).

    PreFilter reads the PersistentVolume of every claim with ``spec.volumeName``
    (unbound WaitForFirstConsumer claims are skipped; other unbound claims were already
    refused by VolumeBinding's PreFilter, which runs first): a missing PV is the
    lister's NotFound, ``persistentvolume "<name>" not found``
    (UnschedulableAndUnresolvable); before 1.27 (v1.26.15) there was no PreFilter and
    the Filter read the PV, after VolumeBinding's Filter had failed every node for the
    missing PV. Filter: a node carrying none of the four
    zone/region labels passes (a single-zone cluster); otherwise, for each zone/region
    label of each PV, the node's value of that label -- or, for a legacy
    ``failure-domain.beta`` key the node lacks, of its GA twin -- must be one of the
    PV's ``__``-separated zones, else ``node(s) had no available volume zone``
    (UnschedulableAndUnresolvable)."""

    name = VOLUME_ZONE

    def prefilter(self, cycle: Cycle) -> FilterFailure | None:
        pod = cycle.pod
        if not pod.spec.pvc_names:
            return None
        snap = cycle.snapshot
        topologies: list[tuple[str, frozenset[str], str]] = []
        for claim_name in pod.spec.pvc_names:
            pvc = snap.pvcs.get((pod.namespace, claim_name))
            if pvc is None or not pvc.volume_name:
                continue  # missing or unbound: VolumeBinding's PreFilter decided already
            pv = snap.pvs.get(pvc.volume_name)
            if pv is None:
                if snap.lacks(PV_KIND) or not cycle.wording.volume_zone_prefilter:
                    # No PV in the input: unknown, not missing. Before 1.27 VolumeZone's Filter
                    # read the PV, after VolumeBinding's Filter had failed every node for it.
                    continue
                return failure(
                    self.name,
                    C.UNRESOLVABLE,
                    (f'persistentvolume "{pvc.volume_name}" not found',),
                    (C.PVC_LOST,),
                    detail(claim=claim_name, volume=pvc.volume_name),
                )
            topologies.extend((key, zones, pv.name) for key, zones in pv_topologies(pv))
        if topologies:
            cycle.state["volumezone"] = topologies
        return None

    def filter_all(self, cycle: Cycle) -> Outcome | None:
        topologies: list[tuple[str, frozenset[str], str]] | None = cycle.state.get("volumezone")
        if not topologies:
            return None
        table = cycle.table
        constrained = 0
        for key in TOPOLOGY_LABELS:
            constrained |= table.key_mask.get(key, 0)
        ok = table.all_mask
        volumes: list[str] = []
        for key, zones, pv_name in topologies:
            own = table.key_mask.get(key, 0)
            allowed = table.domain_mask(key, zones)
            ga = GA_LABEL.get(key)
            if ga is not None:
                allowed |= ~own & table.domain_mask(ga, zones)
            before = ok
            ok &= allowed | ~constrained
            if ok != before and pv_name not in volumes:
                volumes.append(pv_name)
        failing = table.all_mask & constrained & ~ok
        if not failing:
            return None
        out = Outcome(self.name)
        out.add_group(
            failing,
            failure(
                self.name,
                C.UNRESOLVABLE,
                (REASON_ZONE_CONFLICT,),
                (C.VOLUME_ZONE_CONFLICT,),
                detail(volumes=tuple(volumes)),
            ),
        )
        return out
