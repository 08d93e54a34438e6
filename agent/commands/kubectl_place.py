"""``kubectl unstick place``: where would this pod (or the next N replicas of a
workload) land, and why -- live, through the user's kubeconfig.

    kubectl unstick place NS/POD | pod/NAME | deploy/NAME | sts/NAME | rs/NAME
                          [-n NS] [--replicas N] [--scheduler-config FILE] [--json]

It reads what kube-scheduler weighs for one pod (the target, every node, every
pod bound to a node, PersistentVolumes, StorageClasses, PriorityClasses,
Namespaces, and the target namespace's workloads, PVCs and ResourceClaims) with
get/list only, builds the same snapshot as ``unstick analyze``, and answers with
``unstick place``'s own code (:func:`agent.commands.place.answer`): the same
human report and the same JSON contract (docs/placement.md).

Errors: the API's as kubectl prints them (``Error from server (NotFound): …``,
exit 1); a question that cannot be answered (a terminating pod, a
``schedulerName`` no profile serves, a bad ``--replicas`` or
``--scheduler-config``) as ``unstick place`` does: one line, exit 2; a score
plugin's Error status exit 3. With ``--json`` every error is also
``{"error": "..."}`` on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.commands.kubectl import (
    _TARGET_KINDS,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    PluginError,
    Reads,
    _list,
    _list_claims,
    _Parser,
    _placement_inputs,
    add_connection_options,
    request_timeout,
    state_for,
)
from agent.commands.place import Answer, PlaceError, answer, check_replicas, emit, emit_error

if TYPE_CHECKING:
    from agent.kube.gateway import Gateway

# The kinds ``place`` answers for, and the spelling ``unstick place --pod`` takes.
_PLACE_KINDS = {"Pod": "", "Deployment": "deploy", "StatefulSet": "sts", "ReplicaSet": "rs"}
_PLACE_HELP = "NS/POD, pod/NAME, deploy/NAME, sts/NAME or rs/NAME"


@dataclass(frozen=True, slots=True)
class PlaceTarget:
    kind: str  # Pod, Deployment, StatefulSet, ReplicaSet
    name: str
    namespace: str | None  # None: -n, else the context's

    def label(self, namespace: str) -> str:
        """How messages name the target: ``pod shop/web-1``, ``deploy shop/web``."""
        return f"{_PLACE_KINDS[self.kind] or 'pod'} {namespace}/{self.name}"

    def place_target(self, namespace: str) -> str:
        """The target in ``unstick place --pod`` spelling."""
        short = _PLACE_KINDS[self.kind]
        return f"{namespace}/{short}/{self.name}" if short else f"{namespace}/{self.name}"


def build_place_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="kubectl unstick place",
        description=(
            "Where would this pod (or the next N replicas of a Deployment, StatefulSet or ReplicaSet) land, "
            "and why: kube-scheduler's filters and Score phase, plugin by plugin, on the live cluster."
        ),
        epilog=(
            "examples:\n"
            "  kubectl unstick place shop/web-7d9c            # a pod (pending: where it would go; running: its rank)\n"
            "  kubectl unstick place deploy/web -n shop --replicas 20\n"
            "  kubectl unstick place sts/cassandra -n db --scheduler-config sched.yaml --json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", nargs="+", metavar="TARGET", help=f"{_PLACE_HELP} (or TYPE NAME)")
    p.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)")
    add_connection_options(p)
    p.add_argument("--replicas", type=int, metavar="N", help="simulate N sequential bindings")
    p.add_argument("--scheduler-config", metavar="FILE", help="the cluster's KubeSchedulerConfiguration")
    p.add_argument("--json", action="store_true", help="print the JSON contract (docs/placement.md)")
    return p


def parse_place_target(words: Sequence[str]) -> PlaceTarget:
    """``NS/POD``, ``NS/TYPE/NAME``, ``TYPE/NAME`` or ``TYPE NAME`` (kubectl's spellings
    of pod, deploy, sts and rs); a bare ``NAME`` is a pod. A first segment that is not
    a kind's spelling (any kind ``kubectl unstick`` knows: node/x is refused, not read
    as namespace "node") is a namespace; ``-n`` names such a namespace otherwise."""
    if len(words) == 2 and "/" not in words[0] and "/" not in words[1]:
        kind_word, name, namespace = words[0], words[1], None
    elif len(words) == 1:
        parts = words[0].split("/")
        if len(parts) == 1:
            kind_word, name, namespace = "pod", parts[0], None
        elif len(parts) == 2 and parts[0].lower() in _TARGET_KINDS:
            kind_word, name, namespace = parts[0], parts[1], None
        elif len(parts) == 2:
            kind_word, name, namespace = "pod", parts[1], parts[0]
        elif len(parts) == 3:
            namespace, kind_word, name = parts
        else:
            raise PluginError(f"expected {_PLACE_HELP}, got {words[0]!r}")
    else:
        raise PluginError(f"expected one target ({_PLACE_HELP}), got {' '.join(words)!r}")
    kind = _TARGET_KINDS.get(kind_word.lower())
    if kind not in _PLACE_KINDS:
        raise PluginError(f"place answers for pods and the next pod of deploy, sts or rs, not {kind_word!r}")
    if not name or (namespace is not None and not namespace):
        raise PluginError(f"resource name and namespace may not be empty: {'/'.join(words)!r}")
    assert kind is not None
    return PlaceTarget(kind, name, namespace)


async def read_for_place(gw: Gateway, target: PlaceTarget, namespace: str) -> Reads:
    """What kube-scheduler weighs for one pod of ``namespace``, and the target itself."""
    from agent.kube.errors import Forbidden, NotFound

    reads = Reads()
    try:
        reads.requests += 1
        reads.objects.append(await gw.get(target.kind, target.name, namespace))
    except NotFound as exc:
        raise PluginError(f"Error from server (NotFound): {exc}") from None
    await _placement_inputs(gw, reads)
    # A workload's ReplicaSets (the Deployment's newest) and the owners whose selectors
    # the system default spread constraints use.
    for kind in ("PersistentVolumeClaim", "Deployment", "ReplicaSet", "StatefulSet"):
        await _list(gw, reads, kind, namespace=namespace)
    await _list_claims(gw, reads, namespace)
    try:
        # Namespace labels: pod affinity terms' namespaceSelector.
        await _list(gw, reads, "Namespace")
    except Forbidden as exc:
        reads.not_listed["Namespace"] = str(exc)
    return reads


async def place_live(args: argparse.Namespace) -> tuple[Answer, list[str]]:
    """The answer, and notes for stderr."""
    from agent.kube.errors import ConfigError, KubeError
    from agent.kube.gateway import Gateway
    from agent.runner import minor_version

    target = parse_place_target(args.target)
    check_replicas(args.replicas)
    from agent.scheduler_config import SchedulerConfigError, read_scheduler_config

    scheduler_config = None
    if args.scheduler_config:
        try:
            scheduler_config = read_scheduler_config(args.scheduler_config)
            scheduler_config.check()
        except SchedulerConfigError as exc:
            raise PlaceError(str(exc)) from None
    gw = Gateway(
        args.kubeconfig, args.context, request_timeout=args.request_timeout, user_agent="kubectl-unstick/0.1"
    )
    try:
        try:
            await gw.open()
        except ConfigError as exc:
            raise PluginError(f"error: {exc}") from None
        namespace = target.namespace or args.namespace or gw.namespace or "default"
        try:
            version = minor_version(await gw.version())
            reads = await read_for_place(gw, target, namespace)
        except KubeError as exc:
            raise PluginError(f"error: {exc}") from None
    finally:
        await gw.close()
    profiles = None
    if scheduler_config is not None:
        try:
            profiles = scheduler_config.profiles(version)
        except SchedulerConfigError as exc:
            raise PlaceError(str(exc)) from None
    notes = [
        f"Namespaces could not be listed ({why}): pod affinity namespaceSelectors match no namespace"
        for kind, why in reads.not_listed.items()
        if kind == "Namespace"
    ]
    found = answer(
        state_for(reads, version).snapshot(),
        target.place_target(namespace),
        replicas=args.replicas,
        profiles=profiles,
        config_name=args.scheduler_config,
        kube_version=version,
        label=target.label(namespace),
    )
    return found, notes


def main(argv: Sequence[str]) -> int:
    args = build_place_parser().parse_args(argv)
    from agent.logs import configure_logging
    from analyzers import bounds

    try:
        args.request_timeout = request_timeout(args)
    except bounds.OutOfBounds as exc:
        emit_error(str(exc), as_json=args.json, prefix="error: ")
        return EXIT_USAGE
    configure_logging("ERROR", "text")
    try:
        found, notes = asyncio.run(place_live(args))
    except PlaceError as exc:
        emit_error(str(exc), as_json=args.json, prefix="error: ")
        return exc.code
    except PluginError as exc:
        message = str(exc)
        line = message if message.startswith(("error: ", "Error from server")) else f"error: {message}"
        emit_error(line, as_json=args.json, prefix="")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    try:
        emit(found, as_json=args.json)
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return EXIT_OK
