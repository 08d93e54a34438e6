"""``unstick analyze PATH...``: explain every unscheduled pod, stalled rollout
and blocked drain in a dump of ``kubectl get … -o json|yaml`` output."""

from __future__ import annotations

import argparse
import gc
import sys
import textwrap
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

import orjson
import yaml

from agent.cli import EXIT_OK, UserError
from agent.dumps import DumpError, DumpFacts, expand, iter_clusters, load_into
from agent.kube_version import check_kube_version
from agent.terminal import Glyphs, grid_lines, printable, wants_unicode
from analyzers.grid import build_grid
from analyzers.ingest import parse_time
from analyzers.snapshot import ClusterSnapshot, ClusterState

if TYPE_CHECKING:
    from analyzers.report import PodReport, Report
    from analyzers.simulator.results import PodVerdict

# Above this many files, or when stderr is a terminal, show progress on stderr.
PROGRESS_MIN_FILES = 20


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "analyze",
        help="analyse a dump of kubectl JSON/YAML: pending pods, rollouts, PDBs, root causes",
        description=(
            "Read Kubernetes objects as `kubectl get … -o json|yaml` prints them (files, folders, or - for stdin), "
            "simulate kube-scheduler for every unscheduled pod, compare with the scheduler's own message, and "
            "report root causes with verified remedies."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="file or folder of JSON/YAML; - reads stdin")
    p.add_argument("--pod", metavar="NS/NAME", help="only this pod (and findings about it)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON document")
    fmt.add_argument("--yaml", action="store_true", help="print YAML")
    p.add_argument(
        "--each", action="store_true", help="treat every file as its own cluster; one JSON document per line"
    )
    p.add_argument(
        "--kube-version",
        metavar="X.Y",
        help="kube-scheduler version to word messages as (1.18-1.38); default: inferred from the dump "
        "(API server version, nodes' kubeletVersion, the scheduler's wording), else 1.33",
    )
    p.add_argument(
        "--now",
        metavar="RFC3339",
        help="time of the analysis, for ages (default: the dump's latest timestamp, else the current time)",
    )
    p.add_argument(
        "--eviction-log",
        metavar="FILE",
        help="output of a hanging `kubectl drain` (any text with eviction errors); - reads stdin",
    )
    p.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None, help="progress on stderr"
    )
    p.add_argument(
        "--no-color",
        action="store_true",
        help="plain ASCII human output: the grid without box drawing (also when stdout is not UTF-8)",
    )
    p.add_argument(
        "--scheduler-config",
        metavar="FILE",
        help="the cluster's KubeSchedulerConfiguration: its profiles (schedulerName) and disabled filters",
    )
    p.set_defaults(func=run)


def _scheduler_config(args: argparse.Namespace) -> Any:
    """The ``--scheduler-config`` file, read and checked as far as no release is known yet."""
    if not getattr(args, "scheduler_config", None):
        return None
    from agent.scheduler_config import SchedulerConfigError, read_scheduler_config

    try:
        config = read_scheduler_config(args.scheduler_config)
        config.check()
    except SchedulerConfigError as exc:
        raise UserError(str(exc)) from None
    return config


def _profiles(config: Any, kube_version: str | None) -> Any:
    """The file's profiles as the dump's release validates them."""
    if config is None:
        return None
    from agent.scheduler_config import SchedulerConfigError

    try:
        return config.profiles(kube_version)
    except SchedulerConfigError as exc:
        raise UserError(str(exc)) from None


def _now(args: argparse.Namespace, facts: DumpFacts) -> tuple[float, str]:
    """The time ages are counted to, and where it comes from."""
    if args.now is not None:
        value = parse_time(args.now)
        if value is None:
            raise UserError(f"--now: not an RFC 3339 time: {args.now!r}")
        return value, "--now"
    if facts.latest is not None:
        return facts.latest, "the dump's latest timestamp"
    return time.time(), "the current time (the dump has no timestamps)"


def _kube_version(args: argparse.Namespace) -> str | None:
    if args.kube_version is None:
        return None
    try:
        return check_kube_version(args.kube_version)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def input_warnings(snapshot: ClusterSnapshot) -> list[str]:
    """What is odd about a dump as a whole: pods bound to nodes it does not
    hold, pending pods with no Node objects to simulate them against."""
    warnings = []
    missing: dict[str, list[str]] = {}
    for pod in snapshot.pods.values():
        if pod.node_name and pod.node_name not in snapshot.nodes and pod.phase not in ("Succeeded", "Failed"):
            missing.setdefault(pod.node_name, []).append(f"{pod.namespace}/{pod.name}")
    if snapshot.nodes:
        for node, pods in sorted(missing.items()):
            more = f" and {len(pods) - 3} more" if len(pods) > 3 else ""
            warnings.append(
                f"pod {', '.join(sorted(pods)[:3])}{more} bound to node {node}, which is not in the dump: "
                "its requests are not counted on any node"
            )
    pending = sum(1 for p in snapshot.pods.values() if not p.node_name and p.phase == "Pending")
    if not snapshot.nodes and pending:
        warnings.append(
            f"the dump holds {pending} pending pod(s) but no Node objects: nothing to simulate them against; "
            "add `kubectl get nodes -o json` (the scheduler's own message is shown as it is)"
        )
    from analyzers.simulator.dra import unjudged_claims

    unjudged = unjudged_claims(snapshot)
    if unjudged:
        named = sorted({f"{pod.namespace}/{pod.name} names ResourceClaim {claim}" for pod, claim in unjudged})
        more = f" (and {len(named) - 1} more)" if len(named) > 1 else ""
        warnings.append(
            f"claims not in the dump: pod {named[0]}{more}, and the dump holds no ResourceClaims, so whether "
            "a claim is missing is not judged; add `kubectl get resourceclaims -A -o json`"
        )
    with_claims = [p for p in snapshot.unscheduled_pods() if p.spec.resource_claims]
    if with_claims and not snapshot.holds_every("ResourceSlice", ""):
        warnings.append(
            f"the dump holds no ResourceSlices but {len(with_claims)} pending pod(s) use ResourceClaims: which devices "
            "they could get is not judged (never guessed); add "
            "`kubectl get deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates -A -o json`"
        )
    from analyzers.simulator.volumes import unchecked_volume_kinds

    lacking = unchecked_volume_kinds(snapshot)
    if lacking:
        mounting = sum(1 for p in snapshot.unscheduled_pods() if p.spec.pvc_names)
        warnings.append(
            f"the dump holds no {', '.join(lacking)} objects but {mounting} pending pod(s) mount claims: what their "
            "volumes need of them is not checked (never called missing); add `kubectl get pvc,pv,storageclass -A -o json`"
        )
    return warnings


def _pod_filter(args: argparse.Namespace) -> Callable[[Any], bool] | None:
    if not args.pod:
        return None
    if args.pod.count("/") != 1 or not all(args.pod.split("/")):
        raise UserError(f"--pod: expected NAMESPACE/NAME, got {args.pod!r}")
    ns, name = args.pod.split("/")
    return lambda pod: pod.namespace == ns and pod.name == name


def _eviction_messages(path: str | None) -> tuple[dict[str, Any], ...]:
    """Eviction failures from drain output: one parsed message per line that has one."""
    if path is None:
        return ()
    from analyzers.messages import EVICTION, parse_message

    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
    except OSError as exc:
        raise UserError(f"--eviction-log {path}: {exc.strerror or exc}") from exc
    found = []
    for line in text.splitlines():
        parsed = parse_message(line)
        if parsed.kind == EVICTION and parsed.eviction is not None:
            found.append(parsed.eviction.as_dict())
    if not found:
        print(f"unstick: warning: --eviction-log {path}: no eviction errors found in it", file=sys.stderr)
    return tuple(found)


def _progress_printer(enabled: bool) -> Callable[[int, int, int], None] | None:
    if not enabled:
        return None

    def show(done: int, total: int, objects: int) -> None:
        width = 30
        filled = int(width * done / total) if total else width
        sys.stderr.write(
            f"\rloading [{'#' * filled}{'.' * (width - filled)}] {done}/{total} files, {objects:,} objects"
        )
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _warn(message: str) -> None:
    print(f"unstick: warning: {printable(message, keep_newlines=False)}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from analyzers.report import build_report  # the simulator and rules: loaded only when used

    override = _kube_version(args)
    if args.now is not None and parse_time(args.now) is None:
        raise UserError(f"--now: not an RFC 3339 time: {args.now!r}")
    pod_filter = _pod_filter(args)
    scheduler_config = _scheduler_config(args)
    if args.eviction_log == "-" and "-" in args.paths:
        raise UserError("stdin cannot be both a dump and the --eviction-log")
    evictions = _eviction_messages(args.eviction_log)
    try:
        sources = expand(args.paths)
    except DumpError as exc:
        raise UserError(str(exc)) from exc
    if args.each:
        for source, state, used, facts in iter_clusters(sources):
            doc: dict[str, Any] = {"source": source.name}
            if used == 0:
                doc["error"] = f"{source.name}: no usable Kubernetes objects"
                doc["warnings"] = state.warnings
            else:
                now, now_source = _now(args, facts)
                version, why = facts.kube_version(override)
                snapshot = state.snapshot()
                try:
                    profiles = _profiles(scheduler_config, version)
                except UserError as exc:
                    doc["error"] = str(exc)
                    sys.stdout.buffer.write(orjson.dumps(doc) + b"\n")
                    continue
                doc.update(
                    build_report(
                        snapshot, now=now, kube_version=version, pod_filter=pod_filter, profiles=profiles
                    ).as_dict()
                )
                doc["kube_version"] = {"version": version, "source": why}
                doc["now"] = {"time": _iso(now), "source": now_source}
                doc["input_warnings"] = [*state.warnings, *input_warnings(snapshot)]
            sys.stdout.buffer.write(orjson.dumps(doc) + b"\n")
        return EXIT_OK

    state = ClusterState()
    facts = DumpFacts()
    show = (
        args.progress
        if args.progress is not None
        else (len(sources) >= PROGRESS_MIN_FILES and sys.stderr.isatty())
    )
    used = load_into(state, sources, progress=_progress_printer(show), facts=facts)
    for warning in state.warnings:
        _warn(warning)
    if used == 0:
        raise UserError(f"no usable Kubernetes objects in {', '.join(args.paths)}")
    version, why = facts.kube_version(override)
    profiles = _profiles(scheduler_config, version)
    now, now_source = _now(args, facts)
    state.kube_version = version
    snapshot = state.snapshot()
    for warning in input_warnings(snapshot):
        _warn(warning)
    # The loaded objects live until exit: keep the cyclic collector from walking
    # them again and again while the analysis allocates (seconds on big dumps).
    gc.freeze()
    report = build_report(
        snapshot,
        now=now,
        kube_version=version,
        pod_filter=pod_filter,
        eviction_messages=evictions,
        profiles=profiles,
    )
    if (
        args.pod
        and not report.pods
        and not any(p.name == args.pod.split("/")[1] for p in snapshot.pods.values())
    ):
        raise UserError(f"--pod {args.pod}: no such pod in the dump")
    from analyzers.gpu_capacity import gpu_capacity

    gpus = gpu_capacity(snapshot)
    if args.json or args.yaml:
        doc = report.as_dict()
        doc["gpu_capacity"] = [row.as_dict() for row in gpus]
        doc["kube_version"] = {"version": version, "source": why}
        doc["now"] = {"time": _iso(now), "source": now_source}
        if args.json:
            sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        else:
            yaml.safe_dump(doc, sys.stdout, sort_keys=False, allow_unicode=True)
    else:
        context = (
            f"kube-scheduler wording {version}, from {why}.\nAges counted to {_iso(now)}: {now_source}.\n"
        )
        unicode = wants_unicode(getattr(sys.stdout, "encoding", None), args.no_color)
        print_human(report, len(snapshot.nodes), sys.stdout, context=context, unicode=unicode)
        print_gpu_capacity(gpus, sys.stdout)
    return EXIT_OK


def print_gpu_capacity(rows: list[Any], out: TextIO) -> None:
    """GPU CAPACITY: per node, DRA devices per DeviceClass and GPU extended resources."""
    if not rows:
        return
    out.write("\nGPU CAPACITY (per node: DRA devices by DeviceClass, extended resources by name)\n")
    width = max(4, *(len(r.node) for r in rows))
    nwidth = max(16, *(len(r.name) for r in rows))
    out.write(
        f"  {'NODE':<{width}}  {'SOURCE':<17}  {'CLASS / RESOURCE':<{nwidth}}  TOTAL  ALLOCATED  FREE\n"
    )
    for r in rows:
        source = "DRA" if r.source == "dra" else "extended resource"
        out.write(
            printable(
                f"  {r.node:<{width}}  {source:<17}  {r.name:<{nwidth}}  {r.total:>5}  {r.allocated:>9}  {r.free:>4}\n"
            )
        )


# ---------------------------------------------------------------------------
# Human output

_WIDTH = 100


def _wrap(text: str, indent: str) -> str:
    return "\n".join(
        textwrap.fill(
            p,
            _WIDTH,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
            break_long_words=False,
        )
        for p in text.split("\n")
    )


def print_human(
    report: Report, node_count: int, out: TextIO, *, context: str = "", unicode: bool = True
) -> None:
    """The report for people. Text from the cluster (names, messages) has its
    control characters shown escaped (agent.terminal.printable). Each unscheduled
    pod gets its nodes × filter plugins grid (Unicode box drawing, or ASCII)."""
    glyphs = Glyphs(unicode)

    def w(text: str) -> None:
        out.write(printable(text))

    w(
        f"Analysed {node_count} nodes: {len(report.pods)} unscheduled pod(s), {len(report.deployments)} Deployment(s), "
        f"{len(report.pdbs)} PodDisruptionBudget(s); {len(report.findings)} finding(s).\n"
    )
    if context:
        w(context)
    if report.findings:
        w("\nFINDINGS\n")
    for n, f in enumerate(report.findings, 1):
        w(
            f"\n{n}. [{str(f.severity).upper()}] {f.rule_id} — {printable(str(f.subject), keep_newlines=False)}\n"
        )
        w(_wrap(f.title, "   ") + "\n\n")
        w(_wrap(f.explanation, "   ") + "\n")
        for i, r in enumerate(f.remedies, 1):
            mark = "verified" if r.verified else "not verified"
            w(f"\n   Remedy {n}.{i} [{mark}] {r.title}\n")
            w(_wrap(r.verification, "     ") + "\n")
            w(f"     $ {r.command}\n")
            w(textwrap.indent(r.yaml.rstrip("\n"), "     | ") + "\n")
    if report.pods:
        w("\nUNSCHEDULED PODS\n")
    for p in report.pods:
        _print_pod(p, w, glyphs)
    if report.deployments:
        w("\nDEPLOYMENTS (effective rolling-update fenceposts)\n")
        for d in report.deployments:
            dep = d.deployment
            if d.error:
                w(f"  {dep.namespace}/{dep.name}: {d.error}\n")
                continue
            strat = dep.strategy_type
            if strat == "RollingUpdate":
                strat += f" maxSurge={dep.max_surge} maxUnavailable={dep.max_unavailable}"
            w(
                f"  {dep.namespace}/{dep.name}: replicas {dep.replicas}, {strat} → surge {d.max_surge}, unavailable {d.max_unavailable}\n"
            )
    if report.pdbs:
        w("\nPODDISRUPTIONBUDGETS\n")
        for b in report.pdbs:
            pdb = b.pdb
            spec = (
                f"minAvailable={pdb.min_available}"
                if pdb.min_available is not None
                else f"maxUnavailable={pdb.max_unavailable}"
            )
            if b.error:
                extra = f" (failSafe: {b.error}; the other figures are the PDB's status)"
            elif b.unknown:
                extra = (
                    f" (unknown: {b.unknown}; figures from the PDB's status as the controller last wrote it)"
                )
            else:
                extra = ""
            w(
                f"  {pdb.namespace}/{pdb.name}: {spec}; expected {b.expected_pods}, desired healthy {b.desired_healthy}, "
                f"healthy {b.current_healthy} → disruptions allowed {b.disruptions_allowed}{extra}\n"
            )
    for e in report.rule_errors:
        w(f"\nrule {e.rule_id} failed: {e.error}\n")


ALLOCATION_NODES_SHOWN = 5


def _print_allocations(v: PodVerdict, fitting: list[str], w: Callable[[str], Any]) -> None:
    """The devices DynamicResources' structured allocator gives the pod on each feasible
    node (the first few), as ``analyze --json`` reports them (``scheduling.nodes[].allocation``;
    ``scheduling.allocation`` for the node kube-scheduler would choose)."""
    allocations = v.allocations or {}
    shown = [n for n in fitting if n in allocations][:ALLOCATION_NODES_SHOWN]
    chosen = v.allocation is not None
    w(
        "    devices the DRA allocator gives it "
        + (
            "(on the only feasible node, the one kube-scheduler chooses):\n"
            if chosen
            else "(per feasible node):\n"
        )
    )
    for name in shown:
        by_request: dict[str, list[str]] = {}
        for r in allocations[name]:
            by_request.setdefault(r.request, []).append(f"{r.driver}/{r.pool}/{r.device}")
        devices = "; ".join(f"request {req}: {', '.join(ds)}" for req, ds in by_request.items())
        w(_wrap(f"on {name}: {devices or 'no devices'}", "      ") + "\n")
    if len(fitting) > len(shown):
        w(f"      … and {len(fitting) - len(shown)} more node(s) (all in the JSON output)\n")
    if not chosen:
        w("      which of them kube-scheduler picks depends on its scores, which are not simulated here\n")


def _print_pod(p: PodReport, w: Callable[[str], Any], glyphs: Glyphs) -> None:
    v = p.verdict
    w(f"\n  {printable(p.pod.namespace, keep_newlines=False)}/{printable(p.pod.name, keep_newlines=False)}\n")
    if p.scheduler:
        w(_wrap(f"scheduler ({p.scheduler.source}): {p.scheduler.message}", "    ") + "\n")
    if not v.nodes:
        w("    not simulated: the dump holds no Node objects\n")
    elif v.message:
        w(_wrap(f"simulated: {v.message}", "    ") + "\n")
    elif v.gated is not None:
        w(
            _wrap(
                f"simulated: held out of the queue by {v.gated.plugin}: {'; '.join(v.gated.reasons)}", "    "
            )
            + "\n"
        )
    if p.agrees is True:
        w(f"    {glyphs.marks['pass']} the simulation agrees with the scheduler\n")
    elif p.agrees is False:
        w(
            f"    {glyphs.marks['fail']} the simulation differs from the scheduler's message (the cluster changed, or the event is stale)\n"
        )
    if v.fits:
        fitting = [n.node for n in v.nodes if n.fits]
        w(
            f"    fits now on {len(fitting)} node(s): {', '.join(fitting[:5])}{' …' if len(fitting) > 5 else ''}\n"
        )
        if v.allocations:
            _print_allocations(v, fitting, w)
    if v.nodes and not v.fits:
        grid = build_grid(v, [f"{p.pod.namespace}/{p.pod.name}"])
        w("\n".join(grid_lines(grid, glyphs)) + "\n")
