"""``kubectl unstick``: one-shot live diagnosis with the user's kubeconfig, as a kubectl plugin.

kubectl runs ``kubectl-unstick`` from ``$PATH`` for ``kubectl unstick …``. It reads only
what the question needs, through the one gateway, and prints the same report as
``unstick analyze``:

* ``pod/NAME``: the pod, its events, its owners (ReplicaSet → Deployment, …), the nodes
  and the pods bound to them (what the scheduler weighs), the namespace's budgets,
  PersistentVolumeClaims and ResourceClaims;
* ``deploy/NAME``: the Deployment, its ReplicaSets and pods (by its selector), the same
  cluster-wide placement inputs, the namespace's events, budgets and claims;
* ``job/``, ``sts/``, ``ds/``, ``rs/``, ``rc/NAME``: the object (and, for a ReplicaSet, its
  Deployment), every pod its ``spec.selector`` selects, the placement inputs, the namespace's
  budgets, claims and events; findings about its workload only;
* ``cronjob/NAME``: the CronJob (existence), the namespace's Jobs it owns and their pods, as
  for ``job/`` (findings name the Jobs: a Job's pods are what the scheduler sees);
* ``pdb/NAME``: the budget, what it weighs (the pods it selects, their workloads, the
  namespace's other budgets and eviction events) and the placement inputs; findings that
  name this budget, and the rollouts of the Deployments whose pods it selects;
* every kind in kubectl's spellings: plural (``jobs/x``), short (``sts/x``, ``cj/x``) and
  group-qualified (``statefulset.apps/x``, ``deployments.v1.apps/x``);
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
    from analyzers.findings import ObjectRef
    from analyzers.gpu_capacity import GpuRow
    from analyzers.report import Report
    from analyzers.snapshot import ClusterSnapshot, ClusterState

EXIT_OK = 0
EXIT_ERROR = 1  # kubectl's DefaultErrorExitCode
EXIT_USAGE = 2  # a flag given a bad value

# The kinds a target may name, with every spelling kubectl accepts for them: the kind, its
# plural and singular resource names, its short names and ``<resource>.<group>``
# (kubectl api-resources; short names from each registry's ShortNames,
# pkg/registry/*/storage/storage.go).
_KIND_SPELLINGS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # kind: (group, plural, short names)
    "Pod": ("", "pods", ("po",)),
    "Deployment": ("apps", "deployments", ("deploy",)),
    "Node": ("", "nodes", ("no",)),
    "ReplicaSet": ("apps", "replicasets", ("rs",)),
    "StatefulSet": ("apps", "statefulsets", ("sts",)),
    "DaemonSet": ("apps", "daemonsets", ("ds",)),
    "ReplicationController": ("", "replicationcontrollers", ("rc",)),
    "Job": ("batch", "jobs", ()),
    "CronJob": ("batch", "cronjobs", ("cj",)),
    "PodDisruptionBudget": ("policy", "poddisruptionbudgets", ("pdb",)),
}


def _spellings() -> dict[str, str]:
    table: dict[str, str] = {}
    for kind, (group, plural, shorts) in _KIND_SPELLINGS.items():
        singular = kind.lower()
        for word in (singular, plural, *shorts):
            table[word] = kind
            if group:
                table[f"{word}.{group}"] = kind
        table[f"{plural}.{group}" if group else plural] = kind
        if group:
            # fully qualified with the version, as kubectl also accepts (deployments.v1.apps)
            table[f"{plural}.v1.{group}"] = kind
            table[f"{singular}.v1.{group}"] = kind
    return table


_TARGET_KINDS = _spellings()
# The workload kinds whose pods a target reads through the object's own selector.
_SELECTOR_KINDS = ("ReplicaSet", "StatefulSet", "DaemonSet", "ReplicationController", "Job")
_TARGET_HELP = "pod, deploy, sts, ds, rs, rc, job, cronjob, pdb, node"
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
    owned_jobs: tuple[str, ...] = ()  # cronjob/NAME: the Jobs it owns


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
            "  kubectl unstick job/train-7 -n ml           # why its pods wait\n"
            "  kubectl unstick statefulset.apps/cassandra -n db\n"
            "  kubectl unstick pdb/web -n shop           # which evictions it blocks, and why\n"
            "  kubectl unstick node/gpu-node-1          # why draining it hangs\n"
            "  kubectl unstick -A                       # everything stuck, every namespace\n"
            "  kubectl unstick place deploy/web -n shop --replicas 20   # where the next pods land, and why"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "target",
        nargs="*",
        metavar="TYPE/NAME",
        help=(
            "pod/, deploy/, sts/, ds/, rs/, rc/, job/, cronjob/, pdb/ or node/NAME (or TYPE NAME; kubectl's "
            "plural, short and group-qualified names work too: jobs/x, statefulset.apps/x)"
        ),
    )
    p.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="everything stuck in every namespace")
    add_connection_options(p)
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format")
    p.add_argument(
        "--no-color",
        action="store_true",
        help="plain ASCII text output: the grid without box drawing (also when stdout is not UTF-8)",
    )
    p.add_argument(
        "--scheduler-config",
        metavar="FILE",
        help="the cluster's KubeSchedulerConfiguration: its profiles (schedulerName) and disabled filters",
    )
    return p


def add_connection_options(p: argparse.ArgumentParser) -> None:
    """kubectl's connection flags, shared by ``kubectl unstick`` and ``kubectl unstick place``."""
    p.add_argument(
        "--kubeconfig", metavar="PATH", help="kubeconfig file (env KUBECONFIG; default ~/.kube/config)"
    )
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")
    p.add_argument(
        "--request-timeout", metavar="SECONDS", default="30", help="per request: 30, 1.5, 2m (default 30)"
    )


def parse_target(words: Sequence[str]) -> Target:
    if not words:
        return Target(None)
    if len(words) == 1 and "/" in words[0]:
        kind_word, _, name = words[0].partition("/")
    elif len(words) == 2 and "/" not in words[0]:
        kind_word, name = words
    else:
        raise PluginError(f"expected one TYPE/NAME ({_TARGET_HELP}: e.g. job/NAME), got {' '.join(words)!r}")
    kind = _TARGET_KINDS.get(kind_word.lower())
    if kind is None:
        raise PluginError(
            f'the server doesn\'t have a resource type "{kind_word}" that unstick explains ({_TARGET_HELP})'
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
    """The ResourceClaims and ResourceClaimTemplates of ``namespace`` (None: all), and once
    the DeviceClasses and ResourceSlices the structured allocator reads. A cluster that does
    not serve resource.k8s.io/v1 answers 404 and the live agent watches it without them;
    here a 403 too leaves them out (unjudged), not the whole diagnosis."""
    from agent.kube.errors import Forbidden, NotFound

    claims: list[RawObject] = []
    wanted = [("ResourceClaim", namespace), ("ResourceClaimTemplate", namespace)]
    wanted += [(kind, None) for kind in ("DeviceClass", "ResourceSlice") if (kind, "") not in reads.collected]
    for kind, ns in wanted:
        if kind in reads.not_listed:
            continue
        reads.requests += 1
        try:
            items = (await gw.list_objects(kind, namespace=ns))["items"]
        except (NotFound, Forbidden) as exc:
            reads.not_listed.setdefault(kind, str(exc))
            continue
        reads.objects.extend(items)
        reads.collected.add((kind, ns or ""))
        if kind == "ResourceClaim":
            claims = items
    return claims


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
        elif target.kind in _SELECTOR_KINDS:
            assert namespace is not None
            reads.requests += 1
            obj = await gw.get(target.kind, target.name, namespace)
            reads.objects.append(obj)
            await _owners(gw, reads, obj)  # a ReplicaSet's Deployment: the workload findings name
            await _workload_inputs(gw, reads, namespace, [obj])
        elif target.kind == "CronJob":
            assert namespace is not None
            reads.requests += 2
            await gw.get("CronJob", target.name, namespace)  # NotFound says so, as kubectl would
            jobs = [
                j
                for j in (await gw.list_objects("Job", namespace=namespace))["items"]
                if _owned_by(j, "CronJob", target.name)
            ]
            reads.objects.extend(jobs)
            reads.owned_jobs = tuple((j.get("metadata") or {}).get("name", "") for j in jobs)
            await _workload_inputs(gw, reads, namespace, jobs)
        elif target.kind == "PodDisruptionBudget":
            assert namespace is not None
            reads.requests += 1
            await gw.get("PodDisruptionBudget", target.name, namespace)
            # What the budget weighs: every pod it selects (bound ones are among the placement
            # inputs), their workloads, the namespace's other budgets and its eviction events.
            await _placement_inputs(gw, reads)
            await _namespace_inputs(gw, reads, namespace)
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


def _owned_by(obj: RawObject, kind: str, name: str) -> bool:
    return any(
        ref.get("kind") == kind and ref.get("name") == name and ref.get("controller")
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
    )


def label_selector(obj: RawObject) -> str | None:
    """``spec.selector`` of a workload as a label selector string (the API server's syntax,
    ``k8s.io/apimachinery/pkg/labels/selector.go``): a ReplicationController's plain map, or
    ``matchLabels`` and ``matchExpressions`` (In, NotIn, Exists, DoesNotExist). None: no
    selector (every pod of the namespace)."""
    selector = (obj.get("spec") or {}).get("selector")
    if not isinstance(selector, dict) or not selector:
        return None
    expressions: list[dict[str, Any]] = []
    if obj.get("kind") == "ReplicationController":
        labels = selector
    else:
        labels = selector.get("matchLabels") or {}
        expressions = selector.get("matchExpressions") or []
    terms = [f"{k}={v}" for k, v in sorted(labels.items())]
    for expr in expressions:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            terms.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            terms.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            terms.append(key)
        elif op == "DoesNotExist":
            terms.append(f"!{key}")
    return ",".join(terms) or None


async def _workload_inputs(gw: Gateway, reads: Reads, namespace: str, workloads: list[RawObject]) -> None:
    """What the analyzers need about workloads of one namespace: the placement inputs, the
    namespace's claims and budgets, every pod each workload selects (pending and bound:
    budgets count the bound ones) and the namespace's events."""
    await _placement_inputs(gw, reads)
    for kind in ("PersistentVolumeClaim", "PodDisruptionBudget"):
        await _list(gw, reads, kind, namespace=namespace)
    await _list_claims(gw, reads, namespace)
    for selector in dict.fromkeys(label_selector(w) for w in workloads):
        await _list(gw, reads, "Pod", namespace=namespace, label_selector=selector)
    await _list(gw, reads, "Event", namespace=namespace)


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


def _scope_of(
    snapshot: ClusterSnapshot, target: Target, namespace: str, owned_jobs: tuple[str, ...]
) -> frozenset[ObjectRef]:
    """The workloads a target names, as findings name them: the object itself, and the
    workload its pods belong to (a ReplicaSet's Deployment; a CronJob's Jobs)."""
    from analyzers.findings import ObjectRef

    assert target.kind is not None
    owners = {(target.kind, target.name)} if target.kind != "CronJob" else {("Job", j) for j in owned_jobs}
    refs = {ObjectRef(kind, namespace, name) for kind, name in owners}
    for pod in snapshot.pods.values():
        if (
            pod.namespace == namespace
            and pod.owner is not None
            and (pod.owner.kind, pod.owner.name) in owners
        ):
            refs.add(snapshot.workload_of(pod).ref)
    return frozenset(refs)


def report_for(
    state: ClusterState,
    target: Target,
    *,
    kube_version: str | None,
    now: float,
    namespace: str | None = None,
    owned_jobs: tuple[str, ...] = (),
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
    elif target.kind in (*_SELECTOR_KINDS, "CronJob"):
        scope = _scope_of(snapshot, target, namespace or "default", owned_jobs)
    report = build_report(
        snapshot, now=now, kube_version=kube_version, pod_filter=pod_filter, scope=scope, profiles=profiles
    )
    if target.kind == "PodDisruptionBudget":
        from dataclasses import replace as replaced

        name = target.name
        findings = tuple(
            f
            for f in report.findings
            if (f.subject.kind, f.subject.name) == ("PodDisruptionBudget", name)
            or any(isinstance(p, dict) and p.get("name") == name for p in f.evidence.get("pdbs") or ())
        )
        # The Deployments whose pods the budget selects: the rollouts it can hold up.
        from analyzers.disruption import selected_pods

        budget = snapshot.pdbs.get((namespace or "default", name))
        weighed = (
            {snapshot.workload_of(p).ref for p in selected_pods(snapshot, budget)} if budget is not None else set()
        )
        deployments = tuple(
            d
            for d in report.deployments
            if ObjectRef("Deployment", d.deployment.namespace, d.deployment.name) in weighed
        )
        report = replaced(report, findings=findings, deployments=deployments)
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


async def diagnose(args: argparse.Namespace) -> tuple[Report, int, list[str], list[GpuRow]]:
    """(the report, how many nodes were read, notes for stderr, the GPU capacity rows)."""
    from agent.kube.errors import ConfigError, KubeError
    from agent.kube.gateway import Gateway
    from agent.runner import minor_version
    from agent.scales import ScaleReader

    target = parse_target(args.target)
    if args.all_namespaces and target.kind is not None:
        raise PluginError("a resource cannot be retrieved by name across all namespaces")
    from agent.scheduler_config import SchedulerConfigError, read_scheduler_config

    scheduler_config = None
    if args.scheduler_config:
        try:
            scheduler_config = read_scheduler_config(args.scheduler_config)
            scheduler_config.check()
        except SchedulerConfigError as exc:
            raise PluginError(f"error: --scheduler-config {exc}") from None
    notes: list[str] = []
    gw = Gateway(
        args.kubeconfig, args.context, request_timeout=request_timeout(args), user_agent="kubectl-unstick/0.1"
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
    profiles = None
    if scheduler_config is not None:
        try:
            profiles = scheduler_config.profiles(version)
        except SchedulerConfigError as exc:
            raise PluginError(f"error: --scheduler-config {exc}") from None
    notes.extend(claim_notes(state.snapshot(), reads))
    report, nodes = report_for(
        state,
        target,
        kube_version=version,
        now=time.time(),
        namespace=namespace,
        owned_jobs=reads.owned_jobs,
        profiles=profiles,
    )
    from analyzers.gpu_capacity import gpu_capacity

    return report, nodes, notes, gpu_capacity(state.snapshot())


def request_timeout(args: argparse.Namespace) -> float:
    """``--request-timeout`` in seconds (a bounded duration; raises bounds.OutOfBounds)."""
    from analyzers import bounds

    if isinstance(args.request_timeout, float):
        return args.request_timeout  # already parsed by main()
    return bounds.seconds("--request-timeout", args.request_timeout, minimum=0.001, maximum=3600.0)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["place"]:  # kubectl unstick place ...: agent/commands/kubectl_place.py
        from agent.commands.kubectl_place import main as place_main

        return place_main(argv[1:])
    args = build_parser().parse_args(argv)
    from agent.commands.analyze import print_gpu_capacity, print_human
    from agent.logs import configure_logging
    from analyzers import bounds

    try:
        args.request_timeout = request_timeout(args)
    except bounds.OutOfBounds as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    configure_logging("ERROR", "text")  # the report and kubectl-style errors only
    try:
        report, nodes, notes, gpus = asyncio.run(diagnose(args))
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
        if args.output in ("json", "yaml"):
            doc = report.as_dict()
            doc["gpu_capacity"] = [row.as_dict() for row in gpus]  # as `unstick analyze --json`
            if args.output == "json":
                sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
            else:
                yaml.safe_dump(doc, sys.stdout, sort_keys=False, allow_unicode=True)
        else:
            from agent.terminal import wants_unicode

            print_human(
                report,
                nodes,
                sys.stdout,
                unicode=wants_unicode(getattr(sys.stdout, "encoding", None), args.no_color),
            )
            print_gpu_capacity(gpus, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
