"""The real scheduler's verdict against unstick's simulation of the same objects.

The simulation is fed the objects exactly as the API server returns them
(defaulted, admitted), listed cluster-wide as kube-scheduler's informers see them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.dryrun import DryRunVerifier, dry_runs
from agent.kube.gateway import Gateway
from analyzers.findings import Finding
from analyzers.messages.parse import parse_message
from analyzers.messages.reasons import PLACEMENT_FOUND_RE
from analyzers.simulator import PodVerdict, simulate
from analyzers.snapshot import ClusterState
from tests.realcluster.harness import KUBE_VERSION, Api

# What kube-scheduler's informers list that the simulator reads.
LISTS = (
    ("/api/v1/nodes", "v1", "Node"),
    ("/api/v1/pods", "v1", "Pod"),
    ("/api/v1/namespaces", "v1", "Namespace"),
    ("/api/v1/persistentvolumes", "v1", "PersistentVolume"),
    ("/api/v1/persistentvolumeclaims", "v1", "PersistentVolumeClaim"),
    ("/apis/storage.k8s.io/v1/storageclasses", "storage.k8s.io/v1", "StorageClass"),
    ("/apis/scheduling.k8s.io/v1/priorityclasses", "scheduling.k8s.io/v1", "PriorityClass"),
    ("/apis/policy/v1/poddisruptionbudgets", "policy/v1", "PodDisruptionBudget"),
)


# What DynamicResources' informers list.
DRA_LISTS = (
    ("/apis/resource.k8s.io/v1/deviceclasses", "resource.k8s.io/v1", "DeviceClass"),
    ("/apis/resource.k8s.io/v1/resourceslices", "resource.k8s.io/v1", "ResourceSlice"),
    ("/apis/resource.k8s.io/v1/resourceclaims", "resource.k8s.io/v1", "ResourceClaim"),
    ("/apis/resource.k8s.io/v1/resourceclaimtemplates", "resource.k8s.io/v1", "ResourceClaimTemplate"),
)

WORKLOADS = (
    ("/apis/apps/v1/deployments", "apps/v1", "Deployment"),
    ("/apis/apps/v1/replicasets", "apps/v1", "ReplicaSet"),
    ("/apis/apps/v1/statefulsets", "apps/v1", "StatefulSet"),
    ("/apis/apps/v1/daemonsets", "apps/v1", "DaemonSet"),
    ("/apis/batch/v1/jobs", "batch/v1", "Job"),
    ("/api/v1/events", "v1", "Event"),
)


def cluster_objects(api: Api, lists: tuple[tuple[str, str, str], ...] = LISTS) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path, api_version, kind in lists:
        for item in api.get(path)["items"]:
            item["apiVersion"], item["kind"] = api_version, kind
            out.append(item)
    return out


def cluster_objects_with_workloads(cluster: Any) -> list[dict[str, Any]]:
    """What ``unstick analyze`` reads: the scheduler's inputs plus workloads and events."""
    return cluster_objects(cluster.api, LISTS + WORKLOADS)


def simulate_objects(objects: list[dict[str, Any]], namespace: str, name: str) -> PodVerdict:
    state = ClusterState(KUBE_VERSION)
    state.load(objects)
    snap = state.snapshot()
    pod = snap.pods[(namespace, name)]
    return simulate(snap, pod, kube_version=KUBE_VERSION)


def split_message(message: str) -> tuple[str, str]:
    """(filter part, PostFilter part) of ``0/N nodes are available: ... . <postfilter>``."""
    head, sep, rest = message.partition(". ")
    if not sep:
        return message, ""
    return head + ".", rest


def preemption_histogram(message: str) -> tuple[str | None, dict[str, int]]:
    """(verdict, {reason code: count}) of a message's preemption clause."""
    parsed = parse_message(message)
    pre = parsed.preemption
    if pre is None:
        return None, {}
    counts: dict[str, int] = {}
    for r in pre.reasons:
        counts[r.code] = counts.get(r.code, 0) + (r.count or 0)
    return pre.verdict, counts


@dataclass(frozen=True)
class Comparison:
    real_fits: bool
    sim_fits: bool
    real_message: str
    sim_message: str
    real_preemption: tuple[str | None, dict[str, int]]
    sim_preemption: tuple[str | None, dict[str, int]]
    real_nominated: bool
    sim_candidates: tuple[str, ...]
    sim_victims: dict[str, int] = field(default_factory=dict)  # candidate node -> victim count

    @property
    def agrees(self) -> bool:
        return not self.differences()

    def differences(self) -> list[str]:
        diffs: list[str] = []
        if self.real_fits != self.sim_fits:
            diffs.append(f"fits: real {self.real_fits}, simulated {self.sim_fits}")
            return diffs
        if self.real_fits:
            return diffs
        if self.real_nominated != bool(self.sim_candidates):
            diffs.append(f"preemption candidate: real {self.real_nominated}, simulated {self.sim_candidates}")
        real_filter, _ = split_message(self.real_message)
        sim_filter, _ = split_message(self.sim_message)
        if real_filter != sim_filter:
            diffs.append(f"filter part:\n  real:      {real_filter}\n  simulated: {sim_filter}")
        if not self.real_nominated and self.real_preemption != self.sim_preemption:
            diffs.append(f"preemption: real {self.real_preemption}, simulated {self.sim_preemption}")
        placed = placement_found(self.real_message)
        if placed is not None and placed[0] in self.sim_victims and self.sim_victims[placed[0]] != placed[1]:
            # 1.37+ names the chosen node and its victim count; ties between nodes are broken at
            # random upstream, so only a node the simulation also found is compared.
            diffs.append(f"victims on {placed[0]}: real {placed[1]}, simulated {self.sim_victims[placed[0]]}")
        return diffs


def placement_found(message: str) -> tuple[str, int] | None:
    """(node, victims) of a 1.37+ ``preemption: found a potential placement ...`` note."""
    parsed = parse_message(message) if message else None
    pre = parsed.preemption if parsed is not None else None
    if pre is None or pre.note is None:
        return None
    match = PLACEMENT_FOUND_RE.match(pre.note)
    return (match.group(1), int(match.group(2))) if match is not None else None


def compare(objects: list[dict[str, Any]], pod: dict[str, Any], namespace: str, name: str) -> Comparison:
    """``pod`` is the real outcome (bound, or PodScheduled=False); ``objects`` the cluster
    as it stood when the pod was created (the pod itself included, unbound)."""
    verdict = simulate_objects(objects, namespace, name)
    real_fits = bool(pod.get("spec", {}).get("nodeName"))
    message = ""
    for cond in pod.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == "PodScheduled":
            message = cond.get("message", "")
    nominated = bool(pod.get("status", {}).get("nominatedNodeName"))
    return Comparison(
        real_fits=real_fits,
        sim_fits=verdict.fits,
        real_message=message,
        sim_message=verdict.message,
        real_preemption=preemption_histogram(message) if message else (None, {}),
        sim_preemption=preemption_histogram(verdict.message) if verdict.message else (None, {}),
        real_nominated=nominated,
        sim_candidates=tuple(verdict.preemption.candidates),
        sim_victims={n: len(v) for n, v in verdict.preemption.victims.items()},
    )


# API-server refusals of remedies that are known bugs of the rules (analyzers/), each with its
# deterministic regression case in test_regressions.py: a differential run prints them
# instead of failing. Remove an entry when its rule is fixed (its xfail test then says so).
KNOWN_REFUSALS: dict[str, str] = {}


def known_refusal(refusal: str) -> str | None:
    """The regression case of a known refusal, else None."""
    return next((case for text, case in KNOWN_REFUSALS.items() if text in refusal), None)


def dry_run_every_remedy(
    kubeconfig: Path, findings: Sequence[Finding], namespace: str
) -> tuple[int, list[str]]:
    """Every remedy of the namespace's findings that unstick can dry-run (verified or not:
    in-place patches, re-created bare pods, manifests), sent to the real API server by
    the product's own ``DryRunVerifier``: (requests sent, refusals)."""

    async def run() -> tuple[int, list[str]]:
        async with Gateway(str(kubeconfig)) as gateway:
            verifier = DryRunVerifier(gateway)
            refused: list[str] = []
            for finding in findings:
                if finding.subject.namespace != namespace:
                    continue
                for remedy in finding.remedies:
                    if dry_runs(remedy) is None:
                        continue
                    refusal = await verifier.outcome(remedy)
                    if refusal is not None:
                        refused.append(
                            f"{finding.rule_id}: remedy {remedy.title!r} refused by the API server: {refusal}\n"
                            f"{remedy.command}\n{remedy.yaml}"
                        )
            return verifier.requests, refused

    return asyncio.run(run())
