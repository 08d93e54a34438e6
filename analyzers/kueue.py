"""Which Kueue Workload holds a pod, and what Kueue last said about it.

A pod Kueue manages waits behind the ``kueue.x-k8s.io/admission`` scheduling gate;
why it waits is on its Workload (the ``Pending`` event, ``inadmissibleMsg``). The
Workload's name is derived from the object Kueue manages (sigs.k8s.io/kueue v0.17.0,
``pkg/controller/jobframework/workload_names.go``)::

    truncate(lower(kind) + "-" + name, maxLength - 6) + "-" + sha1(kind "\\n" group "\\n" name "\\n" uid)[:5]

with ``maxLength`` 253, or 63 under the ShortWorkloadNames feature gate. The managed
object is the pod's top-level owner (a Job, a JobSet over its Jobs, ...), or the pod
itself for plain pods; a pod group's Workload is named after the group
(``kueue.x-k8s.io/pod-group-name``). Names are computed, never guessed from prefixes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from analyzers.records import Event, OwnerRef, Pod

ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"
POD_GROUP_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
# inadmissibleMsg is posted as "Pending"; a failed second pass (topology) as "SecondPassFailed".
WORKLOAD_EVENT_REASONS: Final = frozenset({"Pending", "SecondPassFailed"})
_HASH_LENGTH: Final = 5
_MAX_NAME_LENGTHS: Final = (253, 63)


def workload_name(kind: str, group: str, name: str, uid: str, max_length: int = 253) -> str:
    """GenerateWorkloadNameWithExtra(name, uid, gvk, "") of Kueue v0.17.0."""
    prefix = f"{kind.lower()}-{name}"[: max_length - 1 - _HASH_LENGTH]
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode(), usedforsecurity=False).hexdigest()
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


def _managed_objects(pod: Pod, parents: Mapping[tuple[str, str], OwnerRef]) -> Iterator[OwnerRef]:
    """The pod itself, then its owner chain upwards (as far as the snapshot knows it)."""
    yield OwnerRef("Pod", pod.name, pod.uid, "v1")
    owner, seen = pod.owner, 0
    while owner is not None and seen < 8:
        yield owner
        owner, seen = parents.get((owner.kind, owner.name)), seen + 1


def candidate_workloads(pod: Pod, parents: Mapping[tuple[str, str], OwnerRef]) -> tuple[str, ...]:
    """Every name the pod's Workload can have: per managed object and name length,
    and the pod group's name. ``parents`` maps (kind, name) in the pod's namespace to
    that object's own controller owner."""
    names: list[str] = []
    group = pod.labels.get(POD_GROUP_LABEL)
    if group:
        names.append(group)
    for ref in _managed_objects(pod, parents):
        if not ref.uid:
            continue
        for length in _MAX_NAME_LENGTHS:
            name = workload_name(ref.kind, ref.group, ref.name, ref.uid, length)
            if name not in names:
                names.append(name)
    return tuple(names)


def newest_workload_event(events: Iterable[Event]) -> Event | None:
    """The newest of Kueue's Workload events that say why it is not admitted."""
    found = [ev for ev in events if ev.reason in WORKLOAD_EVENT_REASONS]
    return max(found, key=lambda ev: ev.last_seen or 0.0) if found else None
