"""KindWatcher's per-event bookkeeping (``_accept``) without a server: the
Delta it builds, versions, duplicates, bookmarks and malformed events."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agent.kube.kinds import POD
from agent.kube.watcher import Delta, KindWatcher, _delta


class _NullSink:
    async def delta(self, delta: Delta) -> None:  # pragma: no cover - not called here
        pass

    async def synced(self, kind: str) -> None:  # pragma: no cover
        pass


def _watcher() -> KindWatcher:
    return KindWatcher(None, POD, _NullSink())  # type: ignore[arg-type]


def _event(type_: str, name: str = "p", rv: str = "1", uid: str = "u1") -> dict[str, Any]:
    return {
        "type": type_,
        "object": {
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv},
        },
    }


def test_fast_delta_equals_the_dataclass() -> None:
    obj = {"kind": "Pod", "metadata": {"name": "p"}}
    fast, plain = _delta("Pod", "MODIFIED", obj), Delta("Pod", "MODIFIED", obj)
    assert fast == plain and repr(fast) == repr(plain) and fast.final_state_unknown is False
    assert all(hasattr(fast, f.name) for f in dataclasses.fields(Delta))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.kind = "Node"  # type: ignore[misc]


def test_accept_books_versions_and_drops_duplicates() -> None:
    w = _watcher()
    first = w._accept(_event("ADDED", rv="5"))
    assert first == Delta("Pod", "ADDED", _event("ADDED", rv="5")["object"])
    assert w.resource_version == "5" and w.known_count == 1 and w.stats.events == 1
    assert w._accept(_event("MODIFIED", rv="5")) is None  # the same version again
    assert w.stats.duplicates == 1
    modified = w._accept(_event("MODIFIED", rv="7"))
    assert modified is not None and modified.type == "MODIFIED" and w.resource_version == "7"
    deleted = w._accept(_event("DELETED", rv="9"))
    assert deleted is not None and deleted.type == "DELETED" and w.known_count == 0


def test_accept_bookmarks_and_malformed_events_deliver_nothing() -> None:
    w = _watcher()
    assert w._accept({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}}) is None
    assert w.resource_version == "42" and w.stats.bookmarks == 1
    assert w._accept({"type": "ADDED", "object": {"metadata": "nope"}}) is None
    assert w._accept({"type": "ADDED", "object": {"metadata": {"name": "p"}}}) is None  # no resourceVersion
    assert w.stats.malformed == 2 and w.stats.events == 0
