"""The wire format of the delta stream (version 1): one JSON object per record.

The in-cluster agent (``unstick watch --publish``) sends every change it sees
to the topic ``<prefix>-deltas``, keyed by the cluster's name, so one
cluster's changes stay in one partition, in order. A record's value is UTF-8
JSON (encoded with orjson)::

    {"v": 1, "cluster": "prod-eu", "epoch": 1732521600123456789, "seq": 17,
     "type": "delta", "kind": "Pod", "op": "MODIFIED", "object": {...}, "unknown": false}

``v`` is the format version (a worker rejects, and dead-letters, versions it
does not know); ``epoch`` names one run of a publisher and ``seq`` counts its
records from 1. After a broker error the publisher sends its unacknowledged
records again, so a worker may see a record twice (or an older one after a
newer one); applying the stream again from any point converges to the same
state, which is what makes redelivery harmless. ``type`` is one of:

=============  ====================================================================
``hello``      a publisher started: ``kube_version`` (``"1.30"`` or null)
``delta``      one object changed: ``kind``, ``op`` (ADDED, MODIFIED, DELETED), ``object``
               (the API object as ``kubectl get -o json`` prints it, without
               ``metadata.managedFields``), ``unknown`` (a deletion inferred by a relist)
``synced``     the initial list of ``kind`` has been sent
``ready``      every kind has been listed (``unavailable``: kinds the cluster does not serve);
               a worker analyses a cluster only after this marker
``relisted``   ``kind`` was listed again after a 410 Gone; the reconciled deltas precede it
``metrics``    a metrics.k8s.io sample: ``nodes`` and ``pods`` (NodeMetrics/PodMetrics items)
``gap``        the publisher had to drop ``dropped`` records (its buffer was full while
               the broker was away): the worker's view may miss changes
``scale``      what the publisher read from a custom controller's ``/scale`` for a
               PodDisruptionBudget (agent.scales): ``kind``, ``namespace``, ``group``,
               ``name``, and ``uid`` and ``replicas``, or ``problem`` (the disruption
               controller's own error) or ``unknown`` (why it could not be read); sent when
               a reading changes, the first ones before ``ready`` (a worker older than
               this type dead-letters it and goes on: its budgets stay *unknown*)
=============  ====================================================================

JSON keeps records readable with any Kafka tool (``kcat``), and orjson
decodes the API's JSON about as fast as anything else would; objects are sent
whole because the analyzers read more fields than any fixed projection would
keep stable across rule changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from analyzers.records import ScaleReading

VERSION = 1
TYPES = frozenset({"hello", "delta", "synced", "ready", "relisted", "metrics", "gap", "scale"})
OPS = frozenset({"ADDED", "MODIFIED", "DELETED"})


class CodecError(ValueError):
    """A record that is not a version-1 stream message; the text says what is wrong."""


@dataclass(frozen=True, slots=True)
class StreamMessage:
    cluster: str
    epoch: int
    seq: int
    type: str
    kind: str = ""
    op: str = ""
    object: dict[str, Any] = field(default_factory=dict)
    unknown: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # type-specific fields (kube_version, nodes, …)


def normalise(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as sent: ``metadata.managedFields`` (often half of a Pod's bytes) left out."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = {k: v for k, v in meta.items() if k != "managedFields"}
        return {**obj, "metadata": meta}
    return obj


def encode(cluster: str, epoch: int, seq: int, type_: str, **fields: Any) -> bytes:
    """One record's value. ``fields``: the type's fields (``kind``, ``op``, ``object``, …)."""
    if type_ not in TYPES:
        raise ValueError(f"unknown stream message type {type_!r}")
    return orjson.dumps(
        {"v": VERSION, "cluster": cluster, "epoch": epoch, "seq": seq, "type": type_, **fields}
    )


def encode_delta(
    cluster: str, epoch: int, seq: int, kind: str, op: str, obj: dict[str, Any], unknown: bool
) -> bytes:
    return orjson.dumps(
        {
            "v": VERSION,
            "cluster": cluster,
            "epoch": epoch,
            "seq": seq,
            "type": "delta",
            "kind": kind,
            "op": op,
            "object": normalise(obj),
            "unknown": unknown,
        }
    )


def decode(value: bytes | None, key: bytes | None = None) -> StreamMessage:
    """Parse and check one record; raises CodecError naming what is wrong."""
    if value is None:
        raise CodecError("empty record (no value)")
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise CodecError(f"expected a JSON object, got {type(doc).__name__}")
    version = doc.get("v")
    if version != VERSION:
        raise CodecError(f"unsupported format version {version!r} (this worker reads {VERSION})")
    cluster, epoch, seq, type_ = doc.get("cluster"), doc.get("epoch"), doc.get("seq"), doc.get("type")
    if not isinstance(cluster, str) or not cluster:
        raise CodecError("'cluster' must be a non-empty string")
    if key is not None and key != cluster.encode():
        raise CodecError(f"record key {key!r} does not match cluster {cluster!r}")
    if type(epoch) is not int or type(seq) is not int or seq < 1:
        raise CodecError("'epoch' and 'seq' must be integers (seq from 1)")
    if type_ not in TYPES:
        raise CodecError(f"unknown message type {type_!r}")
    if type_ == "delta":
        kind, op, obj = doc.get("kind"), doc.get("op"), doc.get("object")
        if not isinstance(kind, str) or not kind:
            raise CodecError("delta without 'kind'")
        if op not in OPS:
            raise CodecError(f"delta with op {op!r} (expected ADDED, MODIFIED or DELETED)")
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise CodecError("delta whose 'object' is not a Kubernetes object with metadata")
        return StreamMessage(cluster, epoch, seq, type_, kind, op, obj, bool(doc.get("unknown")))
    if type_ in ("synced", "relisted") and not isinstance(doc.get("kind"), str):
        raise CodecError(f"{type_} marker without 'kind'")
    if type_ == "metrics" and not (isinstance(doc.get("nodes"), list) and isinstance(doc.get("pods"), list)):
        raise CodecError("metrics sample without 'nodes' and 'pods' lists")
    if type_ == "scale":
        _check_scale(doc)
    extra = {k: v for k, v in doc.items() if k not in ("v", "cluster", "epoch", "seq", "type", "kind")}
    return StreamMessage(cluster, epoch, seq, type_, kind=doc.get("kind") or "", extra=extra)


def encode_scale(cluster: str, epoch: int, seq: int, reading: ScaleReading) -> bytes:
    """A ``scale`` record: one ``/scale`` reading (agent.scales.ScaleReader)."""
    return encode(
        cluster,
        epoch,
        seq,
        "scale",
        kind=reading.kind,
        namespace=reading.namespace,
        group=reading.group,
        name=reading.name,
        uid=reading.uid,
        replicas=reading.replicas,
        problem=reading.problem,
        unknown=reading.unknown,
    )


def scale_reading(msg: StreamMessage) -> ScaleReading:
    """The reading a (decoded) ``scale`` record carries."""
    x = msg.extra
    return ScaleReading(
        x["namespace"],
        x["group"],
        msg.kind,
        x["name"],
        uid=x.get("uid") or "",
        replicas=x.get("replicas"),
        problem=x.get("problem"),
        unknown=x.get("unknown"),
    )


def _check_scale(doc: dict[str, Any]) -> None:
    for name in ("kind", "name"):
        if not isinstance(doc.get(name), str) or not doc[name]:
            raise CodecError(f"scale reading without {name!r}")
    for name in ("namespace", "group"):
        if not isinstance(doc.get(name), str):
            raise CodecError(f"scale reading whose {name!r} is not a string")
    for name in ("uid", "problem", "unknown"):
        if doc.get(name) is not None and not isinstance(doc[name], str):
            raise CodecError(f"scale reading whose {name!r} is not a string")
    replicas = doc.get("replicas")
    if replicas is not None and type(replicas) is not int:
        raise CodecError("scale reading whose 'replicas' is not an integer")
