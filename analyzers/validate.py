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
from datetime import date, datetime
from typing import Any

import orjson

from analyzers.quantity import QuantityError, to_units

# A checker returns None, or the problem with ``value`` as (the path below
# value, what is wrong): the path is built only on the way back up from a
# problem, so a valid object costs no string work.
Problem = tuple[str, str]
Checker = Callable[[Any], "Problem | None"]

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


def _is_map(value: Any) -> bool:
    return value.__class__ is dict or isinstance(value, Mapping)


def _is_list(value: Any) -> bool:
    return value.__class__ is list or isinstance(value, tuple)


def _expected(what: str, value: Any) -> Problem:
    return "", f"expected {what}, found {json_type(value)}"


def _str(value: Any) -> Problem | None:
    if value.__class__ is str or value is None or isinstance(value, str):
        return None
    return _expected("a string", value)


def _time(value: Any) -> Problem | None:
    # YAML reads unquoted timestamps as datetimes; ingest.parse_time ignores them (no time).
    if value is None or isinstance(value, str | datetime | date):
        return None
    return _expected("an RFC 3339 time string", value)


def _bool(value: Any) -> Problem | None:
    if value is None or value is True or value is False:
        return None
    return _expected("a boolean", value)


def _int(value: Any) -> Problem | None:
    if value.__class__ is int:
        return None if INT64_MIN <= value <= INT64_MAX else ("", "integer out of the 64-bit range")
    if value is None:
        return None
    if isinstance(value, bool):
        return _expected("an integer", value)
    if isinstance(value, float):
        if not value.is_integer():
            return "", f"expected an integer, found {value!r}"
        value = int(value)
    elif isinstance(value, str):  # ingest reads "3" as 3, as kubectl's YAML never writes but users do
        text = value.strip()
        if not text.lstrip("-").isdigit() or len(text) > 20:
            return "", f"expected an integer, found string {value[:40]!r}"
        value = int(text)
    elif not isinstance(value, int):
        return _expected("an integer", value)
    if not INT64_MIN <= value <= INT64_MAX:
        return "", "integer out of the 64-bit range"
    return None


def _int_or_percent(value: Any) -> Problem | None:
    """intstr.IntOrString as maxSurge, maxUnavailable, minAvailable use it: an
    integer, or a string ``N%`` (apimachinery GetScaledValueFromIntOrPercent)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return _int(text)
        if text.endswith("%") and text[:-1].isdigit() and len(text) <= 11:
            return None
        return "", f"expected an integer or a percentage such as 25%, found {value[:40]!r}"
    if isinstance(value, int) and not isinstance(value, bool):
        return _int(value)
    return _expected("an integer or a percentage string", value)


def _quantities(value: Any) -> Problem | None:
    if value is None:
        return None
    if not _is_map(value):
        return _expected("an object of quantities", value)
    for k, v in value.items():
        if k.__class__ is not str:
            return "", f"resource names must be strings, found {json_type(k)}"
        try:
            to_units(k, v)
        except QuantityError as exc:
            detail = str(exc)
            if detail.startswith(k + ": "):
                detail = detail[len(k) + 2 :]
            return k, detail
    return None


def _strings(value: Any) -> Problem | None:
    """A map of strings (labels, annotations, nodeSelector)."""
    if value is None:
        return None
    if not _is_map(value):
        return _expected("an object of strings", value)
    for k, v in value.items():
        if k.__class__ is not str:
            return "", f"keys must be strings, found {json_type(k)}"
        if v is not None and v.__class__ is not str and not isinstance(v, str):
            return k, f"expected a string, found {json_type(v)}"
    return None


def _join(name: str, below: str) -> str:
    if not below:
        return name
    return name + below if below.startswith("[") else f"{name}.{below}"


def obj(**fields: Checker) -> Checker:
    # String fields are checked inline (most fields are strings: no call each).
    strings = frozenset(name for name, checker in fields.items() if checker is _str)
    others = {name: checker for name, checker in fields.items() if checker is not _str}

    def check(value: Any) -> Problem | None:
        if value is None:
            return None
        if not _is_map(value):
            return _expected("an object", value)
        for name, field in value.items():
            if name in strings:
                if field.__class__ is not str and field is not None and not isinstance(field, str):
                    return name, f"expected a string, found {json_type(field)}"
                continue
            checker = others.get(name)
            if checker is not None and field is not None:
                problem = checker(field)
                if problem is not None:
                    return _join(name, problem[0]), problem[1]
        return None

    return check


_MEMO_MAX = 8192


def memo(checker: Checker) -> Checker:
    """``checker`` remembered by the value's JSON: the pods of one template
    repeat one spec, checked once (a dump of 150,000 pods holds a few hundred)."""
    seen: dict[bytes, Problem | None] = {}

    def check(value: Any) -> Problem | None:
        try:
            key = orjson.dumps(value)
        except TypeError:  # not JSON (YAML dates, non-string keys): check it as it is
            return checker(value)
        if key in seen:
            return seen[key]
        if len(seen) >= _MEMO_MAX:
            seen.clear()
        found = seen[key] = checker(value)
        return found

    return check


def array(item: Checker) -> Checker:
    strings = item is _str

    def check(value: Any) -> Problem | None:
        if value is None:
            return None
        if not _is_list(value):
            return _expected("an array", value)
        for i, v in enumerate(value):
            problem = _expected("an object", v) if v is None and not strings else item(v)
            if problem is not None:
                return _join(f"[{i}]", problem[0]), problem[1]
        return None

    return check


# -- the fields ingest reads --------------------------------------------------

_OWNER = obj(apiVersion=_str, kind=_str, name=_str, uid=_str, controller=_bool)
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
_POD_SPEC_FIELDS = obj(
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
_POD_SPEC = memo(_POD_SPEC_FIELDS)
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
    if not _is_map(value):
        return f"the object: expected an object, found {json_type(value)}"
    kind = value.get("kind")
    if kind is None:
        return "kind: missing (not a Kubernetes object)"
    if not isinstance(kind, str):
        return f"kind: expected a string, found {json_type(kind)}"
    schema = KIND_SCHEMAS.get(kind)
    if schema is None:
        return None
    meta = value.get("metadata")
    if not _is_map(meta):
        return (
            "metadata: missing" if meta is None else f"metadata: expected an object, found {json_type(meta)}"
        )
    if not meta.get("name"):
        return "metadata.name: missing"
    problem = schema(value)
    if problem is None:
        return None
    path, what = problem
    return f"{path}: {what}" if path else what
