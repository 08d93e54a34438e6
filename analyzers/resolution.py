"""What fixed an incident: the evidence and remedies it recorded while open, compared with
the cluster that no longer shows the problem.

The incident keeps the diagnosis it had while it was open; its resolution says
what changed since, in the cluster's own terms: the Deployment's strategy or
nodeSelector, the workload's requests or replicas, a PodDisruptionBudget, a
node uncordoned, labelled or gone (the nodes the evidence and the remedies'
commands name), and where the pods it was about went. Pure: a function of the
snapshot and the stored incident.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analyzers.findings import ObjectRef
from analyzers.quantity import format_units
from analyzers.snapshot import ClusterSnapshot

MAX_EFFECTS = 5

_UNCORDON = re.compile(r"\bkubectl uncordon (?P<node>[A-Za-z0-9.\-]+)")
_LABEL = re.compile(r"\bkubectl label nodes? (?P<node>[A-Za-z0-9.\-]+) (?P<key>[^\s=]+)=(?P<value>\S*)")


@dataclass(frozen=True, slots=True)
class Resolution:
    """``summary``: one sentence; ``causes``: what was changed in the cluster that the incident
    recorded (a strategy, a budget, a node cordon: a remedy applied); ``effects``: where its pods
    went."""

    summary: str
    causes: tuple[str, ...] = ()
    effects: tuple[str, ...] = ()

    @property
    def changes(self) -> tuple[str, ...]:
        return self.causes + self.effects


def _workload(snapshot: ClusterSnapshot, subject: ObjectRef) -> Any:
    table = {
        "Deployment": snapshot.deployments,
        "StatefulSet": snapshot.statefulsets,
        "DaemonSet": snapshot.daemonsets,
        "ReplicaSet": snapshot.replicasets,
        "Job": snapshot.jobs,
    }.get(subject.kind)
    return None if table is None else table.get((subject.namespace, subject.name))


def _strategy(kind: Any, surge: Any, unavailable: Any) -> str:
    if kind != "RollingUpdate":
        return str(kind)
    return f"RollingUpdate (maxSurge {surge}, maxUnavailable {unavailable})"


def _selector(labels: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "none"


def _budget(min_available: Any, max_unavailable: Any) -> str:
    if min_available is not None:
        return f"minAvailable {min_available}"
    if max_unavailable is not None:
        return f"maxUnavailable {max_unavailable}"
    return "no limit"


def _causes(
    snapshot: ClusterSnapshot,
    subject: ObjectRef,
    evidence: Mapping[str, Any],
    remedies: Sequence[Mapping[str, Any]],
) -> list[str]:
    out: list[str] = []
    workload = _workload(snapshot, subject)
    what = f"{subject.kind} {subject.namespace}/{subject.name}"
    strategy = evidence.get("strategy")
    if isinstance(strategy, Mapping) and subject.kind == "Deployment" and workload is not None:
        old = _strategy(strategy.get("type"), strategy.get("maxSurge"), strategy.get("maxUnavailable"))
        new = _strategy(workload.strategy_type, workload.max_surge, workload.max_unavailable)
        if old != new:
            out.append(f"the {what} strategy changed from {old} to {new}")
    selector = evidence.get("node_selector")
    if isinstance(selector, Mapping) and workload is not None:
        now = dict(workload.template.node_selector)
        if now != dict(selector):
            out.append(f"the {what} nodeSelector changed from {_selector(selector)} to {_selector(now)}")
    if "proposed_requests" in evidence and workload is not None:
        spec = workload.template
        if spec.containers_without_requests == 0 and spec.requests:
            sized = ", ".join(
                f"{r}={format_units(r, spec.requests[r])}" for r in ("cpu", "memory") if r in spec.requests
            )
            out.append(f"{what} now requests {sized}")
    replicas = evidence.get("replicas", evidence.get("workload_replicas"))
    if isinstance(replicas, int) and getattr(workload, "replicas", replicas) != replicas:
        out.append(f"{what} was scaled from {replicas} to {workload.replicas} replicas")
    for pdb in evidence.get("pdbs") or ():
        if not isinstance(pdb, Mapping):
            continue
        ns, name = str(pdb.get("namespace", "")), str(pdb.get("name", ""))
        current = snapshot.pdbs.get((ns, name))
        if current is None:
            out.append(f"PodDisruptionBudget {ns}/{name} was deleted")
            continue
        old = _budget(pdb.get("min_available"), pdb.get("max_unavailable"))
        new = _budget(current.min_available, current.max_unavailable)
        if old != new:
            out.append(f"PodDisruptionBudget {ns}/{name} was relaxed from {old} to {new}")
    cordoned = [
        str(d.get("node"))
        for d in evidence.get("draining_nodes") or ()
        if isinstance(d, Mapping) and d.get("how") == "cordoned"
    ]
    labels: list[tuple[str, str, str]] = []
    for remedy in remedies:
        command = str(remedy.get("command", ""))
        cordoned += [m["node"] for m in _UNCORDON.finditer(command)]
        labels += [(m["node"], m["key"], m["value"]) for m in _LABEL.finditer(command)]
    for node_name in dict.fromkeys(cordoned):
        node = snapshot.nodes.get(node_name)
        if node is None:
            out.append(f"node {node_name} was removed from the cluster")
        elif not node.unschedulable:
            out.append(f"node {node_name} was uncordoned")
    for node_name, key, value in dict.fromkeys(labels):
        node = snapshot.nodes.get(node_name)
        if node is not None and node.labels.get(key) == value:
            out.append(f"node {node_name} was labelled {key}={value}")
    return out


def _pod_names(subject: ObjectRef, pods: Sequence[str], evidence: Mapping[str, Any]) -> list[tuple[str, str]]:
    names: list[tuple[str, str]] = []
    for p in pods:
        ns, _, name = p.partition("/")
        names.append((ns, name))
    for key in ("pending_pods",):
        names += [(subject.namespace, str(n)) for n in evidence.get(key) or () if isinstance(n, str)]
    for entry in evidence.get("pending_replacements") or ():
        if isinstance(entry, Mapping) and entry.get("pod"):
            names.append((subject.namespace, str(entry["pod"])))
    return list(dict.fromkeys(names))


def _effects(
    snapshot: ClusterSnapshot, subject: ObjectRef, pods: Sequence[str], evidence: Mapping[str, Any]
) -> list[str]:
    out: list[str] = []
    gone = 0
    # Pods the evidence records as running on a node already (a drain's blocked pods): where
    # they still run is no change.
    placed = {
        str(e["pod"]): str(e["node"])
        for key in ("blocked_pods", "pods")
        for e in evidence.get(key) or ()
        if isinstance(e, Mapping) and e.get("pod") and e.get("node")
    }
    for ns, name in _pod_names(subject, pods, evidence):
        pod = snapshot.pods.get((ns, name))
        if pod is None:
            gone += 1
        elif pod.node_name and placed.get(name) != pod.node_name:
            out.append(f"pod {name} was scheduled on node {pod.node_name}")
    if gone and not out:
        running = [p for p in snapshot.pods_of_workload(subject) if p.node_name and p.deleted is None]
        for pod in sorted(running, key=lambda p: p.name)[:MAX_EFFECTS]:
            out.append(f"pod {pod.name} runs on node {pod.node_name}")
        out.insert(0, f"{gone} pod(s) it was about were replaced")
    if len(out) > MAX_EFFECTS:
        out = [*out[:MAX_EFFECTS], f"and {len(out) - MAX_EFFECTS} more"]
    return out


def what_changed(
    snapshot: ClusterSnapshot,
    subject: ObjectRef,
    pods: Sequence[str],
    evidence: Mapping[str, Any],
    remedies: Sequence[Mapping[str, Any]],
) -> Resolution:
    """The resolution of an incident about ``subject`` that ``snapshot`` no longer shows."""
    causes = _causes(snapshot, subject, evidence, remedies)
    effects = _effects(snapshot, subject, pods, evidence)
    if causes and effects:
        summary = f"{_cap(effects[0])} after {' and '.join(causes)}."
    elif causes:
        summary = _cap(" and ".join(causes)) + "."
    elif effects:
        summary = _cap(effects[0]) + "."
    else:
        summary = "The analysis no longer finds this problem; nothing it recorded changed visibly."
    return Resolution(summary, tuple(causes), tuple(effects))


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
