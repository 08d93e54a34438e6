"""GPU capacity per node, whichever way the cluster offers it: DRA devices per
DeviceClass (devices in the node's complete pools matching the class's
selectors, allocated ones -- some claim's allocation holds them -- and free), and
classic extended resources beside them (``nvidia.com/gpu``, MIG and time-sliced
names such as ``nvidia.com/mig-1g.10gb`` or ``nvidia.com/gpu.shared``,
``amd.com/gpu``): allocatable, requested by the pods bound there, free.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from analyzers.capacity import node_capacities
from analyzers.records import Device, DeviceClass, Node, Pod, ResourceClaim, ResourceSlice
from analyzers.simulator.dra import cel
from analyzers.simulator.dra.allocator import gather_pools
from analyzers.simulator.dra.plugin import allocated_state, extended_resource_classes, pod_claims
from analyzers.snapshot import ClusterSnapshot

_GPU_PREFIXES = ("nvidia.com/", "amd.com/gpu", "gpu.intel.com/", "habana.ai/", "aws.amazon.com/neuron")


@dataclass(frozen=True, slots=True)
class GpuRow:
    node: str
    source: str  # "dra" | "extended-resource"
    name: str  # the DeviceClass, or the resource name
    total: int
    allocated: int

    @property
    def free(self) -> int:
        return self.total - self.allocated

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "source": self.source,
            "name": self.name,
            "total": self.total,
            "allocated": self.allocated,
            "free": self.free,
        }


def is_gpu_resource(name: str) -> bool:
    return name.startswith(_GPU_PREFIXES)


def _class_devices(
    snapshot: ClusterSnapshot, node: Node, classes: Sequence[DeviceClass]
) -> Iterator[tuple[str, ResourceSlice, Device]]:
    """(DeviceClass name, slice, device) for every device of the node's complete, valid
    pools that matches the class's selectors (a device may match several classes)."""
    slices = list(snapshot.resource_slices.values())
    for pool in gather_pools(node, slices, slices):
        if pool.incomplete or pool.invalid:
            continue
        for s in pool.slices:
            for d in s.devices:
                var = cel.device_variable(s.driver, d.attributes, d.capacity, d.allow_multiple)
                for cls in classes:
                    if not cls.problem and _matches(cls.selectors, var):
                        yield cls.name, s, d


def gpu_capacity(snapshot: ClusterSnapshot) -> list[GpuRow]:
    """One row per node and DeviceClass with devices there, and per node and GPU
    extended resource it has, in node order."""
    rows: list[GpuRow] = []
    caps = node_capacities(snapshot)
    state = allocated_state(snapshot) if snapshot.resource_slices else None
    classes = sorted(snapshot.device_classes.values(), key=lambda c: c.name)
    for name in sorted(snapshot.nodes):
        node = snapshot.nodes[name]
        if state is not None and classes:
            counts: dict[str, list[int]] = {}
            for cls_name, s, d in _class_devices(snapshot, node, classes):
                did = (s.driver, s.pool, d.name)
                row = counts.setdefault(cls_name, [0, 0])
                row[0] += 1
                row[1] += did in state.devices or did in state.shared
            rows.extend(
                GpuRow(name, "dra", cls, total, used) for cls, (total, used) in sorted(counts.items())
            )
        cap = caps.get(name)
        for res, amount in sorted(node.allocatable.items()):
            if is_gpu_resource(res) and amount > 0:
                used = cap.requested.get(res, 0) if cap is not None else 0
                rows.append(GpuRow(name, "extended-resource", res, amount, used))
    return rows


# Device taints that keep the allocator away from a device without a toleration
# (structured/allocator.go, v0.37.2: NoSchedule and NoExecute; "None" only reports).
_BLOCKING_TAINTS = ("NoSchedule", "NoExecute")


def pod_device_classes(snapshot: ClusterSnapshot, pod: Pod) -> list[str]:
    """The DeviceClasses the pod's claims ask for (every ``exactly`` and ``firstAvailable``
    request) and those backing its extended resources through DRA (``extendedResourceName``)."""
    names: set[str] = set()
    for claim in pod_claims(snapshot, pod) or ():
        for request in claim.spec.requests:
            for sub in (request.exactly,) if request.exactly else request.first_available:
                names.add(sub.class_name)
    backing = extended_resource_classes(snapshot)
    names.update(backing[r].name for r, q in pod.spec.requests.items() if q > 0 and r in backing)
    return sorted(names)


def device_inventory(
    snapshot: ClusterSnapshot, nodes: Sequence[str], classes: Sequence[str]
) -> list[dict[str, Any]]:
    """Per node (in the order given) and DeviceClass of ``classes`` with devices there:
    each device allocated (to which claim, reserved for which pods), tainted (a NoSchedule
    or NoExecute device taint, not allocated) or free."""
    wanted = sorted(
        (c for c in snapshot.device_classes.values() if c.name in set(classes)), key=lambda c: c.name
    )
    if not wanted or not snapshot.resource_slices:
        return []
    holders: dict[tuple[str, str, str], ResourceClaim] = {}
    for claim in sorted(snapshot.resource_claims.values(), key=lambda c: c.key):
        for r in claim.allocation:
            if not r.admin_access:
                holders.setdefault((r.driver, r.pool, r.device), claim)
    out: list[dict[str, Any]] = []
    for name in nodes:
        node = snapshot.nodes.get(name)
        if node is None:
            continue
        per_class: dict[str, dict[str, Any]] = {}
        for cls_name, s, d in _class_devices(snapshot, node, wanted):
            row = per_class.setdefault(
                cls_name, {"node": name, "device_class": cls_name, "allocated": [], "tainted": [], "free": []}
            )
            device = {"driver": s.driver, "pool": s.pool, "device": d.name}
            holder = holders.get((s.driver, s.pool, d.name))
            taints = [
                f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}"
                for t in d.taints
                if t.effect in _BLOCKING_TAINTS
            ]
            if holder is not None:
                pods = [
                    _holder_pod(snapshot, holder.namespace, r.name)
                    for r in holder.reserved_for
                    if r.resource == "pods"
                ]
                row["allocated"].append(
                    {**device, "claim": f"{holder.namespace}/{holder.name}", "reserved_for": pods}
                )
            elif taints:
                row["tainted"].append({**device, "taints": taints})
            else:
                row["free"].append(device)
        for cls_name in sorted(per_class):
            row = per_class[cls_name]
            row["total"] = len(row["allocated"]) + len(row["tainted"]) + len(row["free"])
            out.append(row)
    return out


def _holder_pod(snapshot: ClusterSnapshot, namespace: str, name: str) -> dict[str, str]:
    """A pod a claim is reserved for, and its state: its phase, ``Terminating`` while it is
    being deleted, ``gone`` when the snapshot has no such pod (a claim that outlived its pod)."""
    pod = snapshot.pods.get((namespace, name))
    state = "gone" if pod is None else "Terminating" if pod.deleted is not None else pod.phase
    return {"pod": f"{namespace}/{name}", "state": state}


def _matches(selectors: tuple[str, ...], var: dict[str, Any]) -> bool:
    for expr in selectors:
        compiled = cel.compile_selector(expr)
        if compiled.error:
            return False
        try:
            if not cel.evaluate(compiled, var):
                return False
        except cel.CelError:
            return False
    return True


# The NVIDIA device plugin's sharing modes rename what it advertises: time-slicing with
# ``renameByDefault`` advertises ``nvidia.com/gpu.shared`` (``nvidia.com/gpu.replicas`` label
# on the node: the replicas per GPU), MIG strategy ``mixed`` one resource per profile
# (``nvidia.com/mig-1g.10gb``), strategy ``single`` the MIG slices as ``nvidia.com/gpu``.
TIME_SLICING_REPLICAS_LABEL = "nvidia.com/gpu.replicas"


@dataclass(frozen=True, slots=True)
class OtherName:
    resource: str
    nodes: int
    total: int
    kind: str  # "mig" | "time-sliced" | "gpu"


def other_gpu_names(snapshot: ClusterSnapshot, resource: str) -> list[OtherName]:
    """GPU resources the nodes advertise under another name than ``resource``, of the
    same vendor (``nvidia.com/gpu`` asked; ``nvidia.com/gpu.shared`` or
    ``nvidia.com/mig-1g.10gb`` offered), most offered first."""
    if not is_gpu_resource(resource) or "/" not in resource:
        return []
    vendor = resource.split("/", 1)[0] + "/"
    found: dict[str, list[int]] = {}
    for node in snapshot.nodes.values():
        for name, amount in node.allocatable.items():
            if name == resource or not name.startswith(vendor) or amount <= 0:
                continue
            tail = name[len(vendor) :]
            if not (tail.startswith(("gpu", "mig-"))):
                continue
            row = found.setdefault(name, [0, 0])
            row[0] += 1
            row[1] += amount
    out = []
    for name, (nodes, total) in found.items():
        tail = name[len(vendor) :]
        kind = "mig" if tail.startswith("mig-") else "time-sliced" if tail.endswith(".shared") else "gpu"
        out.append(OtherName(name, nodes, total, kind))
    return sorted(out, key=lambda o: (-o.total, o.resource))


def time_sliced_nodes(snapshot: ClusterSnapshot) -> dict[str, int]:
    """Nodes whose GPUs are time-sliced (the device plugin's replicas label) -> replicas."""
    out = {}
    for node in snapshot.nodes.values():
        value = node.labels.get(TIME_SLICING_REPLICAS_LABEL, "")
        if value.isdigit() and int(value) > 1:
            out[node.name] = int(value)
    return out
