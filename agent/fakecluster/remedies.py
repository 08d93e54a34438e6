"""Apply a remedy's command to the in-process cluster, as ``kubectl`` would (``unstick demo`` only).

The demo's "apply this remedy" action runs the remedy a user would paste into
a shell, against the fake API's objects instead of a real cluster. Understood:

* ``kubectl patch KIND NAME -n NS [--type strategic|merge|json] -p 'JSON'``: as
  the API server applies it. ``strategic`` (kubectl's default) merges the lists
  Kubernetes gives a ``patchMergeKey`` by that key (containers by name, their
  ports, env and volume mounts, volumes, topology spread constraints, scheduling
  gates, ...), wherever a pod spec sits in the kind, and replaces the others
  whole (tolerations, node taints, nodeSelector terms carry no merge key in
  k8s.io/api core/v1/types.go); ``merge`` is RFC 7386 (every list replaced);
  ``json`` is RFC 6902 (add, remove, replace, test);
* ``kubectl uncordon NODE``: ``spec.unschedulable`` cleared and the
  ``node.kubernetes.io/unschedulable`` taint removed (what the node lifecycle
  controller does after it);
* ``kubectl label node NODE KEY=VALUE``;
* ``kubectl set resources KIND/NAME -n NS --requests=cpu=…,memory=…``: every
  container of the pod template gets those requests.

Anything else (``kubectl describe``, ``kubectl apply -f -`` of a manifest for a
kind the fake API does not serve, a pipeline) is reported as not applied.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from agent.dryrun import POD_MERGE_KEYS, POD_MERGED_SETS, strategic_merge
from agent.fakecluster.server import FakeCluster
from agent.kube.kinds import kind_for

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_SHORT = {
    "deploy": "Deployment",
    "sts": "StatefulSet",
    "ds": "DaemonSet",
    "rs": "ReplicaSet",
    "pdb": "PodDisruptionBudget",
    "no": "Node",
}


class NotApplicable(ValueError):
    """The remedy's command is not one the demo can apply."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge recursively, ``null`` removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# Where each kind keeps its pod spec (the PodTemplateSpec's path), for the pod's merge keys.
_POD_AT: Mapping[str, tuple[str, ...]] = {
    "Pod": (),
    **{k: ("spec", "template") for k in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")},
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
# Node's lists with a patchMergeKey (k8s.io/api core/v1/types.go NodeStatus; spec.taints has none).
_NODE_MERGE_KEYS: Mapping[tuple[str, ...], str] = {
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
}
_NODE_MERGED_SETS = frozenset({("spec", "podCIDRs")})


def merge_keys(kind: str) -> tuple[Mapping[tuple[str, ...], str], frozenset[tuple[str, ...]]]:
    """The strategic-merge keys and merged sets of ``kind``'s lists: the Pod's under its pod
    spec (``metadata.ownerReferences``/``finalizers`` of the object itself too)."""
    if kind == "Node":
        keys = {**_NODE_MERGE_KEYS, ("metadata", "ownerReferences"): "uid"}
        return keys, _NODE_MERGED_SETS | POD_MERGED_SETS
    at = _POD_AT.get(kind)
    keys = {("metadata", "ownerReferences"): "uid"}
    sets = set(POD_MERGED_SETS)
    if at is not None:
        keys.update({(*at, *path): key for path, key in POD_MERGE_KEYS.items()})
        sets.update((*at, *path) for path in POD_MERGED_SETS)
    return keys, frozenset(sets)


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise NotApplicable(f"JSON pointer {path!r} does not start with /")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, test), as the API server applies
    ``application/json-patch+json``; a path that does not exist fails the whole patch."""
    if not isinstance(operations, list):
        raise NotApplicable("a JSON patch is a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, Mapping) or not isinstance(op.get("path"), str):
            raise NotApplicable(f"JSON patch operation without a path: {op!r}")
        *parents, last = _pointer(op["path"])
        holder = doc
        for part in parents:
            try:
                holder = holder[int(part)] if isinstance(holder, list) else holder[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise NotApplicable(f"JSON patch path {op['path']} does not exist") from None
        kind = op.get("op")
        if isinstance(holder, list):
            index = len(holder) if last == "-" and kind == "add" else int(last) if last.isdigit() else -1
            if not 0 <= index <= len(holder) - (kind != "add"):
                raise NotApplicable(f"JSON patch path {op['path']} does not exist")
        elif not isinstance(holder, dict) or (kind != "add" and last not in holder):
            raise NotApplicable(f"JSON patch path {op['path']} does not exist")
        if kind == "add":
            value = copy.deepcopy(op.get("value"))
            if isinstance(holder, list):
                holder.insert(index, value)
            else:
                holder[last] = value
        elif kind == "remove":
            del holder[index if isinstance(holder, list) else last]
        elif kind == "replace":
            holder[index if isinstance(holder, list) else last] = copy.deepcopy(op.get("value"))
        elif kind == "test":
            if holder[index if isinstance(holder, list) else last] != op.get("value"):
                raise NotApplicable(f"JSON patch test at {op['path']} failed")
        else:
            raise NotApplicable(f"JSON patch operation {kind!r} is not supported")
    return doc


def patched(kind: str, obj: Mapping[str, Any], patch: Any, patch_type: str = "strategic") -> Any:
    """``obj`` with ``patch`` applied as ``kubectl patch --type PATCH_TYPE`` has the API server do."""
    if patch_type == "json":
        return json_patch(obj, patch)
    if patch_type == "merge":
        return merge_patch(obj, patch)
    if patch_type != "strategic":
        raise NotApplicable(f"--type {patch_type}: not strategic, merge or json")
    if not isinstance(patch, Mapping):
        raise NotApplicable("a strategic merge patch is a JSON object")
    keys, sets = merge_keys(kind)
    return strategic_merge(obj, patch, keys, sets)


def _kind(word: str) -> str:
    name = _SHORT.get(word.lower(), word)
    for candidate in (name, name.lower(), name.lower() + "s"):
        try:
            return kind_for(candidate).kind
        except KeyError:
            continue
    raise NotApplicable(f"unknown kind {word!r}")


def _options(args: list[str]) -> tuple[list[str], dict[str, str]]:
    positional: list[str] = []
    options: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            key, _, value = arg[2:].partition("=")
            options[key] = value
        elif arg in ("-n", "--namespace", "-p", "--patch", "--type"):
            if i + 1 >= len(args):
                raise NotApplicable(f"{arg} without a value")
            options[{"-n": "namespace", "-p": "patch"}.get(arg, arg.lstrip("-"))] = args[i + 1]
            i += 1
        else:
            positional.append(arg)
        i += 1
    return positional, options


def _get(cluster: FakeCluster, kind: str, name: str, namespace: str | None) -> dict[str, Any]:
    found = cluster.get(kind, name, namespace)
    if found is None:
        where = f"{namespace}/" if namespace else ""
        raise NotApplicable(f"there is no {kind} {where}{name} in the demo cluster")
    obj: dict[str, Any] = orjson.loads(orjson.dumps(found))
    return obj


def changes_cluster(cluster: FakeCluster, command: str) -> bool:
    """Whether :func:`apply_command` would change ``cluster`` (nothing is written).

    The demo's pages offer "apply" only where this holds: a command the demo
    cannot run, a missing object or a patch that leaves the object as it is
    changes nothing."""
    written: list[dict[str, Any]] = []
    try:
        apply_command(cluster, command, write=written.append)
    except NotApplicable:
        return False
    for obj in written:
        meta = obj.get("metadata", {})
        current = cluster.get(obj["kind"], meta.get("name", ""), meta.get("namespace"))
        if current is None or orjson.loads(orjson.dumps(current)) != obj:
            return True
    return False


def apply_command(
    cluster: FakeCluster, command: str, *, write: Callable[[dict[str, Any]], Any] | None = None
) -> str:
    """Run one remedy command against ``cluster``; returns what changed, or raises :class:`NotApplicable`.

    ``write`` receives each changed object instead of ``cluster.apply`` (a dry run)."""
    apply = cluster.apply if write is None else write
    try:
        words = shlex.split(command.split(" | ", 1)[0].split("  #", 1)[0])
    except ValueError as exc:
        raise NotApplicable(f"cannot parse the command: {exc}") from None
    if len(words) < 3 or words[0] != "kubectl":
        raise NotApplicable("not a kubectl command")
    verb, (positional, options) = words[1], _options(words[2:])
    namespace = options.get("namespace")
    if verb == "uncordon" and positional:
        node = _get(cluster, "Node", positional[0], None)
        node.setdefault("spec", {}).pop("unschedulable", None)
        taints = [t for t in node["spec"].get("taints") or () if t.get("key") != UNSCHEDULABLE_TAINT]
        if taints:
            node["spec"]["taints"] = taints
        else:
            node["spec"].pop("taints", None)
        apply(node)
        return f"node {positional[0]} uncordoned"
    if verb == "label" and len(positional) >= 3 and _kind(positional[0]) == "Node":
        node = _get(cluster, "Node", positional[1], None)
        labels = node.setdefault("metadata", {}).setdefault("labels", {})
        for pair in positional[2:]:
            key, eq, value = pair.partition("=")
            if not eq:
                raise NotApplicable(f"label {pair!r} is not KEY=VALUE")
            labels[key] = value
        apply(node)
        return f"node {positional[1]} labelled {' '.join(positional[2:])}"
    if verb == "patch" and len(positional) >= 2 and "patch" in options:
        kind = _kind(positional[0])
        obj = _get(cluster, kind, positional[1], namespace)
        try:
            patch = orjson.loads(options["patch"])
        except orjson.JSONDecodeError as exc:
            raise NotApplicable(f"the patch is not JSON: {exc}") from None
        apply(patched(kind, obj, patch, options.get("type", "strategic")))
        return f"{kind} {positional[1]} patched with {options['patch']}"
    if verb == "set" and positional[:1] == ["resources"] and len(positional) >= 2 and "requests" in options:
        kind_word, _, name = positional[1].partition("/")
        kind = _kind(kind_word)
        obj = _get(cluster, kind, name, namespace)
        requests = dict(pair.split("=", 1) for pair in options["requests"].split(",") if "=" in pair)
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or ():
            container.setdefault("resources", {}).setdefault("requests", {}).update(requests)
        apply(obj)
        return f"{kind} {name} now requests {options['requests']}"
    raise NotApplicable(f"the demo cannot apply `kubectl {verb}` commands")
