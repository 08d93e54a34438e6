"""Remedies as the incident page shows them.

A stored remedy (``storage.views.remedy_dict``) has a title, a kind, YAML and
a command. The page shows each kind as what a user runs:

* ``command``: the command itself, with the note the rule wrote (the YAML's
  comment lines), never the command re-dressed as YAML;
* ``patch``: the ``kubectl patch`` command, the patch, and a complete manifest
  that ``kubectl apply --server-side`` accepts (apiVersion, kind, name,
  namespace and the fields the patch sets), with the fields that apply makes
  the field manager own and those it cannot remove (``null`` in the patch);
* ``manifest``: the manifest and the command that applies it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

import yaml

FIELD_MANAGER = "unstick"

# kubectl's lower-case resource word → (apiVersion, kind) for the kinds remedies patch.
API_VERSIONS: dict[str, tuple[str, str]] = {
    "deployment": ("apps/v1", "Deployment"),
    "statefulset": ("apps/v1", "StatefulSet"),
    "daemonset": ("apps/v1", "DaemonSet"),
    "replicaset": ("apps/v1", "ReplicaSet"),
    "job": ("batch/v1", "Job"),
    "cronjob": ("batch/v1", "CronJob"),
    "poddisruptionbudget": ("policy/v1", "PodDisruptionBudget"),
    "pod": ("v1", "Pod"),
    "node": ("v1", "Node"),
    "namespace": ("v1", "Namespace"),
    "persistentvolumeclaim": ("v1", "PersistentVolumeClaim"),
    "persistentvolume": ("v1", "PersistentVolume"),
    "replicationcontroller": ("v1", "ReplicationController"),
    "service": ("v1", "Service"),
    "configmap": ("v1", "ConfigMap"),
}


@dataclass(frozen=True, slots=True)
class ApplyManifest:
    """A complete object for ``kubectl apply --server-side``."""

    yaml: str
    command: str
    owned: tuple[str, ...]  # field paths the field manager will own
    not_removed: tuple[str, ...]  # fields the patch removes (null), which this apply leaves


@dataclass(frozen=True, slots=True)
class RemedyView:
    index: int
    title: str
    kind: str
    verified: bool
    verification: str
    command: str
    note: str
    yaml: str
    apply: ApplyManifest | None


def _paths(value: Any, prefix: str = "") -> tuple[list[str], list[str]]:
    """Leaf field paths of a patch: (set, removed by null)."""
    owned: list[str] = []
    removed: list[str] = []
    if isinstance(value, dict):
        for key, child in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if child is None:
                removed.append(path)
            elif isinstance(child, dict) and child:
                o, r = _paths(child, path)
                owned += o
                removed += r
            else:
                owned.append(path)
    return owned, removed


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def parse_patch_command(command: str) -> tuple[str, str, str | None, str] | None:
    """``kubectl [-n NS] patch KIND NAME [-n NS] [--type T] (-p JSON | --patch-file F)``
    → (kind word, name, namespace, patch type); ``None`` when it is not such a command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or words[0] != "kubectl":
        return None
    positional: list[str] = []
    options: dict[str, str] = {}
    rest = words[1:]
    i = 0
    while i < len(rest):
        word = rest[i]
        if word.startswith("--") and "=" in word:
            key, _, value = word.partition("=")
            options[key] = value
        elif word in ("-n", "--namespace", "--type", "-p", "--patch", "--patch-file") and i + 1 < len(rest):
            options[{"-n": "--namespace", "-p": "--patch"}.get(word, word)] = rest[i + 1]
            i += 1
        elif word.startswith("-") or word in ("&&", "|", ";"):
            return None  # flags this view does not know, or a pipeline: no manifest claimed
        else:
            positional.append(word)
        i += 1
    if len(positional) != 3 or positional[0] != "patch" or "/" in positional[1]:
        return None
    return (
        positional[1].lower(),
        positional[2],
        options.get("--namespace"),
        options.get("--type", "strategic"),
    )


def apply_manifest(command: str, patch_yaml: str, incident_id: int, index: int) -> ApplyManifest | None:
    """The complete manifest of a strategic or merge ``kubectl patch`` remedy, whose YAML is the
    patch itself (``analyzers.remedies.RemedyRenderer.patch``); JSON patches have none."""
    parsed = parse_patch_command(command)
    if parsed is None:
        return None
    kind_word, name, namespace, patch_type = parsed
    known = API_VERSIONS.get(kind_word)
    if patch_type not in ("strategic", "merge") or known is None:
        return None
    try:
        patch = yaml.safe_load(patch_yaml)
    except yaml.YAMLError:
        return None
    if not isinstance(patch, dict) or not patch:
        return None
    api_version, kind = known
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    body = _without_nulls(patch)
    patch_metadata = body.pop("metadata", None)
    if isinstance(patch_metadata, dict):
        metadata.update({k: v for k, v in patch_metadata.items() if k not in ("name", "namespace")})
    for key in ("apiVersion", "kind"):
        body.pop(key, None)
    obj = {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}
    owned, removed = _paths({k: v for k, v in patch.items() if k not in ("apiVersion", "kind")})
    text = yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)
    filename = f"incident-{incident_id}-remedy-{index}.apply.yaml"
    return ApplyManifest(
        yaml=text,
        command=f"kubectl apply --server-side --field-manager={FIELD_MANAGER} -f {filename}",
        owned=tuple(owned),
        not_removed=tuple(removed),
    )


def _note_of(yaml_text: str, command: str) -> str:
    """The comment lines of a command remedy's YAML, minus the ``Run:`` header and the command."""
    lines: list[str] = []
    for line in yaml_text.splitlines():
        if not line.startswith("#"):
            continue
        text = line[1:].strip()
        if text in ("Run:", command) or not text:
            continue
        lines.append(text)
    return " ".join(lines)


def remedy_views(remedies: list[dict[str, Any]], incident_id: int) -> list[RemedyView]:
    views: list[RemedyView] = []
    for index, r in enumerate(remedies):
        kind = r["kind"]
        command = r["command"]
        if kind == "command":
            views.append(
                RemedyView(
                    index,
                    r["title"],
                    kind,
                    r["verified"],
                    r["verification"],
                    command,
                    _note_of(r["yaml"], command),
                    "",
                    None,
                )
            )
            continue
        manifest = apply_manifest(command, r["yaml"], incident_id, index) if kind == "patch" else None
        views.append(
            RemedyView(
                index, r["title"], kind, r["verified"], r["verification"], command, "", r["yaml"], manifest
            )
        )
    return views
