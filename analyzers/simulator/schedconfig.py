"""A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1), parsed and
validated purely: the profiles the Score phase and the filters follow.

Merging follows pkg/scheduler/apis/config/v1/default_plugins.go mergePlugins /
mergePluginSet (v1.37.2): a profile starts from the default plugins; at
``multiPoint`` and at each extension point, ``disabled`` removes default plugins
by name (``"*"``: all of them), ``enabled`` re-weights a default plugin in place
or appends a new one. Validation mirrors pkg/scheduler/apis/config/validation/
(validation.go, validation_pluginargs.go): the first error is raised as
:class:`ConfigError`, naming the field path (e.g. ``profiles[0].pluginConfig[0].
args.scoringStrategy.resources[0].weight``). ``v1beta3`` is accepted for
releases up to 1.28 (removed in 1.29).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from analyzers.records import NodeSelector, NodeSelectorTerm, Requirement, TopologySpreadConstraint
from analyzers.simulator.scoring.profile import (
    DEFAULT_PROFILE,
    DEFAULT_SCORE_PLUGINS,
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    Profile,
    ResourceSpec,
)

API_V1 = "kubescheduler.config.k8s.io/v1"
API_V1BETA3 = "kubescheduler.config.k8s.io/v1beta3"

# In-tree plugins of v1.37.2 (pkg/scheduler/framework/plugins/names/names.go).
KNOWN_PLUGINS = frozenset(
    {
        "PrioritySort", "DefaultBinder", "DefaultPreemption", "DynamicResources", "ImageLocality",
        "InterPodAffinity", "NodeAffinity", "NodeName", "NodePorts", "NodeResourcesBalancedAllocation",
        "NodeResourcesFit", "NodeUnschedulable", "NodeVolumeLimits", "PodTopologySpread",
        "SchedulingGates", "TaintToleration", "VolumeBinding", "VolumeRestrictions", "VolumeZone",
        "NodeDeclaredFeatures", "GangScheduling", "DeferredPodScheduling", "TopologyPlacementGenerator",
        "PodGroupPodsCount",
    }
)  # fmt: skip
FILTER_PLUGINS = (
    "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
    "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
    "InterPodAffinity",
)  # fmt: skip
POINTS = (
    "multiPoint", "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
    "reserve", "permit", "preBind", "bind", "postBind",
)  # fmt: skip
ARGS_KIND = {
    "NodeResourcesFit": "NodeResourcesFitArgs",
    "NodeResourcesBalancedAllocation": "NodeResourcesBalancedAllocationArgs",
    "InterPodAffinity": "InterPodAffinityArgs",
    "NodeAffinity": "NodeAffinityArgs",
    "PodTopologySpread": "PodTopologySpreadArgs",
    "DefaultPreemption": "DefaultPreemptionArgs",
    "VolumeBinding": "VolumeBindingArgs",
    "DynamicResources": "DynamicResourcesArgs",
}


class ConfigError(ValueError):
    """An invalid configuration: ``field`` is the path, the message one line."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def _map(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(path, f"must be an object, not {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(path, f"must be a list, not {type(value).__name__}")
    return value


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(path, f"must be an integer, not {value!r}")
    return value


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(path, f"must be a string, not {value!r}")
    return value


def _percentage(value: Any, path: str) -> int | None:
    if value is None:
        return None
    v = _int(value, path)
    if v < 0 or v > 100:
        raise ConfigError(path, f"Invalid value: {v}: not in valid range [0-100]")
    return v


def parse_config(doc: Any, *, kube_version: tuple[int, int] = (1, 37)) -> dict[str, Profile]:
    """Profiles by schedulerName from a KubeSchedulerConfiguration document."""
    root = _map(doc, "(root)")
    api = root.get("apiVersion")
    if api == API_V1BETA3 and kube_version >= (1, 29):
        raise ConfigError(
            "apiVersion", f"{API_V1BETA3} is no longer served since kube-scheduler 1.29; use {API_V1}"
        )
    if api not in (API_V1, API_V1BETA3):
        raise ConfigError("apiVersion", f"must be {API_V1}, not {api!r}")
    if root.get("kind") != "KubeSchedulerConfiguration":
        raise ConfigError("kind", f"must be KubeSchedulerConfiguration, not {root.get('kind')!r}")
    top_pct = _percentage(root.get("percentageOfNodesToScore"), "percentageOfNodesToScore")
    raw_profiles = _list(root.get("profiles"), "profiles") or [{"schedulerName": "default-scheduler"}]
    out: dict[str, Profile] = {}
    for idx, raw in enumerate(raw_profiles):
        path = f"profiles[{idx}]"
        prof = _profile(_map(raw, path), path, kube_version)
        if prof.percentage_of_nodes_to_score is None and top_pct is not None:
            prof = replace(prof, percentage_of_nodes_to_score=top_pct)
        if prof.scheduler_name in out:
            raise ConfigError(f"{path}.schedulerName", f"Duplicate value: {prof.scheduler_name!r}")
        out[prof.scheduler_name] = prof
    return out


def _plugin_set(value: Any, path: str) -> tuple[list[tuple[str, int | None]], list[str]]:
    m = _map(value, path)
    enabled: list[tuple[str, int | None]] = []
    for i, e in enumerate(_list(m.get("enabled"), f"{path}.enabled")):
        e = _map(e, f"{path}.enabled[{i}]")
        name = _str(e.get("name"), f"{path}.enabled[{i}].name")
        if name not in KNOWN_PLUGINS:
            raise ConfigError(f"{path}.enabled[{i}].name", f'plugin "{name}" does not exist')
        w = e.get("weight")
        weight = None if w is None else _int(w, f"{path}.enabled[{i}].weight")
        if weight is not None and weight < 0:
            raise ConfigError(f"{path}.enabled[{i}].weight", f"Invalid value: {weight}: must not be negative")
        enabled.append((name, weight))
    disabled: list[str] = []
    for i, d in enumerate(_list(m.get("disabled"), f"{path}.disabled")):
        d = _map(d, f"{path}.disabled[{i}]")
        name = _str(d.get("name"), f"{path}.disabled[{i}].name")
        if name != "*" and name not in KNOWN_PLUGINS:
            raise ConfigError(f"{path}.disabled[{i}].name", f'plugin "{name}" does not exist')
        disabled.append(name)
    return enabled, disabled


def _merge(
    defaults: list[tuple[str, int]], enabled: list[tuple[str, int | None]], disabled: list[str]
) -> list[tuple[str, int]]:
    """mergePluginSet: defaults minus the disabled, enabled ones replacing in place or appended."""
    kept = [] if "*" in disabled else [(n, w) for n, w in defaults if n not in disabled]
    for name, weight in enabled:
        w = weight if weight else 1
        for k, (n, _) in enumerate(kept):
            if n == name:
                kept[k] = (name, w)
                break
        else:
            kept.append((name, w))
    return kept


def _profile(raw: Mapping[str, Any], path: str, kube_version: tuple[int, int] = (1, 37)) -> Profile:
    name = raw.get("schedulerName")
    if not name:
        raise ConfigError(f"{path}.schedulerName", "Required value")
    name = _str(name, f"{path}.schedulerName")
    plugins = _map(raw.get("plugins"), f"{path}.plugins")
    for point in plugins:
        if point not in POINTS:
            raise ConfigError(f"{path}.plugins.{point}", "unknown extension point")
    me, md = _plugin_set(plugins.get("multiPoint"), f"{path}.plugins.multiPoint")
    se, sd = _plugin_set(plugins.get("score"), f"{path}.plugins.score")
    fe, fd = _plugin_set(plugins.get("filter"), f"{path}.plugins.filter")
    pe, pd = _plugin_set(plugins.get("preFilter"), f"{path}.plugins.preFilter")
    scoring_names = {n for n, _ in DEFAULT_SCORE_PLUGINS}
    score = _merge(list(DEFAULT_SCORE_PLUGINS), [(n, w) for n, w in me if n in scoring_names], md)
    score = _merge(score, se, sd)
    filters = _merge([(n, 0) for n in FILTER_PLUGINS], [(n, 0) for n, _ in me if n in FILTER_PLUGINS], md)
    filters = _merge(filters, [(n, 0) for n, _ in fe], fd)
    kept_filters = {n for n, _ in filters}
    disabled_filters = frozenset(n for n in FILTER_PLUGINS if n not in kept_filters)
    if "*" in pd or pd:
        # A PreFilter disabled alone still leaves the Filter, which needs its state:
        # kube-scheduler then errors on every pod; refuse it here instead.
        for n in pd:
            if n != "*" and n in kept_filters:
                raise ConfigError(
                    f"{path}.plugins.preFilter.disabled", f"{n} disabled at preFilter but not at filter"
                )
    del pe
    prof = replace(
        DEFAULT_PROFILE,
        scheduler_name=name,
        score_plugins=tuple(score),
        disabled_filters=disabled_filters,
        percentage_of_nodes_to_score=_percentage(
            raw.get("percentageOfNodesToScore"), f"{path}.percentageOfNodesToScore"
        ),
    )
    seen: set[str] = set()
    for i, pc in enumerate(_list(raw.get("pluginConfig"), f"{path}.pluginConfig")):
        cpath = f"{path}.pluginConfig[{i}]"
        pc = _map(pc, cpath)
        pname = _str(pc.get("name"), f"{cpath}.name")
        if pname in seen:
            raise ConfigError(f"{path}.pluginConfig", f"Duplicate value: {pname!r}")
        seen.add(pname)
        args = _map(pc.get("args"), f"{cpath}.args")
        kind = args.get("kind")
        if kind is not None and kind != ARGS_KIND.get(pname):
            raise ConfigError(
                f"{cpath}.args", f"Invalid value: has to match plugin args ({ARGS_KIND.get(pname)})"
            )
        prof = _apply_args(prof, pname, args, f"{cpath}.args", kube_version)
    return prof


def _resources(value: Any, path: str, *, exactly_one: bool = False) -> tuple[ResourceSpec, ...]:
    out = []
    names: set[str] = set()
    for i, r in enumerate(_list(value, path)):
        r = _map(r, f"{path}[{i}]")
        name = _str(r.get("name"), f"{path}[{i}].name")
        weight = _int(r.get("weight", 1), f"{path}[{i}].weight")
        if exactly_one and weight != 1:
            raise ConfigError(f"{path}[{i}].weight", f"Invalid value: {weight}: must be 1")
        if weight <= 0 or weight > 100:
            raise ConfigError(
                f"{path}[{i}].weight",
                f"Invalid value: {weight}: resource weight of {name} not in valid range (0, 100]",
            )
        if exactly_one and name in names:
            raise ConfigError(f"{path}[{i}].name", f"Duplicate value: {name!r}")
        names.add(name)
        out.append(ResourceSpec(name, weight))
    return tuple(out)


def _shape(value: Any, path: str) -> tuple[tuple[int, int], ...]:
    """A UtilizationShapePoint list as validation_pluginargs.go validateFunctionShape
    (v1.37.2) accepts it: at least one point, utilization increasing in [0, 100],
    score in [0, 10]."""
    raw_shape = _list(value, path)
    if not raw_shape:
        raise ConfigError(path, "Required value: at least one point must be specified")
    points: list[tuple[int, int]] = []
    for i, p in enumerate(raw_shape):
        p = _map(p, f"{path}[{i}]")
        u = _int(p.get("utilization", 0), f"{path}[{i}].utilization")
        s = _int(p.get("score", 0), f"{path}[{i}].score")
        if points and u <= points[-1][0]:
            raise ConfigError(
                f"{path}[{i}].utilization", f"Invalid value: {u}: values must be sorted in increasing order"
            )
        if u < 0 or u > 100:
            raise ConfigError(f"{path}[{i}].utilization", f"Invalid value: {u}: not in valid range [0, 100]")
        if s < 0 or s > 10:
            raise ConfigError(f"{path}[{i}].score", f"Invalid value: {s}: not in valid range [0, 10]")
        points.append((u, s))
    return tuple(points)


def _apply_args(
    prof: Profile, name: str, args: Mapping[str, Any], path: str, kube_version: tuple[int, int] = (1, 37)
) -> Profile:
    if name == "NodeResourcesFit":
        strategy = _map(args.get("scoringStrategy"), f"{path}.scoringStrategy")
        if not strategy:
            return prof
        spath = f"{path}.scoringStrategy"
        kind = strategy.get("type", LEAST_ALLOCATED)
        if kind not in (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO):
            raise ConfigError(
                f"{spath}.type",
                f'Unsupported value: {kind!r}: supported values: "{LEAST_ALLOCATED}", "{MOST_ALLOCATED}", '
                f'"{REQUESTED_TO_CAPACITY_RATIO}"',
            )
        resources = prof.fit_resources
        if "resources" in strategy:
            resources = _resources(strategy.get("resources"), f"{spath}.resources")
        shape: tuple[tuple[int, int], ...] = ()
        rtcr = strategy.get("requestedToCapacityRatio")
        if kind == REQUESTED_TO_CAPACITY_RATIO:
            if rtcr is None:
                raise ConfigError(
                    f"{spath}.requestedToCapacityRatio",
                    "Required value: must be specified when type is RequestedToCapacityRatio",
                )
            shape = _shape(
                _map(rtcr, f"{spath}.requestedToCapacityRatio").get("shape"),
                f"{spath}.requestedToCapacityRatio.shape",
            )
        elif rtcr is not None:
            raise ConfigError(
                f"{spath}.requestedToCapacityRatio",
                "Forbidden: must be nil when type is not RequestedToCapacityRatio",
            )
        return replace(prof, fit_strategy=kind, fit_resources=resources, shape=shape)
    if name == "NodeResourcesBalancedAllocation":
        if "resources" not in args:
            return prof
        return replace(
            prof, balanced_resources=_resources(args.get("resources"), f"{path}.resources", exactly_one=True)
        )
    if name == "InterPodAffinity":
        prof2 = prof
        if "hardPodAffinityWeight" in args:
            w = _int(args["hardPodAffinityWeight"], f"{path}.hardPodAffinityWeight")
            if w < 0 or w > 100:
                raise ConfigError(
                    f"{path}.hardPodAffinityWeight", f"Invalid value: {w}: not in valid range [0, 100]"
                )
            prof2 = replace(prof2, hard_pod_affinity_weight=w)
        if "ignorePreferredTermsOfExistingPods" in args:
            v = args["ignorePreferredTermsOfExistingPods"]
            if not isinstance(v, bool):
                raise ConfigError(
                    f"{path}.ignorePreferredTermsOfExistingPods", f"must be a boolean, not {v!r}"
                )
            prof2 = replace(prof2, ignore_preferred_terms_of_existing_pods=v)
        return prof2
    if name == "VolumeBinding":
        timeout = args.get("bindTimeoutSeconds")
        if timeout is not None and _int(timeout, f"{path}.bindTimeoutSeconds") < 0:
            raise ConfigError(
                f"{path}.bindTimeoutSeconds",
                f"Invalid value: {timeout}: invalid BindTimeoutSeconds, should not be a negative value",
            )
        if kube_version < (1, 37) and args.get("shape") is not None:
            # validation_pluginargs.go ValidateVolumeBindingArgsWithOptions: StorageCapacityScoring
            # is off by default before v1.37 (pkg/features/kube_features.go).
            raise ConfigError(
                f"{path}.shape",
                "Invalid value: unexpected field `shape`, remove it or turn on the feature gate "
                "StorageCapacityScoring",
            )
        if not args.get("shape"):
            return prof  # SetDefaults_VolumeBindingArgs: the default shape
        return replace(prof, volume_shape=_shape(args["shape"], f"{path}.shape"))
    if name == "DynamicResources":
        return _dynamic_resources_args(prof, args, path, kube_version)
    if name == "NodeAffinity":
        added = _map(args.get("addedAffinity"), f"{path}.addedAffinity")
        preferred = []
        for i, t in enumerate(
            _list(
                added.get("preferredDuringSchedulingIgnoredDuringExecution"),
                f"{path}.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution",
            )
        ):
            tpath = f"{path}.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            t = _map(t, tpath)
            w = _int(t.get("weight", 0), f"{tpath}.weight")
            preferred.append(
                (w, _term(_map(t.get("preference"), f"{tpath}.preference"), f"{tpath}.preference"))
            )
        required = None
        if added.get("requiredDuringSchedulingIgnoredDuringExecution") is not None:
            rpath = f"{path}.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            raw = _map(added["requiredDuringSchedulingIgnoredDuringExecution"], rpath)
            required = NodeSelector(
                tuple(
                    _term(_map(t, f"{rpath}.nodeSelectorTerms[{i}]"), f"{rpath}.nodeSelectorTerms[{i}]")
                    for i, t in enumerate(_list(raw.get("nodeSelectorTerms"), f"{rpath}.nodeSelectorTerms"))
                )
            )
        return replace(prof, added_preferred=tuple(preferred), added_required=required)
    if name == "PodTopologySpread":
        dtype = args.get("defaultingType", "System")
        if dtype not in ("System", "List"):
            raise ConfigError(
                f"{path}.defaultingType", f'Unsupported value: {dtype!r}: supported values: "List", "System"'
            )
        constraints = []
        for i, c in enumerate(_list(args.get("defaultConstraints"), f"{path}.defaultConstraints")):
            cpath = f"{path}.defaultConstraints[{i}]"
            c = _map(c, cpath)
            skew = _int(c.get("maxSkew", 0), f"{cpath}.maxSkew")
            if skew <= 0:
                raise ConfigError(f"{cpath}.maxSkew", f"Invalid value: {skew}: not in valid range (0, inf)")
            key = c.get("topologyKey")
            if not key:
                raise ConfigError(f"{cpath}.topologyKey", "Required value: can not be empty")
            when = c.get("whenUnsatisfiable")
            if when not in ("DoNotSchedule", "ScheduleAnyway"):
                raise ConfigError(
                    f"{cpath}.whenUnsatisfiable",
                    f'Unsupported value: {when!r}: supported values: "DoNotSchedule", "ScheduleAnyway"',
                )
            if c.get("labelSelector") is not None:
                raise ConfigError(
                    f"{cpath}.labelSelector",
                    "Forbidden: constraint must not define a selector, as they deduced for each pod",
                )
            constraints.append(
                TopologySpreadConstraint(
                    max_skew=skew, topology_key=_str(key, f"{cpath}.topologyKey"), when_unsatisfiable=when
                )
            )
        if dtype == "System" and constraints:
            raise ConfigError(
                f"{path}.defaultingType", 'Invalid value: "System": when .defaultConstraints are not empty'
            )
        return replace(prof, spread_defaulting_type=dtype, spread_default_constraints=tuple(constraints))
    return prof


def _dynamic_resources_args(
    prof: Profile, args: Mapping[str, Any], path: str, kube_version: tuple[int, int]
) -> Profile:
    """DynamicResourcesArgs.filterTimeout (ValidateDynamicResourcesArgs,
    validation_pluginargs.go v1.37.2): a duration, zero or positive, allowed only with the
    DRASchedulerFilterTimeout gate (beta and on since 1.34, pkg/features/kube_features.go)."""
    raw = args.get("filterTimeout")
    if raw is None:
        return prof
    if kube_version < (1, 34):
        raise ConfigError(
            f"{path}.filterTimeout", "Forbidden: DRASchedulingFilterTimeout feature gate is disabled"
        )
    seconds = go_duration(_str(raw, f"{path}.filterTimeout"), f"{path}.filterTimeout")
    if seconds < 0:
        raise ConfigError(f"{path}.filterTimeout", f"Invalid value: {raw}: must be zero or positive")
    return replace(prof, dra_filter_timeout=seconds)


_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def go_duration(text: str, path: str) -> float:
    """Go's time.ParseDuration (metav1.Duration's JSON form), in seconds: a signed sequence
    of decimal numbers with units (``10s``, ``1m30s``, ``500ms``; ``0`` alone)."""
    body = text[1:] if text[:1] in "+-" else text
    sign = -1.0 if text.startswith("-") else 1.0
    if body == "0":
        return 0.0
    total, pos = 0.0, 0
    while pos < len(body):
        m = _DURATION_PART.match(body, pos)
        if m is None:
            break
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not body or pos != len(body):
        raise ConfigError(path, f'time: invalid duration "{text}"')
    return sign * total


def _term(raw: Mapping[str, Any], path: str) -> NodeSelectorTerm:
    def reqs(key: str) -> tuple[Requirement, ...]:
        out = []
        for i, e in enumerate(_list(raw.get(key), f"{path}.{key}")):
            e = _map(e, f"{path}.{key}[{i}]")
            out.append(
                Requirement(
                    _str(e.get("key"), f"{path}.{key}[{i}].key"),
                    _str(e.get("operator"), f"{path}.{key}[{i}].operator"),
                    tuple(str(v) for v in _list(e.get("values"), f"{path}.{key}[{i}].values")),
                )
            )
        return tuple(out)

    return NodeSelectorTerm(reqs("matchExpressions"), reqs("matchFields"))


def profile_for(profiles: Mapping[str, Profile] | None, scheduler_name: str) -> Profile | None:
    """The pod's profile: the default one without a configuration; None when
    the configuration has no profile of that name (nothing schedules the pod)."""
    if profiles is None:
        return (
            replace(DEFAULT_PROFILE, scheduler_name=scheduler_name)
            if scheduler_name == "default-scheduler"
            else None
        )
    return profiles.get(scheduler_name)
