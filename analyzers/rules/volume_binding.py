"""volume-binding: a pending pod's PersistentVolumeClaims keep it off every node.

kube-scheduler's VolumeBinding plugin (pkg/scheduler/framework/plugins/
volumebinding/volume_binding.go, binder.go):

* PreFilter rejects the pod outright (UnschedulableAndUnresolvable) when a
  claim is missing (``persistentvolumeclaim "x" not found``), Lost, or unbound
  with ``volumeBindingMode: Immediate`` (``pod has unbound immediate
  PersistentVolumeClaims``): Immediate claims are bound by the PV controller
  without regard to pods (pkg/controller/volume/persistentvolume/
  pv_controller.go), so a claim with no matching PV and no provisioner stays
  Pending forever.
* Filter, per node: a bound claim's PV whose ``nodeAffinity`` excludes the
  node (``node(s) had volume node affinity conflict``; 1.33+ ``node(s) didn't
  match PersistentVolume's node affinity``): a zonal disk pins its pod to its
  zone; a WaitForFirstConsumer claim with neither an Available matching PV on
  the node nor a provisioner allowed there (``kubernetes.io/no-provisioner``
  never provisions; ``allowedTopologies`` must match the node, binder.go
  checkVolumeProvisions): ``node(s) didn't find available persistent volumes
  to bind``.

The rule speaks only when the volume is what stands in the way: the
scheduler rejects the pod at PreFilter for a volume, or the pod fails a
volume filter and would fit if it had no volumes (re-simulated). It names
the root cause in storage terms (which claim, PV, StorageClass, which zone
against which selector, which nodes are full) and offers the specific fix,
verified by re-simulation where a change of objects can be simulated:
pointing the pod's zone selector at the PV's zone or the class's allowed
topology, a StorageClass allowing the pod's zone (``WaitForFirstConsumer``), a
matching PersistentVolume, a node in the volume's zone.

Pods of an old Deployment revision whose template no longer carries their
placement constraints are skipped: the rollout replaces them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from analyzers.findings import Finding, ObjectRef, Remedy, Severity
from analyzers.quantity import format_units
from analyzers.records import (
    Deployment,
    FrozenMap,
    Node,
    NodeSelector,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    Requirement,
    StatefulSet,
    StorageClass,
)
from analyzers.rules._describe import (
    describe_nodes,
    describe_verdict,
    names,
    plural,
    table_free_what_if,
    what_if_verdict,
    where_fits,
)
from analyzers.rules.context import RuleContext
from analyzers.simulator import PodVerdict
from analyzers.simulator.selectors import node_selector_matches
from analyzers.snapshot import ClusterSnapshot

RULE_ID = "volume-binding"

_VOLUME_PLUGINS = frozenset({"VolumeBinding", "VolumeZone", "VolumeRestrictions", "NodeVolumeLimits"})
# Canonical reason codes of those plugins (analyzers.messages.reasons / analyzers.simulator.codes).
_VOLUME_CODES = frozenset(
    {
        "volume-unbound-pvc",
        "volume-no-pv",
        "volume-node-affinity-conflict",
        "volume-insufficient-storage",
        "volume-zone-conflict",
        "volume-restrictions",
        "volume-limits",
        "pvc-not-found",
        "pvc-being-deleted",
        "pvc-lost",
    }
)
_NO_PROVISIONER = "kubernetes.io/no-provisioner"
_ZONE_KEYS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
# Keys a PV's node affinity pins a zone (or a node) with: in-tree and the common CSI drivers.
_PV_TOPOLOGY_KEYS = (
    *_ZONE_KEYS,
    "topology.ebs.csi.aws.com/zone",
    "topology.gke.io/zone",
    "topology.disk.csi.azure.com/zone",
    "kubernetes.io/hostname",
)
_EMPTY_CLASS = '""'


@dataclass
class _Problem:
    kind: str
    text: str
    claims: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    remedies: list[Remedy] = field(default_factory=list)


def analyze(ctx: RuleContext) -> list[Finding]:
    findings = []
    for ref, pods in ctx.pending_by_workload().items():
        by_kind: dict[str, list[tuple[Pod, _Problem, PodVerdict]]] = {}
        # Pods of one workload failing the same way (a StatefulSet's pods differ only in their
        # claims) are diagnosed once: the first one's diagnosis and remedies stand for all.
        diagnosed: dict[tuple[str, ...], tuple[_Problem, PodVerdict] | None] = {}
        for pod in pods:
            if pod.spec.scheduling_gates or not pod.spec.pvc_names or _old_revision(ctx.snapshot, pod):
                continue
            verdict = ctx.verdict(pod)
            if verdict.fits:
                continue
            signature = _signature(verdict)
            if signature not in diagnosed:
                problem = _diagnose(ctx, pod, verdict)
                diagnosed[signature] = None if problem is None else (problem, verdict)
            found = diagnosed[signature]
            if found is not None:
                by_kind.setdefault(found[0].kind, []).append((pod, found[0], verdict))
        for kind, items in sorted(by_kind.items()):
            findings.append(_finding(ctx, ref, kind, items))
    return findings


def _signature(verdict: PodVerdict) -> tuple[str, ...]:
    pre = verdict.prefilter
    if pre is not None:
        return ("prefilter", pre.plugin, *pre.reason_codes)
    return ("filter", *sorted(c for c, n in verdict.reason_counts.items() if n))


def _old_revision(snap: ClusterSnapshot, pod: Pod) -> bool:
    """A pod of a Deployment whose template no longer has the pod's placement constraints."""
    workload = snap.workload_of(pod)
    dep = workload.record
    if not isinstance(dep, Deployment):
        return False
    return (
        dep.template.node_selector != pod.spec.node_selector
        or dep.template.required_node_affinity != pod.spec.required_node_affinity
    )


def _finding(
    ctx: RuleContext, ref: ObjectRef, kind: str, items: list[tuple[Pod, _Problem, PodVerdict]]
) -> Finding:
    pod, problem, verdict = items[0]
    pods = [p for p, _, _ in items]
    claims = sorted({*problem.claims, *(c for p in pods[1:] for c in p.spec.pvc_names)})
    more = f" ({len(pods) - 1} more pod(s) of {ref.name} wait the same way)" if len(pods) > 1 else ""
    explanation = (
        f"{pod.name} is Pending: {verdict.message or describe_verdict(pod, verdict)} {problem.text}{more}"
    )
    evidence: dict[str, Any] = {
        "cause": kind,
        "pods": [p.name for p in pods],
        "claims": claims,
        "scheduler_message": verdict.message,
        **problem.evidence,
    }
    return Finding(
        rule_id=RULE_ID,
        severity=Severity.WARNING,
        subject=ref,
        title=f"{plural(len(pods), 'pod')} of {ref.name} cannot be placed because of {_TITLES[kind]}",
        explanation=explanation,
        evidence=evidence,
        remedies=tuple(problem.remedies),
        cause=kind,
        pods=tuple(f"{p.namespace}/{p.name}" for p in pods),
    )


_TITLES = {
    "pvc-missing": "a missing PersistentVolumeClaim",
    "pvc-lost": "a claim whose PersistentVolume is gone",
    "immediate-unbound": "an unbound Immediate-binding PersistentVolumeClaim",
    "pv-node-affinity-conflict": "its volume's zone (PV node affinity conflicts with the pod's nodes)",
    "pv-zone-full": "its volume's zone: every node there is full",
    "wffc-topology-mismatch": "its StorageClass's allowedTopologies (no allowed zone matches the pod's nodes)",
    "wffc-no-pv": "no matching PersistentVolume to bind",
    "volume-other": "its volumes",
}


# ---------------------------------------------------------------------------
# Diagnosis


def _diagnose(ctx: RuleContext, pod: Pod, verdict: PodVerdict) -> _Problem | None:
    snap = ctx.snapshot
    pre = verdict.prefilter
    if pre is not None:
        if pre.plugin not in ("VolumeBinding", "VolumeRestrictions"):
            return None
        codes = set(pre.reason_codes)
        if "pvc-not-found" in codes:
            return _pvc_missing(ctx, pod, str(pre.detail.get("claim", "")))
        if "pvc-lost" in codes:
            return _pvc_lost(ctx, pod, str(pre.detail.get("claim", "")), str(pre.detail.get("volume", "")))
        claims = [str(c) for c in pre.detail.get("claims", ())] or list(pod.spec.pvc_names)
        return _immediate_unbound(ctx, pod, claims)
    # A node that only a volume filter rejects reports that filter first (VolumeBinding runs
    # after the node, affinity and resource filters), so its code shows in the counts.
    codes = _volume_codes(verdict)
    if not codes:
        return None
    # Is the volume what stands in the way? Without its claims, would the pod fit?
    bare = _without_volumes(ctx, pod)
    if not bare.fits:
        return None
    allowed = [n for n in snap.nodes.values() if _pod_allows(pod, n)]
    if "volume-node-affinity-conflict" in codes:
        problem = _pv_conflict(ctx, pod, verdict, allowed, bare)
        if problem is not None:
            return problem
    if "volume-no-pv" in codes:
        problem = _delayed_unbindable(ctx, pod, verdict, allowed, bare)
        if problem is not None:
            return problem
    return _Problem(
        "volume-other",
        f"Its volumes rule out nodes ({', '.join(sorted(codes))}); without them it would fit on {where_fits(bare)}.",
        list(pod.spec.pvc_names),
    )


def _pod_allows(pod: Pod, node: Node) -> bool:
    """The pod's own node constraints (nodeSelector AND required node affinity)."""
    for key, value in pod.spec.node_selector.items():
        if node.labels.get(key) != value:
            return False
    affinity = pod.spec.required_node_affinity
    return affinity is None or node_selector_matches(affinity, node.labels, node.name)


def _without_volumes(ctx: RuleContext, pod: Pod, drop: Iterable[str] | None = None) -> PodVerdict:
    """The pod's verdict without (some of) its claims."""
    dropped = set(pod.spec.pvc_names if drop is None else drop)
    spec = replace(pod.spec, pvc_names=tuple(c for c in pod.spec.pvc_names if c not in dropped))
    return what_if_verdict(ctx, replace(pod, spec=spec))


def _volume_codes(verdict: PodVerdict) -> set[str]:
    return {c for c, n in verdict.reason_counts.items() if n and c in _VOLUME_CODES}


def _first_fitting(verdict: PodVerdict) -> str | None:
    return next((nv.node for nv in verdict.nodes if nv.fits), None) if verdict.fits else None


def _selector_words(selector: NodeSelector | None) -> str:
    if selector is None:
        return "any node"
    terms = []
    for term in selector.terms:
        parts = []
        for req in term.match_expressions:
            if req.operator == "In" and len(req.values) == 1:
                parts.append(f"{req.key}={req.values[0]}")
            elif req.operator in ("In", "NotIn"):
                parts.append(f"{req.key} {req.operator} ({', '.join(req.values)})")
            else:
                parts.append(f"{req.key} {req.operator}")
        for req in term.match_fields:
            parts.append(f"{req.key} {req.operator} ({', '.join(req.values)})")
        terms.append(" and ".join(parts))
    return " or ".join(terms)


def _pod_constraint_words(pod: Pod) -> str:
    parts = [f"{k}={v}" for k, v in sorted(pod.spec.node_selector.items())]
    if pod.spec.required_node_affinity is not None:
        parts.append(f"required node affinity {_selector_words(pod.spec.required_node_affinity)}")
    return ", ".join(parts) or "no node constraints"


def _single_value(selector: NodeSelector | None, keys: Sequence[str]) -> tuple[str, str] | None:
    """(key, value) when the selector pins exactly one value of one of keys."""
    if selector is None or len(selector.terms) != 1:
        return None
    for req in selector.terms[0].match_expressions:
        if req.key in keys and req.operator == "In" and len(req.values) == 1:
            return req.key, req.values[0]
    return None


def _pvc_missing(ctx: RuleContext, pod: Pod, claim: str) -> _Problem:
    workload = ctx.snapshot.workload_of(pod)
    hint = ""
    if isinstance(workload.record, StatefulSet):
        hint = (
            " The StatefulSet controller creates a pod's claims from volumeClaimTemplates before it creates the pod; "
            "a claim deleted afterwards is re-created only when the pod is re-created."
        )
    problem = _Problem(
        "pvc-missing",
        f"PersistentVolumeClaim {pod.namespace}/{claim} does not exist, and kube-scheduler's PreFilter (VolumeRestrictions "
        f"since 1.27, VolumeBinding before) rejects a pod whose claim is missing before it tries any node.{hint}",
        [claim],
    )
    if isinstance(workload.record, StatefulSet):
        problem.remedies.append(
            ctx.renderer.command(
                f"Let the StatefulSet re-create {claim}: delete the Pending pod {pod.name}",
                ObjectRef("Pod", pod.namespace, pod.name),
                f"kubectl delete pod {pod.name} -n {pod.namespace}",
                note="The controller then creates the claim from volumeClaimTemplates and the pod again.",
                verified=False,
                verification="not simulated: the claim's spec comes from volumeClaimTemplates, which the snapshot does not hold",
            )
        )
    return problem


def _pvc_lost(ctx: RuleContext, pod: Pod, claim: str, volume: str) -> _Problem:
    return _Problem(
        "pvc-lost",
        f"PersistentVolumeClaim {pod.namespace}/{claim} is Lost: the PersistentVolume {volume} it was bound to no longer "
        "exists, and VolumeBinding rejects the pod at PreFilter. The data is gone with the PV unless the disk survived "
        "(reclaimPolicy Retain): re-create a PV for that disk with claimRef to the claim, or delete the claim to get a "
        "new, empty volume.",
        [claim],
    )


def _class_of(snap: ClusterSnapshot, pvc: PersistentVolumeClaim) -> StorageClass | None:
    if pvc.storage_class:
        return snap.storage_classes.get(pvc.storage_class)
    return None


def _pv_rejections(
    snap: ClusterSnapshot, pvc: PersistentVolumeClaim, nodes: Sequence[Node] | None = None
) -> list[str]:
    """Why each PV of the claim's class does not match it (binder.go findMatchingVolume)."""
    out = []
    wanted_class = pvc.storage_class or ""
    for pv in sorted(snap.pvs.values(), key=lambda v: v.name):
        if pv.storage_class != wanted_class:
            continue
        if pv.claim is not None and pv.claim != pvc.key:
            out.append(f"{pv.name} is bound to {pv.claim[0]}/{pv.claim[1]}")
        elif pv.phase not in ("Available",) and pv.claim != pvc.key:
            out.append(f"{pv.name} is {pv.phase}")
        elif pv.capacity_bytes < pvc.request_bytes:
            out.append(
                f"{pv.name} has {format_units('memory', pv.capacity_bytes)}, the claim asks for "
                f"{format_units('memory', pvc.request_bytes)}"
            )
        elif not all(m in pv.access_modes for m in pvc.access_modes):
            out.append(
                f"{pv.name} offers {', '.join(pv.access_modes)}, the claim needs {', '.join(pvc.access_modes)}"
            )
        elif (
            nodes is not None
            and pv.node_affinity is not None
            and not any(node_selector_matches(pv.node_affinity, n.labels, None) for n in nodes)
        ):
            out.append(
                f"{pv.name} is pinned to {_selector_words(pv.node_affinity)}, where the pod may not run"
            )
    return out


def _immediate_unbound(ctx: RuleContext, pod: Pod, claims: list[str]) -> _Problem:
    snap = ctx.snapshot
    texts = []
    remedies: list[Remedy] = []
    evidence: dict[str, Any] = {"unbound_claims": []}
    for name in claims:
        pvc = snap.pvcs.get((pod.namespace, name))
        if pvc is None:
            continue
        cls = _class_of(snap, pvc)
        size = format_units("memory", pvc.request_bytes) if pvc.request_bytes else "no size"
        modes = ", ".join(pvc.access_modes) or "no access mode"
        rejections = _pv_rejections(snap, pvc)
        why_pv = (
            f" No PersistentVolume matches it ({'; '.join(rejections)})."
            if rejections
            else f" There is no PersistentVolume of class {pvc.storage_class or _EMPTY_CLASS} at all."
        )
        evidence["unbound_claims"].append(
            {
                "claim": name,
                "storage_class": pvc.storage_class,
                "size": size,
                "access_modes": list(pvc.access_modes),
                "provisioner": cls.provisioner if cls else None,
                "pv_rejections": rejections,
            }
        )
        if pvc.storage_class and cls is None:
            texts.append(
                f"Claim {name} ({size}, {modes}) names StorageClass {pvc.storage_class}, which does not exist, so "
                f"nothing provisions it.{why_pv}"
            )
        elif cls is None or not cls.provisioner or cls.provisioner == _NO_PROVISIONER:
            how = (
                f"StorageClass {cls.name} has no dynamic provisioner ({cls.provisioner or 'none'})"
                if cls
                else 'the claim has no class (storageClassName: ""), so only a pre-created PV can bind it'
            )
            texts.append(
                f"Claim {name} ({size}, {modes}) is Pending with Immediate binding: {how}.{why_pv} The PV controller "
                "binds Immediate claims on its own, without looking at pods, and until it does VolumeBinding rejects "
                "the pod at PreFilter."
            )
            remedy = _matching_pv(ctx, pod, pvc, immediate=True)
            if remedy is not None:
                remedies.append(remedy)
        else:
            last = _claim_event(snap, pvc)
            texts.append(
                f"Claim {name} ({size}, {modes}) of StorageClass {cls.name} (provisioner {cls.provisioner}, Immediate) "
                "is still unbound: the provisioner has not created its volume"
                + (f" (last event: {last})" if last else "")
                + ". VolumeBinding rejects the pod at PreFilter until the claim is bound."
            )
        other = _other_class(ctx, pod, pvc)
        if other is not None:
            remedies.append(other)
    return _Problem("immediate-unbound", " ".join(texts), claims, evidence, remedies)


def _claim_event(snap: ClusterSnapshot, pvc: PersistentVolumeClaim) -> str:
    for ev in reversed(snap.events_for("PersistentVolumeClaim", pvc.namespace, pvc.name)):
        if ev.type == "Warning" or ev.reason in ("ProvisioningFailed", "ExternalProvisioning"):
            return f"{ev.reason}: {ev.message}"
    return ""


def _bound(
    pvc: PersistentVolumeClaim, pv: PersistentVolume
) -> tuple[PersistentVolume, PersistentVolumeClaim]:
    """What the PV controller does within seconds once a matching, pre-bound PV exists."""
    return replace(pv, phase="Bound"), replace(pvc, volume_name=pv.name, phase="Bound")


def _matching_pv(ctx: RuleContext, pod: Pod, pvc: PersistentVolumeClaim, *, immediate: bool) -> Remedy | None:
    """A pre-bound local PersistentVolume on a node the pod fits (without this claim)."""
    node = _first_fitting(_without_volumes(ctx, pod, drop=[pvc.name]))
    if node is None:
        return None
    size = pvc.request_bytes or 1
    pv_name = f"{pvc.name}-{node}"[:63].rstrip("-.")
    affinity = NodeSelector((NodeSelectorTerm((Requirement("kubernetes.io/hostname", "In", (node,)),)),))
    pv = PersistentVolume(
        name=pv_name,
        storage_class=pvc.storage_class or "",
        capacity_bytes=size,
        access_modes=pvc.access_modes or ("ReadWriteOnce",),
        claim=pvc.key,
        node_affinity=affinity,
        phase="Available",
    )
    what_if = table_free_what_if(ctx, *_bound(pvc, pv)) if immediate else table_free_what_if(ctx, pv)
    verdict = what_if_verdict(ctx, pod, what_if)
    manifest = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": format_units("memory", size)},
            "accessModes": list(pvc.access_modes or ("ReadWriteOnce",)),
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": pvc.storage_class or "",
            "volumeMode": "Filesystem",
            "claimRef": {"namespace": pvc.namespace, "name": pvc.name},
            "local": {"path": f"/mnt/disks/{pvc.name}"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                }
            },
        },
    }
    return ctx.renderer.manifest(
        f"Create a PersistentVolume for {pvc.name} on {node} (pre-bound to the claim)",
        ObjectRef("PersistentVolume", "", pv_name),
        "object.yaml.j2",
        verified=verdict.fits,
        verification=(
            f"re-simulated with this PV{' bound to the claim (the PV controller binds a pre-bound PV at once)' if immediate else ''}: "
            + (
                f"{pod.name} fits on {where_fits(verdict)}"
                if verdict.fits
                else f"still unschedulable ({verdict.message})"
            )
            + f"; the directory /mnt/disks/{pvc.name} must exist on {node} (a local volume; use your storage's own "
            "volume source instead if it is not local disk)"
        ),
        obj=manifest,
    )


def _other_class(ctx: RuleContext, pod: Pod, pvc: PersistentVolumeClaim) -> Remedy | None:
    """Re-create the (unbound, empty) claim with a StorageClass that can provision it here.

    storageClassName is immutable (pkg/apis/core/validation/validation.go,
    ValidatePersistentVolumeClaimUpdate), so ``kubectl apply`` of the changed claim is refused:
    the command deletes the claim first. Its ``kubernetes.io/pvc-protection`` finalizer holds
    the delete while a pod bound to a node uses the claim (podUsesPVC in
    pkg/controller/volume/pvcprotection/pvc_protection_controller.go counts only pods with a
    nodeName), so such pods are deleted before it; pending pods keep their reference and
    schedule once the new claim exists. A StatefulSet's volumeClaimTemplate claim gets no
    such remedy: the controller re-creates it from the (immutable) template."""
    snap = ctx.snapshot
    if _from_claim_template(snap, pod, pvc.name):
        return None
    classes = sorted(
        (
            c
            for c in snap.storage_classes.values()
            if c.provisioner and c.provisioner != _NO_PROVISIONER and c.name != (pvc.storage_class or "")
        ),
        key=lambda c: (not c.is_default, c.binding_mode != "WaitForFirstConsumer", c.name),
    )
    holders = sorted(
        p.name
        for p in snap.pods.values()
        if p.namespace == pvc.namespace
        and p.node_name
        and not p.finished
        and p.deleted is None
        and pvc.name in p.spec.pvc_names
    )
    steps = [f"kubectl delete pod {' '.join(holders)} -n {pvc.namespace}"] if holders else []
    steps += [f"kubectl delete pvc {pvc.name} -n {pvc.namespace}", "kubectl apply -f -"]
    held = (
        f"; the claim's pvc-protection finalizer holds the delete while {plural(len(holders), 'pod')} bound to a "
        f"node use{'s' if len(holders) == 1 else ''} it ({names(holders)}), so the command deletes "
        f"{'that pod' if len(holders) == 1 else 'those pods'} first (a controller re-creates its pods; a bare pod "
        "must be re-created by hand)"
        if holders
        else ""
    )
    for cls in classes[:3]:
        changed = replace(pvc, storage_class=cls.name, volume_name="", phase="Pending")
        verdict = what_if_verdict(ctx, pod, table_free_what_if(ctx, changed))
        if not verdict.fits:
            continue
        manifest = _pvc_manifest(pvc, cls.name)
        remedy = ctx.renderer.manifest(
            f"Re-create claim {pvc.name} with StorageClass {cls.name} ({cls.provisioner}, {cls.binding_mode})",
            ObjectRef("PersistentVolumeClaim", pvc.namespace, pvc.name),
            "object.yaml.j2",
            verified=True,
            verification=(
                f"re-simulated with the claim in class {cls.name}: {pod.name} fits on {where_fits(verdict)}"
                + (
                    " and the volume is provisioned in that node's topology"
                    if cls.binding_mode == "WaitForFirstConsumer"
                    else ""
                )
                + "; storageClassName is immutable and the claim is unbound (no data), so the command deletes it "
                f"and creates it anew{held}"
            ),
            obj=manifest,
        )
        return replace(remedy, command=" && ".join(steps))
    return None


def _from_claim_template(snap: ClusterSnapshot, pod: Pod, claim: str) -> bool:
    """Whether ``claim`` is one a StatefulSet made for ``pod`` from its volumeClaimTemplates
    (a pod of it naming a claim its template's volumes do not)."""
    owner = pod.owner
    if owner is None or owner.kind != "StatefulSet":
        return False
    sts = snap.statefulsets.get((pod.namespace, owner.name))
    return sts is None or claim not in sts.template.pvc_names


def _pvc_manifest(pvc: PersistentVolumeClaim, storage_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": pvc.name, "namespace": pvc.namespace},
        "spec": {
            "accessModes": list(pvc.access_modes or ("ReadWriteOnce",)),
            "resources": {"requests": {"storage": format_units("memory", pvc.request_bytes or 1)}},
            "storageClassName": storage_class,
            "volumeMode": "Filesystem",
        },
    }


def _pv_conflict(
    ctx: RuleContext, pod: Pod, verdict: PodVerdict, allowed: list[Node], bare: PodVerdict
) -> _Problem | None:
    snap = ctx.snapshot
    for name in pod.spec.pvc_names:
        pvc = snap.pvcs.get((pod.namespace, name))
        if pvc is None or not pvc.volume_name:
            continue
        pv = snap.pvs.get(pvc.volume_name)
        if pv is None or pv.node_affinity is None:
            continue
        pv_nodes = [n for n in snap.nodes.values() if node_selector_matches(pv.node_affinity, n.labels, None)]
        both = [n for n in pv_nodes if n in allowed]
        pinned = _selector_words(pv.node_affinity)
        evidence = {
            "claim": name,
            "volume": pv.name,
            "volume_node_affinity": pinned,
            "pod_constraints": _pod_constraint_words(pod),
            "volume_nodes": sorted(n.name for n in pv_nodes),
            "pod_nodes": sorted(n.name for n in allowed),
        }
        if not both:
            if pv_nodes:
                where = (
                    f"{names(sorted(n.name for n in pv_nodes))} {'is' if len(pv_nodes) == 1 else 'are'} there"
                )
            else:
                where = "no node is there any more"
            text = (
                f"Claim {name} is bound to PersistentVolume {pv.name}, whose nodeAffinity pins it to {pinned} "
                f"({where}); the pod itself may only run on nodes matching {_pod_constraint_words(pod)} "
                f"({names(sorted(n.name for n in allowed)) or 'none'}). No node satisfies both, so every node fails "
                "VolumeBinding (volume node affinity conflict) or NodeAffinity. A zonal disk cannot follow the pod to "
                "another zone."
            )
            problem = _Problem("pv-node-affinity-conflict", text, [name], evidence)
            remedy = _selector_to_volume(ctx, pod, pv)
            if remedy is not None:
                problem.remedies.append(remedy)
            if not pv_nodes:
                capacity = _node_in_topology(ctx, pod, pv.node_affinity, bare)
                if capacity is not None:
                    problem.remedies.append(capacity)
            problem.remedies.append(_move_data_note(ctx, pod, pvc, pv))
            return problem
        # The pod could go where the volume is, but those nodes fail for other reasons (full).
        blocked = {nv.node: nv for nv in verdict.nodes if nv.node in {n.name for n in both}}
        why = describe_nodes(blocked.values())
        text = (
            f"Claim {name} is bound to PersistentVolume {pv.name}, pinned to {pinned}; the only nodes there the pod may "
            f"use are {names(sorted(blocked))}, and they have no room: {why}. Without the volume the pod would fit on "
            f"{where_fits(bare)}, but a zonal disk cannot follow it."
        )
        problem = _Problem("pv-zone-full", text, [name], evidence)
        capacity = _node_in_topology(ctx, pod, pv.node_affinity, bare, model_from=sorted(blocked))
        if capacity is not None:
            problem.remedies.append(capacity)
        problem.remedies.append(_move_data_note(ctx, pod, pvc, pv))
        return problem
    return None


def _workload_patch_target(ctx: RuleContext, pod: Pod) -> tuple[ObjectRef, Any] | None:
    workload = ctx.snapshot.workload_of(pod)
    if isinstance(workload.record, Deployment | StatefulSet):
        return workload.ref, workload.record
    return None


def _with_selector(pod: Pod, key: str, value: str | None) -> Pod:
    selector = {k: v for k, v in pod.spec.node_selector.items() if k != key}
    if value is not None:
        selector[key] = value
    return replace(pod, spec=replace(pod.spec, node_selector=FrozenMap(selector)))


def _selector_to_volume(ctx: RuleContext, pod: Pod, pv: PersistentVolume) -> Remedy | None:
    """Point the pod's zone nodeSelector at the PV's zone (or drop it), verified by re-simulation."""
    pinned = _single_value(pv.node_affinity, _PV_TOPOLOGY_KEYS)
    target = _workload_patch_target(ctx, pod)
    if pinned is None or target is None:
        return None
    ref, _ = target
    conflicting = [k for k in pod.spec.node_selector if k in _ZONE_KEYS or k == pinned[0]]
    if not conflicting:
        return None
    key = conflicting[0]
    zone = pinned[1]
    node_zone = _zone_label_value(ctx.snapshot, pv, key)
    if node_zone is None:
        return None
    moved = _with_selector(pod, key, node_zone)
    verdict = what_if_verdict(ctx, moved)
    if not verdict.fits:
        return None
    return _template_patch(
        ctx,
        ref,
        pod,
        f"Run {ref.name} in the volume's zone: nodeSelector {key}={node_zone}",
        {"spec": {"template": {"spec": {"nodeSelector": {key: node_zone}}}}},
        f"re-simulated {pod.name} with nodeSelector {key}={node_zone} (where {pv.name} lives, {zone}): it fits on "
        f"{where_fits(verdict)}",
    )


def _template_patch(
    ctx: RuleContext, ref: ObjectRef, pod: Pod, title: str, patch: dict[str, Any], verification: str
) -> Remedy:
    """A verified pod-template patch. A Deployment's rollout replaces the Pending pod; a
    StatefulSet waits for it to become Ready before it updates it (it never will), so
    there the command also deletes the Pending pod."""
    if ref.kind != "StatefulSet":
        return ctx.renderer.patch(title, ref, patch, verified=True, verification=verification)
    body = json.dumps(patch, separators=(",", ":"))
    command = (
        f"kubectl patch statefulset {shlex.quote(ref.name)} -n {shlex.quote(ref.namespace)} --type strategic "
        f"-p {shlex.quote(body)} && kubectl delete pod {shlex.quote(pod.name)} -n {shlex.quote(pod.namespace)}"
    )
    return ctx.renderer.command(
        title,
        ref,
        command,
        note=(
            "A StatefulSet does not replace a Pending pod of an old revision on its own (it waits for the pod to become "
            "Ready first), so the Pending pod is deleted after the patch and re-created from the new template."
        ),
        verified=True,
        verification=verification,
    )


def _zone_label_value(snap: ClusterSnapshot, pv: PersistentVolume, key: str) -> str | None:
    """The value of the pod's selector key on the nodes the PV may use."""
    if pv.node_affinity is None:
        return None
    values = {
        n.labels.get(key)
        for n in snap.nodes.values()
        if node_selector_matches(pv.node_affinity, n.labels, None)
    }
    values.discard(None)
    if len(values) == 1:
        return values.pop()
    return None


def _node_in_topology(
    ctx: RuleContext,
    pod: Pod,
    topology: NodeSelector,
    bare: PodVerdict,
    model_from: Sequence[str] = (),
) -> Remedy | None:
    """A node in the volume's zone: modelled on a full node there, else on a node that fits the pod."""
    snap = ctx.snapshot
    model_name = next(iter(model_from), None) or _first_fitting(bare)
    if model_name is None:
        return None
    model = snap.nodes[model_name]
    pinned = _single_value(topology, tuple({r.key for t in topology.terms for r in t.match_expressions}))
    labels = dict(model.labels)
    if pinned is not None:
        labels[pinned[0]] = pinned[1]
        for zk in _ZONE_KEYS:
            if zk in labels and pinned[0] != "kubernetes.io/hostname":
                labels[zk] = pinned[1]
    clone_name = f"{model.name}-whatif"
    labels["kubernetes.io/hostname"] = clone_name
    clone = replace(
        model, name=clone_name, uid="", labels=FrozenMap(labels), unschedulable=False, taints=model.taints
    )
    if not node_selector_matches(topology, clone.labels, None):
        return None
    verdict = what_if_verdict(ctx, pod, snap.replace(clone))
    ok = verdict.fits and any(nv.node == clone_name and nv.fits for nv in verdict.nodes)
    where = _selector_words(topology)
    command = (
        f"kubectl get nodes -l {pinned[0]}={pinned[1]} -o wide"
        if pinned is not None
        else "kubectl get nodes -o wide"
    )
    return ctx.renderer.command(
        f"Add a node in {where} (like {model.name}) to the node group",
        ObjectRef("Node", "", model.name),
        command,
        note=f"Scale the node group of {where} (or let cluster-autoscaler/Karpenter add one there): the disk can only attach there.",
        verified=ok,
        verification=(
            f"re-simulated with an empty node like {model.name} in {where}: "
            + ("the pod fits on it" if ok else f"still unschedulable ({verdict.message})")
            + " (capacity is added outside Kubernetes objects)"
        ),
    )


def _move_data_note(ctx: RuleContext, pod: Pod, pvc: PersistentVolumeClaim, pv: PersistentVolume) -> Remedy:
    snapshot_name = f"{pvc.name}-move"
    manifest = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": snapshot_name, "namespace": pvc.namespace},
        "spec": {"source": {"persistentVolumeClaimName": pvc.name}},
    }
    return ctx.renderer.manifest(
        f"Or move the data: snapshot {pvc.name} and restore it into a new claim in the pod's zone",
        ObjectRef("PersistentVolumeClaim", pvc.namespace, pvc.name),
        "object.yaml.j2",
        verified=False,
        verification=(
            "not simulated: needs a CSI snapshot class and a new claim with dataSource "
            f"{{kind: VolumeSnapshot, name: {snapshot_name}}}, provisioned (WaitForFirstConsumer) where the pod runs"
        ),
        obj=manifest,
    )


def _delayed_unbindable(
    ctx: RuleContext, pod: Pod, verdict: PodVerdict, allowed: list[Node], bare: PodVerdict
) -> _Problem | None:
    snap = ctx.snapshot
    for name in pod.spec.pvc_names:
        pvc = snap.pvcs.get((pod.namespace, name))
        if pvc is None or pvc.volume_name:
            continue
        cls = _class_of(snap, pvc)
        if cls is None or cls.binding_mode != "WaitForFirstConsumer":
            continue
        size = format_units("memory", pvc.request_bytes) if pvc.request_bytes else "no size"
        evidence: dict[str, Any] = {
            "claim": name,
            "storage_class": cls.name,
            "provisioner": cls.provisioner,
            "allowed_topologies": _selector_words(cls.allowed_topologies) if cls.allowed_topologies else None,
            "pod_constraints": _pod_constraint_words(pod),
            "pod_nodes": sorted(n.name for n in allowed),
        }
        if pvc.selected_node and pvc.selected_node not in {n.name for n in allowed}:
            text = (
                f"Claim {name} (WaitForFirstConsumer) was already given node {pvc.selected_node} "
                "(annotation volume.kubernetes.io/selected-node) for provisioning, but the pod may not run there any "
                f"more ({_pod_constraint_words(pod)}); the scheduler only considers that node for the claim."
            )
            return _Problem("wffc-topology-mismatch", text, [name], evidence)
        if cls.provisioner and cls.provisioner != _NO_PROVISIONER:
            if cls.allowed_topologies is None:
                continue
            topo_nodes = [n for n in allowed if node_selector_matches(cls.allowed_topologies, n.labels, None)]
            if topo_nodes:
                continue
            text = (
                f"Claim {name} ({size}) uses StorageClass {cls.name} (provisioner {cls.provisioner}, "
                f"WaitForFirstConsumer), whose allowedTopologies permit only {_selector_words(cls.allowed_topologies)}; "
                f"the pod may only run on nodes matching {_pod_constraint_words(pod)} "
                f"({names(sorted(n.name for n in allowed)) or 'none'}). On no node may both the pod run and the volume "
                "be provisioned, so every node fails VolumeBinding: the scheduler checks the class's allowedTopologies "
                "against each node before it lets the provisioner create the volume there (binder.go "
                "checkVolumeProvisions)."
            )
            problem = _Problem("wffc-topology-mismatch", text, [name], evidence)
            remedy = _selector_to_topology(ctx, pod, cls)
            if remedy is not None:
                problem.remedies.append(remedy)
            widened = _class_for_pod_zone(ctx, pod, pvc, cls, allowed)
            if widened is not None:
                problem.remedies.append(widened)
            return problem
        rejections = _pv_rejections(snap, pvc, allowed)
        text = (
            f"Claim {name} ({size}, {', '.join(pvc.access_modes)}) uses StorageClass {cls.name}, which has no provisioner "
            f"({cls.provisioner or 'none'}): it binds only to a pre-created, Available PersistentVolume on a node the "
            "pod may use, and there is none"
            + (f" ({'; '.join(rejections)})" if rejections else f" (no PV of class {cls.name} exists)")
            + "."
        )
        problem = _Problem("wffc-no-pv", text, [name], {**evidence, "pv_rejections": rejections})
        remedy = _matching_pv(ctx, pod, pvc, immediate=False)
        if remedy is not None:
            problem.remedies.append(remedy)
        return problem
    return None


def _selector_to_topology(ctx: RuleContext, pod: Pod, cls: StorageClass) -> Remedy | None:
    """Point the pod's zone selector at a zone the StorageClass allows."""
    target = _workload_patch_target(ctx, pod)
    if target is None or cls.allowed_topologies is None:
        return None
    ref, _ = target
    keys = [k for k in pod.spec.node_selector if k in _ZONE_KEYS]
    if not keys:
        return None
    key = keys[0]
    zones = sorted(
        {
            n.labels[key]
            for n in ctx.snapshot.nodes.values()
            if key in n.labels and node_selector_matches(cls.allowed_topologies, n.labels, None)
        }
    )
    for zone in zones:
        moved = _with_selector(pod, key, zone)
        verdict = what_if_verdict(ctx, moved)
        if not verdict.fits:
            continue
        return _template_patch(
            ctx,
            ref,
            pod,
            f"Run {ref.name} in a zone {cls.name} may provision in: nodeSelector {key}={zone}",
            {"spec": {"template": {"spec": {"nodeSelector": {key: zone}}}}},
            f"re-simulated {pod.name} with nodeSelector {key}={zone}: it fits on {where_fits(verdict)}",
        )
    return None


def _class_for_pod_zone(
    ctx: RuleContext, pod: Pod, pvc: PersistentVolumeClaim, cls: StorageClass, allowed: list[Node]
) -> Remedy | None:
    """A StorageClass like cls whose allowedTopologies include the pod's zone (a new class: the
    fields of a StorageClass are immutable; the claim is unbound, so it can be re-created)."""
    keys = sorted(
        {
            r.key
            for t in (cls.allowed_topologies.terms if cls.allowed_topologies else ())
            for r in t.match_expressions
        }
    )
    if not keys or not allowed:
        return None
    key = keys[0]
    zones = sorted({n.labels[key] for n in allowed if key in n.labels})
    if not zones:
        return None
    name = f"{cls.name}-{zones[0]}" if len(zones) == 1 else f"{cls.name}-wide"
    existing = cls.allowed_topologies.terms[0].match_expressions[0].values if cls.allowed_topologies else ()
    values = tuple(sorted(set(existing) | set(zones)))
    new_cls = StorageClass(
        name=name,
        provisioner=cls.provisioner,
        binding_mode="WaitForFirstConsumer",
        allowed_topologies=NodeSelector((NodeSelectorTerm((Requirement(key, "In", values),)),)),
    )
    moved = replace(pvc, storage_class=name)
    verdict = what_if_verdict(ctx, pod, table_free_what_if(ctx, new_cls, moved))
    manifest = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": cls.provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": key, "values": list(values)}]}],
    }
    return ctx.renderer.manifest(
        f"Or provision in the pod's zone: StorageClass {name} (WaitForFirstConsumer, {key} in {', '.join(values)})",
        ObjectRef("StorageClass", "", name),
        "object.yaml.j2",
        verified=verdict.fits,
        verification=(
            f"re-simulated with {name} and claim {pvc.name} in it: "
            + (
                f"{pod.name} fits on {where_fits(verdict)}"
                if verdict.fits
                else f"still unschedulable ({verdict.message})"
            )
            + f"; copy the parameters of {cls.name} (not in the snapshot); StorageClass fields and a claim's "
            f"storageClassName are immutable: re-create the unbound claim {pvc.name} with storageClassName: {name}"
        ),
        obj=manifest,
    )
