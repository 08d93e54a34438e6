"""Scenarios for the fake API endpoint: initial objects plus a timeline.

A scenario is a YAML file (or a folder holding ``scenario.yaml``)::

    name: gpu-rollout-deadlock
    description: A rollout that needs a second GPU on a one-GPU node.
    speed: 1               # default playback speed (2 = twice as fast)
    metrics: false         # serve metrics.k8s.io (NodeMetrics/PodMetrics objects)
    serverVersion: v1.30.2
    objects:               # the state before the timeline starts
      - objects.yaml       #   a file of Kubernetes objects (multi-document,
      - apiVersion: v1     #   or a List), relative to the scenario file,
        kind: Node         #   or an object inline
        metadata: {name: gpu-1}
    timeline:
      - at: 5              # seconds from the start, in scenario time
        apply: [rollout.yaml, {apiVersion: apps/v1, kind: Deployment, ...}]
        delete:
          - {kind: Pod, namespace: ml, name: trainer-7d9f-abcde}
        events:
          - involvedObject: {kind: Pod, namespace: ml, name: trainer-5c8d-xyz12}
            reason: FailedScheduling
            type: Warning
            source: default-scheduler
            message: "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, ..."

Within a step, deletions run first, then applies, then events. An event in
the short form above is recorded as the event recorder would (a repeat bumps
``count``), with the involved object's uid filled from the cluster when it
exists; a full ``kind: Event`` object is applied as written.

A YAML file of plain Kubernetes objects (no ``objects``/``timeline`` keys) is
a scenario too: just its initial state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from agent.fakecluster.server import FakeCluster

__all__ = ["Scenario", "ScenarioError", "ScenarioPlayer", "Step", "load_objects"]

Obj = dict[str, Any]


class ScenarioError(ValueError):
    """A scenario file that cannot be used, with the file and the reason."""


_DURATION = re.compile(r"^\s*(?:(?P<h>\d+(?:\.\d+)?)h)?\s*(?:(?P<m>\d+(?:\.\d+)?)m)?\s*(?:(?P<s>\d+(?:\.\d+)?)s?)?\s*$")


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and value.strip() and (m := _DURATION.match(value)):
        seconds = sum(float(m[unit] or 0) * factor for unit, factor in (("h", 3600), ("m", 60), ("s", 1)))
    else:
        raise ScenarioError(f"{where}: 'at' must be seconds or a duration like '1m30s', not {value!r}")
    if seconds < 0:
        raise ScenarioError(f"{where}: 'at' must not be negative")
    return seconds


def _flatten(doc: Any, where: str) -> Iterator[Obj]:
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise ScenarioError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
    if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from _flatten(item, where)
        return
    if not doc.get("kind") or not doc.get("apiVersion"):
        raise ScenarioError(f"{where}: object without kind/apiVersion: {str(doc)[:80]}")
    yield doc


def load_objects(path: str | Path) -> list[Obj]:
    """Kubernetes objects from a YAML (multi-document, or List) or JSON file."""
    file = Path(path)
    try:
        docs = list(yaml.safe_load_all(file.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"{file}: {exc}") from exc
    return [obj for doc in docs for obj in _flatten(doc, str(file))]


def _objects(entries: Any, base: Path, where: str) -> list[Obj]:
    if entries is None:
        return []
    if not isinstance(entries, list):
        entries = [entries]
    out: list[Obj] = []
    for entry in entries:
        if isinstance(entry, str):
            out.extend(load_objects(base / entry))
        else:
            out.extend(_flatten(entry, where))
    return out


@dataclass(frozen=True, slots=True)
class Step:
    at: float  # seconds from the start, scenario time
    apply: tuple[Obj, ...] = ()
    delete: tuple[Obj, ...] = ()  # {kind, name, namespace?} or objects
    events: tuple[Obj, ...] = ()


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str = ""
    objects: tuple[Obj, ...] = ()
    timeline: tuple[Step, ...] = ()
    speed: float = 1.0
    metrics: bool = False
    server_version: str = "v1.30.2"
    source: Path | None = field(default=None, compare=False)

    @property
    def duration(self) -> float:
        return max((s.at for s in self.timeline), default=0.0)

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        """Load a scenario file, a folder with ``scenario.yaml``, or a file of
        plain Kubernetes objects."""
        file = Path(path)
        if file.is_dir():
            file = file / "scenario.yaml"
        try:
            docs = [d for d in yaml.safe_load_all(file.read_text(encoding="utf-8")) if d is not None]
        except (OSError, yaml.YAMLError) as exc:
            raise ScenarioError(f"{file}: {exc}") from exc
        if len(docs) == 1 and isinstance(docs[0], dict) and ("timeline" in docs[0] or "objects" in docs[0]):
            return cls.from_dict(docs[0], base=file.parent, source=file)
        objects = [obj for doc in docs for obj in _flatten(doc, str(file))]
        return cls(name=file.stem, objects=tuple(objects), source=file)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, base: Path | None = None, source: Path | None = None) -> Scenario:
        base = base or Path.cwd()
        where = str(source or "scenario")
        unknown = set(doc) - {"name", "description", "speed", "metrics", "serverVersion", "objects", "timeline"}
        if unknown:
            raise ScenarioError(f"{where}: unknown keys {sorted(unknown)}")
        steps: list[Step] = []
        for i, raw in enumerate(doc.get("timeline") or []):
            here = f"{where}: timeline[{i}]"
            if not isinstance(raw, dict) or "at" not in raw:
                raise ScenarioError(f"{here}: a step needs 'at'")
            extra = set(raw) - {"at", "apply", "delete", "events"}
            if extra:
                raise ScenarioError(f"{here}: unknown keys {sorted(extra)}")
            deletes = raw.get("delete") or []
            for d in deletes:
                if not isinstance(d, dict) or not (d.get("name") or (d.get("metadata") or {}).get("name")):
                    raise ScenarioError(f"{here}: a delete needs kind and name")
            events = raw.get("events") or []
            for e in events:
                if not isinstance(e, dict) or not isinstance(e.get("involvedObject"), dict):
                    raise ScenarioError(f"{here}: an event needs involvedObject")
            steps.append(
                Step(
                    at=_seconds(raw["at"], here),
                    apply=tuple(_objects(raw.get("apply"), base, here)),
                    delete=tuple(deletes),
                    events=tuple(events),
                )
            )
        steps.sort(key=lambda s: s.at)
        speed = float(doc.get("speed", 1.0))
        if speed <= 0:
            raise ScenarioError(f"{where}: speed must be positive")
        return cls(
            name=str(doc.get("name") or (source.stem if source else "scenario")),
            description=str(doc.get("description") or ""),
            objects=tuple(_objects(doc.get("objects"), base, f"{where}: objects")),
            timeline=tuple(steps),
            speed=speed,
            metrics=bool(doc.get("metrics", False)),
            server_version=str(doc.get("serverVersion") or "v1.30.2"),
            source=source,
        )

    def rebased(self, now: datetime) -> Scenario:
        """The same scenario with every RFC 3339 timestamp in its objects moved
        by whole seconds so that the latest one is within the second before
        ``now``: recorded fixtures then read as fresh (a pod pending since 10:08
        of a March day is pending for minutes, not months), and the intervals
        between timestamps are kept exactly (whole-second stamps stay whole,
        an API server's microsecond ones keep their fraction)."""
        stamps = [t for obj in self._all_objects() for t in _timestamps(obj)]
        if not stamps:
            return self
        shift = timedelta(seconds=math.floor((now - max(stamps)).total_seconds()))
        return dataclasses.replace(
            self,
            objects=tuple(_shift(o, shift) for o in self.objects),
            timeline=tuple(dataclasses.replace(s, apply=tuple(_shift(o, shift) for o in s.apply)) for s in self.timeline),
        )

    def _all_objects(self) -> Iterator[Obj]:
        yield from self.objects
        for step in self.timeline:
            yield from step.apply

    def cluster(self, **kwargs: Any) -> FakeCluster:
        """A FakeCluster configured for this scenario, with its initial
        objects applied (not started)."""
        kwargs.setdefault("metrics", self.metrics)
        kwargs.setdefault("version", self.server_version)
        cluster = FakeCluster(**kwargs)
        apply_all(cluster, self.objects)
        return cluster


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def _parse_stamp(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _timestamps(value: Any) -> Iterator[datetime]:
    if isinstance(value, str):
        if _RFC3339.match(value):
            yield _parse_stamp(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _timestamps(item)
    elif isinstance(value, list):
        for item in value:
            yield from _timestamps(item)


def _shift(value: Any, by: timedelta) -> Any:
    if isinstance(value, str) and _RFC3339.match(value):
        moved = (_parse_stamp(value) + by).astimezone(UTC)
        fraction = value[19:-1]  # ".000000" or ""
        text = moved.strftime("%Y-%m-%dT%H:%M:%S")
        if fraction:
            text += f".{moved.microsecond:06d}"[: len(fraction)]
        return text + "Z"
    if isinstance(value, Mapping):
        return {k: _shift(v, by) for k, v in value.items()}
    if isinstance(value, list):
        return [_shift(v, by) for v in value]
    return value


def apply_all(cluster: FakeCluster, objects: Iterable[Obj]) -> None:
    # Namespaces first, then cluster-scoped kinds, so references resolve as
    # they would after `kubectl apply -f` of a folder.
    ordered = sorted(objects, key=lambda o: (o.get("kind") != "Namespace", o.get("kind") == "Event"))
    for obj in ordered:
        cluster.apply(obj)


def play_step(cluster: FakeCluster, step: Step) -> None:
    """Apply one timeline step to the cluster."""
    for ref in step.delete:
        meta = ref.get("metadata") or {}
        cluster.delete(str(ref["kind"]), ref.get("name") or meta["name"], ref.get("namespace") or meta.get("namespace"))
    apply_all(cluster, step.apply)
    for event in step.events:
        if event.get("kind") == "Event":
            cluster.apply(event)
            continue
        involved = dict(event["involvedObject"])
        current = cluster.get(str(involved.get("kind")), str(involved.get("name")), involved.get("namespace"))
        if current is not None:
            involved.setdefault("uid", current["metadata"].get("uid"))
            involved.setdefault("apiVersion", current.get("apiVersion"))
        source = event.get("source") or "default-scheduler"
        component = source.get("component", "default-scheduler") if isinstance(source, dict) else str(source)
        cluster.record_event(
            involved,
            str(event.get("reason", "")),
            str(event.get("message", "")),
            type=str(event.get("type", "Warning")),
            component=component,
        )


class ScenarioPlayer:
    """Plays a scenario's timeline against a cluster. ``speed`` (default the
    scenario's) divides every offset; ``math.inf`` plays without waiting."""

    def __init__(
        self,
        cluster: FakeCluster,
        scenario: Scenario,
        *,
        speed: float | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] | None = None,
        on_step: Callable[[Step], Awaitable[None] | None] | None = None,
        before_step: Callable[[Step], Awaitable[None]] | None = None,
    ) -> None:
        self.cluster = cluster
        self.scenario = scenario
        self.speed = speed if speed is not None else scenario.speed
        if self.speed <= 0:
            raise ValueError("speed must be positive")
        self._sleep = sleep
        self._clock = clock
        self._on_step = on_step
        self._before_step = before_step
        self.played = 0

    @property
    def done(self) -> bool:
        return self.played >= len(self.scenario.timeline)

    async def play(self) -> None:
        """Play the remaining steps, each at its offset divided by speed. ``before_step`` (when
        given) may hold a step back; later steps keep their spacing after it."""
        clock = self._clock or asyncio.get_running_loop().time
        started = clock()
        for step in self.scenario.timeline[self.played :]:
            if not math.isinf(self.speed):
                wait = started + step.at / self.speed - clock()
                if wait > 0:
                    await self._sleep(wait)
            if self._before_step is not None:
                held_from = clock()
                await self._before_step(step)
                started += clock() - held_from
            play_step(self.cluster, step)
            self.played += 1
            if self._on_step is not None:
                result = self._on_step(step)
                if result is not None:
                    await result

    def play_all(self) -> None:
        """Apply every remaining step at once."""
        for step in self.scenario.timeline[self.played :]:
            play_step(self.cluster, step)
            self.played += 1
