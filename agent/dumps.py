"""Reading cluster dumps from files, folders and stdin into a ClusterState.

A dump is whatever ``kubectl get … -o json|yaml`` printed: one or many files,
a folder of them (read recursively, ``*.json``, ``*.yaml``, ``*.yml``), or ``-``
for stdin. Bad files and bad objects become warnings naming the file and the
object; only when nothing usable remains is it an error.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from analyzers import ingest
from analyzers.ingest import InputError, describe, parse_time, stream_documents
from analyzers.simulator.versions import DEFAULT_KUBE_VERSION, VersionError, parse_version
from analyzers.snapshot import ClusterState
from analyzers.validate import check_object

DUMP_SUFFIXES = (".json", ".yaml", ".yml")
# Files in a scenario folder that describe it rather than belong to the cluster.
NOT_CLUSTER_FILES = frozenset({"expected.yaml", "expected.yml", "timeline.yaml", "scenario.yaml"})


class DumpError(Exception):
    """Nothing usable could be read; the message says why."""


@dataclass(frozen=True)
class DumpSource:
    name: str
    path: Path | None  # None for stdin

    def chunks(self, stdin: BinaryIO) -> Iterator[bytes]:
        """The bytes, ``ingest.STREAM_CHUNK_BYTES`` at a time. A file over the document size limit is
        refused (InputError) before it is read; stdin is cut there by the reader."""
        with contextlib.ExitStack() as stack:
            fh = stdin
            if self.path is not None:
                fh = stack.enter_context(self.path.open("rb"))
                if os.fstat(fh.fileno()).st_size > ingest.MAX_DOCUMENT_BYTES:
                    raise InputError(
                        self.name,
                        f"larger than {ingest.MAX_DOCUMENT_BYTES >> 20} MiB (the document size limit)",
                    )
            while chunk := fh.read(ingest.STREAM_CHUNK_BYTES):
                yield chunk


def expand(paths: Sequence[str]) -> list[DumpSource]:
    """Files and folders (recursively) to read, in a stable order; ``-`` is stdin."""
    sources: list[DumpSource] = []
    for raw in paths:
        if raw == "-":
            sources.append(DumpSource("<stdin>", None))
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and p.suffix.lower() in DUMP_SUFFIXES and p.name not in NOT_CLUSTER_FILES
            )
            if not found:
                raise DumpError(f"{raw}: no .json or .yaml files in this folder")
            sources.extend(DumpSource(str(p), p) for p in found)
        elif path.is_file():
            sources.append(DumpSource(str(path), path))
        elif path.exists():
            raise DumpError(f"{raw}: not a regular file or folder")
        else:
            raise DumpError(f"{raw}: no such file or folder")
    return sources


def load_into(
    state: ClusterState,
    sources: Sequence[DumpSource],
    *,
    stdin: BinaryIO | None = None,
    progress: Callable[[int, int, int], None] | None = None,
    facts: DumpFacts | None = None,
) -> int:
    """Read every source into ``state``. Returns the number of objects used.
    A file that cannot be read, or an object whose fields have the wrong
    types, is one warning naming the file (and the object and field); the
    others are still read. ``facts`` collects what the dump says about its
    cluster's version and time. ``progress(done_files, total_files, objects)``
    is called after each file."""
    used = 0
    stdin = stdin if stdin is not None else sys.stdin.buffer
    facts = facts if facts is not None else DumpFacts()
    listed: set[str] = set()
    for index, source in enumerate(sources, 1):
        listings: set[str] = set()
        failed: list[str] = []
        objects = _until_failure(
            stream_documents(source.chunks(stdin), source.name, listings), source, failed
        )
        complete = True
        try:
            used += state.load(_checked(objects, source.name, state, facts), source.name)
        except Exception as exc:
            state.warn(f"{source.name}: cannot be read (internal error {type(exc).__name__}: {exc})")
            complete = False
        for message in failed:
            state.warn(message)
        if complete and not failed:  # a file read in part does not list every object of its kinds
            kinds = listed_kinds(source, listings)
            listed |= kinds
            for kind in kinds:
                state.mark_collected(kind)
        if progress is not None:
            progress(index, len(sources), used)
    _mark_absent_volume_kinds(state, listed)
    return used


def _until_failure(
    objects: Iterator[dict[str, Any]], source: DumpSource, failed: list[str]
) -> Iterator[dict[str, Any]]:
    """``objects`` until the file cannot be read further (bad JSON, over the size limit,
    an I/O error): the objects before that are used, and ``failed`` gets the one line that
    says why."""
    try:
        yield from objects
    except InputError as exc:
        failed.append(str(exc))
    except OSError as exc:
        failed.append(f"{source.name}: cannot read: {exc.strerror or exc}")


def _mark_absent_volume_kinds(state: ClusterState, listed: set[str]) -> None:
    """A dump that carries no object (and no listing) of a volume kind was made without
    it: a claim, volume or class a pod needs is then unknown, not missing."""
    from analyzers.simulator.volumes import VOLUME_KINDS
    from analyzers.snapshot import KIND_COLLECTIONS

    for kind in VOLUME_KINDS:
        if not state.collections[KIND_COLLECTIONS[kind]] and kind not in listed:
            state.mark_uncollected(kind)


# Kinds whose listing a dump may carry although it holds none of their objects, by the
# names of a file of the per-kind dump layout (`kubectl get resourceclaims -A -o json >
# resourceclaims.json`: an empty result is a `List` that does not name its kind).
LISTING_FILES = {
    "resourceclaims": "ResourceClaim",
    "resourceclaims.resource.k8s.io": "ResourceClaim",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "persistentvolumes": "PersistentVolume",
    "storageclasses": "StorageClass",
    "storageclasses.storage.k8s.io": "StorageClass",
}


def listed_kinds(source: DumpSource, listings: set[str]) -> set[str]:
    """The kinds whose every object ``source`` carries: the item kinds of its typed lists
    (a ``ResourceClaimList``, even empty), and the kind its file name is a listing of."""
    kinds = set(listings)
    if source.path is not None:
        named = LISTING_FILES.get(source.path.name.lower().rsplit(".", 1)[0])
        if named is not None:
            kinds.add(named)
    return kinds


def _checked(
    objects: Iterable[Mapping[str, Any]], source: str, state: ClusterState, facts: DumpFacts
) -> Iterator[Mapping[str, Any]]:
    """The objects whose fields have the types unstick reads (the others are
    warnings naming the field); ``kubectl version`` output is noted, not loaded."""
    for obj in objects:
        if "kind" not in obj and isinstance(obj.get("serverVersion"), Mapping):
            facts.note_server_version(obj["serverVersion"])
            continue
        problem = check_object(obj)
        if problem is not None:
            state.warn(f"{source}: {describe(obj)}: {problem}")
            continue
        facts.observe(obj)
        yield obj


def iter_clusters(
    sources: Sequence[DumpSource], *, stdin: BinaryIO | None = None
) -> Iterator[tuple[DumpSource, ClusterState, int, DumpFacts]]:
    """Each source as its own cluster (``unstick analyze --each``)."""
    for source in sources:
        state = ClusterState()
        facts = DumpFacts()
        used = load_into(state, [source], stdin=stdin, facts=facts)
        yield source, state, used, facts


# ---------------------------------------------------------------------------
# What a dump says about its cluster: the kube-scheduler version, and when it was taken

# Phrases of kube-scheduler's FailedScheduling messages that date it, with the
# versions (inclusive, (major, minor, patch)) that print them; the upstream
# changes are listed in analyzers/simulator/versions.py.
_NEWEST = (1, 999, 999)
WORDING_MARKERS: tuple[tuple[str, tuple[int, int, int], tuple[int, int, int]], ...] = (
    ("node(s) had untolerated taint(s)", (1, 34, 2), _NEWEST),
    ("node(s) had untolerated taint {", (1, 24, 0), (1, 34, 1)),
    ("that the pod didn't tolerate", (1, 18, 0), (1, 23, 999)),
    ("node(s) didn't match node selector", (1, 18, 0), (1, 19, 999)),
    ("node(s) didn't match Pod's node affinity/selector", (1, 21, 0), _NEWEST),
    ("node(s) didn't match PersistentVolume's node affinity", (1, 33, 0), _NEWEST),
    ("node(s) had volume node affinity conflict", (1, 18, 0), (1, 32, 999)),
    ("node(s) didn't satisfy plugin(s) [NodeAffinity]", (1, 31, 0), _NEWEST),
    ("node is filtered out by the prefilter result", (1, 26, 0), (1, 30, 999)),
    ("no new claims to deallocate", (1, 34, 0), (1, 36, 999)),
    ("still not schedulable", (1, 26, 0), (1, 36, 999)),
    ("preemption: found a potential placement for pod on node", (1, 37, 0), _NEWEST),
    ("preemption: ", (1, 24, 0), _NEWEST),
)
_DOUBLE_DOT = re.compile(r"\.\. ?preemption: |\.\.$")
# A preemption clause with no DynamicResources PostFilter text in front: 1.34-1.36 put one
# there for every pod (DRA on by default), so such a message is either older or 1.37+.
_BARE_PREEMPTION = "preemption without a DRA PostFilter text"
_DRA_POSTFILTER_TEXTS = ("no new claims to deallocate, preemption: ", "still not schedulable, preemption: ")
_AFTER_DRA_POSTFILTER = (1, 37, 0)


@dataclass
class DumpFacts:
    """Collected while a dump is read: versions its objects name, the
    wording of its scheduler events, and its latest timestamp."""

    server_version: str | None = None
    kubelet_versions: dict[str, int] = field(default_factory=dict)
    wording: dict[str, int] = field(default_factory=dict)
    latest: float | None = None

    def note_server_version(self, info: Mapping[str, Any]) -> None:
        git = info.get("gitVersion")
        if isinstance(git, str) and git:
            self.server_version = git
        elif isinstance(info.get("major"), str) and isinstance(info.get("minor"), str):
            self.server_version = f"{info['major']}.{info['minor'].rstrip('+')}"

    def _time(self, value: Any) -> None:
        t = parse_time(value)
        if t is not None and (self.latest is None or t > self.latest):
            self.latest = t

    def observe(self, obj: Mapping[str, Any]) -> None:
        """Note what ``obj`` says; kinds unstick does not read are not validated, so nothing is assumed."""
        meta = obj.get("metadata")
        if isinstance(meta, Mapping):
            self._time(meta.get("creationTimestamp"))
            managed = meta.get("managedFields")
            for entry in managed if isinstance(managed, list) else ():
                if isinstance(entry, Mapping):
                    self._time(entry.get("time"))
        kind = obj.get("kind")
        status = obj.get("status")
        if isinstance(status, Mapping):
            conditions = status.get("conditions")
            for c in conditions if isinstance(conditions, list) else ():
                if isinstance(c, Mapping):
                    self._time(c.get("lastTransitionTime"))
                    self._time(c.get("lastHeartbeatTime"))
                    self._time(c.get("lastProbeTime"))
            if kind == "Node":
                info = status.get("nodeInfo")
                version = info.get("kubeletVersion") if isinstance(info, Mapping) else None
                if isinstance(version, str) and version:
                    self.kubelet_versions[version] = self.kubelet_versions.get(version, 0) + 1
        if kind == "Event":
            series = obj.get("series") or {}
            for key in ("firstTimestamp", "lastTimestamp", "eventTime", "deprecatedLastTimestamp"):
                self._time(obj.get(key))
            self._time(series.get("lastObservedTime"))
            message = obj.get("message") or obj.get("note")
            if obj.get("reason") == "FailedScheduling" and isinstance(message, str):
                for phrase, _, _ in WORDING_MARKERS:
                    if phrase in message:
                        self.wording[phrase] = self.wording.get(phrase, 0) + 1
                if _DOUBLE_DOT.search(message.rstrip()):
                    self.wording[".."] = self.wording.get("..", 0) + 1
                if "preemption: " in message and not any(t in message for t in _DRA_POSTFILTER_TEXTS):
                    self.wording[_BARE_PREEMPTION] = self.wording.get(_BARE_PREEMPTION, 0) + 1

    def kube_version(self, override: str | None = None) -> tuple[str, str]:
        """The kube-scheduler version to word messages as, and why (for people)."""
        if override is not None:
            return override, "--kube-version"
        low, high, phrases = (1, 18, 0), _NEWEST, []
        markers = [*WORDING_MARKERS, ("..", (1, 26, 0), (1, 28, 999))]
        for phrase, lo, hi in markers:
            if phrase in self.wording:
                low, high = max(low, lo), min(high, hi)
                phrases.append(phrase)
        if _BARE_PREEMPTION in self.wording and low >= (1, 34, 0) and low < _AFTER_DRA_POSTFILTER:
            # Wording of 1.34+ whose preemption clause lacks DynamicResources' text: 1.37+.
            low = _AFTER_DRA_POSTFILTER
            phrases.append(_BARE_PREEMPTION)
        wording_ok = low <= high
        if self.server_version is not None:
            try:
                parse_version(self.server_version)
                return self.server_version.lstrip(
                    "v"
                ), f"the API server version in the dump ({self.server_version})"
            except VersionError:
                pass
        if self.kubelet_versions:
            newest = max(self.kubelet_versions, key=_version_key)
            v = _version_key(newest)
            if phrases and wording_ok and not low <= v <= high:
                chosen = low if v < low else high
                return _label(chosen), (
                    f"the scheduler's own wording ({_quote(phrases)}) over the nodes' kubeletVersion {newest}"
                )
            nodes = self.kubelet_versions[newest]
            return _label(v), f"the newest kubeletVersion of the nodes ({newest}, {nodes} node(s))"
        if phrases and wording_ok:
            default = parse_version(DEFAULT_KUBE_VERSION)
            chosen = min(max(default, low), high)
            return _label(
                chosen
            ), f"the wording of the scheduler's FailedScheduling events ({_quote(phrases)})"
        return DEFAULT_KUBE_VERSION, "the default (the dump names no API server or kubelet version)"


def _version_key(text: str) -> tuple[int, int, int]:
    try:
        return parse_version(text)
    except VersionError:
        return (0, 0, 0)


def _label(v: tuple[int, int, int]) -> str:
    """MAJOR.MINOR, with the patch when it matters (999: any patch of the minor)."""
    return f"{v[0]}.{v[1]}.{v[2]}" if 0 < v[2] < 999 else f"{v[0]}.{v[1]}"


def _quote(phrases: list[str]) -> str:
    return ", ".join(f"'{p}'" for p in phrases[:3]) + (" …" if len(phrases) > 3 else "")
