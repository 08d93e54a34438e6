"""Kubernetes JSON/YAML (as the API and kubectl print it) → slim records.

``parse_documents`` turns text into API-shaped dicts (``List`` with ``items``,
single objects, multi-document YAML, JSON streams); ``Decoder.decode`` turns one
dict into one record. Shared values (labels, selectors, pod specs) are interned
in the decoder, so keep one decoder per cluster state.

Defaults the API server would apply are applied here too, so hand-written
manifests and API dumps give the same records (e.g. container requests default
to limits, pkg/apis/core/v1/defaults.go; Deployment strategy 25%/25%,
pkg/apis/apps/v1/defaults.go).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

import orjson
import yaml

from analyzers.quantity import QuantityError, to_units
from analyzers.records import (
    EMPTY_MAP,
    Condition,
    DaemonSet,
    Deployment,
    Event,
    FrozenMap,
    HostPort,
    InvolvedObject,
    Job,
    LabelSelector,
    Namespace,
    Node,
    NodeMetrics,
    NodeSelector,
    NodeSelectorTerm,
    OwnerRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinityTerm,
    PodDisruptionBudget,
    PodMetrics,
    PodSpec,
    PriorityClass,
    Record,
    ReplicaSet,
    Requirement,
    StatefulSet,
    StorageClass,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WorkloadStatus,
)

T = TypeVar("T")
Obj = Mapping[str, Any]


class InputError(ValueError):
    """A document or object that cannot be read; says which and why."""

    def __init__(self, source: str, message: str, obj: str = "") -> None:
        self.source = source
        self.obj = obj
        self.detail = message
        where = f"{source}: {obj}: " if obj else f"{source}: "
        super().__init__(where + message)


# ---------------------------------------------------------------------------
# Text → dicts


def parse_documents(text: str | bytes, source: str = "<input>") -> Iterator[dict[str, Any]]:
    """Yield every Kubernetes object in ``text`` (JSON, JSON stream or YAML),
    flattening ``List`` kinds. Raises InputError on undecodable text."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(source, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    stripped = text.lstrip()
    if not stripped:
        return
    docs: list[Any]
    if stripped[0] in "{[":
        try:
            docs = [orjson.loads(stripped)]
        except orjson.JSONDecodeError:
            # Several JSON documents one after another (kubectl get … -o json per object).
            docs = list(_json_documents(stripped, source))
    else:
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise InputError(source, f"invalid YAML{where}: {problem}") from exc
    for doc in docs:
        yield from _flatten(doc, source)


def _json_documents(text: str, source: str) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    pos, end = 0, len(text)
    while pos < end:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            break
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InputError(
                source, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from exc
        yield doc


def _flatten(doc: Any, source: str, list_kind: str = "") -> Iterator[dict[str, Any]]:
    if isinstance(doc, list):
        for item in doc:
            yield from _flatten(item, source, list_kind)
        return
    if not isinstance(doc, dict):
        raise InputError(source, f"expected a Kubernetes object, found {type(doc).__name__}")
    kind = doc.get("kind") or ""
    if "items" in doc and (not kind or kind.endswith("List")):
        item_kind = kind[: -len("List")] if kind.endswith("List") and kind != "List" else ""
        for item in doc.get("items") or ():
            if isinstance(item, dict) and not item.get("kind") and item_kind:
                item = {**item, "kind": item_kind, "apiVersion": doc.get("apiVersion", "")}
            yield from _flatten(item, source, item_kind)
        return
    if not kind and list_kind:
        doc = {**doc, "kind": list_kind}
    yield doc


# ---------------------------------------------------------------------------
# Small converters


def parse_time(value: Any) -> float | None:
    """RFC 3339 timestamp → seconds since the epoch (None when absent or unreadable)."""
    if not value or not isinstance(value, str):
        return None
    return _parse_rfc3339(value)


@lru_cache(maxsize=8192)
def _parse_rfc3339(value: str) -> float | None:
    # Memoised: a watch stream repeats the same timestamps (one per second at most).
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _int(value: Any, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, found {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise ValueError(f"expected an integer, found {value!r}")


def _int_or_str(value: Any) -> int | str | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, str):
        v = value.strip()
        return int(v) if v.isdigit() else v
    raise ValueError(f"expected an int-or-string, found {value!r}")


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ValueError("metadata is missing")
    if not meta.get("name"):
        raise ValueError("metadata.name is missing")
    return meta


def describe(obj: Obj) -> str:
    """kind/namespace/name of a raw object, for messages."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    ns, name = meta.get("namespace"), meta.get("name") or "?"
    kind = obj.get("kind") or "?"
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


# ---------------------------------------------------------------------------
# The decoder


class Decoder:
    """Decodes API dicts into records, interning shared values."""

    def __init__(self) -> None:
        self._raw_specs: dict[tuple[bytes, tuple[str, ...]], PodSpec] = {}
        self._maps: dict[FrozenMap[Any], FrozenMap[Any]] = {}
        self._values: dict[Any, Any] = {}
        self._specs: dict[PodSpec, PodSpec] = {}

    # -- interning ---------------------------------------------------------
    def s(self, value: Any) -> str:
        if not value:
            return ""
        if value.__class__ is str:
            return sys.intern(value)
        return sys.intern(str(value))

    def labels(self, value: Any) -> FrozenMap[str]:
        if not value:
            return EMPTY_MAP
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a map of strings, found {type(value).__name__}")
        fm: FrozenMap[str] = FrozenMap(
            (self.s(k), self.s(v) if v is not None else "") for k, v in value.items()
        )
        return self._maps.setdefault(fm, fm)

    def resources(self, value: Any) -> FrozenMap[int]:
        if not value:
            return EMPTY_MAP
        fm: FrozenMap[int] = FrozenMap((self.s(k), to_units(str(k), v)) for k, v in value.items())
        return self._maps.setdefault(fm, fm)

    def value(self, v: T) -> T:
        return self._values.setdefault(v, v)  # type: ignore[no-any-return]

    # -- selectors ---------------------------------------------------------
    def label_selector(self, value: Any) -> LabelSelector | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError("a label selector must be a map")
        exprs = tuple(
            Requirement(
                self.s(e.get("key")),
                self.s(e.get("operator")),
                tuple(self.s(v) for v in e.get("values") or ()),
            )
            for e in value.get("matchExpressions") or ()
        )
        return self.value(LabelSelector(self.labels(value.get("matchLabels")), exprs))

    def node_selector(self, value: Any) -> NodeSelector | None:
        if not value:
            return None
        terms = []
        for term in value.get("nodeSelectorTerms") or ():
            terms.append(
                NodeSelectorTerm(
                    tuple(
                        Requirement(
                            self.s(e.get("key")),
                            self.s(e.get("operator")),
                            tuple(self.s(v) for v in e.get("values") or ()),
                        )
                        for e in term.get("matchExpressions") or ()
                    ),
                    tuple(
                        Requirement(
                            self.s(e.get("key")),
                            self.s(e.get("operator")),
                            tuple(self.s(v) for v in e.get("values") or ()),
                        )
                        for e in term.get("matchFields") or ()
                    ),
                )
            )
        return self.value(NodeSelector(tuple(terms)))

    def owner(self, meta: Mapping[str, Any]) -> OwnerRef | None:
        refs = meta.get("ownerReferences") or ()
        chosen = next((r for r in refs if r.get("controller")), None) or (refs[0] if refs else None)
        if not chosen:
            return None
        return self.value(
            OwnerRef(self.s(chosen.get("kind")), self.s(chosen.get("name")), self.s(chosen.get("uid")))
        )

    def conditions(self, value: Any) -> tuple[Condition, ...]:
        return tuple(
            Condition(
                self.s(c.get("type")),
                self.s(c.get("status")),
                self.s(c.get("reason")),
                self.s(c.get("message")),
                parse_time(c.get("lastTransitionTime")),
            )
            for c in value or ()
        )

    # -- pod spec ----------------------------------------------------------
    def pod_spec(self, spec: Any, *, with_node_name: bool = True) -> PodSpec:
        """The scheduling view of a pod spec. Pods of one template share one
        object: the raw spec (less per-pod fields) is the cache key."""
        if not isinstance(spec, Mapping):
            raise ValueError("spec is missing")
        try:
            shared = {k: v for k, v in spec.items() if k not in _PER_POD_SPEC_FIELDS}
            if with_node_name and spec.get("nodeName"):
                shared["nodeName"] = spec["nodeName"]
            key = (orjson.dumps(shared, option=orjson.OPT_SORT_KEYS), _claim_names(spec))
        except TypeError:
            return self._pod_spec(spec, with_node_name)
        cached = self._raw_specs.get(key)
        if cached is None:
            cached = self._raw_specs[key] = self._pod_spec(spec, with_node_name)
        return cached

    def _pod_spec(self, spec: Mapping[str, Any], with_node_name: bool) -> PodSpec:
        requests, limits, without, count = self._pod_requests(spec)
        affinity = spec.get("affinity") or {}
        node_aff = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        pod_aff = (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        anti = affinity.get("podAntiAffinity") or {}
        preferred_anti = tuple(
            self._affinity_term(w.get("podAffinityTerm") or {})
            for w in anti.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        )
        host_ports = []
        for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
            for p in c.get("ports") or ():
                hp = p.get("hostPort")
                if hp:
                    host_ports.append(
                        HostPort(
                            _int(hp), self.s(p.get("protocol") or "TCP"), self.s(p.get("hostIP") or "0.0.0.0")
                        )
                    )
        result = PodSpec(
            requests=requests,
            limits=limits,
            containers_without_requests=without,
            container_count=count,
            node_selector=self.labels(spec.get("nodeSelector")),
            required_node_affinity=self.node_selector(node_aff),
            tolerations=tuple(
                self.value(
                    Toleration(
                        self.s(t.get("key")),
                        self.s(t.get("operator") or "Equal"),
                        self.s(t.get("value")),
                        self.s(t.get("effect")),
                        t.get("tolerationSeconds"),
                    )
                )
                for t in spec.get("tolerations") or ()
            ),
            pod_affinity=tuple(self._affinity_term(t) for t in pod_aff or ()),
            pod_anti_affinity=tuple(
                self._affinity_term(t)
                for t in anti.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
            ),
            preferred_pod_anti_affinity=preferred_anti,
            topology_spread=tuple(
                self.value(
                    TopologySpreadConstraint(
                        max_skew=_int(c.get("maxSkew"), 1),
                        topology_key=self.s(c.get("topologyKey")),
                        when_unsatisfiable=self.s(c.get("whenUnsatisfiable") or "DoNotSchedule"),
                        label_selector=self.label_selector(c.get("labelSelector")),
                        min_domains=c.get("minDomains"),
                        node_affinity_policy=self.s(c.get("nodeAffinityPolicy") or "Honor"),
                        node_taints_policy=self.s(c.get("nodeTaintsPolicy") or "Ignore"),
                        match_label_keys=tuple(self.s(k) for k in c.get("matchLabelKeys") or ()),
                    )
                )
                for c in spec.get("topologySpreadConstraints") or ()
            ),
            host_ports=tuple(host_ports),
            pvc_names=tuple(self.s(n) for n in _claim_names(spec)),
            scheduling_gates=tuple(self.s(g.get("name")) for g in spec.get("schedulingGates") or ()),
            node_name=self.s(spec.get("nodeName")) if with_node_name else "",
            scheduler_name=self.s(spec.get("schedulerName") or "default-scheduler"),
            priority_class_name=self.s(spec.get("priorityClassName")),
            priority=spec.get("priority"),
            preemption_policy=self.s(spec.get("preemptionPolicy")),
            has_overhead=bool(spec.get("overhead")),
        )
        return self._specs.setdefault(result, result)

    def _affinity_term(self, t: Mapping[str, Any]) -> PodAffinityTerm:
        return self.value(
            PodAffinityTerm(
                topology_key=self.s(t.get("topologyKey")),
                label_selector=self.label_selector(t.get("labelSelector")),
                namespaces=tuple(self.s(n) for n in t.get("namespaces") or ()),
                namespace_selector=self.label_selector(t.get("namespaceSelector")),
                match_label_keys=tuple(self.s(k) for k in t.get("matchLabelKeys") or ()),
                mismatch_label_keys=tuple(self.s(k) for k in t.get("mismatchLabelKeys") or ()),
            )
        )

    def _pod_requests(self, spec: Mapping[str, Any]) -> tuple[FrozenMap[int], FrozenMap[int], int, int]:
        """The pod's effective request as the scheduler computes it:
        k8s.io/component-helpers/resource/helpers.go PodRequests (sum of
        containers and restartable init containers, the max with each init
        container, plus overhead), with requests defaulted from limits as
        pkg/apis/core/v1/defaults.go does."""
        total: dict[str, int] = {}
        limits: dict[str, int] = {}
        without = 0
        containers = spec.get("containers") or ()
        for c in containers:
            req = self._container_requests(c)
            if "cpu" not in req and "memory" not in req:
                without += 1
            _add(total, req)
            _add(limits, self._resource_map((c.get("resources") or {}).get("limits")))
        restartable: dict[str, int] = {}
        init_max: dict[str, int] = {}
        for c in spec.get("initContainers") or ():
            req = self._container_requests(c)
            if c.get("restartPolicy") == "Always":
                _add(total, req)
                _add(restartable, req)
                effective = dict(restartable)
            else:
                effective = dict(req)
                _add(effective, restartable)
            for k, v in effective.items():
                if v > init_max.get(k, 0):
                    init_max[k] = v
        for k, v in init_max.items():
            if v > total.get(k, 0):
                total[k] = v
        pod_level = self._resource_map((spec.get("resources") or {}).get("requests"))
        for k in ("cpu", "memory"):
            if k in pod_level:
                total[k] = pod_level[k]
        _add(total, self._resource_map(spec.get("overhead")))
        return self.resources_from_units(total), self.resources_from_units(limits), without, len(containers)

    def resources_from_units(self, units: Mapping[str, int]) -> FrozenMap[int]:
        if not units:
            return EMPTY_MAP
        fm: FrozenMap[int] = FrozenMap((self.s(k), v) for k, v in units.items())
        return self._maps.setdefault(fm, fm)

    def _resource_map(self, value: Any) -> dict[str, int]:
        if not value:
            return {}
        return {str(k): to_units(str(k), v) for k, v in value.items()}

    def _container_requests(self, c: Mapping[str, Any]) -> dict[str, int]:
        resources = c.get("resources") or {}
        req = self._resource_map(resources.get("requests"))
        for k, v in self._resource_map(resources.get("limits")).items():
            req.setdefault(k, v)
        return req

    # -- objects -------------------------------------------------------------
    def decode(self, obj: Obj, source: str = "<input>") -> Record | None:
        """One API object → its record; None for kinds unstick does not read.
        Raises InputError naming the object when it is malformed."""
        kind = obj.get("kind")
        fn = _DECODERS.get(kind) if isinstance(kind, str) else None
        if fn is None:
            return None
        try:
            record: Record = fn(self, obj)
            return record
        except (ValueError, TypeError, AttributeError, KeyError, QuantityError) as exc:
            raise InputError(source, str(exc) or type(exc).__name__, describe(obj)) from exc

    def pod(self, obj: Obj) -> Pod:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        # Only PodScheduled and Ready are kept: decode just those (a pod
        # carries five conditions, and every watch event of a pod decodes them).
        scheduled: Condition | None = None
        ready = False
        for c in status.get("conditions") or ():
            ctype = c.get("type")
            if ctype == "PodScheduled":
                if scheduled is None:
                    scheduled = self.conditions((c,))[0]
            elif ctype == "Ready" and c.get("status") == "True":
                ready = True
        return Pod(
            namespace=self.s(meta.get("namespace") or "default"),
            name=str(meta["name"]),
            uid=str(meta.get("uid") or ""),
            labels=self.labels(meta.get("labels")),
            spec=self.pod_spec(spec, with_node_name=False),
            node_name=self.s(spec.get("nodeName")),
            phase=self.s(status.get("phase") or "Pending"),
            owner=self.owner(meta),
            created=parse_time(meta.get("creationTimestamp")),
            deleted=parse_time(meta.get("deletionTimestamp")),
            ready=ready,
            scheduled=scheduled,
            nominated_node=self.s(status.get("nominatedNodeName")),
            annotations=self._pod_annotations(meta.get("annotations")),
        )

    def _pod_annotations(self, value: Any) -> FrozenMap[str]:
        # Only the few annotations analysis reads; full maps would cost memory per pod.
        if not value:
            return EMPTY_MAP
        keep = {k: v for k, v in value.items() if k in _KEPT_POD_ANNOTATIONS}
        return self.labels(keep)

    def node(self, obj: Obj) -> Node:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        conditions = self.conditions(status.get("conditions"))
        ready_cond = next((c for c in conditions if c.type == "Ready"), None)
        capacity = self.resources(status.get("capacity"))
        allocatable = self.resources(status.get("allocatable")) if status.get("allocatable") else capacity
        return Node(
            name=self.s(meta["name"]),
            uid=str(meta.get("uid") or ""),
            labels=self.labels(meta.get("labels")),
            allocatable=allocatable,
            capacity=capacity,
            taints=tuple(
                self.value(Taint(self.s(t.get("key")), self.s(t.get("value")), self.s(t.get("effect"))))
                for t in spec.get("taints") or ()
            ),
            unschedulable=bool(spec.get("unschedulable")),
            ready=None if ready_cond is None else ready_cond.status == "True",
            conditions=conditions,
            created=parse_time(meta.get("creationTimestamp")),
        )

    def _status(self, status: Mapping[str, Any], *, replicas: str = "replicas") -> WorkloadStatus:
        return self.value(
            WorkloadStatus(
                replicas=_int(status.get(replicas)),
                updated=_int(status.get("updatedReplicas", status.get("updatedNumberScheduled"))),
                ready=_int(status.get("readyReplicas", status.get("numberReady"))),
                available=_int(status.get("availableReplicas", status.get("numberAvailable"))),
                unavailable=_int(status.get("unavailableReplicas", status.get("numberUnavailable"))),
                observed_generation=_int(status.get("observedGeneration")),
            )
        )

    def _template(self, spec: Mapping[str, Any]) -> tuple[PodSpec, FrozenMap[str]]:
        template = spec.get("template") or {}
        tmeta = template.get("metadata") or {}
        return self.pod_spec(template.get("spec") or {}), self.labels(tmeta.get("labels"))

    def deployment(self, obj: Obj) -> Deployment:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        template, template_labels = self._template(spec)
        strategy = spec.get("strategy") or {}
        stype = strategy.get("type") or "RollingUpdate"
        surge: int | str | None = None
        unavailable: int | str | None = None
        if stype == "RollingUpdate":
            ru = strategy.get("rollingUpdate") or {}
            # pkg/apis/apps/v1/defaults.go SetDefaults_Deployment: both default to 25%.
            surge = _int_or_str(ru.get("maxSurge", "25%"))
            unavailable = _int_or_str(ru.get("maxUnavailable", "25%"))
        annotations = meta.get("annotations") or {}
        return Deployment(
            namespace=self.s(meta.get("namespace") or "default"),
            name=self.s(meta["name"]),
            uid=str(meta.get("uid") or ""),
            labels=self.labels(meta.get("labels")),
            replicas=_int(spec.get("replicas"), 1),
            selector=self.label_selector(spec.get("selector")),
            template=template,
            template_labels=template_labels,
            strategy_type=self.s(stype),
            max_surge=surge,
            max_unavailable=unavailable,
            paused=bool(spec.get("paused")),
            progress_deadline_seconds=_int(spec.get("progressDeadlineSeconds"), 600),
            min_ready_seconds=_int(spec.get("minReadySeconds")),
            generation=_int(meta.get("generation")),
            status=self._status(obj.get("status") or {}),
            conditions=self.conditions((obj.get("status") or {}).get("conditions")),
            revision=self.s(annotations.get("deployment.kubernetes.io/revision")),
            created=parse_time(meta.get("creationTimestamp")),
        )

    def replicaset(self, obj: Obj) -> ReplicaSet:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        template, template_labels = self._template(spec)
        annotations = meta.get("annotations") or {}
        return ReplicaSet(
            namespace=self.s(meta.get("namespace") or "default"),
            name=self.s(meta["name"]),
            uid=str(meta.get("uid") or ""),
            labels=self.labels(meta.get("labels")),
            replicas=_int(spec.get("replicas"), 1),
            selector=self.label_selector(spec.get("selector")),
            template=template,
            template_labels=template_labels,
            owner=self.owner(meta),
            revision=self.s(annotations.get("deployment.kubernetes.io/revision")),
            status=self._status(obj.get("status") or {}),
            created=parse_time(meta.get("creationTimestamp")),
        )

    def statefulset(self, obj: Obj) -> StatefulSet:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        template, template_labels = self._template(spec)
        return StatefulSet(
            namespace=self.s(meta.get("namespace") or "default"),
            name=self.s(meta["name"]),
            uid=str(meta.get("uid") or ""),
            labels=self.labels(meta.get("labels")),
            replicas=_int(spec.get("replicas"), 1),
            selector=self.label_selector(spec.get("selector")),
            template=template,
            template_labels=template_labels,
            update_strategy=self.s((spec.get("updateStrategy") or {}).get("type") or "RollingUpdate"),
            pod_management_policy=self.s(spec.get("podManagementPolicy") or "OrderedReady"),
            status=self._status(obj.get("status") or {}),
            created=parse_time(meta.get("creationTimestamp")),
        )

    def daemonset(self, obj: Obj) -> DaemonSet:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        template, template_labels = self._template(spec)
        return DaemonSet(
            namespace=self.s(meta.get("namespace") or "default"),
            name=self.s(meta["name"]),
            uid=str(meta.get("uid") or ""),
            labels=self.labels(meta.get("labels")),
            selector=self.label_selector(spec.get("selector")),
            template=template,
            template_labels=template_labels,
            desired=_int(status.get("desiredNumberScheduled")),
            status=self._status(status, replicas="currentNumberScheduled"),
            created=parse_time(meta.get("creationTimestamp")),
        )

    def job(self, obj: Obj) -> Job:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        template, template_labels = self._template(spec)
        completions = spec.get("completions")
        return Job(
            namespace=self.s(meta.get("namespace") or "default"),
            name=self.s(meta["name"]),
            uid=str(meta.get("uid") or ""),
            labels=self.labels(meta.get("labels")),
            template=template,
            template_labels=template_labels,
            parallelism=_int(spec.get("parallelism"), 1),
            completions=None if completions is None else _int(completions),
            owner=self.owner(meta),
            active=_int(status.get("active")),
            succeeded=_int(status.get("succeeded")),
            failed=_int(status.get("failed")),
            created=parse_time(meta.get("creationTimestamp")),
        )

    def pdb(self, obj: Obj) -> PodDisruptionBudget:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        selector = self.label_selector(spec.get("selector"))
        if selector is not None and selector.is_empty and str(obj.get("apiVersion", "")).endswith("v1beta1"):
            # policy/v1beta1: an empty selector selects no pods (policy/v1: all pods of the namespace).
            selector = None
        return PodDisruptionBudget(
            namespace=self.s(meta.get("namespace") or "default"),
            name=self.s(meta["name"]),
            uid=str(meta.get("uid") or ""),
            selector=selector,
            min_available=_int_or_str(spec.get("minAvailable")),
            max_unavailable=_int_or_str(spec.get("maxUnavailable")),
            unhealthy_pod_eviction_policy=self.s(spec.get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"),
            status_expected_pods=status.get("expectedPods"),
            status_desired_healthy=status.get("desiredHealthy"),
            status_current_healthy=status.get("currentHealthy"),
            status_disruptions_allowed=status.get("disruptionsAllowed"),
            created=parse_time(meta.get("creationTimestamp")),
        )

    def priority_class(self, obj: Obj) -> PriorityClass:
        meta = _meta(obj)
        return PriorityClass(
            name=self.s(meta["name"]),
            value=_int(obj.get("value")),
            preemption_policy=self.s(obj.get("preemptionPolicy") or "PreemptLowerPriority"),
            global_default=bool(obj.get("globalDefault")),
        )

    def namespace(self, obj: Obj) -> Namespace:
        meta = _meta(obj)
        return Namespace(
            name=self.s(meta["name"]),
            labels=self.labels(meta.get("labels")),
            phase=self.s((obj.get("status") or {}).get("phase") or "Active"),
        )

    def pvc(self, obj: Obj) -> PersistentVolumeClaim:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        annotations = meta.get("annotations") or {}
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        return PersistentVolumeClaim(
            namespace=self.s(meta.get("namespace") or "default"),
            name=self.s(meta["name"]),
            uid=str(meta.get("uid") or ""),
            storage_class=None
            if spec.get("storageClassName") is None
            else self.s(spec.get("storageClassName")),
            volume_name=self.s(spec.get("volumeName")),
            phase=self.s((obj.get("status") or {}).get("phase") or "Pending"),
            access_modes=tuple(self.s(m) for m in spec.get("accessModes") or ()),
            request_bytes=to_units("storage", storage) if storage is not None else 0,
            selected_node=self.s(annotations.get("volume.kubernetes.io/selected-node")),
        )

    def pv(self, obj: Obj) -> PersistentVolume:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        claim = spec.get("claimRef")
        capacity = (spec.get("capacity") or {}).get("storage")
        return PersistentVolume(
            name=self.s(meta["name"]),
            storage_class=self.s(spec.get("storageClassName")),
            capacity_bytes=to_units("storage", capacity) if capacity is not None else 0,
            access_modes=tuple(self.s(m) for m in spec.get("accessModes") or ()),
            claim=(self.s(claim.get("namespace") or "default"), self.s(claim.get("name"))) if claim else None,
            node_affinity=self.node_selector((spec.get("nodeAffinity") or {}).get("required")),
            phase=self.s((obj.get("status") or {}).get("phase") or "Available"),
        )

    def storage_class(self, obj: Obj) -> StorageClass:
        meta = _meta(obj)
        annotations = meta.get("annotations") or {}
        topologies = obj.get("allowedTopologies") or ()
        allowed = None
        if topologies:
            allowed = NodeSelector(
                tuple(
                    NodeSelectorTerm(
                        tuple(
                            Requirement(
                                self.s(e.get("key")), "In", tuple(self.s(v) for v in e.get("values") or ())
                            )
                            for e in t.get("matchLabelExpressions") or ()
                        )
                    )
                    for t in topologies
                )
            )
        return StorageClass(
            name=self.s(meta["name"]),
            provisioner=self.s(obj.get("provisioner")),
            binding_mode=self.s(obj.get("volumeBindingMode") or "Immediate"),
            allowed_topologies=allowed,
            is_default=annotations.get("storageclass.kubernetes.io/is-default-class") == "true",
        )

    def event(self, obj: Obj) -> Event:
        meta = _meta(obj)
        # core/v1 Event and events.k8s.io/v1 Event have different field names.
        involved = obj.get("involvedObject") or obj.get("regarding") or {}
        series = obj.get("series") or {}
        count = obj.get("count") or obj.get("deprecatedCount") or series.get("count") or 1
        first = parse_time(
            obj.get("firstTimestamp") or obj.get("deprecatedFirstTimestamp") or obj.get("eventTime")
        )
        last = parse_time(
            series.get("lastObservedTime")
            or obj.get("lastTimestamp")
            or obj.get("deprecatedLastTimestamp")
            or obj.get("eventTime")
            or meta.get("creationTimestamp")
        )
        source = (
            obj.get("reportingController")
            or obj.get("reportingComponent")
            or (obj.get("source") or {}).get("component")
        )
        return Event(
            namespace=self.s(meta.get("namespace") or involved.get("namespace") or "default"),
            name=str(meta["name"]),
            uid=str(meta.get("uid") or ""),
            involved=InvolvedObject(
                self.s(involved.get("kind")),
                self.s(involved.get("namespace")),
                self.s(involved.get("name")),
                str(involved.get("uid") or ""),
            ),
            reason=self.s(obj.get("reason")),
            message=self.s(obj.get("message") or obj.get("note")),
            type=self.s(obj.get("type") or "Normal"),
            count=_int(count, 1),
            first_seen=first,
            last_seen=last or first,
            source=self.s(source),
        )

    def node_metrics(self, obj: Obj) -> NodeMetrics:
        meta = _meta(obj)
        return NodeMetrics(
            name=self.s(meta["name"]),
            usage=self.resources(obj.get("usage")),
            timestamp=parse_time(obj.get("timestamp")),
        )

    def pod_metrics(self, obj: Obj) -> PodMetrics:
        meta = _meta(obj)
        total: dict[str, int] = {}
        for c in obj.get("containers") or ():
            _add(total, self._resource_map(c.get("usage")))
        return PodMetrics(
            namespace=self.s(meta.get("namespace") or "default"),
            name=str(meta["name"]),
            usage=self.resources_from_units(total),
            timestamp=parse_time(obj.get("timestamp")),
        )


# Pod spec fields that differ between pods of one template and do not matter to
# scheduling analysis (volumes matter only through their claim names).
_PER_POD_SPEC_FIELDS = frozenset({"nodeName", "hostname", "subdomain", "volumes", "serviceAccount"})


def _claim_names(spec: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        str(v["persistentVolumeClaim"].get("claimName") or "")
        for v in spec.get("volumes") or ()
        if isinstance(v, Mapping) and isinstance(v.get("persistentVolumeClaim"), Mapping)
    )


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


_KEPT_POD_ANNOTATIONS = frozenset(
    {
        "cluster-autoscaler.kubernetes.io/safe-to-evict",
        "karpenter.sh/do-not-disrupt",
    }
)

_DECODERS: dict[str, Any] = {
    "Pod": Decoder.pod,
    "Node": Decoder.node,
    "Deployment": Decoder.deployment,
    "ReplicaSet": Decoder.replicaset,
    "StatefulSet": Decoder.statefulset,
    "DaemonSet": Decoder.daemonset,
    "Job": Decoder.job,
    "PodDisruptionBudget": Decoder.pdb,
    "PriorityClass": Decoder.priority_class,
    "Namespace": Decoder.namespace,
    "PersistentVolumeClaim": Decoder.pvc,
    "PersistentVolume": Decoder.pv,
    "StorageClass": Decoder.storage_class,
    "Event": Decoder.event,
    "NodeMetrics": Decoder.node_metrics,
    "PodMetrics": Decoder.pod_metrics,
}

KNOWN_KINDS = frozenset(_DECODERS)
# Kinds that appear in dumps and are fine to skip without a warning.
IGNORED_KINDS = frozenset(
    {
        "Service",
        "Endpoints",
        "EndpointSlice",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Ingress",
        "ControllerRevision",
        "Lease",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
        "LimitRange",
        "ResourceQuota",
        "CronJob",
        "ReplicationController",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "APIService",
        "CSIDriver",
        "CSINode",
        "VolumeAttachment",
        "RuntimeClass",
    }
)
