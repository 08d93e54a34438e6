"""``kubectl drain``'s (and ``oc adm drain``'s) refusal to start, in every wording since 1.5.

Before evicting anything, drain lists the node's pods and refuses when some may not be
deleted without a flag. Each refusal is one fatal filter message and the pods it holds:

- kubernetes ``pkg/kubectl/cmd/drain.go`` (v1.5-v1.10) and ``pkg/kubectl/cmd/drain/drain.go``
  (v1.11-v1.14; read at v1.5.8, v1.9.11, v1.13.12): ``podStatuses.Message()`` prints ``<fatal>: <pod>, <pod>`` per kind,
  the kinds joined with ``"; "``, pod names **without** namespace, lower-case ``pods``:
  ``pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet
  (use --force to override)`` (earlier: ``..., Job, or DaemonSet``), ``DaemonSet-managed pods
  (use --ignore-daemonsets to ignore)``, ``pods with local storage (use --delete-local-data
  to override)``; printed as ``error: <message>``.
- ``k8s.io/kubectl pkg/drain/filters.go`` (read at v0.17.0, v0.18.0, v0.20.0, v0.37.2; and
  ``oc adm drain``, which is kubectl's drain command: openshift/oc ``pkg/cli/admin/admin.go``): ``cannot delete <fatal>: <ns>/<pod>, <ns>/<pod>`` per kind, aggregated
  (``[a, b]`` when more than one), capital ``Pods``; ``--delete-emptydir-data`` replaces
  ``--delete-local-data`` in v0.20; ``Pods that declare no controller`` replaces ``Pods not
  managed by ...`` in v0.19 (and v0.19-v0.2x print ``cannot delete`` twice before it).
- Both are wrapped by ``error: unable to drain node "<node>" due to error: <error>,
  continuing command...`` / ``aborting command...`` and repeated after ``There are pending
  nodes to be drained:``.

The flag in the text says which filter refused; pods are kept in the order printed,
each once. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Final

# One fatal filter message: what is refused and the flag that allows it.
_FATAL_RE: Final = re.compile(
    r"(?:cannot delete )*(?P<what>(?:Pods|DaemonSet-managed)\b[^():;\[\]]{0,160}?)\s*"
    r"\(use (?P<flag>--[\w-]{1,40}) to (?:override|ignore)\):\s*",
    re.IGNORECASE,
)
# What can follow the last pod of a list and is not a pod.
_NOT_A_POD: Final = r"(?!(?:continuing|aborting|cannot|pods?|there|error|evicting|node|daemonset-managed)\b)"
_NAME: Final = r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?"
_POD_RE: Final = re.compile(_NOT_A_POD + rf"(?:{_NAME}/)?{_NAME}(?=[,;\]\s]|$)")
_SEPARATOR_RE: Final = re.compile(r",\s*")

Refusal = tuple[str, str, tuple[str, ...]]


def _pods_at(text: str, start: int) -> tuple[str, ...]:
    """The ``<pod>, <pod>`` list that begins at ``start``."""
    pods: list[str] = []
    at = start
    while True:
        match = _POD_RE.match(text, at)
        if match is None:
            break
        pods.append(match.group(0))
        sep = _SEPARATOR_RE.match(text, match.end())
        if sep is None:
            break
        at = sep.end()
    return tuple(pods)


def drain_refusals(text: str) -> tuple[Refusal, ...]:
    """Every (what, flag, pods) refusal in ``text``, one per kind (the summary after
    ``There are pending nodes`` repeats the error: its pods are merged, not doubled)."""
    seen: dict[tuple[str, str], tuple[str, ...]] = {}
    for match in _FATAL_RE.finditer(text):
        pods = _pods_at(text, match.end())
        if not pods:
            continue
        key = (" ".join(match.group("what").split()), match.group("flag"))
        seen[key] = tuple(dict.fromkeys(seen.get(key, ()) + pods))
    return tuple((what, flag, pods) for (what, flag), pods in seen.items())
