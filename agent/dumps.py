"""Reading cluster dumps from files, folders and stdin into a ClusterState.

A dump is whatever ``kubectl get … -o json|yaml`` printed: one or many files,
a folder of them (read recursively, ``*.json``, ``*.yaml``, ``*.yml``), or ``-``
for stdin. Bad files and bad objects become warnings naming the file and the
object; only when nothing usable remains is it an error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from analyzers.ingest import InputError, parse_documents
from analyzers.snapshot import ClusterState

DUMP_SUFFIXES = (".json", ".yaml", ".yml")
# Files in a scenario folder that describe it rather than belong to the cluster.
NOT_CLUSTER_FILES = frozenset({"expected.yaml", "expected.yml", "timeline.yaml", "scenario.yaml"})


class DumpError(Exception):
    """Nothing usable could be read; the message says why."""


@dataclass(frozen=True)
class DumpSource:
    name: str
    path: Path | None  # None for stdin

    def read(self, stdin: BinaryIO) -> bytes:
        if self.path is None:
            return stdin.read()
        return self.path.read_bytes()


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
) -> int:
    """Read every source into ``state``. Returns the number of objects used.
    ``progress(done_files, total_files, objects)`` is called after each file."""
    used = 0
    stdin = stdin if stdin is not None else sys.stdin.buffer
    for index, source in enumerate(sources, 1):
        try:
            data = source.read(stdin)
        except OSError as exc:
            state.warn(f"{source.name}: cannot read: {exc.strerror or exc}")
            continue
        try:
            used += state.load(parse_documents(data, source.name), source.name)
        except InputError as exc:
            state.warn(str(exc))
        if progress is not None:
            progress(index, len(sources), used)
    return used


def iter_clusters(
    sources: Sequence[DumpSource], *, kube_version: str | None = None, stdin: BinaryIO | None = None
) -> Iterator[tuple[DumpSource, ClusterState, int]]:
    """Each source as its own cluster (``unstick analyze --each``)."""
    for source in sources:
        state = ClusterState(kube_version)
        used = load_into(state, [source], stdin=stdin)
        yield source, state, used
