"""The stream's wire format (version 1): what the publisher writes, the worker reads;
anything else is refused with a reason (and dead-lettered by the worker)."""

from __future__ import annotations

import orjson
import pytest

from agent.stream import codec

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "managedFields": [{"manager": "kubectl"}]},
}


def test_delta_round_trip_drops_managed_fields() -> None:
    value = codec.encode_delta("c1", 7, 3, "Pod", "MODIFIED", POD, False)
    msg = codec.decode(value, b"c1")
    assert (msg.cluster, msg.epoch, msg.seq, msg.type, msg.kind, msg.op) == ("c1", 7, 3, "delta", "Pod", "MODIFIED")
    assert "managedFields" not in msg.object["metadata"]
    assert msg.object["metadata"]["name"] == "p"
    assert "managedFields" in POD["metadata"]  # the watcher's dict is not changed
    assert orjson.loads(value)["v"] == codec.VERSION


@pytest.mark.parametrize(
    ("type_", "fields"),
    [
        ("hello", {"kube_version": "1.30"}),
        ("synced", {"kind": "Pod"}),
        ("ready", {"unavailable": ["PodMetrics"]}),
        ("relisted", {"kind": "Event"}),
        ("metrics", {"nodes": [], "pods": []}),
        ("gap", {"dropped": 12}),
    ],
)
def test_markers_round_trip(type_: str, fields: dict) -> None:
    msg = codec.decode(codec.encode("c1", 1, 1, type_, **fields))
    assert msg.type == type_
    for name, value in fields.items():
        assert (msg.kind if name == "kind" else msg.extra[name]) == value


def _doc(**changes: object) -> bytes:
    doc = {"v": 1, "cluster": "c1", "epoch": 1, "seq": 1, "type": "delta", "kind": "Pod", "op": "ADDED",
           "object": {"metadata": {"name": "p"}}}
    doc.update(changes)
    return orjson.dumps({k: v for k, v in doc.items() if v is not None})


@pytest.mark.parametrize(
    ("value", "key", "says"),
    [
        (None, None, "empty record"),
        (b"\xff\x00 not json", None, "not JSON"),
        (b"[1, 2]", None, "JSON object"),
        (_doc(v=2), None, "unsupported format version 2"),
        (_doc(v=None), None, "unsupported format version None"),
        (_doc(cluster=""), None, "'cluster'"),
        (_doc(), b"other", "does not match cluster"),
        (_doc(seq=0), None, "'seq'"),
        (_doc(epoch="x"), None, "'epoch'"),
        (_doc(type="patch"), None, "unknown message type"),
        (_doc(op="UPSERT"), None, "op 'UPSERT'"),
        (_doc(kind=None), None, "without 'kind'"),
        (_doc(object={"spec": {}}), None, "not a Kubernetes object"),
        (_doc(type="synced", kind=None), None, "synced marker without 'kind'"),
        (_doc(type="metrics"), None, "'nodes' and 'pods'"),
    ],
)
def test_bad_records_are_refused_with_a_reason(value: bytes | None, key: bytes | None, says: str) -> None:
    with pytest.raises(codec.CodecError, match=None) as info:
        codec.decode(value, key)
    assert says in str(info.value)
