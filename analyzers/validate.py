"""Types of the fields unstick reads, checked before an object from a file is
decoded.

The API server validates what it stores, so objects from a live cluster have
the right types; a dump a user was handed need not. ``check_object`` walks
the fields ``analyzers.ingest.Decoder`` reads and returns the first one with
the wrong type or an unusable value, as ``path: problem`` (``spec.containers:
expected an array, found string``), so a bad object is skipped with a warning
naming the field instead of being read as something it is not.

Fields unstick does not read are not looked at. ``null`` stands for an absent
field everywhere, as in the API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from analyzers.quantity import QuantityError, to_units

# A checker returns the problem with ``value`` at ``path``, or None.
Checker = Callable[[Any, str], "str | None"]

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def json_type(value: Any) -> str:
    """The JSON name of a Python value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _expected(path: str, what: str, value: Any) -> str:
    return f"{path}: expected {what}, found {json_type(value)}"


def _str(value: Any, path: str) -> str | None:
    if value is None or isinstance(value, str):
        return None
    return _expected(path, "a string", value)


def _time(value: Any, path: str) -> str | None:
    # YAML reads unquoted timestamps as datetimes; ingest.parse_time ignores them (no time).
    if value is None or isinstance(value, str) or type(value).__name__ in ("datetime", "date"):
        return None
    return _expected(path, "an RFC 3339 time string", value)


def _bool(value: Any, path: str) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    return _expected(path, "a boolean", value)


def _int(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return _expected(path, "an integer", value)
    if isinstance(value, float):
        if not value.is_integer():
            return f"{path}: expected an integer, found {value!r}"
        value = int(value)
    elif isinstance(value, str):  # ingest reads "3" as 3, as kubectl's YAML never writes but users do
        text = value.strip()
        if not text.lstrip("-").isdigit() or len(text) > 20:
            return f"{path}: expected an integer, found string {value[:40]!r}"
        value = int(text)
    elif not isinstance(value, int):
        return _expected(path, "an integer", value)
    if not INT64_MIN <= value <= INT64_MAX:
        return f"{path}: integer out of the 64-bit range"
    return None


def _int_or_percent(value: Any, path: str) -> str | None:
    """intstr.IntOrString as maxSurge, maxUnavailable, minAvailable use it: an
    integer, or a string ``N%`` (apimachinery GetScaledValueFromIntOrPercent)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return _int(text, path)
        if text.endswith("%") and text[:-1].isdigit() and len(text) <= 11:
            return None
        return f"{path}: expected an integer or a percentage such as 25%, found {value[:40]!r}"
    if isinstance(value, int) and not isinstance(value, bool):
        return _int(value, path)
    return _expected(path, "an integer or a percentage string", value)


def _quantity(value: Any, path: str, resource: str) -> str | None:
    try:
        to_units(resource, value)
    except QuantityError as exc:
        detail = str(exc)
        if detail.startswith(resource + ": "):
            detail = detail[len(resource) + 2 :]
        return f"{path}: {detail}"
    return None


def _quantities(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return _expected(path, "an object of quantities", value)
    for k, v in value.items():
        if not isinstance(k, str):
            return f"{path}: resource names must be strings, found {json_type(k)}"
        problem = _quantity(v, f"{path}.{k}", k)
        if problem:
            return problem
    return None


def _strings(value: Any, path: str) -> str | None:
    """A map of strings (labels, annotations, nodeSelector)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return _expected(path, "an object of strings", value)
    for k, v in value.items():
        if not isinstance(k, str):
            return f"{path}: keys must be strings, found {json_type(k)}"
        if v is not None and not isinstance(v, str):
            return _expected(f"{path}.{k}", "a string", v)
    return None


def obj(**fields: Checker) -> Checker:
    items = tuple(fields.items())

    def check(value: Any, path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            return _expected(path or "the object", "an object", value)
        for name, checker in items:
            field = value.get(name)
            if field is not None:
                problem = checker(field, f"{path}.{name}" if path else name)
                if problem:
                    return problem
        return None

    return check


def array(item: Checker) -> Checker:
    def check(value: Any, path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, list | tuple):
            return _expected(path, "an array", value)
        for i, v in enumerate(value):
            problem = (
                _expected(f"{path}[{i}]", "an object", v)
                if v is None and item is not _str
                else item(v, f"{path}[{i}]")
            )
            if problem:
                return problem
        return None

    return check


# -- the fields ingest reads --------------------------------------------------

_OWNER = obj(kind=_str, name=_str, uid=_str, controller=_bool)
_METADATA = obj(
    name=_str,
    namespace=_str,
    uid=_str,
    labels=_strings,
    annotations=_strings,
    ownerReferences=array(_OWNER),
    creationTimestamp=_time,
    deletionTimestamp=_time,
    generation=_int,
    managedFields=array(obj(time=_time)),
)
# lastHeartbeatTime and lastProbeTime date the dump (agent.dumps.DumpFacts).
_CONDITION = obj(
    type=_str,
    status=_str,
    reason=_str,
    message=_str,
    lastTransitionTime=_time,
    lastHeartbeatTime=_time,
    lastProbeTime=_time,
)
_REQUIREMENT = obj(key=_str, operator=_str, values=array(_str))
_LABEL_SELECTOR = obj(matchLabels=_strings, matchExpressions=array(_REQUIREMENT))
_NODE_SELECTOR = obj(
    nodeSelectorTerms=array(obj(matchExpressions=array(_REQUIREMENT), matchFields=array(_REQUIREMENT)))
)
_AFFINITY_TERM = obj(
    topologyKey=_str,
    labelSelector=_LABEL_SELECTOR,
    namespaces=array(_str),
    namespaceSelector=_LABEL_SELECTOR,
    matchLabelKeys=array(_str),
    mismatchLabelKeys=array(_str),
)
_POD_AFFINITY = obj(requiredDuringSchedulingIgnoredDuringExecution=array(_AFFINITY_TERM))
_AFFINITY = obj(
    nodeAffinity=obj(requiredDuringSchedulingIgnoredDuringExecution=_NODE_SELECTOR),
    podAffinity=_POD_AFFINITY,
    podAntiAffinity=obj(
        requiredDuringSchedulingIgnoredDuringExecution=array(_AFFINITY_TERM),
        preferredDuringSchedulingIgnoredDuringExecution=array(obj(podAffinityTerm=_AFFINITY_TERM)),
    ),
)
_CONTAINER = obj(
    resources=obj(requests=_quantities, limits=_quantities),
    ports=array(obj(hostPort=_int, protocol=_str, hostIP=_str)),
    restartPolicy=_str,
)
_POD_SPEC = obj(
    containers=array(_CONTAINER),
    initContainers=array(_CONTAINER),
    nodeName=_str,
    volumes=array(obj(persistentVolumeClaim=obj(claimName=_str))),
    affinity=_AFFINITY,
    nodeSelector=_strings,
    tolerations=array(obj(key=_str, operator=_str, value=_str, effect=_str, tolerationSeconds=_int)),
    topologySpreadConstraints=array(
        obj(
            maxSkew=_int,
            topologyKey=_str,
            whenUnsatisfiable=_str,
            labelSelector=_LABEL_SELECTOR,
            minDomains=_int,
            nodeAffinityPolicy=_str,
            nodeTaintsPolicy=_str,
            matchLabelKeys=array(_str),
        )
    ),
    schedulingGates=array(obj(name=_str)),
    schedulerName=_str,
    priorityClassName=_str,
    priority=_int,
    preemptionPolicy=_str,
    overhead=_quantities,
    resources=obj(requests=_quantities, limits=_quantities),
)
_TEMPLATE = obj(metadata=obj(labels=_strings), spec=_POD_SPEC)
_WORKLOAD_STATUS = obj(
    replicas=_int,
    updatedReplicas=_int,
    readyReplicas=_int,
    availableReplicas=_int,
    unavailableReplicas=_int,
    observedGeneration=_int,
    currentNumberScheduled=_int,
    updatedNumberScheduled=_int,
    numberReady=_int,
    numberAvailable=_int,
    numberUnavailable=_int,
    desiredNumberScheduled=_int,
    active=_int,
    succeeded=_int,
    failed=_int,
    conditions=array(_CONDITION),
)
_WORKLOAD_SPEC = {"replicas": _int, "selector": _LABEL_SELECTOR, "template": _TEMPLATE}
_INVOLVED = obj(kind=_str, namespace=_str, name=_str, uid=_str)

KIND_SCHEMAS: dict[str, Checker] = {
    "Pod": obj(
        metadata=_METADATA,
        spec=_POD_SPEC,
        status=obj(phase=_str, conditions=array(_CONDITION), nominatedNodeName=_str),
    ),
    "Node": obj(
        metadata=_METADATA,
        spec=obj(taints=array(obj(key=_str, value=_str, effect=_str)), unschedulable=_bool),
        status=obj(
            conditions=array(_CONDITION),
            capacity=_quantities,
            allocatable=_quantities,
            nodeInfo=obj(kubeletVersion=_str),
        ),
    ),
    "Deployment": obj(
        metadata=_METADATA,
        spec=obj(
            **_WORKLOAD_SPEC,
            strategy=obj(
                type=_str,
                rollingUpdate=obj(maxSurge=_int_or_percent, maxUnavailable=_int_or_percent),
            ),
            paused=_bool,
            progressDeadlineSeconds=_int,
            minReadySeconds=_int,
        ),
        status=_WORKLOAD_STATUS,
    ),
    "ReplicaSet": obj(metadata=_METADATA, spec=obj(**_WORKLOAD_SPEC), status=_WORKLOAD_STATUS),
    "StatefulSet": obj(
        metadata=_METADATA,
        spec=obj(**_WORKLOAD_SPEC, updateStrategy=obj(type=_str), podManagementPolicy=_str),
        status=_WORKLOAD_STATUS,
    ),
    "DaemonSet": obj(metadata=_METADATA, spec=obj(**_WORKLOAD_SPEC), status=_WORKLOAD_STATUS),
    "Job": obj(
        metadata=_METADATA,
        spec=obj(template=_TEMPLATE, parallelism=_int, completions=_int),
        status=_WORKLOAD_STATUS,
    ),
    "PodDisruptionBudget": obj(
        metadata=_METADATA,
        spec=obj(
            selector=_LABEL_SELECTOR,
            minAvailable=_int_or_percent,
            maxUnavailable=_int_or_percent,
            unhealthyPodEvictionPolicy=_str,
        ),
        status=obj(expectedPods=_int, desiredHealthy=_int, currentHealthy=_int, disruptionsAllowed=_int),
    ),
    "PriorityClass": obj(metadata=_METADATA, value=_int, preemptionPolicy=_str, globalDefault=_bool),
    "Namespace": obj(metadata=_METADATA, status=obj(phase=_str)),
    "PersistentVolumeClaim": obj(
        metadata=_METADATA,
        spec=obj(
            storageClassName=_str,
            volumeName=_str,
            accessModes=array(_str),
            resources=obj(requests=_quantities),
        ),
        status=obj(phase=_str),
    ),
    "PersistentVolume": obj(
        metadata=_METADATA,
        spec=obj(
            storageClassName=_str,
            capacity=_quantities,
            accessModes=array(_str),
            claimRef=obj(namespace=_str, name=_str),
            nodeAffinity=obj(required=_NODE_SELECTOR),
        ),
        status=obj(phase=_str),
    ),
    "StorageClass": obj(
        metadata=_METADATA,
        provisioner=_str,
        volumeBindingMode=_str,
        allowedTopologies=array(obj(matchLabelExpressions=array(obj(key=_str, values=array(_str))))),
    ),
    "Event": obj(
        metadata=_METADATA,
        involvedObject=_INVOLVED,
        regarding=_INVOLVED,
        series=obj(count=_int, lastObservedTime=_time),
        count=_int,
        deprecatedCount=_int,
        firstTimestamp=_time,
        lastTimestamp=_time,
        deprecatedFirstTimestamp=_time,
        deprecatedLastTimestamp=_time,
        eventTime=_time,
        reportingController=_str,
        reportingComponent=_str,
        source=obj(component=_str),
        reason=_str,
        message=_str,
        note=_str,
        type=_str,
    ),
    "NodeMetrics": obj(metadata=_METADATA, usage=_quantities, timestamp=_time),
    "PodMetrics": obj(metadata=_METADATA, containers=array(obj(usage=_quantities)), timestamp=_time),
}


def check_object(value: Any) -> str | None:
    """The first problem with a raw object's kind or the fields unstick reads
    of it, as ``path: problem``; None when it can be decoded as what it says."""
    if not isinstance(value, Mapping):
        return _expected("the object", "an object", value)
    kind = value.get("kind")
    if kind is None:
        return "kind: missing (not a Kubernetes object)"
    if not isinstance(kind, str):
        return _expected("kind", "a string", kind)
    schema = KIND_SCHEMAS.get(kind)
    if schema is None:
        return None
    meta = value.get("metadata")
    if not isinstance(meta, Mapping):
        return "metadata: missing" if meta is None else _expected("metadata", "an object", meta)
    if not meta.get("name"):
        return "metadata.name: missing"
    return schema(value, "")
