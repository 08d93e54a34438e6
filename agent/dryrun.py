"""Remedies checked by the API server itself: ``unstick watch --verify-with-dry-run``.

A remedy that re-simulation verified is sent to the API server with
``dryRun=All`` as the request its command makes: validation, defaulting and
admission (webhooks and policies included) run, nothing is stored. The outcome
is appended to the remedy's ``verification``; a remedy the server rejects is no
longer ``verified``. Three shapes are sent (:func:`dry_runs`):

- an in-place ``kubectl patch``: the same PATCH;
- a bare pod re-created with the change (``kubectl get pod … -o json | kubectl
  patch --local … | kubectl replace --force -f -``, for a pod's immutable
  placement fields): the pod as the API server returns it, the patch merged in
  as ``kubectl patch --local`` does (:func:`strategic_merge`), sent as a CREATE
  under a generated name (the pod it replaces still exists);
- a manifest (``kubectl apply -f -``): each document as a CREATE; when an
  object of that name exists (409 AlreadyExists), as the strategic merge PATCH
  ``kubectl apply`` sends for an object it did not create.

Needs ``patch`` on the kinds remedies change (Deployments, StatefulSets,
DaemonSets, ReplicaSets, Pods, PodDisruptionBudgets) and ``create`` on pods,
PersistentVolumes, PersistentVolumeClaims and StorageClasses. RBAC cannot limit
a verb to dry-run requests, so this is opt-in; unstick itself only ever sends
these requests with ``dryRun=All`` (agent.kube.gateway.Gateway.dry_run_patch,
dry_run_create).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from agent.kube.errors import Conflict, KubeError
from agent.kube.gateway import Gateway
from agent.kube.kinds import kind_for
from analyzers.findings import Finding, Remedy, RemedyKind

log = logging.getLogger(__name__)

ACCEPTED = "accepted by the API server (server-side dry run)"
_TYPE_RE = re.compile(r"--type[= ](strategic|merge|json)\b")
_RECREATE = "| kubectl replace --force -f -"
_APPLY = "kubectl apply -f -"
CACHE_SIZE = 512

PatchType = Literal["strategic", "merge", "json"]

# The Pod's lists that a strategic merge patch merges by key instead of replacing: the
# ``patchMergeKey`` tags of k8s.io/api core/v1/types.go (PodSpec, Container) and
# apimachinery meta/v1/types.go (ObjectMeta) at v0.35.4. A path step "[]" is a list item.
POD_MERGE_KEYS: Mapping[tuple[str, ...], str] = {
    ("metadata", "ownerReferences"): "uid",
    ("spec", "volumes"): "name",
    ("spec", "initContainers"): "name",
    ("spec", "containers"): "name",
    ("spec", "ephemeralContainers"): "name",
    ("spec", "imagePullSecrets"): "name",
    ("spec", "hostAliases"): "ip",
    ("spec", "topologySpreadConstraints"): "topologyKey",
    ("spec", "schedulingGates"): "name",
    ("spec", "resourceClaims"): "name",
    **{
        ("spec", containers, "[]", field): key
        for containers in ("initContainers", "containers", "ephemeralContainers")
        for field, key in (
            ("ports", "containerPort"),
            ("env", "name"),
            ("volumeMounts", "mountPath"),
            ("volumeDevices", "devicePath"),
        )
    },
}
# Lists of scalars with patchStrategy=merge: the patch's items are added to the original's.
POD_MERGED_SETS: frozenset[tuple[str, ...]] = frozenset({("metadata", "finalizers")})


def strategic_merge(
    original: Any,
    patch: Any,
    merge_keys: Mapping[tuple[str, ...], str] = POD_MERGE_KEYS,
    merged_sets: frozenset[tuple[str, ...]] = POD_MERGED_SETS,
    path: tuple[str, ...] = (),
) -> Any:
    """``patch`` applied to ``original`` as a strategic merge patch
    (apimachinery/pkg/util/strategicpatch/patch.go, mergeMap/mergeSlice): maps merge
    recursively and ``null`` deletes a key; a list with a merge key merges the patch's
    items into the original's item with the same key (new ones appended); a merged
    set adds missing items; any other list, and any scalar, is replaced. The
    ``$patch``/``$retainKeys`` directives are not supported (remedies do not use them).
    A merged list is ordered as the API server orders it (normalizeElementOrder)."""
    if isinstance(patch, Mapping):
        out = dict(original) if isinstance(original, Mapping) else {}
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = strategic_merge(out.get(key), value, merge_keys, merged_sets, (*path, key))
        return out
    if isinstance(patch, list) and isinstance(original, list):
        merge_key = merge_keys.get(path)
        if merge_key is not None:
            merged = list(original)
            for item in patch:
                at = next(
                    (
                        i
                        for i, old in enumerate(merged)
                        if isinstance(item, Mapping)
                        and isinstance(old, Mapping)
                        and merge_key in item
                        and old.get(merge_key) == item[merge_key]
                    ),
                    None,
                )
                if at is None:
                    merged.append(copy.deepcopy(item))
                else:
                    merged[at] = strategic_merge(merged[at], item, merge_keys, merged_sets, (*path, "[]"))
            return _server_order(
                merged, patch, original, lambda v: v.get(merge_key) if isinstance(v, Mapping) else v
            )
        if path in merged_sets:
            merged = list(original) + [copy.deepcopy(v) for v in patch if v not in original]
            return _server_order(merged, patch, original, lambda v: v)
    return copy.deepcopy(patch)


def _server_order(merged: list[Any], patch: list[Any], original: list[Any], key: Any) -> list[Any]:
    """apimachinery strategicpatch's normalizeElementOrder and mergeSortedSlice (patch.go): the
    patch's items in the patch's order, the original's other items in theirs, interleaved so
    that one of the latter goes before a patch item only when both were in the original in
    that order."""
    patch_keys, original_keys = [key(v) for v in patch], [key(v) for v in original]
    in_patch = sorted((v for v in merged if key(v) in patch_keys), key=lambda v: patch_keys.index(key(v)))
    server_only = [v for v in merged if key(v) not in patch_keys]
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(in_patch):
        if j >= len(in_patch) or (
            i < len(server_only)
            and key(server_only[i]) in original_keys
            and key(in_patch[j]) in original_keys
            and original_keys.index(key(server_only[i])) < original_keys.index(key(in_patch[j]))
        ):
            out.append(server_only[i])
            i += 1
        else:
            out.append(in_patch[j])
            j += 1
    return out


def recreated_pod(current: Mapping[str, Any], patch: Any) -> dict[str, Any]:
    """What ``kubectl get pod -o json | kubectl patch --local -p PATCH -o json | kubectl
    replace --force -f -`` creates, as a dry-run CREATE: the pod with ``patch`` merged in,
    without ``resourceVersion`` (kubectl's resource.Helper.Create clears it) and
    ``managedFields`` (kubectl get does not print them), and with ``generateName`` instead
    of its name, since the pod it replaces still exists during a dry run."""
    pod: dict[str, Any] = strategic_merge(copy.deepcopy(dict(current)), patch)
    meta = dict(pod.get("metadata") or {})
    for key in ("resourceVersion", "managedFields"):
        meta.pop(key, None)
    meta["generateName"] = f"{meta.pop('name', 'pod')}-"
    pod["metadata"] = meta
    return pod


@dataclass(frozen=True)
class DryRun:
    """One dry-run request a remedy is checked with."""

    how: Literal["patch", "recreate", "apply"]
    kind: str
    namespace: str | None
    name: str
    body: Any
    patch_type: PatchType = "strategic"


def patch_of(remedy: Remedy) -> tuple[Any, PatchType] | None:
    """The body and patch type of an in-place patch remedy (None for other remedies)."""
    if remedy.kind != RemedyKind.PATCH or remedy.target is None:
        return None
    if not remedy.command.startswith(f"kubectl patch {remedy.target.kind.lower()} "):
        # e.g. a bare pod's placement fix re-creates the pod (patch --local | replace --force):
        # the server would refuse the same change as an in-place PATCH
        return None
    body = _load(remedy.yaml)
    match = _TYPE_RE.search(remedy.command)
    kind: PatchType = "strategic"
    if isinstance(body, list):
        kind = "json"
    elif match is not None and match.group(1) == "merge":
        kind = "merge"
    if not isinstance(body, dict | list):
        return None
    return body, kind


def dry_runs(remedy: Remedy) -> list[DryRun] | None:
    """The requests that check ``remedy`` (None: it is not one unstick can dry-run, e.g. a
    command, or a manifest of a kind the gateway does not know)."""
    target = remedy.target
    found = patch_of(remedy)
    if found is not None and target is not None:
        body, patch_type = found
        return [DryRun("patch", target.kind, target.namespace or None, target.name, body, patch_type)]
    if (
        remedy.kind == RemedyKind.PATCH
        and target is not None
        and target.kind == "Pod"
        and remedy.command.rstrip().endswith(_RECREATE)
    ):
        body = _load(remedy.yaml)
        if not isinstance(body, dict):
            return None
        return [DryRun("recreate", "Pod", target.namespace or None, target.name, body)]
    if remedy.kind == RemedyKind.MANIFEST and remedy.command.strip() == _APPLY:
        try:
            docs = [d for d in yaml.safe_load_all(remedy.yaml) if d is not None]
        except yaml.YAMLError:
            return None
        out: list[DryRun] = []
        for doc in docs:
            if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
                return None
            try:
                k = kind_for(str(doc.get("kind", "")))
            except KeyError:
                return None
            if doc.get("apiVersion") != k.api_version:
                return None
            meta = doc["metadata"]
            namespace = (
                (meta.get("namespace") or (target.namespace if target else None)) if k.namespaced else None
            )
            if k.namespaced and not namespace:
                return None
            if namespace:
                doc = {**doc, "metadata": {**meta, "namespace": namespace}}
            out.append(DryRun("apply", k.kind, namespace, str(meta.get("name", "")), doc))
        return out or None
    return None


def _load(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


class DryRunVerifier:
    """Checks remedies with server-side dry runs, remembering outcomes per request so a
    pass does not repeat them."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self._outcomes: OrderedDict[tuple[str, str, str, str, str], str | None] = OrderedDict()
        self.requests = 0

    async def send(self, run: DryRun) -> None:
        """Send one dry run; a refusal is raised as the gateway's KubeError."""
        g = self.gateway
        if run.how == "patch":
            await g.dry_run_patch(run.kind, run.name, run.namespace, run.body, run.patch_type)
        elif run.how == "recreate":
            current = await g.get(run.kind, run.name, run.namespace)
            await g.dry_run_create(run.kind, recreated_pod(current, run.body))
        else:
            try:
                await g.dry_run_create(run.kind, run.body)
            except Conflict as exc:
                if exc.reason != "AlreadyExists":
                    raise
                # kubectl apply of an object it did not create: a strategic merge patch
                await g.dry_run_patch(run.kind, run.name, run.namespace, run.body, "strategic")

    async def outcome(self, remedy: Remedy) -> str | None:
        """None when every request of the remedy is accepted, else the first refusal in one line."""
        runs = dry_runs(remedy)
        assert runs is not None
        key = (runs[0].how, runs[0].kind, runs[0].namespace or "", runs[0].name, remedy.yaml)
        if key in self._outcomes:
            self._outcomes.move_to_end(key)
            return self._outcomes[key]
        result: str | None = None
        for run in runs:
            self.requests += 1
            try:
                await self.send(run)
            except KubeError as exc:
                result = str(exc)
                break
            except KeyError as exc:  # a kind the gateway does not know
                result = f"cannot dry-run {run.kind}: {exc}"
                break
        self._outcomes[key] = result
        while len(self._outcomes) > CACHE_SIZE:
            self._outcomes.popitem(last=False)
        return result

    async def check(self, findings: Sequence[Finding]) -> list[Finding]:
        out: list[Finding] = []
        for finding in findings:
            remedies: list[Remedy] = []
            changed = False
            for remedy in finding.remedies:
                if remedy.verified and dry_runs(remedy) is not None:
                    refusal = await self.outcome(remedy)
                    if refusal is None:
                        remedy = dataclasses.replace(
                            remedy, verification=f"{remedy.verification}; {ACCEPTED}"
                        )
                    else:
                        log.warning(
                            "remedy refused by the API server's dry run: %s",
                            refusal,
                            extra={"rule_id": finding.rule_id, "k8s_object": str(remedy.target)},
                        )
                        remedy = dataclasses.replace(
                            remedy,
                            verified=False,
                            verification=f"{remedy.verification}; rejected by the API server (dry run): {refusal}",
                        )
                    changed = True
                remedies.append(remedy)
            out.append(dataclasses.replace(finding, remedies=tuple(remedies)) if changed else finding)
        return out
