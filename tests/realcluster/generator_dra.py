"""Random DRA clusters and claims for the DRA differential run (issue 23).

A :class:`DraCase` is a cluster as a DRA driver would publish it -- Nodes, one
ResourceSlice per node (a pool per node; devices with attribute mixes, memory
capacity, sometimes a device taint; sometimes a partitionable GPU whose
partitions share counters from a counter-set slice of the same pool, or a pool
whose ``resourceSliceCount`` says a slice is still missing), DeviceClasses with
CEL selectors -- plus *holders*: pods with claims the real scheduler allocates
first (so devices are in use), and *probes*: a claim (or a template) with one
of every request form and the pod using it, each scheduled alone.

Request forms: ExactCount with a count, ``allocationMode: All``, selectors on
attributes and on capacity (quantity comparisons), ``firstAvailable``
subrequests, ``matchAttribute`` constraints over two requests, tolerations of
the device taint, a class that selects by model, a class that does not exist.

Everything comes from one ``random.Random(seed)``; a seed reproduces a run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.realcluster.harness import node

DRIVER = "gpu.unstick.test"
MODELS = ("A100", "H100", "L4")
TAINT = {"key": "unstick.test/degraded", "value": "true", "effect": "NoSchedule"}
API = "resource.k8s.io/v1"
EXTENDED = "unstick.test/gpu"  # served through DRA by class unstick-ext (DRAExtendedResource)


@dataclass
class DraCase:
    index: int
    nodes: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    classes: list[dict[str, Any]]
    holders: list[tuple[dict[str, Any], dict[str, Any]]]  # (claim, pod)
    # (claim or template, pod); None for a pod asking the DRA-backed extended resource
    probes: list[tuple[dict[str, Any] | None, dict[str, Any]]] = field(default_factory=list)


def _maybe(rng: random.Random, p: float) -> bool:
    return rng.random() < p


def device_classes() -> list[dict[str, Any]]:
    def cls(name: str, expr: str) -> dict[str, Any]:
        return {
            "apiVersion": API,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr}}]},
        }

    return [
        cls("unstick-gpu", f'device.driver == "{DRIVER}"'),
        cls("unstick-h100", f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "H100"'),
        {
            "apiVersion": API,
            "kind": "DeviceClass",
            "metadata": {"name": "unstick-ext"},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                "extendedResourceName": EXTENDED,
            },
        },
        cls(
            "unstick-big",
            f'device.driver == "{DRIVER}" && '
            f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0',
        ),
    ]


def _device(rng: random.Random, name: str) -> dict[str, Any]:
    model = rng.choice(MODELS)
    d: dict[str, Any] = {
        "name": name,
        "attributes": {
            "model": {"string": model},
            "numa": {"int": rng.randint(0, 1)},
            "driverVersion": {"version": rng.choice(("1.2.0", "1.10.3", "2.0.0"))},
        },
        "capacity": {"memory": {"value": rng.choice(("24Gi", "40Gi", "80Gi"))}},
    }
    if _maybe(rng, 0.1):
        d["taints"] = [dict(TAINT)]
    return d


def make_slices(rng: random.Random, case: int, node_name: str) -> list[dict[str, Any]]:
    pool = node_name
    devices = [_device(rng, f"gpu-{i}") for i in range(rng.randint(0, 4))]
    slices: list[dict[str, Any]] = []
    count = 1
    if _maybe(rng, 0.15):
        # A partitionable GPU: two halves and the whole consume one counter set
        # (kept in a slice of its own, as 1.35+ requires).
        count = 2
        slices.append(
            {
                "apiVersion": API,
                "kind": "ResourceSlice",
                "metadata": {"name": f"c{case}-{node_name}-counters"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node_name,
                    "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2},
                    "sharedCounters": [{"name": "mig-0", "counters": {"memory": {"value": "80Gi"}}}],
                },
            }
        )
        for name, mem in (("mig-0-whole", "80Gi"), ("mig-0-half-a", "40Gi"), ("mig-0-half-b", "40Gi")):
            devices.append(
                {
                    "name": name,
                    "attributes": {"model": {"string": "H100"}, "numa": {"int": 0}},
                    "capacity": {"memory": {"value": mem}},
                    "consumesCounters": [{"counterSet": "mig-0", "counters": {"memory": {"value": mem}}}],
                }
            )
    missing = _maybe(rng, 0.05)  # the pool announces one slice more than there is: not used
    slices.append(
        {
            "apiVersion": API,
            "kind": "ResourceSlice",
            "metadata": {"name": f"c{case}-{node_name}-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node_name,
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": count + (1 if missing else 0)},
                "devices": devices,
            },
        }
    )
    for s in slices:
        s["spec"]["pool"]["resourceSliceCount"] = count + (1 if missing else 0)
    return slices


def _selector(rng: random.Random) -> list[dict[str, Any]]:
    exprs = [
        f'device.attributes["{DRIVER}"].model == "{rng.choice(MODELS)}"',
        f'device.attributes["{DRIVER}"].numa == {rng.randint(0, 1)}',
        f'device.capacity["{DRIVER}"].memory.isGreaterThan(quantity("{rng.choice(("20Gi", "40Gi", "60Gi"))}"))',
        f'device.attributes["{DRIVER}"].model != "L4"',
    ]
    return [{"cel": {"expression": rng.choice(exprs)}}] if _maybe(rng, 0.5) else []


def _exact(rng: random.Random, cls: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "deviceClassName": cls or rng.choice(("unstick-gpu", "unstick-gpu", "unstick-h100", "unstick-big"))
    }
    if _maybe(rng, 0.12):
        body["allocationMode"] = "All"
    else:
        body["count"] = rng.choice((1, 1, 1, 2, 2, 3))
    sel = _selector(rng)
    if sel:
        body["selectors"] = sel
    if _maybe(rng, 0.2):
        body["tolerations"] = [{"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]
    return body


def claim_spec(rng: random.Random) -> dict[str, Any]:
    form = rng.random()
    if form < 0.5:
        return {"devices": {"requests": [{"name": "gpu", "exactly": _exact(rng)}]}}
    if form < 0.7:
        subs = []
        for i in range(rng.randint(2, 3)):
            sub = {"name": f"s{i}", **_exact(rng)}
            subs.append(sub)
        return {"devices": {"requests": [{"name": "gpu", "firstAvailable": subs}]}}
    if form < 0.9:
        a, b = _exact(rng), _exact(rng)
        a.pop("allocationMode", None)
        b.pop("allocationMode", None)
        a.setdefault("count", 1)
        b.setdefault("count", 1)
        return {
            "devices": {
                "requests": [{"name": "a", "exactly": a}, {"name": "b", "exactly": b}],
                "constraints": [{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/numa"}],
            }
        }
    if form < 0.95:
        return {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "unstick-none", "count": 1}}]
            }
        }
    return {"devices": {"requests": [{"name": "gpu", "exactly": _exact(rng, "unstick-gpu")}]}}


def _pod(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "10m"}},
                }
            ],
            "resourceClaims": [entry],
        },
    }


def make_case(rng: random.Random, index: int, probes: int) -> DraCase:
    nodes = [node(f"dra{index}-n{i}", cpu="8", memory="32Gi") for i in range(rng.randint(1, 4))]
    slices = [s for n in nodes for s in make_slices(rng, index, n["metadata"]["name"])]
    holders = []
    for h in range(rng.randint(0, 3)):
        claim = {
            "apiVersion": API,
            "kind": "ResourceClaim",
            "metadata": {"name": f"held-{index}-{h}"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": "unstick-gpu", "count": rng.randint(1, 2)},
                        }
                    ]
                }
            },
        }
        holders.append(
            (
                claim,
                _pod(f"holder-{index}-{h}", {"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}),
            )
        )
    case = DraCase(index, nodes, slices, device_classes(), holders)
    for p in range(probes):
        spec = claim_spec(rng)
        name = f"probe-{index}-{p}"
        if _maybe(rng, 0.12):
            pod = _pod(name, {"name": "unused", "resourceClaimName": "unused"})
            del pod["spec"]["resourceClaims"]
            amount = str(rng.randint(1, 3))
            resources = pod["spec"]["containers"][0]["resources"]
            resources["requests"][EXTENDED] = amount
            resources["limits"] = {EXTENDED: amount}
            case.probes.append((None, pod))
        elif _maybe(rng, 0.25):
            template = {
                "apiVersion": API,
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name},
                "spec": {"spec": spec},
            }
            case.probes.append((template, _pod(name, {"name": "gpu", "resourceClaimTemplateName": name})))
        else:
            claim = {"apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": name}, "spec": spec}
            case.probes.append((claim, _pod(name, {"name": "gpu", "resourceClaimName": name})))
    return case
