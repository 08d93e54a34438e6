"""The live agent's reads of custom controllers' ``/scale`` for PodDisruptionBudget arithmetic.

The disruption controller's last finder, getScaleController
(pkg/controller/disruption/disruption.go, v1.35.4), maps a pod's controllerRef to its
resource with the RESTMapper (discovery), GETs the ``/scale`` subresource (an
autoscaling/v1 Scale: its UID and spec.replicas), and on a 404 asks discovery whether
the resource implements the scale subresource at all (implementsScale). ``ScaleReader``
does the same through the gateway for the controllers ``analyzers.disruption.scale_targets``
names, and keeps each outcome in the ClusterState as a ``ScaleReading``, which
``analyzers.disruption`` reads like any other record:

* the Scale read: its UID and replicas;
* 404 and discovery lists ``PLURAL/scale``: the object is gone (the finder finds nothing,
  so upstream's ``found no controllers``);
* 404 and no scale subresource, or a kind discovery does not serve: upstream's error
  (the controller fails safe) -- ``problem``;
* 403 (RBAC: ``get`` on ``*/scale`` is opt-in, the chart's ``scaleSubresource``), or any
  failure of the API: ``unknown``, with the reason; the budget is then shown from its
  own status.

Each controller is read at most once per ``interval`` seconds; a reading that did not
change leaves the state (and so the analysis) alone.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agent.kube.errors import Forbidden, KubeError, NotFound, Unauthorized
from agent.kube.gateway import Gateway
from analyzers.disruption import scale_targets
from analyzers.records import OwnerRef, ScaleReading
from analyzers.snapshot import ClusterState

__all__ = ["SCALE_VERSIONS", "ScaleReader", "implements_scale", "resource_for"]

log = logging.getLogger(__name__)

# client-go scale.NewScaleConverter().ScaleVersions() (k8s.io/client-go/scale/util.go, v0.35.4).
SCALE_VERSIONS = frozenset(
    {
        ("autoscaling", "v1"),
        ("autoscaling", "__internal"),
        ("extensions", "v1beta1"),
        ("extensions", "__internal"),
        ("apps", "__internal"),
        ("apps", "v1beta1"),
        ("apps", "v1beta2"),
    }
)


def resource_for(resources: Iterable[Mapping[str, Any]], kind: str) -> str | None:
    """The RESTMapper's answer from one group version's discovery: the resource (not a
    subresource) serving ``kind``."""
    for r in resources:
        name = r.get("name")
        if isinstance(name, str) and "/" not in name and r.get("kind") == kind:
            return name
    return None


def implements_scale(resources: Iterable[Mapping[str, Any]], plural: str) -> bool:
    """implementsScale (disruption.go): discovery lists ``PLURAL/scale`` as a ``Scale``
    of one of the scale client's group versions."""
    return any(
        r.get("name") == f"{plural}/scale"
        and r.get("kind") == "Scale"
        and (r.get("group"), r.get("version")) in SCALE_VERSIONS
        for r in resources
    )


class ScaleReader:
    """Reads ``/scale`` for the custom controllers PDB budgets need, into a ClusterState."""

    def __init__(
        self, gateway: Gateway, *, interval: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.gateway = gateway
        self.interval = interval
        self.clock = clock
        self.reads = 0
        self._read_at: dict[tuple[str, OwnerRef], float] = {}

    async def refresh(self, state: ClusterState) -> int:
        """Read the scales due; returns how many readings changed the state."""
        return len(await self.refresh_readings(state))

    async def refresh_readings(self, state: ClusterState) -> list[ScaleReading]:
        """Read the scales due into ``state``; returns the readings that changed it (what a
        publisher sends on, agent.stream.publisher.ScaleRelay)."""
        snapshot = state.snapshot()
        changed: list[ScaleReading] = []
        targets = scale_targets(snapshot)
        # Readings of controllers no budget needs any more go, with their read times.
        wanted = {(ns, ref) for ns, ref in targets}
        self._read_at = {k: v for k, v in self._read_at.items() if k in wanted}
        state.forget_scales(
            {(ns, ref.api_version.rpartition("/")[0], ref.kind, ref.name) for ns, ref in targets}
        )
        for namespace, ref in sorted(targets, key=lambda t: (t[0], t[1].kind, t[1].name)):
            now = self.clock()
            if now - self._read_at.get((namespace, ref), -math.inf) < self.interval:
                continue
            self._read_at[(namespace, ref)] = now
            reading = await self.read(namespace, ref)
            if snapshot.scales.get(reading.key) != reading:
                state.apply(reading)
                changed.append(reading)
                if reading.unknown is not None:
                    log.warning(
                        "PodDisruptionBudget arithmetic: %s",
                        reading.unknown,
                        extra={"k8s_object": f"{ref.kind}/{namespace}/{ref.name}"},
                    )
        return changed

    async def read(self, namespace: str, ref: OwnerRef) -> ScaleReading:
        group, _, version = ref.api_version.rpartition("/")
        what = f'{ref.kind} "{ref.name}" in {namespace}'
        self.reads += 1
        try:
            resources = await self.gateway.api_resources(group, version)
        except NotFound:
            resources = []
        except KubeError as exc:
            return self._unknown(namespace, group, ref, f"the discovery of {ref.api_version} failed ({exc})")
        plural = resource_for(resources, ref.kind)
        if plural is None:  # meta.NoKindMatchError
            problem = f'no matches for kind "{ref.kind}" in version "{ref.api_version}"'
            return ScaleReading(namespace, group, ref.kind, ref.name, problem=problem)
        path = f"/apis/{group}/{version}/namespaces/{namespace}/{plural}/{ref.name}/scale"
        try:
            scale = await self.gateway.get_scale(group, version, namespace, plural, ref.name)
        except NotFound:
            if not implements_scale(resources, plural):
                problem = f"{plural}.{group} does not implement the scale subresource"
                return ScaleReading(namespace, group, ref.kind, ref.name, problem=problem)
            return ScaleReading(namespace, group, ref.kind, ref.name)  # gone: no controller found
        except (Forbidden, Unauthorized) as exc:
            return self._unknown(
                namespace,
                group,
                ref,
                f"GET {path} was refused ({exc}); the scale of {what} needs get on {plural}/scale "
                "(the chart's scaleSubresource value)",
            )
        except KubeError as exc:
            return self._unknown(namespace, group, ref, f"GET {path} failed ({exc})")
        meta, spec = scale.get("metadata"), scale.get("spec")
        meta = meta if isinstance(meta, dict) else {}
        spec = spec if isinstance(spec, dict) else {}
        replicas = spec.get("replicas", 0)  # ScaleSpec.replicas is omitempty: absent is 0
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            return self._unknown(namespace, group, ref, f"GET {path}: spec.replicas is not an integer")
        return ScaleReading(
            namespace, group, ref.kind, ref.name, uid=str(meta.get("uid") or ""), replicas=replicas
        )

    def _unknown(self, namespace: str, group: str, ref: OwnerRef, why: str) -> ScaleReading:
        return ScaleReading(namespace, group, ref.kind, ref.name, unknown=why)
