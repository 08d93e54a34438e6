"""``kubectl unstick``: one-shot live diagnosis with the user's kubeconfig, as a kubectl plugin.

kubectl runs ``kubectl-unstick`` from ``$PATH`` for ``kubectl unstick …``. It reads only
what the question needs, through the one gateway, and prints the same report as
``unstick analyze``:

* ``pod/NAME``: the pod, its events, its owners (ReplicaSet → Deployment, …), the nodes
  and the pods bound to them (what the scheduler weighs), the namespace's budgets,
  PersistentVolumeClaims and ResourceClaims;
* ``deploy/NAME``: the Deployment, its ReplicaSets and pods (by its selector), the same
  cluster-wide placement inputs, the namespace's events, budgets and claims;
* ``node/NAME``: why a drain of it hangs: the pods on it, the budgets and workloads of
  their namespaces, whether replacements fit elsewhere; a node that is not cordoned yet is
  analysed as cordoned (the first step of ``kubectl drain``), said on stderr;
* no target: everything stuck in the namespace (``-n``, else the context's); ``-A``: in all.

ResourceClaims (``resource.k8s.io/v1``) tell which pods DynamicResources' PreEnqueue holds
back; a cluster that does not serve them (404) or a user who may not list them (403) leaves
them unjudged, said on stderr when a pod names one. Budgets over pods of custom controllers
read the controllers' ``/scale`` as the live agent does (agent.scales.ScaleReader): a
refused read (403) leaves that budget unknown, with the reason.

Flags follow kubectl (``-n``, ``-A``, ``--context``, ``--kubeconfig``, ``-o json|yaml``);
exit codes too: 0 on success, 1 on any error (``error: …`` or ``Error from server
(NotFound): …`` on stderr), as ``k8s.io/kubectl/pkg/cmd/util/helpers.go`` CheckErr does.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import yaml

if TYPE_CHECKING:
    from agent.kube.gateway import Gateway, RawObject
    from analyzers.report import Report
    from analyzers.snapshot import ClusterSnapshot, ClusterState

EXIT_OK = 0
EXIT_ERROR = 1  # kubectl's DefaultErrorExitCode

# kubectl's names and short names for the kinds a target may name.
_TARGET_KINDS = {
    "pod": "Pod",
    "pods": "Pod",
    "po": "Pod",
    "deployment": "Deployment",
    "deployments": "Deployment",
    "deploy": "Deployment",
    "deployment.apps": "Deployment",
    "deployments.apps": "Deployment",
    "node": "Node",
    "nodes": "Node",
    "no": "Node",
}
# Cluster-scoped inputs every placement question reads (small next to pods).
_CLUSTER_KINDS = ("Node", "PriorityClass", "StorageClass", "PersistentVolume")
# Per-namespace inputs for a question about something in that namespace.
_NAMESPACE_KINDS = (
    "PersistentVolumeClaim",
    "PodDisruptionBudget",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
)
_LIVE_PHASES = "status.phase!=Succeeded,status.phase!=Failed"


class PluginError(Exception):
    """Printed as kubectl prints errors; exit code 1."""


@dataclass
class Target:
    kind: str | None  # None: everything stuck in the namespace(s)
    name: str = ""


@dataclass
class Reads:
    """The objects read, and a count of requests (what ``--v`` would show)."""

    objects: list[RawObject] = field(default_factory=list)
    requests: int = 0
    # (kind, namespace) listed in full ("" namespace: all): ClusterState.mark_collected
    collected: set[tuple[str, str]] = field(default_factory=set)
    not_listed: dict[str, str] = field(default_factory=dict)  # kind -> why its list failed


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # kubectl: "error: …", exit 1 (argparse would exit 2)
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="kubectl unstick",
        description=(
            "Explain why a pod is Pending, a rollout stalls or a drain hangs, live, in kube-scheduler's terms, "
            "with verified fixes. Reads only what the question needs."
        ),
        epilog=(
            "examples:\n"
            "  kubectl unstick pod/web-7d9c -n shop\n"
            "  kubectl unstick deploy/vision-object-tracker -n vision -o yaml\n"
            "  kubectl unstick node/gpu-node-1          # why draining it hangs\n"
            "  kubectl unstick -A                       # everything stuck, every namespace"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "target", nargs="*", metavar="TYPE/NAME", help="pod/NAME, deploy/NAME or node/NAME (or TYPE NAME)"
    )
    p.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="everything stuck in every namespace")
    p.add_argument(
        "--kubeconfig", metavar="PATH", help="kubeconfig file (env KUBECONFIG; default ~/.kube/config)"
    )
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format")
    p.add_argument(
        "--request-timeout", metavar="SECONDS", type=float, default=30.0, help="per request (default 30)"
    )
    p.add_argument(
        "--scheduler-config",
        metavar="FILE",
        help="the cluster's KubeSchedulerConfiguration: its profiles (schedulerName) and disabled filters",
    )
    return p


def parse_target(words: Sequence[str]) -> Target:
    if not words:
        return Target(None)
    if len(words) == 1 and "/" in words[0]:
        kind_word, _, name = words[0].partition("/")
    elif len(words) == 2 and "/" not in words[0]:
        kind_word, name = words
    else:
        raise PluginError(
            f"expected one TYPE/NAME (pod/NAME, deploy/NAME, node/NAME), got {' '.join(words)!r}"
        )
    kind = _TARGET_KINDS.get(kind_word.lower())
    if kind is None:
        raise PluginError(
            f'the server doesn\'t have a resource type "{kind_word}" that unstick explains (pod, deploy, node)'
        )
    if not name or "/" in name:
        raise PluginError(
            f"resource name may not be empty or contain '/': {words[0] if len(words) == 1 else name!r}"
        )
    return Target(kind, name)


async def _list(gw: Gateway, reads: Reads, kind: str, **kw: Any) -> list[RawObject]:
    reads.requests += 1
    items = (await gw.list_objects(kind, **kw))["items"]
    reads.objects.extend(items)
    return items


async def _related_events(gw: Gateway, reads: Reads, pod: RawObject, namespace: str) -> None:
    """Events about what the pod waits on besides itself: its PersistentVolumeClaims (a
    provisioner's ProvisioningFailed, quoted by scheduler-error) and, for a pod Kueue
    gates, the namespace's Workloads (Kueue's Pending, quoted by scheduling-gated)."""
    spec = pod.get("spec") or {}
    claims = sorted(
        {
            (v.get("persistentVolumeClaim") or {}).get("claimName")
            for v in spec.get("volumes") or ()
            if isinstance(v, dict) and (v.get("persistentVolumeClaim") or {}).get("claimName")
        }
    )
    for claim in claims:
        await _list(
            gw,
            reads,
            "Event",
            namespace=namespace,
            field_selector=f"involvedObject.kind=PersistentVolumeClaim,involvedObject.name={claim}",
        )
    gates = [g.get("name", "") for g in spec.get("schedulingGates") or () if isinstance(g, dict)]
    if any(g.startswith("kueue.x-k8s.io/") for g in gates):
        await _list(gw, reads, "Event", namespace=namespace, field_selector="involvedObject.kind=Workload")


async def _list_claims(gw: Gateway, reads: Reads, namespace: str | None) -> list[RawObject]:
    """The ResourceClaims of ``namespace`` (None: all). A cluster that does not serve
    resource.k8s.io/v1 answers 404 and the live agent watches it without them; here a 403
    too leaves them out (unjudged), not the whole diagnosis."""
    from agent.kube.errors import Forbidden, NotFound

    reads.requests += 1
    try:
        items = (await gw.list_objects("ResourceClaim", namespace=namespace))["items"]
    except (NotFound, Forbidden) as exc:
        reads.not_listed.setdefault("ResourceClaim", str(exc))
        return []
    reads.objects.extend(items)
    reads.collected.add(("ResourceClaim", namespace or ""))
    return items


async def _placement_inputs(gw: Gateway, reads: Reads) -> None:
    """What the scheduler weighs for any pod: nodes, classes, volumes, the pods bound to nodes."""
    for kind in _CLUSTER_KINDS:
        await _list(gw, reads, kind)
    await _list(gw, reads, "Pod", field_selector=f"spec.nodeName!=,{_LIVE_PHASES}")


async def _namespace_inputs(gw: Gateway, reads: Reads, namespace: str, *, pending: bool = True) -> None:
    for kind in _NAMESPACE_KINDS:
        await _list(gw, reads, kind, namespace=namespace)
    await _list_claims(gw, reads, namespace)
    if pending:
        await _list(gw, reads, "Pod", namespace=namespace, field_selector=f"spec.nodeName=,{_LIVE_PHASES}")
    await _list(gw, reads, "Event", namespace=namespace)


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


async def read(gw: Gateway, target: Target, namespace: str | None) -> Reads:
    from agent.kube.errors import NotFound

    reads = Reads()
    try:
        if target.kind is None:
            await _placement_inputs(gw, reads)
            if namespace is None:  # -A: every namespaced input, cluster-wide
                for kind in _NAMESPACE_KINDS:
                    await _list(gw, reads, kind)
                await _list_claims(gw, reads, None)
                await _list(gw, reads, "Pod", field_selector=f"spec.nodeName=,{_LIVE_PHASES}")
                await _list(gw, reads, "Event")
            else:
                await _namespace_inputs(gw, reads, namespace)
        elif target.kind == "Pod":
            assert namespace is not None
            reads.requests += 1
            pod = await gw.get("Pod", target.name, namespace)
            await _placement_inputs(gw, reads)
            reads.objects.append(pod)
            for kind in ("PersistentVolumeClaim", "PodDisruptionBudget"):
                await _list(gw, reads, kind, namespace=namespace)
            await _list_claims(gw, reads, namespace)
            await _owners(gw, reads, pod)
            await _list(
                gw, reads, "Event", namespace=namespace, field_selector=f"involvedObject.name={target.name}"
            )
            await _related_events(gw, reads, pod, namespace)
        elif target.kind == "Deployment":
            assert namespace is not None
            reads.requests += 1
            dep = await gw.get("Deployment", target.name, namespace)
            reads.objects.append(dep)
            labels = ((dep.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            await _placement_inputs(gw, reads)
            for kind in ("PersistentVolumeClaim", "PodDisruptionBudget"):
                await _list(gw, reads, kind, namespace=namespace)
            await _list_claims(gw, reads, namespace)
            selector = _selector(labels) if labels else None
            await _list(gw, reads, "ReplicaSet", namespace=namespace, label_selector=selector)
            await _list(
                gw,
                reads,
                "Pod",
                namespace=namespace,
                label_selector=selector,
                field_selector="spec.nodeName=",
            )
            await _list(gw, reads, "Event", namespace=namespace)
        else:  # Node: why would a drain of it hang
            reads.requests += 1
            await gw.get("Node", target.name)
            await _placement_inputs(gw, reads)
            on_node = [
                o
                for o in reads.objects
                if o.get("kind") == "Pod" and (o.get("spec") or {}).get("nodeName") == target.name
            ]
            for ns in sorted({(o.get("metadata") or {}).get("namespace", "") for o in on_node}):
                await _namespace_inputs(gw, reads, ns)
    except NotFound as exc:
        raise PluginError(f"Error from server (NotFound): {exc}") from None
    return reads


async def _owners(gw: Gateway, reads: Reads, obj: RawObject) -> None:
    """The owner chain of ``obj`` (controller references), read one by one."""
    from agent.kube.errors import NotFound

    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if not ref.get("controller"):
            continue
        kind = ref.get("kind")
        if kind not in ("ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "Job"):
            continue
        reads.requests += 1
        try:
            owner = await gw.get(kind, ref.get("name", ""), meta.get("namespace"))
        except NotFound:
            continue
        reads.objects.append(owner)
        await _owners(gw, reads, owner)


def _as_cordoned(objects: list[RawObject], node: str) -> bool:
    """Mark ``node`` unschedulable in the read objects (the first step of a drain); True if it was not."""
    for obj in objects:
        if obj.get("kind") == "Node" and (obj.get("metadata") or {}).get("name") == node:
            spec = obj.setdefault("spec", {})
            if spec.get("unschedulable"):
                return False
            spec["unschedulable"] = True
            return True
    return False


def state_for(reads: Reads, kube_version: str | None) -> ClusterState:
    """The read objects as a ClusterState, with the kinds listed in full marked collected."""
    from analyzers.snapshot import ClusterState

    state = ClusterState(kube_version)
    for obj in reads.objects:
        state.apply_object(obj, source="the API server")
    for kind, namespace in sorted(reads.collected):
        state.mark_collected(kind, namespace)
    return state


def claim_notes(snapshot: ClusterSnapshot, reads: Reads) -> list[str]:
    """One note when a pending pod names a ResourceClaim that could not be listed."""
    from analyzers.simulator.dra import unjudged_claims

    unjudged = unjudged_claims(snapshot)
    if not unjudged:
        return []
    pod, claim = unjudged[0]
    more = f" (and {len(unjudged) - 1} more)" if len(unjudged) > 1 else ""
    why = reads.not_listed.get("ResourceClaim", "not listed")
    return [
        f"pod {pod.namespace}/{pod.name} names ResourceClaim {claim}{more}, but ResourceClaims could not "
        f"be listed ({why}): whether it exists is not judged"
    ]


def report_for(
    state: ClusterState,
    target: Target,
    *,
    kube_version: str | None,
    now: float,
    profiles: Mapping[str, Any] | None = None,
) -> tuple[Report, int]:
    from analyzers.findings import ObjectRef
    from analyzers.report import build_report

    snapshot = state.snapshot()
    pod_filter = None
    scope = None
    if target.kind == "Pod":
        pods = [p for p in snapshot.pods.values() if p.name == target.name]
        name = target.name
        pod_filter = lambda pod: pod.name == name  # noqa: E731
        if pods:
            scope = frozenset({snapshot.workload_of(pods[0]).ref, ObjectRef("Pod", pods[0].namespace, name)})
    elif target.kind == "Deployment":
        dep = next(iter(d for d in snapshot.deployments.values() if d.name == target.name), None)
        if dep is not None:
            scope = frozenset({ObjectRef("Deployment", dep.namespace, dep.name)})
    report = build_report(
        snapshot, now=now, kube_version=kube_version, pod_filter=pod_filter, scope=scope, profiles=profiles
    )
    if scope is not None:
        findings = tuple(f for f in report.findings if f.subject in scope)
        deployments = tuple(
            d
            for d in report.deployments
            if ObjectRef("Deployment", d.deployment.namespace, d.deployment.name) in scope
        )
        from dataclasses import replace

        report = replace(report, findings=findings, deployments=deployments)
    return report, len(snapshot.nodes)


async def diagnose(args: argparse.Namespace) -> tuple[Report, int, list[str]]:
    from agent.kube.errors import ConfigError, KubeError
    from agent.kube.gateway import Gateway
    from agent.runner import minor_version
    from agent.scales import ScaleReader

    target = parse_target(args.target)
    if args.all_namespaces and target.kind is not None:
        raise PluginError("a resource cannot be retrieved by name across all namespaces")
    profiles = None
    if args.scheduler_config:
        from agent.scheduler_config import SchedulerConfigError, load_scheduler_config

        try:
            profiles = load_scheduler_config(args.scheduler_config)
        except SchedulerConfigError as exc:
            raise PluginError(f"error: --scheduler-config {exc}") from None
    notes: list[str] = []
    gw = Gateway(
        args.kubeconfig, args.context, request_timeout=args.request_timeout, user_agent="kubectl-unstick/0.1"
    )
    try:
        try:
            await gw.open()
        except ConfigError as exc:
            raise PluginError(f"error: {exc}") from None
        namespace = (
            None
            if args.all_namespaces or target.kind == "Node"
            else (args.namespace or gw.namespace or "default")
        )
        try:
            version = minor_version(await gw.version())
            reads = await read(gw, target, namespace)
        except KubeError as exc:
            raise PluginError(f"error: {exc}") from None
        if target.kind == "Node" and _as_cordoned(reads.objects, target.name):
            notes.append(
                f"node/{target.name} is not cordoned: analysed as `kubectl drain` would leave it (cordoned)"
            )
        state = state_for(reads, version)
        # Budgets over pods of custom controllers: their /scale, read as the live agent
        # reads it (a refusal is an unknown reading with the reason, never an error here).
        await ScaleReader(gw).refresh(state)
    finally:
        await gw.close()
    notes.extend(claim_notes(state.snapshot(), reads))
    report, nodes = report_for(state, target, kube_version=version, now=time.time(), profiles=profiles)
    return report, nodes, notes


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from agent.commands.analyze import print_human
    from agent.logs import configure_logging

    configure_logging("ERROR", "text")  # the report and kubectl-style errors only
    try:
        report, nodes, notes = asyncio.run(diagnose(args))
    except PluginError as exc:
        message = str(exc)
        print(
            message if message.startswith(("error: ", "Error from server")) else f"error: {message}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    try:
        if args.output == "json":
            sys.stdout.buffer.write(orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2) + b"\n")
        elif args.output == "yaml":
            yaml.safe_dump(report.as_dict(), sys.stdout, sort_keys=False, allow_unicode=True)
        else:
            print_human(report, nodes, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
