"""Parsing eviction refusals and drain failures, from everyone who evicts, and the kubelet's own
rejections.

Upstream texts:

- ``pkg/registry/core/pod/storage/eviction.go`` (the eviction subresource): 429 ``Cannot evict pod as
  it would violate the pod's disruption budget.`` with the cause ``The disruption budget <pdb> needs
  <desired> healthy pods and has <current> currently``, or when the budget's controller is in fail-safe
  ``The disruption budget <pdb> does not allow evicting pods currently because it failed sync:
  <condition message>`` (``... currently (<reason>): <message>``, ``... currently``), or ``The
  disruption budget <pdb> is still being processed by the server.``; 500 ``This pod has more than one
  PodDisruptionBudget, which the eviction subresource does not support.``
- ``staging/src/k8s.io/kubectl/pkg/drain/drain.go``: ``evicting pod <ns>/<name>``, ``error when
  evicting pods/"<name>" -n "<ns>" (will retry after 5s): <error>``; before 1.18 ``evicting pod
  "<name>"`` and ``error when evicting pod "<name>" (will retry after 5s): <error>``.
- ``staging/src/k8s.io/kubectl/pkg/drain/filters.go``: before evicting anything, ``kubectl drain``
  refuses a node holding pods it may not delete without a flag, ``cannot delete <what>: <ns>/<pod>,
  ...`` (one per kind, aggregated ``[..., ...]``; the unmanaged kind prints ``cannot delete`` twice):
  ``Pods that declare no controller (use --force to override)``, ``DaemonSet-managed Pods (use
  --ignore-daemonsets to ignore)``, ``Pods with local storage (use --delete-emptydir-data to
  override)`` (``--delete-local-data`` before 1.20; lower-case ``pods`` and ``Pods not managed by
  ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet`` in older releases).
- descheduler ``pkg/descheduler/evictions/evictions.go``: ``error when evicting pod (ignoring)
  "<name>": <error>``.
- cluster-autoscaler ``core/scaledown``: ``not enough pod disruption budget to move <ns>/<name>``,
  ``failed to evict pod <ns>/<name> within allowed timeout (last error: <error>)``; the VPA updater
  ``failed to evict pod <ns>/<name>, error: <error>`` (later a structured log line, ``"Failed to
  evict pod" err="<error>" pod="<ns>/<name>"``); other drainers ``failed to evict/delete pod
  <ns>/<name>: <error>``.
- Karpenter (``pkg/controllers/state/statenode.go``, events ``DisruptionBlocked``): ``Cannot disrupt
  Node: PDB "<ns>/<name>" prevents pod evictions`` (v0.3x), ``Pdb "<ns>/<name>" prevents pod
  evictions``, ``Pdb prevents pod evictions (PodDisruptionBudget=[<ns>/<name>])`` (v1, with or
  without the brackets), ``Eviction does not support multiple PDBs (PodDisruptionBudget(s)=[...])``,
  ``Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=<ns>/<name>)``, ``Cannot disrupt Node: Pod
  "<ns>/<name>" has "karpenter.sh/do-not-disrupt" annotation`` (``do-not-evict`` before v0.32).
- the kubelet: ``pkg/kubelet/eviction/helpers.go`` node-pressure eviction ``The node was low on
  resource: <resource>. ...``, admission refused under a node condition ``The node had condition:
  [<conditions>]. ``; ``pkg/kubelet/lifecycle/predicate.go`` admission ``Node didn't have enough
  resource: <resource>, requested: ..., used: ..., capacity: ...``, ``Predicate <name> failed: ...``,
  ``Failed to admit pod as ...``.

Emitters capitalise differently (``pdb``/``Pdb``/``PDB``), so matching ignores case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from analyzers.messages.drain import drain_refusals
from analyzers.messages.karpenter_disruption import disruption_blocked
from analyzers.messages.text import cut_at_next_event, until_terminator

PDB_VIOLATION: Final = "pdb-violation"
MULTIPLE_PDBS: Final = "multiple-pdbs"
DO_NOT_DISRUPT: Final = "do-not-disrupt"
NODE_PRESSURE: Final = "node-pressure"
NODE_CONDITION: Final = "node-condition"
KUBELET_ADMISSION: Final = "kubelet-admission"
DRAIN_REFUSED: Final = "drain-refused"
# Karpenter will not disrupt the node (analyzers.messages.karpenter_disruption: ``blocker`` says why).
DISRUPTION_BLOCKED: Final = "disruption-blocked"
OTHER: Final = "other"

_I: Final = re.IGNORECASE
_KUBECTL_NEW_RE: Final = re.compile(
    r'error when evicting pods/"([^"]+)" -n "([^"]+)"( \(will retry after [^)]*\))?:? ?', _I
)
_KUBECTL_OLD_RE: Final = re.compile(
    r'error when evicting pod (?:\(ignoring\) )?"([^"]+)"( \(will retry after [^)]*\))?:? ?', _I
)
_EVICTING_NS_RE: Final = re.compile(r'evicting pod ([^\s/"]+)/([^\s"]+)', _I)
_EVICTING_OLD_RE: Final = re.compile(r'evicting pod "([^"]+)"', _I)
_EVICTED_RE: Final = re.compile(r"\bpod/([^\s/]+) evicted\b", _I)
# Any other wrapper that names the pod after "evict pod" / "evicting pod" / "eviction of pod",
# with or without namespace and quotes: chaos tools and operators (``evicting pod X failed:``,
# ``Failed to evict pod X: {<Status JSON>}``, ``error evicting pod ns/X:``). Words that follow
# "evict pod" in the API's own sentences are not names.
_WRAPPED_POD_RE: Final = re.compile(
    r"\bevict(?:ing|ion of)? (?:the )?pods? [\"'`]?"
    r"(?!(?:as|because|that|which|failed|with|from|in|on|since|due|within|error|is)\b)"
    r"(?:([a-z0-9][-a-z0-9.]{0,252})/)?([a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)[\"'`]?(?=[\s:,;)]|$)",
    _I,
)
_FAILED_TO_RE: Final = re.compile(
    r'failed to (?:evict|delete|drain) pods? "?([^\s/":,]+)/([^\s":,]+?)"?(?=[\s:,)]|$)', _I
)
_KLOG_POD_RE: Final = re.compile(r'\bpod="([^"/\s]+)/([^"\s]+)')
_PDB_NEEDS_RE: Final = re.compile(
    r"The disruption budget (\S+) needs ([0-9]{1,9}) healthy pods? and has ([0-9]{1,9}) currently", _I
)
_PDB_DENIES_RE: Final = re.compile(
    r"The disruption budget (\S+) does not allow evicting pods currently"
    r"(?P<sync> because it failed sync: )?",
    _I,
)
_PDB_PROCESSING_RE: Final = re.compile(
    r"The disruption budget (\S+) is still being processed by the server", _I
)
_CA_RE: Final = re.compile(r"not enough pod disruption budget to move ([^\s/]+)/(\S+)", _I)
_KARPENTER_QUOTED_RE: Final = re.compile(r'pdb "?([^\s/"]+)/([^\s"]+)"? prevents pod evictions', _I)
_KARPENTER_KV_RE: Final = re.compile(
    r"pdb prevents pod evictions \(PodDisruptionBudget=\[?([^\s/\]]+)/([^\s\])]+)\]?\)", _I
)
_KARPENTER_MULTI_RE: Final = re.compile(
    r"(?:eviction does not support multiple PDBs|multiple PDBs) \(PodDisruptionBudget\(s\)=\[([^\]]*)\]\)", _I
)
_DO_NOT_DISRUPT_RE: Final = re.compile(r"karpenter\.sh/do-not-(?:disrupt|evict)", _I)
_KARPENTER_POD_KV_RE: Final = re.compile(r"\(Pod=([^\s/)]+)/([^\s)]+)\)", _I)
_KARPENTER_POD_QUOTED_RE: Final = re.compile(r'pod "([^"/\s]+)/([^"\s]+)" has', _I)
_PRESSURE_RE: Final = re.compile(r"The node was low on resource: ([\w./-]+)", _I)
_CONDITION_RE: Final = re.compile(r"The node had condition: \[?([^\].]*)\]?", _I)
_ADMISSION_RESOURCE_RE: Final = re.compile(r"Node didn't have enough resource: ([\w./-]+)", _I)
_ADMISSION_OTHER_RE: Final = re.compile(r"Predicate \S+ failed\b|Failed to admit pod\b", _I)
# What follows a cause that has no full stop of its own (a drain's next line).
_NEXT_LINE_RE: Final = re.compile(
    r"\s(?:evicting pod |error when evicting |pod/\S+ evicted|There are pending)", _I
)

_VIOLATION_MARKERS: Final = (
    "would violate the pod's disruption budget",
    "not enough pod disruption budget",
    "prevents pod evictions",
)


@dataclass(frozen=True, slots=True)
class Eviction:
    """An eviction refusal or failure: what kind, for which pod, and the PDB
    figures when the API's text is present.

    ``kind``: ``pdb-violation``, ``multiple-pdbs``, ``do-not-disrupt`` (Karpenter
    will not evict the pod), ``node-pressure`` (the kubelet evicted it),
    ``node-condition`` or ``kubelet-admission`` (the kubelet refused to run it),
    ``drain-refused`` (kubectl drain stopped before evicting: ``refusals`` holds
    each kind of pod it may not delete, with the flag that allows it and the pods)
    ``disruption-blocked`` (Karpenter will not disrupt the node: ``blocker`` names the
    cause, ``detail`` quotes it) or ``other``. ``sync_failed``: the budget's controller could not compute it,
    so the API allows no eviction whatever the pods' health (``detail`` says why).
    """

    kind: str
    pod: str | None
    namespace: str | None
    pdb: str | None = None
    desired_healthy: int | None = None
    current_healthy: int | None = None
    will_retry: bool = False
    detail: str | None = None
    sync_failed: bool = False
    budgets: tuple[str, ...] = ()
    resource: str | None = None
    refusals: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    blocker: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "pod": self.pod,
            "namespace": self.namespace,
            "pdb": self.pdb,
            "desired_healthy": self.desired_healthy,
            "current_healthy": self.current_healthy,
            "will_retry": self.will_retry,
            "detail": self.detail,
            "sync_failed": self.sync_failed,
            "budgets": list(self.budgets),
            "resource": self.resource,
            "refusals": [
                {"pods_that": what, "flag": flag, "pods": list(pods)} for what, flag, pods in self.refusals
            ],
            "blocker": self.blocker,
        }


_MARKERS: Final = (
    "evict",
    "cannot delete",
    "disruption budget",
    "poddisruptionbudget",
    "low on resource",
    "do-not-disrupt",
    "multiple pdbs",
    "had condition:",
    "didn't have enough resource",
    "failed to admit pod",
    "failed to delete pod",
    "failed to drain pod",
    "to override)",
    "to ignore)",
)


def looks_like_eviction(text: str) -> bool:
    lower = text.lower()
    return any(marker in lower for marker in _MARKERS) or ("predicate " in lower and " failed" in lower)


def _rest_of_cause(text: str) -> str:
    """A cause's text up to the next drain line or event row."""
    match = _NEXT_LINE_RE.search(text)
    return cut_at_next_event(text[: match.start()] if match is not None else text).strip()


def _pod_and_namespace(text: str) -> tuple[str | None, str | None, bool, str | None]:
    """(pod, namespace, will_retry, detail) from the wrappers that name the pod."""
    pod: str | None = None
    namespace: str | None = None
    will_retry = False
    detail: str | None = None
    match = _KUBECTL_NEW_RE.search(text)
    if match is not None:
        pod, namespace = match.group(1), match.group(2)
        will_retry = match.group(3) is not None
        detail = text[match.end() :].strip() or None
    else:
        old = _KUBECTL_OLD_RE.search(text)
        if old is not None:
            pod = old.group(1)
            will_retry = old.group(2) is not None
            detail = text[old.end() :].strip() or None
    if namespace is None:
        for regex in (
            _EVICTING_NS_RE,
            _FAILED_TO_RE,
            _KLOG_POD_RE,
            _CA_RE,
            _KARPENTER_POD_KV_RE,
            _KARPENTER_POD_QUOTED_RE,
        ):
            found = regex.search(text)
            if found is not None and (pod is None or found.group(2) == pod):
                namespace, pod = found.group(1), found.group(2)
                break
    if pod is None:
        for regex in (_EVICTING_OLD_RE, _EVICTED_RE):
            found = regex.search(text)
            if found is not None:
                pod = found.group(1)
                break
    if pod is None:
        wrapped = _WRAPPED_POD_RE.search(text)
        if wrapped is not None:
            namespace, pod = wrapped.group(1), wrapped.group(2)
    return pod, namespace, will_retry, detail


def _kubelet(text: str) -> Eviction | None:
    """The kubelet's node-pressure eviction and admission refusals."""
    pressure = _PRESSURE_RE.search(text)
    if pressure is not None:
        return Eviction(
            NODE_PRESSURE,
            None,
            None,
            detail=pressure.group(0).rstrip("."),
            resource=pressure.group(1).rstrip("."),
        )
    condition = _CONDITION_RE.search(text)
    if condition is not None:
        return Eviction(NODE_CONDITION, None, None, detail=until_terminator(condition.group(0))[0].strip())
    admission = _ADMISSION_RESOURCE_RE.search(text)
    if admission is not None:
        detail = cut_at_next_event(text[admission.start() :]).strip()
        return Eviction(KUBELET_ADMISSION, None, None, detail=detail, resource=admission.group(1))
    other = _ADMISSION_OTHER_RE.search(text)
    if other is not None:
        detail = until_terminator(cut_at_next_event(text[other.start() :]))[0].strip()
        return Eviction(KUBELET_ADMISSION, None, None, detail=detail)
    return None


def _drain_refusal(text: str) -> Eviction | None:
    """kubectl drain's refusal to start: every kind of pod it may not delete, and which
    (analyzers.messages.drain: every wording since 1.4)."""
    refusals = drain_refusals(text)
    if not refusals:
        return None
    every_pod = [p for _, _, kind_pods in refusals for p in kind_pods]
    namespace, name = None, None
    if len(every_pod) == 1:
        first = every_pod[0]
        namespace, _, name = first.rpartition("/") if "/" in first else ("", "", first)
    return Eviction(
        DRAIN_REFUSED,
        name or None,
        namespace or None,
        detail="; ".join(f"{what} ({flag})" for what, flag, _ in refusals),
        refusals=refusals,
    )


def parse_disruption_blocked(text: str) -> Eviction | None:
    """Karpenter's refusal to disrupt a node (``DisruptionBlocked``, ``Unconsolidatable``)
    for a cause other than a pod's budget or annotation; None when ``text`` holds none."""
    found = disruption_blocked(text)
    if found is None:
        return None
    blocker, cause, wrapped = found
    return Eviction(
        DISRUPTION_BLOCKED,
        None,
        None,
        detail=cause if wrapped is None else f"{wrapped} {cause}",
        blocker=blocker,
    )


def parse_eviction(text: str) -> Eviction | None:
    """Parse a cleaned eviction/drain text; None when it does not look like one."""
    if not looks_like_eviction(text):
        return None
    if "(use --" in text:
        refusal = _drain_refusal(text)
        if refusal is not None:
            return refusal
    lower = text.lower()
    pod, namespace, will_retry, detail = _pod_and_namespace(text)

    pdb: str | None = None
    desired: int | None = None
    current: int | None = None
    sync_failed = False
    budgets: tuple[str, ...] = ()
    needs = _PDB_NEEDS_RE.search(text)
    denies = _PDB_DENIES_RE.search(text) if needs is None else None
    processing = _PDB_PROCESSING_RE.search(text) if needs is None and denies is None else None
    if needs is not None:
        pdb, desired, current = needs.group(1), int(needs.group(2)), int(needs.group(3))
        detail = needs.group(0)
    elif denies is not None:
        pdb = denies.group(1)
        sync_failed = denies.group("sync") is not None
        # A sync failure's condition message may hold full stops: kept whole.
        tail = _rest_of_cause(text[denies.end() :])
        sep = "" if not tail or denies.group(0).endswith(" ") else " "
        detail = (denies.group(0) + sep + tail).strip()
    elif processing is not None:
        pdb = processing.group(1)
        detail = processing.group(0)
    else:
        multi = _KARPENTER_MULTI_RE.search(text)
        if multi is not None:
            budgets = tuple(b for b in multi.group(1).split() if b)
        for regex in (_KARPENTER_KV_RE, _KARPENTER_QUOTED_RE):
            karpenter = regex.search(text)
            if karpenter is not None:
                namespace = namespace or karpenter.group(1)
                pdb = karpenter.group(2)
                budgets = (f"{karpenter.group(1)}/{karpenter.group(2)}",)
                break

    if "more than one poddisruptionbudget" in lower or "multiple pdbs" in lower:
        kind = MULTIPLE_PDBS
    elif needs is not None or pdb is not None or any(m in lower for m in _VIOLATION_MARKERS):
        kind = PDB_VIOLATION
    elif _DO_NOT_DISRUPT_RE.search(text) is not None:
        kind = DO_NOT_DISRUPT
        found = _DO_NOT_DISRUPT_RE.search(text)
        detail = f"{found.group(0)} annotation" if found is not None else None
    else:
        kubelet = _kubelet(text)
        if kubelet is not None:
            return kubelet
        kind = OTHER
    if detail is None and kind != OTHER:
        detail = text
    if detail is not None and not sync_failed:
        detail = until_terminator(detail)[0].strip() or None
    return Eviction(
        kind=kind,
        pod=pod,
        namespace=namespace,
        pdb=pdb,
        desired_healthy=desired,
        current_healthy=current,
        will_retry=will_retry,
        detail=detail,
        sync_failed=sync_failed,
        budgets=budgets,
    )
