"""``unstick place DUMP... --pod NS/NAME``: where would this pod (or the next N
replicas of a workload) land, and why -- kube-scheduler's Score phase
simulated plugin by plugin, for the default profile or the cluster's own
KubeSchedulerConfiguration (``--scheduler-config``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

from agent.cli import EXIT_OK, EXIT_USAGE, UserError
from agent.dumps import DumpError, DumpFacts, expand, load_into
from agent.scheduler_config import SchedulerConfigError, read_scheduler_config
from analyzers.records import OwnerRef, Pod
from analyzers.snapshot import ClusterSnapshot, ClusterState

EXIT_SCHEDULING_ERROR = 3


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "place",
        help="where would this pod (or the next N replicas) land, and why: the Score phase, plugin by plugin",
        description=(
            "Simulate kube-scheduler's filters and scores for one pod of a dump, or for the next replicas of "
            "a Deployment, StatefulSet or ReplicaSet (deploy/NAME, sts/NAME, rs/NAME)."
        ),
    )
    p.add_argument(
        "paths", nargs="+", metavar="DUMP", help="file or folder of kubectl JSON/YAML; - reads stdin"
    )
    p.add_argument(
        "--pod", required=True, metavar="NS/NAME", help="a pod, or NS/deploy/NAME, NS/sts/NAME, NS/rs/NAME"
    )
    p.add_argument("--replicas", type=int, metavar="N", help="simulate N sequential bindings")
    p.add_argument("--scheduler-config", metavar="FILE", help="the cluster's KubeSchedulerConfiguration")
    p.add_argument(
        "--kube-version", metavar="X.Y", help="kube-scheduler version (wording); default: the dump's"
    )
    p.add_argument("--json", action="store_true", help="print the JSON contract (docs/placement.md)")
    p.set_defaults(func=run)


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    emit_error(message, as_json=args.json, prefix="unstick: ")
    return code


def target_pod(snapshot: ClusterSnapshot, target: str, label: str | None = None) -> Pod:
    """The pod to place: an existing pod, or one as a workload would create it now.
    ``label`` names the target in messages (default ``--pod TARGET``)."""
    label = label or f"--pod {target}"
    parts = target.split("/")
    if len(parts) == 2 and all(parts):
        ns, name = parts
        pod = snapshot.pods.get((ns, name))
        if pod is None:
            raise UserError(f"{label}: no such pod in the dump")
        if pod.deleted is not None:
            raise UserError(f"{label}: the pod is terminating (deletionTimestamp is set)")
        return pod
    if len(parts) == 3 and all(parts):
        ns, kind, name = parts
        return _from_workload(snapshot, ns, kind, name, label)
    raise UserError(f"--pod: expected NAMESPACE/NAME or NAMESPACE/deploy|sts|rs/NAME, got {target!r}")


def _from_workload(snapshot: ClusterSnapshot, ns: str, kind: str, name: str, label: str) -> Pod:
    kinds = {"deploy": "deployment", "deployment": "deployment", "sts": "statefulset", "statefulset": "statefulset",
             "rs": "replicaset", "replicaset": "replicaset"}  # fmt: skip
    which = kinds.get(kind.lower())
    if which is None:
        raise UserError(f"{label}: {kind!r} is not deploy, sts or rs")
    owner: OwnerRef | None
    if which == "deployment":
        dep = snapshot.deployments.get((ns, name))
        if dep is None:
            raise UserError(f"{label}: no such Deployment in the dump")
        # The newest ReplicaSet whose template is the Deployment's: its pods carry its hash label.
        owned = [
            rs
            for rs in snapshot.replicasets.values()
            if rs.namespace == ns
            and rs.owner is not None
            and rs.owner.name == name
            and rs.template == dep.template
        ]
        if owned:
            rs = max(owned, key=lambda r: (r.revision, r.name))
            labels, spec = rs.template_labels, rs.template
            owner = OwnerRef("ReplicaSet", rs.name, rs.uid, "apps/v1")
        else:
            labels, spec, owner = dep.template_labels, dep.template, None
    elif which == "statefulset":
        sts = snapshot.statefulsets.get((ns, name))
        if sts is None:
            raise UserError(f"{label}: no such StatefulSet in the dump")
        labels, spec = sts.template_labels, sts.template
        owner = OwnerRef("StatefulSet", sts.name, sts.uid, "apps/v1")
    else:
        found = snapshot.replicasets.get((ns, name))
        if found is None:
            raise UserError(f"{label}: no such ReplicaSet in the dump")
        labels, spec = found.template_labels, found.template
        owner = OwnerRef("ReplicaSet", found.name, found.uid, "apps/v1")
    return Pod(
        namespace=ns,
        name=f"{name}-next",
        uid=f"unstick-next-{ns}-{name}",
        labels=labels,
        spec=replace(spec, node_name=""),
        owner=owner,
    )


class PlaceError(Exception):
    """A placement question that cannot be answered: one line, and the exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Answer:
    """What ``place`` prints: the JSON contract's document, the pod placed and the
    simulation behind it (the human rendering reads its rows and phase)."""

    doc: dict[str, Any]
    pod: Pod
    result: Any


def answer(
    snapshot: ClusterSnapshot,
    target: str,
    *,
    replicas: int | None,
    profiles: Mapping[str, Any] | None,
    config_name: str | None,
    kube_version: str | None,
    label: str | None = None,
) -> Answer:
    """Place ``target`` (``NS/NAME`` or ``NS/deploy|sts|rs/NAME``) on ``snapshot``:
    the one code path of ``unstick place`` (dumps) and ``kubectl unstick place``
    (live). Raises :class:`PlaceError` with the exit code."""
    from analyzers.simulator.schedconfig import profile_for
    from analyzers.simulator.scoring import ScoreError
    from analyzers.simulator.scoring.placement import place, placement_json, rank

    check_replicas(replicas)
    label = label or f"--pod {target}"
    try:
        pod = target_pod(snapshot, target, label)
    except UserError as exc:
        raise PlaceError(str(exc)) from None
    profile = profile_for(profiles, pod.spec.scheduler_name)
    if profile is None:
        raise PlaceError(
            f"{label}: schedulerName {pod.spec.scheduler_name!r} names no profile of "
            + (config_name or "the default configuration")
            + ": no scheduler would pick this pod up"
        )
    current = pod.node_name
    if current:
        # "If it were scheduled now": the pod leaves its node, then is scheduled anew.
        snapshot = snapshot.replace(remove=[("pods", pod.key)])
    try:
        result = place(snapshot, pod, replicas or 1, profile, kube_version=kube_version)
    except ScoreError as exc:
        raise PlaceError(f"scheduling error: {exc}", EXIT_SCHEDULING_ERROR) from None
    doc = placement_json(result, pod, profile, replicas)
    if current:
        doc["current_node"] = current
        ranked = [r.node for r in rank(result.first.rows)]
        doc["current_rank"] = ranked.index(current) + 1 if current in ranked else None
    return Answer(doc, pod, result)


def emit(found: Answer, *, as_json: bool) -> None:
    """Print an answer: the JSON contract, or the human report."""
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(found.doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_human(found.doc, found.pod, found.result)


def emit_error(message: str, *, as_json: bool, prefix: str) -> None:
    """One line on stderr and, with ``--json``, ``{"error": ...}`` on stdout."""
    if as_json:
        sys.stdout.buffer.write(orjson.dumps({"error": message}) + b"\n")
    print(f"{prefix}{message}", file=sys.stderr)


def check_replicas(replicas: int | None) -> None:
    if replicas is not None and replicas < 1:
        raise PlaceError(f"--replicas: must be at least 1, got {replicas}")


def run(args: argparse.Namespace) -> int:
    try:
        check_replicas(args.replicas)
    except PlaceError as exc:
        return _fail(args, str(exc), exc.code)
    scheduler_config = None
    if args.scheduler_config:
        try:
            scheduler_config = read_scheduler_config(args.scheduler_config)
            scheduler_config.check()
        except SchedulerConfigError as exc:
            return _fail(args, str(exc), EXIT_USAGE)
    try:
        sources = expand(args.paths)
    except DumpError as exc:
        raise UserError(str(exc)) from exc
    state = ClusterState()
    facts = DumpFacts()
    used = load_into(state, sources, facts=facts)
    if used == 0:
        raise UserError(f"no usable Kubernetes objects in {', '.join(args.paths)}")
    override = None
    if args.kube_version is not None:
        from agent.kube_version import check_kube_version

        try:
            override = check_kube_version(args.kube_version)
        except ValueError as exc:
            return _fail(args, f"--kube-version: {exc}", EXIT_USAGE)
    version, _why = facts.kube_version(override)
    state.kube_version = version
    profiles = None
    if scheduler_config is not None:
        try:
            profiles = scheduler_config.profiles(version)
        except SchedulerConfigError as exc:
            return _fail(args, str(exc), EXIT_USAGE)
    try:
        found = answer(
            state.snapshot(),
            args.pod,
            replicas=args.replicas,
            profiles=profiles,
            config_name=args.scheduler_config,
            kube_version=version,
        )
    except PlaceError as exc:
        return _fail(args, str(exc), exc.code)
    emit(found, as_json=args.json)
    return EXIT_OK


def print_human(doc: dict[str, Any], pod: Pod, result: Any) -> None:
    from analyzers.simulator.scoring.placement import rank

    first = result.first
    out = sys.stdout
    out.write(f"Placement of {doc['pod']} (profile {doc['profile']})\n")
    ranked = rank(first.rows)
    weights = dict(zip(first.phase.plugins, first.phase.weights, strict=True)) if first.phase else {}
    if ranked:
        out.write("\nFeasible nodes, best first (plugin score 0-100 x weight):\n")
        for r in ranked:
            parts = ", ".join(f"{p} {s}x{weights.get(p, 1)}" for p, s in r.scores.items())
            mark = "*" if r.node in doc["top"] else " "
            out.write(f" {mark} {r.node:<30} total {r.total:>5}   {parts}\n")
    infeasible: dict[str, list[str]] = {}
    for r in first.rows:
        if not r.feasible:
            infeasible.setdefault(r.reason or "(no reason)", []).append(r.node)
    if infeasible:
        out.write("\nInfeasible nodes, by first failing filter:\n")
        for reason, names in sorted(infeasible.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            out.write(f"   {len(names)} {reason}: {shown}\n")
    out.write("\n" + decided_sentence(first) + "\n")
    if doc.get("current_node"):
        where = doc["current_node"]
        if doc.get("current_rank"):
            out.write(
                f"It runs on {where}, which would rank {doc['current_rank']} of {len(ranked)} "
                "if it were scheduled now (its own requests taken off that node).\n"
            )
        else:
            reason = next((r.reason for r in first.rows if r.node == where), "")
            out.write(f"It runs on {where}, which would not be feasible now: {reason}\n")
    if doc["scored"] != "all":
        out.write(
            f"kube-scheduler scores only {doc['scored']} of the {len(ranked)} feasible nodes "
            "(percentageOfNodesToScore), starting where its last attempt stopped; the nodes that can win some "
            f"such window: {', '.join(doc.get('possible', []))}.\n"
        )
    if "placements" in doc:
        out.write(f"\nNext {len(doc['placements'])} replica(s), one after another:\n")
        for p in doc["placements"]:
            out.write(f"   replica {p['replica']}: {' or '.join(p['top'])}\n")
        how = doc.get("distribution_method", "")
        out.write(f"Expected replicas per node ({how}, ties broken uniformly at random):\n")
        for node, n in sorted(doc["distribution"].items(), key=lambda kv: -kv[1]):
            out.write(f"   {node:<30} {n:g}\n")


def decided_sentence(first: Any) -> str:
    """Which plugin decided: the one whose weighted score separates the winner
    from the runner-up the most."""
    phase = first.phase
    if phase is None:
        return "No node is feasible: nothing is scored."
    top = set(phase.top())
    if len(phase.nodes) == 1:
        return "Only one node is feasible: kube-scheduler binds there without scoring."
    best = max(phase.totals)
    others = [t for t in phase.totals if t != best]
    if not others:
        return f"All {len(phase.nodes)} feasible nodes tie at {best}: kube-scheduler picks one of them."
    runner = max(others)
    win = next(k for k, n in enumerate(phase.nodes) if n in top)
    rk = next(k for k, t in enumerate(phase.totals) if t == runner)
    gaps = [
        (phase.scores[j][win] * w - phase.scores[j][rk] * w, p)
        for j, (p, w) in enumerate(zip(phase.plugins, phase.weights, strict=True))
    ]
    gap, plugin = max(gaps)
    tie = f" ({len(top)} nodes tie for it)" if len(top) > 1 else ""
    return (
        f"Best total {best}{tie} against {runner} for the runner-up; {plugin} decided it "
        f"(+{gap} weighted points)."
    )
