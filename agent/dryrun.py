"""Remedies checked by the API server itself: ``unstick watch --verify-with-dry-run``.

A patch remedy that re-simulation verified is sent to the API server as the same
PATCH with ``dryRun=All``: validation, defaulting and admission (webhooks and
policies included) run, nothing is stored. The outcome is appended to the
remedy's ``verification``; a patch the server rejects is no longer ``verified``.

Needs ``patch`` on the kinds remedies change (Deployments, StatefulSets,
DaemonSets, ReplicaSets, Pods, PodDisruptionBudgets). RBAC cannot limit a verb
to dry-run requests, so this is opt-in; unstick itself only ever sends these
PATCHes with ``dryRun=All`` (agent.kube.gateway.Gateway.dry_run_patch).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal

import yaml

from agent.kube.errors import KubeError
from agent.kube.gateway import Gateway
from analyzers.findings import Finding, Remedy, RemedyKind

log = logging.getLogger(__name__)

ACCEPTED = "accepted by the API server (server-side dry run)"
_TYPE_RE = re.compile(r"--type[= ](strategic|merge|json)\b")
CACHE_SIZE = 512


def patch_of(remedy: Remedy) -> tuple[Any, Literal["strategic", "merge", "json"]] | None:
    """The body and patch type of a patch remedy (None for other remedies)."""
    if remedy.kind != RemedyKind.PATCH or remedy.target is None:
        return None
    if not remedy.command.startswith(f"kubectl patch {remedy.target.kind.lower()} "):
        # e.g. a bare pod's placement fix re-creates the pod (patch --local | replace --force):
        # the server would refuse the same change as an in-place PATCH
        return None
    try:
        body = yaml.safe_load(remedy.yaml)
    except yaml.YAMLError:
        return None
    match = _TYPE_RE.search(remedy.command)
    kind: Literal["strategic", "merge", "json"] = "strategic"
    if isinstance(body, list):
        kind = "json"
    elif match is not None and match.group(1) == "merge":
        kind = "merge"
    if not isinstance(body, dict | list):
        return None
    return body, kind


class DryRunVerifier:
    """Checks the verified patch remedies of findings with a server-side dry run,
    remembering outcomes per (target, patch) so a pass does not repeat requests."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self._outcomes: OrderedDict[tuple[str, str, str, str], str | None] = OrderedDict()
        self.requests = 0

    async def outcome(self, remedy: Remedy) -> str | None:
        """None when accepted, else the API server's refusal in one line."""
        found = patch_of(remedy)
        assert found is not None and remedy.target is not None
        body, patch_type = found
        t = remedy.target
        key = (t.kind, t.namespace, t.name, remedy.yaml)
        if key in self._outcomes:
            self._outcomes.move_to_end(key)
            return self._outcomes[key]
        self.requests += 1
        try:
            await self.gateway.dry_run_patch(t.kind, t.name, t.namespace or None, body, patch_type)
            result: str | None = None
        except KubeError as exc:
            result = str(exc)
        except KeyError as exc:  # a kind the gateway does not know
            result = f"cannot dry-run a patch of {t.kind}: {exc}"
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
                if remedy.verified and patch_of(remedy) is not None:
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
