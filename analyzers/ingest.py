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
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, Final, TypeVar

import orjson
import yaml

from analyzers.lifecycle import Trigger
from analyzers.quantity import QuantityError, to_units
from analyzers.records import (
    EMPTY_MAP,
    Condition,
    CustomObject,
    CustomResourceDefinition,
    CustomResourceVersion,
    DaemonSet,
    Deployment,
    DeviceClass,
    Event,
    FrozenMap,
    HostPort,
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
    PodResourceClaim,
    PodSpec,
    PriorityClass,
    Record,
    ReplicaSet,
    ReplicationController,
    Requirement,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    StatefulSet,
    StorageClass,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WorkloadStatus,
    make_condition,
    make_event,
    make_involved,
    make_node,
    make_pod,
)
from analyzers.validate import check_object, json_type

T = TypeVar("T")
Obj = Mapping[str, Any]
_intern = sys.intern
SCHEDULED_TRUE: Final = make_condition("PodScheduled", "True", "", "", None)


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


# Limits on what one input file may cost (``unstick analyze`` reads files a
# user was handed; kubectl never writes YAML aliases or deep nesting).
MAX_DOCUMENT_BYTES = 1 << 30
"""Largest input file or stdin (1 GiB)."""
MAX_DEPTH = 200
"""Deepest nesting of maps and lists in YAML (JSON: the decoder's own 1024)."""
MAX_YAML_ALIASES = 10_000
"""Most ``*alias`` references in one YAML file."""
MAX_ALIAS_EXPANSION = 16 << 20
"""Most characters (scalars, plus one per node) aliases may add to a YAML document."""
JSON_MAX_DEPTH = 1024  # orjson's limit, which we keep


class LimitError(InputError):
    """An input over one of the limits above; the message names the limit."""


def parse_documents(
    text: str | bytes, source: str = "<input>", listings: set[str] | None = None
) -> Iterator[dict[str, Any]]:
    """Yield every Kubernetes object in ``text`` (JSON, JSON stream or YAML),
    flattening ``List`` kinds. Raises InputError on undecodable text and
    LimitError on text over the limits (size, nesting, YAML aliases).
    ``listings`` receives the item kind of every typed list (``ResourceClaimList``:
    ``ResourceClaim``), empty ones too: the dump carries that kind's listing."""
    if len(text) > MAX_DOCUMENT_BYTES:
        raise LimitError(source, f"larger than {MAX_DOCUMENT_BYTES >> 20} MiB (the document size limit)")
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
        except orjson.JSONDecodeError as exc:
            if "depth limit" in str(exc):
                raise LimitError(
                    source, f"nested deeper than {JSON_MAX_DEPTH} levels (the JSON nesting limit)"
                ) from None
            # Several JSON documents one after another (kubectl get … -o json per object).
            docs = list(_json_documents(stripped, source))
    else:
        docs = _yaml_documents(text, source)
    for doc in docs:
        yield from _flatten(doc, source, listings=listings)


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
        except RecursionError:
            raise LimitError(
                source, f"nested deeper than {JSON_MAX_DEPTH} levels (the JSON nesting limit)"
            ) from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise InputError(source, f"invalid JSON: {str(exc).split(';')[0]}") from None
        yield doc


class _BoundedYAMLLoader(yaml.SafeLoader):
    """PyYAML's safe loader with limits on nesting depth and alias references."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise _Limit(f"more than {MAX_YAML_ALIASES:,} YAML aliases (the alias limit)")
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Limit(f"nested deeper than {MAX_DEPTH} levels (the nesting limit)")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _Limit(Exception):
    pass


def _yaml_documents(text: str, source: str) -> list[Any]:
    """Every YAML document of ``text``, each node graph checked before it is
    built: no alias that contains itself, and aliases may not expand the
    document by more than MAX_ALIAS_EXPANSION characters ("billion laughs")."""
    loader = _BoundedYAMLLoader(text)
    docs: list[Any] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_expansion(node)
            doc = loader.construct_document(node)
            if doc is not None:
                docs.append(doc)
    except _Limit as exc:
        raise LimitError(source, str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(source, f"invalid YAML{where}: {problem}") from exc
    except RecursionError:
        raise LimitError(source, f"nested deeper than {MAX_DEPTH} levels (the nesting limit)") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more digits than Python converts
        raise InputError(source, f"invalid YAML value: {str(exc).split(';')[0]}") from None
    finally:
        loader.dispose()
    return docs


def _check_expansion(root: yaml.Node) -> None:
    """Raise _Limit when ``root`` contains itself through an alias, or when
    its aliases add more than MAX_ALIAS_EXPANSION characters. Iterative, each
    distinct node visited once (sizes are memoised by node)."""
    expanded: dict[int, int] = {}
    written = 0
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1
            for child in _children(node):
                total += expanded[id(child)]
            expanded[key] = total
            continue
        if key in expanded:
            continue
        if key in on_path:
            raise _Limit("a YAML alias refers to a node that contains it (the alias would never end)")
        if isinstance(node, yaml.ScalarNode):
            size = 1 + len(node.value)
            expanded[key] = size
            written += size
            continue
        written += 1
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise _Limit("a YAML alias refers to a node that contains it (the alias would never end)")
            if id(child) not in expanded:
                stack.append((child, False))
    if expanded[id(root)] - written > MAX_ALIAS_EXPANSION:
        raise _Limit(
            f"YAML aliases expand it by more than {MAX_ALIAS_EXPANSION >> 20} MiB (the alias expansion limit)"
        )


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        yield from node.value
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            yield k
            yield v


# ---------------------------------------------------------------------------
# A JSON List read item by item

STREAM_CHUNK_BYTES = 4 << 20
"""How much of a dump ``stream_documents``'s caller reads at a time."""
# Where an item of an ``items`` array may end: a ``}`` before the next object or the end.
_ITEM_END = re.compile(rb"\}[ \t\r\n]*(?:\]|,[ \t\r\n]*\{)")
_JSON_WS = b" \t\r\n"
# Candidate ends tried with unbalanced braces counted before parsing them regardless
# (braces inside strings).
_UNBALANCED_TRIES = 32


class _Chunks:
    """The bytes of ``chunks`` as one growing buffer, with the document size limit."""

    def __init__(self, chunks: Iterable[bytes], source: str) -> None:
        self.chunks = iter(chunks)
        self.source = source
        self.buf = bytearray()
        self.total = 0
        self.at = 0

    def more(self) -> bool:
        """Append the next chunk; False at the end."""
        for chunk in self.chunks:
            if not chunk:
                continue
            if not self.total and chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
            self.total += len(chunk)
            if self.total > MAX_DOCUMENT_BYTES:
                raise LimitError(
                    self.source, f"larger than {MAX_DOCUMENT_BYTES >> 20} MiB (the document size limit)"
                )
            self.buf += chunk
            return True
        return False

    def byte_at(self, pos: int) -> int:
        """The first byte at or after ``pos`` that is not JSON whitespace (-1 at the end), its
        position in ``self.at``."""
        while True:
            n = len(self.buf)
            while pos < n and self.buf[pos] in _JSON_WS:
                pos += 1
            if pos < n:
                self.at = pos
                return self.buf[pos]
            if not self.more():
                self.at = pos
                return -1

    def drop(self, upto: int) -> int:
        """Forget the bytes before ``upto``; returns the offset positions move by."""
        del self.buf[:upto]
        return upto

    def rest(self) -> bytes:
        while self.more():
            pass
        return bytes(self.buf)


def stream_documents(
    chunks: Iterable[bytes], source: str = "<input>", listings: set[str] | None = None
) -> Iterator[dict[str, Any]]:
    """``parse_documents`` over the concatenation of ``chunks``, holding one object at a
    time where it can: a JSON document whose top-level object has an ``items`` array
    (``kubectl get … -o json``) is read item by item, each item's bytes parsed by orjson,
    flattened and dropped, so memory holds one item, not the file. Anything else (YAML,
    a single object, a stream of documents) is read whole and handed to
    ``parse_documents``. An item that is not valid JSON is an InputError naming it; the
    items before it have been yielded."""
    reader = _Chunks(chunks, source)
    first = reader.byte_at(0)
    header = _items_header(reader) if first == ord("{") else None
    if header is None:
        yield from parse_documents(reader.rest(), source, listings)
        return
    head_bytes, head = header
    kind = head.get("kind") if isinstance(head.get("kind"), str) else None
    api_version = head.get("apiVersion") if "apiVersion" in head else None
    deferred: list[tuple[int, bytes]] = []
    index = 0
    pos = reader.at  # just after the items array's "["
    while True:
        b = reader.byte_at(pos)
        pos = reader.at
        if b == ord("]"):
            pos += 1
            break
        if b != ord("{"):
            if index == 0:  # nothing read yet: the whole document says what is wrong
                yield from parse_documents(reader.rest(), source, listings)
                return
            if b < 0:
                raise InputError(
                    source, f"invalid JSON: the file ends in the items array, after items[{index - 1}]"
                )
            raise InputError(source, "expected a Kubernetes object (a JSON object)", f"items[{index}]")
        if pos > STREAM_CHUNK_BYTES:
            pos -= reader.drop(pos)
        end, item = _item_end(reader, pos, index)
        if deferred or (not item.get("kind") and (kind is None or api_version is None)):
            # The list's kind comes after its items: hold this one (and, to keep the
            # order, every one after it) as bytes until then.
            deferred.append((index, bytes(reader.buf[pos:end])))
        else:
            yield from _list_item(item, kind or "", api_version or "", source, "", index, listings)
        pos = end
        b = reader.byte_at(pos)
        pos = reader.at + 1
        if b == ord("]"):
            break
        if b != ord(","):
            raise InputError(source, f"invalid JSON after items[{index}]: expected ',' or ']'")
        index += 1
    tail = reader.rest()[pos:]
    document = head_bytes + b'"items":[]' + tail
    try:
        doc = orjson.loads(document)
        after = b""
    except orjson.JSONDecodeError as exc:
        if "unexpected content after document" not in str(exc):
            raise InputError(source, f"invalid JSON after the items array: {exc}") from None
        # More documents follow the list (a JSON stream). orjson's pos counts characters.
        text = document.decode("utf-8", errors="replace")
        doc, after = orjson.loads(text[: exc.pos]), text[exc.pos :].encode()
    kind, api_version = doc.get("kind") or "", doc.get("apiVersion", "")
    if not isinstance(kind, str) or (kind and not kind.endswith("List")):
        raise InputError(source, f"an items array in a document of kind {kind!r}, which is not a List")
    if kind.endswith("List") and kind != "List" and listings is not None:
        listings.add(kind[: -len("List")])
    for at, raw in deferred:
        yield from _list_item(orjson.loads(raw), kind, api_version, source, "", at, listings)
    if after.strip():
        yield from parse_documents(after, source, listings)


def _items_header(reader: _Chunks) -> tuple[bytes, dict[str, Any]] | None:
    """The top-level object's keys before ``"items": [`` (as bytes, and parsed), with
    ``reader.at`` just after the ``[``; None when the document does not start so."""
    start = reader.at
    found = -1
    while found < 0:
        found = reader.buf.find(b'"items"', start)
        if found < 0 and (len(reader.buf) > (1 << 20) or not reader.more()):
            return None
    head_bytes = bytes(reader.buf[start:found])
    try:
        head = orjson.loads(head_bytes + b'"items":[]}')
    except orjson.JSONDecodeError:
        return None  # "items" was not a key of the top-level object
    if not isinstance(head, dict) or reader.byte_at(found + len(b'"items"')) != ord(":"):
        return None
    if reader.byte_at(reader.at + 1) != ord("["):
        return None
    reader.at += 1
    return head_bytes, head


def _item_end(reader: _Chunks, start: int, index: int) -> tuple[int, dict[str, Any]]:
    """Where the JSON object at ``start`` ends (past its ``}``), reading more as needed,
    and the object.
    Candidate ends (a ``}`` followed by ``,`` or ``]``) are tried with orjson once the
    braces between balance; a JSON object is prefix-free, so the first candidate that
    parses is its end. Pretty-printed dumps (kubectl indents) are tried first at the
    item's own indentation."""
    buf = reader.buf
    line = buf.rfind(b"\n", max(0, start - 256), start)
    indent = bytes(buf[line + 1 : start]) if line >= 0 else None
    marker = b"\n" + indent + b"}" if indent is not None and not indent.strip(b" \t") else None
    error: orjson.JSONDecodeError | None = None
    # ``depth``: braces opened minus closed in buf[start:counted].
    search, tries, skipped, force, counted, depth = start, 0, False, False, start, 0
    while True:
        if marker is not None:
            found = buf.find(marker, search)
            end = found + len(marker) if found >= 0 else -1
            found += 1
        else:
            m = _ITEM_END.search(buf, search)
            found = end = m.start() + 1 if m is not None else -1
        if end < 0:
            if reader.more():
                continue
            if marker is not None:
                marker, search, tries, counted, depth = None, start, 0, start, 0  # not pretty-printed
                continue
            if skipped and not force:
                search, force = start, True  # braces inside strings: parse every candidate
                continue
            break
        search, tries = found, tries + 1
        depth += buf.count(b"{", counted, end) - buf.count(b"}", counted, end)
        counted = end
        if force or tries > _UNBALANCED_TRIES or depth == 0:
            try:
                item = orjson.loads(buf[start:end])
            except orjson.JSONDecodeError as exc:
                if "depth limit" in str(exc):
                    raise LimitError(
                        reader.source, f"nested deeper than {JSON_MAX_DEPTH} levels (the JSON nesting limit)"
                    ) from None
                error = exc
            else:
                return end, item
        else:
            skipped = True
        if marker is not None and tries == 3:
            marker, search, tries, counted, depth = None, start, 0, start, 0  # not pretty-printed
    detail = f": {error}" if error is not None else ": the object is not closed"
    raise InputError(reader.source, f"invalid JSON in items[{index}]{detail}")


def _list_item(
    item: Any,
    list_kind: str,
    api_version: Any,
    source: str,
    where: str,
    index: int,
    listings: set[str] | None,
) -> Iterator[dict[str, Any]]:
    """One item of a list of kind ``list_kind`` (``PodList``: an item without a kind is a Pod)."""
    item_kind = list_kind[: -len("List")] if list_kind.endswith("List") and list_kind != "List" else ""
    if isinstance(item, dict) and not item.get("kind") and item_kind:
        item = {**item, "kind": item_kind, "apiVersion": api_version}
    yield from _flatten(item, source, item_kind, f"{where}.items[{index}]", listings)


def _flatten(
    doc: Any, source: str, list_kind: str = "", where: str = "", listings: set[str] | None = None
) -> Iterator[dict[str, Any]]:
    if isinstance(doc, list):
        for index, item in enumerate(doc):
            yield from _flatten(item, source, list_kind, f"{where}[{index}]", listings)
        return
    if not isinstance(doc, dict):
        raise InputError(source, f"expected a Kubernetes object, found {json_type(doc)}", where.lstrip("."))
    kind = doc.get("kind") or ""
    if not isinstance(kind, str):
        yield doc  # the reader reports the kind (validate.check_object)
        return
    if "items" in doc and (not kind or kind.endswith("List")):
        item_kind = kind[: -len("List")] if kind.endswith("List") and kind != "List" else ""
        items = doc.get("items") or ()
        if not isinstance(items, list | tuple):
            raise InputError(
                source, f"items: expected an array, found {json_type(items)}", f"{kind or 'List'}{where}"
            )
        if item_kind and listings is not None:
            listings.add(item_kind)
        for index, item in enumerate(items):
            yield from _list_item(item, kind, doc.get("apiVersion", ""), source, where, index, listings)
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
    if meta.__class__ is not dict and not isinstance(meta, Mapping):
        raise ValueError("metadata is missing")
    if not meta.get("name"):
        raise ValueError("metadata.name is missing")
    return meta


def describe(obj: Obj) -> str:
    """kind/namespace/name of a raw object, for messages (what is not a string shows as ``?``)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)

    def text(value: Any) -> str:
        return value[:253] if isinstance(value, str) and value else "?"

    ns, name, kind = meta.get("namespace"), text(meta.get("name")), text(obj.get("kind"))
    return f"{kind} {text(ns)}/{name}" if ns else f"{kind} {name}"


# ---------------------------------------------------------------------------
# The decoder


class Decoder:
    """Decodes API dicts into records, interning shared values."""

    def __init__(self) -> None:
        self._raw_specs: dict[bytes, PodSpec] = {}
        self._maps: dict[FrozenMap[Any], FrozenMap[Any]] = {}
        self._values: dict[Any, Any] = {}
        self._specs: dict[PodSpec, PodSpec] = {}
        self._node_maps: dict[bytes, FrozenMap[int]] = {}

    # -- interning ---------------------------------------------------------
    def s(self, value: Any) -> str:
        if value.__class__ is str:
            return _intern(value)  # "" interns to ""
        if not value:
            return ""
        return _intern(str(value))

    def labels(self, value: Any) -> FrozenMap[str]:
        if not value:
            return EMPTY_MAP
        if value.__class__ is not dict and not isinstance(value, Mapping):
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

    def owner(self, meta: Mapping[str, Any], held: OwnerRef | None = None) -> OwnerRef | None:
        refs = meta.get("ownerReferences")
        if not refs:
            return None
        chosen = next((r for r in refs if r.get("controller") is True), None)
        controller = chosen is not None
        if chosen is None:
            chosen = refs[0]
        if not chosen:
            return None
        if chosen.get("apiVersion") is not None and not isinstance(chosen.get("apiVersion"), str):
            raise ValueError("ownerReferences[].apiVersion: expected a string")
        if (
            held is not None
            and (chosen.get("kind") or "") == held.kind
            and (chosen.get("name") or "") == held.name
            and (chosen.get("uid") or "") == held.uid
            and (chosen.get("apiVersion") or "") == held.api_version
            and controller == held.controller
        ):
            return held
        return self.value(
            OwnerRef(
                self.s(chosen.get("kind")),
                self.s(chosen.get("name")),
                self.s(chosen.get("uid")),
                self.s(chosen.get("apiVersion")),
                controller,
            )
        )

    def conditions(self, value: Any, held: tuple[Condition, ...] = ()) -> tuple[Condition, ...]:
        """Decoded conditions; with ``held`` (the same object's conditions as
        decoded before), a condition that did not change is the held one, and
        when none changed ``held`` itself is returned."""
        if not held:
            return tuple(self._condition(c) for c in value or ())
        value = value or ()
        if len(value) == len(held):
            for c, h in zip(value, held, strict=True):
                if not _same_condition(c, h):
                    break
            else:
                return held
        n = len(held)
        return tuple(
            held[i] if i < n and _same_condition(c, held[i]) else self._condition(c)
            for i, c in enumerate(value)
        )

    def _scheduled(self, c: Mapping[str, Any]) -> Condition:
        """A pod's PodScheduled condition. ``True`` without reason or message (every bound pod)
        is one shared record: what the analysis reads of it is that it is there and True (its
        transition time is read only while it is False: ``agent.pipeline.pending_since``)."""
        if c.get("status") == "True" and not c.get("reason") and not c.get("message"):
            return SCHEDULED_TRUE
        return self._condition(c)

    def _condition(self, c: Mapping[str, Any]) -> Condition:
        s = self.s
        return make_condition(
            s(c.get("type")),
            s(c.get("status")),
            s(c.get("reason")),
            s(c.get("message")),
            parse_time(c.get("lastTransitionTime")),
        )

    # -- pod spec ----------------------------------------------------------
    def pod_spec(self, spec: Any, *, with_node_name: bool = True) -> PodSpec:
        """The scheduling view of a pod spec. Pods of one template share one
        object: the spec's scheduling fields (``_spec_parts``) serialised are
        the cache key, and the PodSpec is built from those parts alone, so
        nothing outside the key can reach the record."""
        if spec.__class__ is not dict and not isinstance(spec, Mapping):
            raise ValueError("spec is missing")
        parts = _spec_parts(spec, with_node_name)
        try:
            key = orjson.dumps(parts)
        except TypeError:  # not JSON (YAML dates, non-string keys): decode uncached
            return self._pod_spec(_spec_view(parts), with_node_name)
        cached = self._raw_specs.get(key)
        if cached is None:
            cached = self._raw_specs[key] = self._pod_spec(_spec_view(parts), with_node_name)
        return cached

    def _pod_spec(self, spec: Mapping[str, Any], with_node_name: bool) -> PodSpec:
        # ``spec`` is a ``_spec_view``: read only the fields it copies.
        requests, limits, without, count = self._pod_requests(spec)
        affinity = spec.get("affinity") or {}
        node_aff = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        pod_aff = (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        anti = affinity.get("podAntiAffinity") or {}
        preferred_anti = tuple(
            self._affinity_term(w.get("podAffinityTerm") or {})
            for w in anti.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        )
        # pkg/scheduler/util/utils.go GetHostPorts (v1.34): host ports of init containers
        # count only for restartable sidecars (restartPolicy Always), which run as long
        # as the pod; NodeInfo.UsedPorts is built with the same function.
        preferred_aff = tuple(
            self._affinity_term(w.get("podAffinityTerm") or {})
            for w in (affinity.get("podAffinity") or {}).get(
                "preferredDuringSchedulingIgnoredDuringExecution"
            )
            or ()
        )
        host_ports = []
        sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
        for c in [*sidecars, *(spec.get("containers") or ())]:
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
            preferred_pod_affinity=preferred_aff,
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
            resource_claims=tuple(self._pod_resource_claim(c) for c in spec.get("resourceClaims") or ()),
            scheduling_gates=tuple(self.s(g.get("name")) for g in spec.get("schedulingGates") or ()),
            node_name=self.s(spec.get("nodeName")) if with_node_name else "",
            scheduler_name=self.s(spec.get("schedulerName") or "default-scheduler"),
            priority_class_name=self.s(spec.get("priorityClassName")),
            priority=spec.get("priority"),
            preemption_policy=self.s(spec.get("preemptionPolicy")),
            has_overhead=bool(spec.get("overhead")),
            nonzero_requests=self._nonzero_requests(spec),
            preferred_node_affinity=tuple(
                (_int(w.get("weight")), term)
                for w in (affinity.get("nodeAffinity") or {}).get(
                    "preferredDuringSchedulingIgnoredDuringExecution"
                )
                or ()
                for term in self._preferred_node_term(w.get("preference"))
            ),
            preferred_pod_affinity_weights=tuple(
                _int(w.get("weight"))
                for w in (affinity.get("podAffinity") or {}).get(
                    "preferredDuringSchedulingIgnoredDuringExecution"
                )
                or ()
            ),
            preferred_pod_anti_affinity_weights=tuple(
                _int(w.get("weight"))
                for w in anti.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
            ),
            images=tuple(
                self.s(normalized_image_name(str(c.get("image") or "")))
                for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
            ),
        )
        return self._specs.setdefault(result, result)

    def _preferred_node_term(self, preference: Any) -> list[NodeSelectorTerm]:
        """One preferred term's preference as a NodeSelectorTerm (via ``node_selector``)."""
        selector = self.node_selector({"nodeSelectorTerms": [preference or {}]})
        return list(selector.terms) if selector is not None else [NodeSelectorTerm()]

    def _add_init_and_pod_level(
        self,
        spec: Mapping[str, Any],
        total: dict[str, int],
        of: Callable[[Mapping[str, Any]], Mapping[str, int]],
    ) -> None:
        """PodRequests' second half on ``total`` (the containers' sum, each request
        read by ``of``): restartable init containers add to it, the max with each
        init container (plus the restartable ones before it) wins, then pod-level
        cpu/memory requests override (k8s.io/component-helpers/resource/helpers.go)."""
        restartable: dict[str, int] = {}
        init_max: dict[str, int] = {}
        for c in spec.get("initContainers") or ():
            req = of(c)
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

    def _nonzero_requests(self, spec: Mapping[str, Any]) -> FrozenMap[int]:
        """cpu and memory as the Score phase counts them: PodRequests with
        NonMissingContainerRequests = {cpu: 100m, memory: 200Mi}, i.e. each container
        (and init container) lacking a cpu or memory request counts as requesting
        schedutil.DefaultMilliCPURequest / DefaultMemoryRequest
        (pkg/scheduler/util/pod_resources.go, v1.37.2; applied by
        k8s.io/component-helpers/resource/helpers.go applyNonMissing and
        pkg/scheduler/framework/types.go CalculateResource); pod-level requests then
        override, and overhead is added."""
        defaults = {"cpu": DEFAULT_MILLI_CPU_REQUEST, "memory": DEFAULT_MEMORY_REQUEST}

        def of(c: Mapping[str, Any]) -> dict[str, int]:
            req = self._container_requests(c)
            return {k: req.get(k, v) for k, v in defaults.items()}

        total = {"cpu": 0, "memory": 0}
        for c in spec.get("containers") or ():
            _add(total, of(c))
        self._add_init_and_pod_level(spec, total, of)
        overhead = self._resource_map(spec.get("overhead"))
        for k in ("cpu", "memory"):
            total[k] += overhead.get(k, 0)
        return self.resources_from_units(total)

    def _pod_resource_claim(self, c: Mapping[str, Any]) -> PodResourceClaim:
        return self.value(
            PodResourceClaim(
                self.s(c.get("name")),
                self.s(c.get("resourceClaimName")),
                self.s(c.get("resourceClaimTemplateName")),
            )
        )

    def _claim_statuses(self, status: Mapping[str, Any]) -> FrozenMap[str]:
        found = status.get("resourceClaimStatuses")
        if not found:
            return EMPTY_MAP
        return self.labels({self.s(e.get("name")): self.s(e.get("resourceClaimName")) for e in found})

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
        self._add_init_and_pod_level(spec, total, self._container_requests)
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
    def decode(
        self, obj: Obj, source: str = "<input>", known: Mapping[Any, Any] | None = None
    ) -> Record | None:
        """One API object → its record; None for kinds unstick does not read.
        Raises InputError naming the object when it is malformed.

        ``known`` is the collection of records already held for the object's
        kind (as ClusterState keys them). A Pod or Node seen before is decoded
        against its held record: parts that did not change are that record's
        own values (no decoding, no new objects), and when nothing kept
        changed the held record itself comes back. The result is always equal
        to a fresh decode of ``obj``."""
        kind = obj.get("kind")
        fn: Any = _DECODERS.get(kind) if isinstance(kind, str) else None
        if fn is None:
            if not is_custom_resource(obj):
                return None
            fn = Decoder.custom_object
        try:
            record: Record = fn(self, obj) if known is None or kind not in _REUSING else fn(self, obj, known)
            return record
        except (ValueError, TypeError, AttributeError, KeyError, QuantityError, RecursionError) as exc:
            # The slow path only: name the field that is wrong when the schema can tell.
            problem = check_object(obj) or str(exc) or type(exc).__name__
            raise InputError(source, problem, describe(obj)) from exc

    def pod(self, obj: Obj, known: Mapping[Any, Any] | None = None) -> Pod:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        prev: Pod | None = None
        if known:
            ns, name = meta.get("namespace") or "default", meta["name"]
            if ns.__class__ is str and name.__class__ is str:
                prev = known.get((ns, name))
        # Only PodScheduled and Ready are kept: decode just those (a pod
        # carries five conditions, and every watch event of a pod decodes them).
        scheduled: Condition | None = None
        ready = False
        preempted: bool | None = None
        for c in status.get("conditions") or ():
            ctype = c.get("type")
            if ctype == "PodScheduled":
                if scheduled is None:
                    held = prev.scheduled if prev is not None else None
                    if held is None or held is SCHEDULED_TRUE or not _same_condition(c, held):
                        scheduled = self._scheduled(c)  # SCHEDULED_TRUE is a cheaper check
                    else:
                        scheduled = held
            elif ctype == "Ready" and c.get("status") == "True":
                ready = True
            elif ctype == "DisruptionTarget" and preempted is None:
                # podTerminatingByPreemption (default_preemption.go) reads the first one.
                preempted = c.get("status") == "True" and c.get("reason") == "PreemptionByScheduler"
        preempted = bool(preempted)
        if prev is None:
            return make_pod(
                self.s(meta.get("namespace") or "default"),
                str(meta["name"]),
                str(meta.get("uid") or ""),
                self.labels(meta.get("labels")),
                self.pod_spec(spec, with_node_name=False),
                self.s(spec.get("nodeName")),
                self.s(status.get("phase") or "Pending"),
                self.owner(meta),
                parse_time(meta.get("creationTimestamp")),
                parse_time(meta.get("deletionTimestamp")),
                ready,
                scheduled,
                self.s(status.get("nominatedNodeName")),
                self._pod_annotations(meta.get("annotations")),
                self._claim_statuses(status),
                preempted,
            )
        # Seen before (a watch MODIFIED): keep the held record's values where
        # the object still says the same; usually only a container status moved.
        # A held str is reused when the raw value equals it: only a str equals a
        # str, and s() turns every falsy value into "" (so does ``or ""``).
        uid = meta.get("uid") or ""
        uid = prev.uid if uid == prev.uid else str(uid)
        raw_labels = meta.get("labels")
        labels = prev.labels if prev.labels == raw_labels else self.labels(raw_labels)
        pod_spec = self.pod_spec(spec, with_node_name=False)
        node_name = spec.get("nodeName") or ""
        node_name = prev.node_name if node_name == prev.node_name else self.s(node_name)
        phase = status.get("phase") or "Pending"
        phase = prev.phase if phase == prev.phase else self.s(phase)
        owner = self.owner(meta, prev.owner)
        created = parse_time(meta.get("creationTimestamp"))
        deleted = parse_time(meta.get("deletionTimestamp"))
        nominated = status.get("nominatedNodeName") or ""
        nominated = prev.nominated_node if nominated == prev.nominated_node else self.s(nominated)
        annotations = self._pod_annotations(meta.get("annotations"))
        claim_statuses = self._claim_statuses(status)
        if claim_statuses == prev.resource_claim_statuses:
            claim_statuses = prev.resource_claim_statuses
        if (
            uid is prev.uid
            and labels is prev.labels
            and pod_spec is prev.spec
            and node_name is prev.node_name
            and phase is prev.phase
            and owner is prev.owner
            and created == prev.created
            and deleted == prev.deleted
            and ready is prev.ready
            and scheduled is prev.scheduled
            and nominated is prev.nominated_node
            and annotations is prev.annotations
            and claim_statuses is prev.resource_claim_statuses
            and preempted is prev.preempted_by_scheduler
        ):
            return prev
        return make_pod(
            prev.namespace,
            prev.name,
            uid,
            labels,
            pod_spec,
            node_name,
            phase,
            owner,
            created,
            deleted,
            ready,
            scheduled,
            nominated,
            annotations,
            claim_statuses,
            preempted,
        )

    def _pod_annotations(self, value: Any) -> FrozenMap[str]:
        # Only the few annotations analysis reads; full maps would cost memory per pod.
        if not value or (value.__class__ is dict and _KEPT_POD_ANNOTATIONS.isdisjoint(value)):
            return EMPTY_MAP
        keep = {k: v for k, v in value.items() if k in _KEPT_POD_ANNOTATIONS}
        return self.labels(keep)

    def node(self, obj: Obj, known: Mapping[Any, Any] | None = None) -> Node:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        prev: Node | None = None
        if known and meta["name"].__class__ is str:
            prev = known.get(meta["name"])
        conditions = self.conditions(status.get("conditions"), prev.conditions if prev is not None else ())
        ready_cond = next((c for c in conditions if c.type == "Ready"), None)
        capacity = self._node_resources(status.get("capacity"))
        allocatable = (
            self._node_resources(status.get("allocatable")) if status.get("allocatable") else capacity
        )
        if prev is None:
            return make_node(
                self.s(meta["name"]),
                str(meta.get("uid") or ""),
                self.labels(meta.get("labels")),
                allocatable,
                capacity,
                self._taints(spec.get("taints")),
                bool(spec.get("unschedulable")),
                None if ready_cond is None else ready_cond.status == "True",
                conditions,
                parse_time(meta.get("creationTimestamp")),
                self._images(status.get("images")),
            )
        uid = _uid(meta.get("uid"), prev.uid)
        raw_labels = meta.get("labels")
        labels = prev.labels if prev.labels == raw_labels else self.labels(raw_labels)
        raw_taints = spec.get("taints") or ()
        taints = prev.taints if _same_taints(raw_taints, prev.taints) else self._taints(raw_taints)
        unschedulable = bool(spec.get("unschedulable"))
        ready = None if ready_cond is None else ready_cond.status == "True"
        created = parse_time(meta.get("creationTimestamp"))
        raw_images = status.get("images")
        images = prev.images if _same_images(raw_images, prev.images) else self._images(raw_images)
        if (
            images is prev.images
            and uid is prev.uid
            and labels is prev.labels
            and allocatable is prev.allocatable
            and capacity is prev.capacity
            and taints is prev.taints
            and unschedulable is prev.unschedulable
            and ready is prev.ready
            and conditions is prev.conditions
            and created == prev.created
        ):
            return prev
        return make_node(
            prev.name,
            uid,
            labels,
            allocatable,
            capacity,
            taints,
            unschedulable,
            ready,
            conditions,
            created,
            images,
        )

    def _images(self, value: Any) -> tuple[tuple[tuple[str, ...], int], ...]:
        """status.images as (names, sizeBytes); the scheduler's cache keys image
        states by these names as reported (pkg/scheduler/backend/cache/cache.go
        addNodeImageStates, v1.37.2)."""
        if not value:
            return ()
        return tuple(
            (
                tuple([_intern(n) if n.__class__ is str else self.s(n) for n in img.get("names") or ()]),
                _int(img.get("sizeBytes")),
            )
            for img in value
            if img.__class__ is dict or isinstance(img, Mapping)
        )

    def _taints(self, value: Any) -> tuple[Taint, ...]:
        return tuple(
            self.value(Taint(self.s(t.get("key")), self.s(t.get("value")), self.s(t.get("effect"))))
            for t in value or ()
        )

    def _node_resources(self, value: Any) -> FrozenMap[int]:
        """``resources`` for a node's capacity and allocatable, memoised by the
        raw map's JSON: every heartbeat of every node repeats one of a few."""
        if not value:
            return EMPTY_MAP
        try:
            key = orjson.dumps(value)
        except TypeError:
            return self.resources(value)
        fm = self._node_maps.get(key)
        if fm is None:
            fm = self.resources(value)
            if len(self._node_maps) >= _NODE_MAPS_MAX:
                self._node_maps.clear()
            self._node_maps[key] = fm
        return fm

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

    def replicationcontroller(self, obj: Obj) -> ReplicationController:
        meta = _meta(obj)
        spec = obj.get("spec") or {}
        return ReplicationController(
            namespace=self.s(meta.get("namespace") or "default"),
            name=self.s(meta["name"]),
            uid=str(meta.get("uid") or ""),
            replicas=_int(spec.get("replicas"), 1),
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

    def resource_claim(self, obj: Obj) -> ResourceClaim:
        """resource.k8s.io/v1 (1.34+), v1beta2 or v1beta1 (analyzers.ingest_dra)."""
        from analyzers import ingest_dra

        return ingest_dra.resource_claim(self, obj)

    def resource_claim_template(self, obj: Obj) -> ResourceClaimTemplate:
        from analyzers import ingest_dra

        return ingest_dra.resource_claim_template(self, obj)

    def resource_slice(self, obj: Obj) -> ResourceSlice:
        from analyzers import ingest_dra

        return ingest_dra.resource_slice(self, obj)

    def device_class(self, obj: Obj) -> DeviceClass:
        from analyzers import ingest_dra

        return ingest_dra.device_class(self, obj)

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
            labels=self.labels(meta.get("labels")),
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
        get = obj.get
        # core/v1 Event and events.k8s.io/v1 Event have different field names.
        involved = get("involvedObject") or get("regarding") or {}
        series = get("series") or {}
        # An aggregated event's live count is series.count (events.k8s.io/v1 EventSeries);
        # count / deprecatedCount beside it is the copy the recorder stops updating.
        count = series.get("count") or get("count") or get("deprecatedCount") or 1
        first = parse_time(get("firstTimestamp") or get("deprecatedFirstTimestamp") or get("eventTime"))
        last = parse_time(
            series.get("lastObservedTime")
            or get("lastTimestamp")
            or get("deprecatedLastTimestamp")
            or get("eventTime")
            or meta.get("creationTimestamp")
        )
        source = (
            get("reportingController") or get("reportingComponent") or (get("source") or {}).get("component")
        )
        s = self.s
        return make_event(
            s(meta.get("namespace") or involved.get("namespace") or "default"),
            str(meta["name"]),
            str(meta.get("uid") or ""),
            make_involved(
                s(involved.get("kind")),
                s(involved.get("namespace")),
                s(involved.get("name")),
                str(involved.get("uid") or ""),
            ),
            s(get("reason")),
            s(get("message") or get("note")),
            s(get("type") or "Normal"),
            _int(count, 1),
            first,
            last or first,
            s(source),
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

    def crd(self, obj: Obj) -> CustomResourceDefinition:
        """apiextensions.k8s.io/v1 CustomResourceDefinition: names and, per version,
        ``subresources.scale`` (specReplicasPath, statusReplicasPath)."""
        meta = _meta(obj)
        spec = _object_at(obj.get("spec"), "spec")
        names = _object_at(spec.get("names"), "spec.names")
        listed = spec.get("versions") or []
        if not isinstance(listed, list):
            raise ValueError(f"spec.versions: expected an array, found {json_type(listed)}")
        versions = []
        for i, item in enumerate(listed):
            v = _object_at(item, f"spec.versions[{i}]")
            subresources = _object_at(v.get("subresources"), f"spec.versions[{i}].subresources")
            scale = subresources.get("scale")
            if scale is not None:
                scale = _object_at(scale, f"spec.versions[{i}].subresources.scale")
                for field in ("specReplicasPath", "statusReplicasPath"):
                    if not isinstance(scale.get(field, ""), str):
                        where = f"spec.versions[{i}].subresources.scale.{field}"
                        raise ValueError(f"{where}: expected a string, found {json_type(scale[field])}")
            versions.append(
                CustomResourceVersion(
                    name=self.s(v.get("name")),
                    served=v.get("served") is not False,
                    spec_replicas_path=None if scale is None else self.s(scale.get("specReplicasPath")),
                    status_replicas_path=None if scale is None else self.s(scale.get("statusReplicasPath")),
                )
            )
        return CustomResourceDefinition(
            name=self.s(meta["name"]),
            group=self.s(spec.get("group")),
            kind=self.s(names.get("kind")),
            plural=self.s(names.get("plural")),
            namespaced=spec.get("scope") != "Cluster",
            versions=tuple(versions),
        )

    def custom_object(self, obj: Obj) -> CustomObject:
        """A custom resource: identity, ``spec`` and ``status`` (read at its CRD's scale paths)."""
        meta = _meta(obj)
        content = {k: _frozen(obj[k]) for k in ("spec", "status") if k in obj}
        return CustomObject(
            api_version=self.s(obj.get("apiVersion")),
            kind=self.s(obj.get("kind")),
            namespace=self.s(meta.get("namespace") or ""),
            name=self.s(meta["name"]),
            uid=self.s(meta.get("uid")),
            content=FrozenMap(content),
        )


# The pod spec fields a PodSpec is built from, besides containers, volumes and
# nodeName (of which _spec_parts takes a part). Fields that differ between
# pods of one template (hostname, volume names, …) are left out, so that those
# pods share one key and one PodSpec.
_SPEC_FIELDS = (
    "affinity",
    "nodeSelector",
    "tolerations",
    "topologySpreadConstraints",
    "schedulingGates",
    "schedulerName",
    "priorityClassName",
    "priority",
    "preemptionPolicy",
    "overhead",
    "resources",
    "resourceClaims",
)
_SPEC_PARTS = ("containers", "initContainers", "nodeName", "volumes", *_SPEC_FIELDS)


# pkg/scheduler/util/pod_resources.go (v1.37.2; unchanged since 1.19): what a container
# without a cpu or memory request counts as in the Score phase, never in Filter.
DEFAULT_MILLI_CPU_REQUEST = 100  # 0.1 core
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # 200 MB


def normalized_image_name(name: str) -> str:
    """pkg/scheduler/framework/plugins/imagelocality/image_locality.go
    normalizedImageName (v1.37.2): ``:latest`` added when the name has no tag."""
    if name.rfind(":") <= name.rfind("/"):
        name = name + ":latest"
    return name


def _spec_parts(spec: Mapping[str, Any], with_node_name: bool) -> list[Any]:
    """What ``Decoder._pod_spec`` reads of a pod spec, as a list in the order
    of ``_SPEC_PARTS``: each container's and init container's ``resources``,
    ``ports``, ``restartPolicy`` and ``image`` (not env, probes), ``nodeName``
    when asked, the claim names of the volumes, and the fields above.
    Serialised, it is the PodSpec cache key."""
    get = spec.get
    containers = get("containers")
    init = get("initContainers")
    return [
        [[c.get("resources"), c.get("ports"), c.get("restartPolicy"), c.get("image")] for c in containers]
        if containers
        else None,
        [[c.get("resources"), c.get("ports"), c.get("restartPolicy"), c.get("image")] for c in init]
        if init
        else None,
        get("nodeName") if with_node_name else None,
        _claim_names(spec) if get("volumes") else None,
        *map(get, _SPEC_FIELDS),
    ]


def _spec_view(parts: list[Any]) -> dict[str, Any]:
    """``_spec_parts`` back as an API-shaped spec, which is all ``_pod_spec``
    sees: a field it reads must be among the parts, or it reads nothing."""
    view = dict(zip(_SPEC_PARTS, parts, strict=True))
    for name in ("containers", "initContainers"):
        if view[name] is not None:
            view[name] = [
                {"resources": r, "ports": p, "restartPolicy": rp, "image": im} for r, p, rp, im in view[name]
            ]
    if view["volumes"] is not None:
        view["volumes"] = [{"persistentVolumeClaim": {"claimName": n}} for n in view["volumes"]]
    return view


def _uid(value: Any, held: str) -> str:
    """``str(value or "")``, as ``held`` itself when equal to it."""
    return held if (value or "") == held else str(value or "")


def _same_condition(c: Mapping[str, Any], held: Condition) -> bool:
    """Whether ``Decoder._condition(c)`` would equal ``held``."""
    return (
        (c.get("type") or "") == held.type
        and (c.get("status") or "") == held.status
        and (c.get("reason") or "") == held.reason
        and (c.get("message") or "") == held.message
        and parse_time(c.get("lastTransitionTime")) == held.last_transition
    )


def _same_images(value: Any, held: tuple[tuple[tuple[str, ...], int], ...]) -> bool:
    """Whether ``Decoder._images(value)`` would equal ``held`` (a heartbeat repeats a
    node's images: compared, not decoded)."""
    if not value:
        return not held
    if value.__class__ is not list or len(value) != len(held):
        return False
    for img, (names, size) in zip(value, held, strict=True):
        if img.__class__ is not dict:
            return False
        raw = img.get("names")
        if raw.__class__ is not list or tuple(raw) != names:
            return False
        raw_size = img.get("sizeBytes")
        if raw_size.__class__ is not int or raw_size != size:
            return False
    return True


def _same_taints(value: Any, held: tuple[Taint, ...]) -> bool:
    """Whether ``Decoder._taints(value)`` would equal ``held``."""
    if len(value) != len(held):
        return False
    for t, h in zip(value, held, strict=True):
        if not (
            (t.get("key") or "") == h.key
            and (t.get("value") or "") == h.value
            and (t.get("effect") or "") == h.effect
        ):
            return False
    return True


# Distinct node capacity/allocatable maps memoised (cleared when full).
_NODE_MAPS_MAX = 1024


def _claim_names(spec: Mapping[str, Any]) -> tuple[str, ...]:
    names: list[str] = []
    for v in spec.get("volumes") or ():
        if v.__class__ is dict or isinstance(v, Mapping):
            claim = v.get("persistentVolumeClaim")
            if claim is not None and (claim.__class__ is dict or isinstance(claim, Mapping)):
                names.append(str(claim.get("claimName") or ""))
    return tuple(names)


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _object_at(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` when it is a JSON object (absent: empty), else an error naming ``where``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, found {json_type(value)}")
    return value


def is_custom_resource(obj: Obj) -> bool:
    """Whether an object of a kind unstick does not decode may be a custom resource: its
    group has a dot (a CRD's ``spec.group`` must, ValidateCustomResourceDefinitionSpec in
    apiextensions-apiserver) and its kind is not one dumps carry that unstick skips."""
    api_version = obj.get("apiVersion")
    meta = obj.get("metadata")
    if not isinstance(api_version, str) or not isinstance(meta, Mapping) or not meta.get("name"):
        return False
    return "." in api_version.rpartition("/")[0] and obj.get("kind") not in IGNORED_KINDS


def _frozen(value: Any, depth: int = 0) -> Any:
    """JSON as immutable values: objects → FrozenMap, arrays → tuples (bounded depth)."""
    if depth > 64:
        raise ValueError("custom resource nested too deeply")
    cls = value.__class__
    if cls is str or cls is int or cls is float or cls is bool or value is None:
        return value
    if isinstance(value, Mapping):
        return FrozenMap((str(k), _frozen(v, depth + 1)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(v, depth + 1) for v in value)
    return value


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
    "ReplicationController": Decoder.replicationcontroller,
    "StatefulSet": Decoder.statefulset,
    "DaemonSet": Decoder.daemonset,
    "Job": Decoder.job,
    "PodDisruptionBudget": Decoder.pdb,
    "PriorityClass": Decoder.priority_class,
    "Namespace": Decoder.namespace,
    "PersistentVolumeClaim": Decoder.pvc,
    "ResourceClaim": Decoder.resource_claim,
    "ResourceClaimTemplate": Decoder.resource_claim_template,
    "ResourceSlice": Decoder.resource_slice,
    "DeviceClass": Decoder.device_class,
    "PersistentVolume": Decoder.pv,
    "StorageClass": Decoder.storage_class,
    "Event": Decoder.event,
    "NodeMetrics": Decoder.node_metrics,
    "PodMetrics": Decoder.pod_metrics,
    "CustomResourceDefinition": Decoder.crd,
}

# Kinds decoded against the record already held for them (``Decoder.decode``'s ``known``).
_REUSING = frozenset({"Pod", "Node"})

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
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
        "LimitRange",
        "ResourceQuota",
        "CronJob",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "APIService",
        "CSIDriver",
        "CSINode",
        "VolumeAttachment",
        "RuntimeClass",
    }
)


def trigger_from_event(event: Mapping[str, Any]) -> Trigger:
    """A :class:`~analyzers.lifecycle.Trigger` from a Kubernetes Event as the API returns it
    (core/v1 or events.k8s.io/v1).

    The key is ``uid:count``, where the count is ``series.count`` when the
    event recorder aggregated the event into a series, else ``count``
    (``deprecatedCount`` in events.k8s.io/v1), else 1 (the fields of
    staging/src/k8s.io/api/core/v1/types.go ``Event`` and
    staging/src/k8s.io/api/events/v1/types.go, v1.37.2)."""
    meta = event.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    if not uid:
        raise ValueError("event has no metadata.uid")
    series = event.get("series") or {}
    count = series.get("count") or event.get("count") or event.get("deprecatedCount") or 1
    involved = event.get("involvedObject") or event.get("regarding") or {}
    pod = ""
    if involved.get("kind") == "Pod" and involved.get("name"):
        pod = f"{involved.get('namespace') or ''}/{involved['name']}"
    message = str(event.get("message") or event.get("note") or "")
    return Trigger(f"{uid}:{int(count)}", message, pod)
