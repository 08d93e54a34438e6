"""The dump reader item by item (``stream_documents``) against the whole-document
reader (``parse_documents``): the same objects, in the same order, with the same
listings, whatever the layout, the chunk boundaries and the strings inside."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.ingest import InputError, LimitError, parse_documents, stream_documents

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def chunked(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def both(data: bytes, size: int) -> tuple[list[Any], set[str], list[Any], set[str]]:
    whole: set[str] = set()
    streamed: set[str] = set()
    expected = list(parse_documents(data, "d.json", whole))
    got = list(stream_documents(chunked(data, size), "d.json", streamed))
    return expected, whole, got, streamed


# Strings that could fool a splitter: braces, brackets, escaped quotes, "items", newlines.
awkward_text = st.sampled_from(
    ["", "}", "{", "},{", "}]", '"', '\\"}', "items", '"items": [', "\n        }", "a\nb", "é}", "[{]"]
) | st.text(max_size=12)
leaf = st.none() | st.booleans() | st.integers(-5, 5) | awkward_text
json_value = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(awkward_text, inner, max_size=3),
    max_leaves=12,
)


@st.composite
def list_documents(draw: Any) -> bytes:
    kinds = draw(st.sampled_from(["List", "PodList", "ResourceClaimList", "", None]))
    items = []
    for i in range(draw(st.integers(0, 6))):
        item: dict[str, Any] = {"metadata": {"name": f"o{i}", "annotations": draw(json_value)}}
        if draw(st.booleans()):
            item["kind"] = draw(st.sampled_from(["Pod", "Node", "List"]))
            if item["kind"] == "List":
                item["items"] = [{"kind": "Pod", "metadata": {"name": f"n{i}"}}]
        item["spec"] = draw(json_value)
        items.append(item)
    doc: dict[str, Any] = {}
    order = draw(st.permutations(["apiVersion", "items", "kind", "metadata"]))
    for key in order:
        if key == "items":
            doc["items"] = items
        elif key == "kind" and kinds is not None:
            doc["kind"] = kinds
        elif key == "apiVersion":
            doc["apiVersion"] = "v1"
        elif key == "metadata":
            doc["metadata"] = {"resourceVersion": "12", "note": draw(awkward_text)}
    indent = draw(st.sampled_from([None, 1, 4]))
    text = json.dumps(doc, indent=indent, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        text += "\n" + json.dumps({"kind": "Pod", "metadata": {"name": "after"}})
    data = text.encode()
    return b"\xef\xbb\xbf" + data if draw(st.booleans()) else data


@settings(max_examples=300, deadline=None)
@given(list_documents(), st.integers(1, 64))
def test_streamed_items_are_the_documents_objects(data: bytes, size: int) -> None:
    expected, whole, got, streamed = both(data, size)
    assert got == expected
    assert streamed == whole


@pytest.mark.parametrize("size", [1, 5, 4096])
def test_every_golden_dump_reads_the_same(size: int) -> None:
    # The golden scenarios' files as kubectl prints them (-o json), pretty and compact.
    paths = sorted(SCENARIOS.rglob("*.yaml"))[:60]
    assert paths
    for path in paths:
        try:
            objects = list(parse_documents(path.read_text(), str(path)))
        except InputError:
            continue
        for indent in (4, None):
            data = json.dumps({"apiVersion": "v1", "items": objects, "kind": "List"}, indent=indent).encode()
            expected, whole, got, streamed = both(data, size)
            assert got == expected == objects and streamed == whole


def test_yaml_and_single_objects_are_read_whole() -> None:
    for text in ("kind: Pod\nmetadata: {name: a}\n", '{"kind": "Pod", "metadata": {"name": "a"}}', "[]", ""):
        expected, _, got, _ = both(text.encode(), 3)
        assert got == expected


def test_a_broken_item_names_it_after_the_items_before_it() -> None:
    data = b'{"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "a"}}, {"kind": "Pod", "metad'
    seen: list[Any] = []
    with pytest.raises(InputError, match=r"d.json: invalid JSON in items\[1\]"):
        for obj in stream_documents(chunked(data, 8), "d.json"):
            seen.append(obj)
    assert [o["metadata"]["name"] for o in seen] == ["a"]


def test_a_deep_item_is_the_nesting_limit() -> None:
    deep = '{"a":' * 1100 + "1" + "}" * 1100
    data = ('{"kind": "List", "items": [' + deep + "]}").encode()
    with pytest.raises(LimitError, match="JSON nesting limit"):
        list(stream_documents(chunked(data, 4096), "d.json"))


def test_a_typed_list_holds_its_kindless_items_until_its_kind() -> None:
    # The API's own lists: items carry no kind, and the list's kind follows them.
    data = orjson.dumps(
        {
            "apiVersion": "v1",
            "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}],
            "kind": "PodList",
        }
    )
    listings: set[str] = set()
    got = list(stream_documents(chunked(data, 10), "d.json", listings))
    assert [(o["kind"], o["apiVersion"], o["metadata"]["name"]) for o in got] == [
        ("Pod", "v1", "a"),
        ("Pod", "v1", "b"),
    ]
    assert listings == {"Pod"}


def test_items_in_a_document_that_is_not_a_list_are_refused() -> None:
    # Read whole, such a document is one object of that kind; streamed, its items were
    # read before its kind: the document is refused with one line.
    for kind in ('"Pod"', "5"):
        data = ('{"items": [{"kind": "Pod", "metadata": {"name": "a"}}], "kind": ' + kind + "}").encode()
        with pytest.raises(InputError, match=r"an items array in a document of kind .*, which is not a List"):
            list(stream_documents(chunked(data, 7), "d.json"))


def test_a_dump_over_the_size_limit_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.dumps import expand, load_into
    from analyzers import ingest
    from analyzers.snapshot import ClusterState

    pods = [
        {"kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "c"}]}}
        for i in range(50)
    ]
    data = orjson.dumps({"apiVersion": "v1", "items": pods, "kind": "List"})
    path = tmp_path / "pods.json"
    path.write_bytes(data)
    monkeypatch.setattr(ingest, "MAX_DOCUMENT_BYTES", len(data) - 1)
    state = ClusterState()
    assert load_into(state, expand([str(path)])) == 0
    assert state.warnings == [f"{path}: larger than 0 MiB (the document size limit)"]
    # stdin has no size to read first: what came before the limit is used, and it is said
    state = ClusterState()
    monkeypatch.setattr(ingest, "STREAM_CHUNK_BYTES", 64)
    used = load_into(state, expand(["-"]), stdin=io.BytesIO(data))
    assert 0 < used < 50
    assert state.warnings == ["<stdin>: larger than 0 MiB (the document size limit)"]
    monkeypatch.setattr(ingest, "MAX_DOCUMENT_BYTES", len(data))
    state = ClusterState()
    assert load_into(state, expand([str(path)])) == 50 and not state.warnings


def test_a_listing_read_in_part_is_not_the_whole_listing(tmp_path: Path) -> None:
    from agent.dumps import expand, load_into
    from analyzers.snapshot import KIND_COLLECTIONS, ClusterState

    claim = {"metadata": {"name": "data-0", "namespace": "ml"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    whole = orjson.dumps(
        {"apiVersion": "v1", "kind": "List", "items": [{"kind": "PersistentVolumeClaim", **claim}]}
    )
    path = tmp_path / "persistentvolumeclaims.json"  # the per-kind layout: the file is the listing
    path.write_bytes(whole)
    state = ClusterState()
    load_into(state, expand([str(path)]))
    assert ("PersistentVolumeClaim", "") in state.collected and not state.warnings
    # the same listing cut short after its first claim: that claim is read, the listing is not whole
    path.write_bytes(whole[: whole.rindex(b"]")] + b',{"metadata": {"na')
    state = ClusterState()
    load_into(state, expand([str(path)]))
    assert ("PersistentVolumeClaim", "") not in state.collected
    assert [c.name for c in state.collections[KIND_COLLECTIONS["PersistentVolumeClaim"]].values()] == [
        "data-0"
    ]
    assert len(state.warnings) == 1 and "invalid JSON in items[1]" in state.warnings[0]
