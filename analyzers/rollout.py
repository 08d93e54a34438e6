"""Deployment rollout arithmetic, exactly as the deployment controller does it.

* ``scaled_value`` is apimachinery's ``GetScaledValueFromIntOrPercent``
  (staging/src/k8s.io/apimachinery/pkg/util/intstr/intstr.go).
* ``resolve_fenceposts`` is ``ResolveFenceposts`` from
  pkg/controller/deployment/util/deployment_util.go: maxSurge rounds up,
  maxUnavailable rounds down, and when both resolve to zero maxUnavailable
  becomes 1.
* ``effective_max_surge`` / ``effective_max_unavailable`` are ``MaxSurge`` /
  ``MaxUnavailable`` of the same file (Recreate → 0; unavailable capped at
  replicas; 0 replicas → 0 unavailable).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from analyzers.records import Deployment, ReplicaSet
from analyzers.snapshot import CARRIED, ClusterSnapshot


class IntOrPercentError(ValueError):
    pass


def scaled_value(value: int | str | None, total: int, round_up: bool) -> int:
    """GetScaledValueFromIntOrPercent: an int is itself; ``"N%"`` is N% of total,
    rounded up or down; any other string is an error."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = value.strip()
    if not text.endswith("%"):
        raise IntOrPercentError(
            f"invalid value for IntOrString: invalid type: string is not a percentage: {value!r}"
        )
    try:
        percent = int(text[:-1])
    except ValueError as exc:
        raise IntOrPercentError(f"invalid value {value!r}: {exc}") from exc
    # Go computes math.Ceil/Floor(float64(value) * float64(total) / 100).
    scaled = float(percent) * float(total) / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def resolve_fenceposts(
    max_surge: int | str | None, max_unavailable: int | str | None, desired: int
) -> tuple[int, int]:
    surge = scaled_value(max_surge, desired, True)
    unavailable = scaled_value(max_unavailable, desired, False)
    if surge == 0 and unavailable == 0:
        # "If both fenceposts resolve to zero, then we should set maxUnavailable to 1
        # on the theory that surge might not work due to quota."
        unavailable = 1
    return surge, unavailable


def effective_max_surge(dep: Deployment) -> int:
    if dep.strategy_type != "RollingUpdate":
        return 0
    return resolve_fenceposts(dep.max_surge, dep.max_unavailable, dep.replicas)[0]


def effective_max_unavailable(dep: Deployment) -> int:
    if dep.strategy_type != "RollingUpdate" or dep.replicas == 0:
        return 0
    unavailable = resolve_fenceposts(dep.max_surge, dep.max_unavailable, dep.replicas)[1]
    return min(unavailable, dep.replicas)


def describe_fenceposts(dep: Deployment) -> str:
    """Plain words: '25% of 1 replica rounds up to a surge of 1 and down to 0 unavailable'.
    When both resolve to 0 the words give the 0 and say the controller uses 1."""
    if dep.strategy_type != "RollingUpdate":
        return f"strategy {dep.strategy_type} replaces all pods at once (no surge)"
    surge = effective_max_surge(dep)
    n = dep.replicas
    replicas = f"{n} replica" if n == 1 else f"{n} replicas"
    ms, mu = dep.max_surge, dep.max_unavailable
    both_zero = surge == 0 and scaled_value(mu, n, False) == 0
    unavailable = 0 if both_zero else effective_max_unavailable(dep)
    if isinstance(ms, str) and ms == mu:
        text = f"{ms} of {replicas} rounds up to a surge of {surge} and down to {unavailable} unavailable"
    else:
        parts = []
        parts.append(
            f"maxSurge {ms} of {replicas} rounds up to {surge}"
            if isinstance(ms, str)
            else f"maxSurge is {surge}"
        )
        parts.append(
            f"maxUnavailable {mu} rounds down to {unavailable}"
            if isinstance(mu, str)
            else f"maxUnavailable is {unavailable}"
        )
        text = ", ".join(parts)
    if both_zero:
        text += " (both resolved to 0, so the controller uses maxUnavailable 1)"
    return text


def is_new_replicaset(dep: Deployment, rs: ReplicaSet) -> bool:
    """The new ReplicaSet carries the Deployment's revision, or (without revisions) its pod template."""
    if dep.revision and rs.revision:
        return dep.revision == rs.revision
    labels = {k: v for k, v in rs.template_labels.items() if k != "pod-template-hash"}
    return rs.template is dep.template and labels == dict(dep.template_labels)


NO_UNAVAILABLE_KEY = "rollout.no_unavailable"


def _takes_no_pod_down(dep: Deployment) -> bool:
    """A rolling update that may not make any pod unavailable (maxUnavailable resolves to
    0), not paused, with replicas: the rollouts that can wait on their own old pods. A
    malformed IntOrString counts, so that whoever reads it meets the error."""
    if dep.strategy_type != "RollingUpdate" or dep.paused or dep.replicas == 0:
        return False
    try:
        return effective_max_unavailable(dep) == 0
    except IntOrPercentError:
        return True


def rollouts_taking_no_pod_down(snapshot: ClusterSnapshot) -> tuple[Deployment, ...]:
    """The snapshot's Deployments for which ``_takes_no_pod_down`` holds, by (namespace,
    name). Carried from one snapshot of the live agent to the next: a pass works out the
    arithmetic of the Deployments that changed, not of all 3,200."""

    def build() -> tuple[Deployment, ...]:
        return tuple(
            snapshot.deployments[key] for key in sorted(snapshot.deployments)
            if _takes_no_pod_down(snapshot.deployments[key])
        )

    found: tuple[Deployment, ...] = snapshot.derived(NO_UNAVAILABLE_KEY, build)
    return found


def _carry_rollouts(
    base: tuple[Deployment, ...],
    older: ClusterSnapshot,
    newer: ClusterSnapshot,
    changes: Mapping[str, Sequence[tuple[Any, Any]]],
) -> tuple[Deployment, ...]:
    pairs = changes.get("deployments", ())
    if not pairs:
        return base
    found = {dep.key: dep for dep in base}
    for old, new in pairs:
        found.pop((old if old is not None else new).key, None)
        if new is not None and _takes_no_pod_down(new):
            found[new.key] = new
    return tuple(found[key] for key in sorted(found))


CARRIED[NO_UNAVAILABLE_KEY] = _carry_rollouts
