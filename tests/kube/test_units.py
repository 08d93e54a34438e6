"""Pure pieces: the kinds table, error translation, selector parsing."""

from __future__ import annotations

import pytest

from agent.fakecluster.selectors import FieldSelector, LabelSelector, SelectorError, field_value
from agent.kube.errors import (
    BadRequest,
    Forbidden,
    Gone,
    KubeError,
    PermanentKubeError,
    ProtocolError,
    ServerError,
    Throttled,
    Timeout,
    TransientKubeError,
    Unavailable,
    error_from_response,
    error_from_status,
)
from agent.kube.kinds import ALL_KINDS, EVENT, KINDS_BY_NAME, POD, WATCHED_KINDS, kind_for


def test_kind_paths() -> None:
    assert POD.path() == "/api/v1/pods"
    assert POD.path("shop") == "/api/v1/namespaces/shop/pods"
    assert POD.path("shop", "web-1") == "/api/v1/namespaces/shop/pods/web-1"
    deploy = kind_for("Deployment")
    assert deploy.path("shop") == "/apis/apps/v1/namespaces/shop/deployments"
    assert deploy.api_version == "apps/v1" and deploy.list_kind == "DeploymentList"
    node = kind_for("nodes")
    assert node.path("ignored") == "/api/v1/nodes"  # cluster-scoped
    assert kind_for("poddisruptionbudgets.policy").api_version == "policy/v1"
    assert kind_for("nodes", "metrics.k8s.io/v1beta1").kind == "NodeMetrics"
    with pytest.raises(KeyError):
        kind_for("Secret")


def test_kinds_table_is_consistent() -> None:
    assert len(KINDS_BY_NAME) == len(ALL_KINDS)
    expected = {
        "Node", "Pod", "Event", "Deployment", "ReplicaSet", "ReplicationController", "StatefulSet", "DaemonSet", "Job",
        "PodDisruptionBudget", "PriorityClass", "PersistentVolumeClaim", "PersistentVolume", "StorageClass",
        "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceClass",
    }  # fmt: skip
    assert {k.kind for k in WATCHED_KINDS} == expected
    assert all(k.watchable for k in WATCHED_KINDS)
    assert EVENT.supports_field("involvedObject.name") and POD.supports_field("spec.nodeName")
    assert not POD.supports_field("reason")


@pytest.mark.parametrize(
    ("status", "cls", "transient"),
    [
        (400, BadRequest, False),
        (403, Forbidden, False),
        (410, Gone, False),
        (429, Throttled, True),
        (500, ServerError, True),
        (504, ServerError, True),
        (418, PermanentKubeError, False),
    ],
)
def test_error_classes(status: int, cls: type[KubeError], transient: bool) -> None:
    err = error_from_status(status, {"kind": "Status", "message": "m", "reason": "R", "code": status})
    assert type(err) is cls
    assert err.transient is transient
    assert isinstance(err, TransientKubeError if transient else KubeError)
    assert str(err) == f"{status} R: m"


def test_retry_after_from_header_or_details() -> None:
    err = error_from_response(429, b'{"kind":"Status","code":429}', {"Retry-After": "4"})
    assert isinstance(err, Throttled) and err.retry_after == 4.0
    err = error_from_response(429, b'{"kind":"Status","code":429,"details":{"retryAfterSeconds":9}}', {})
    assert err.retry_after == 9.0
    err = error_from_response(503, b"<html>bad gateway</html>", {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert isinstance(err, ServerError) and err.retry_after is None
    assert "bad gateway" in err.message


def test_connection_errors_are_transient() -> None:
    assert issubclass(Timeout, Unavailable) and issubclass(Unavailable, TransientKubeError)
    assert ProtocolError.transient


OBJ = {
    "kind": "Event",
    "metadata": {"name": "e1", "namespace": "shop"},
    "involvedObject": {"kind": "Pod", "name": "web,1"},
    "reason": "FailedScheduling",
    "source": {"component": "default-scheduler"},
    "count": 3,
}


def test_field_values() -> None:
    assert field_value(OBJ, "involvedObject.kind") == "Pod"
    assert field_value(OBJ, "source") == "default-scheduler"
    assert field_value(OBJ, "count") == "3"
    assert field_value(OBJ, "spec.nodeName") == ""
    assert field_value({"spec": {"unschedulable": True}}, "spec.unschedulable") == "true"


def test_field_selector_parsing_and_matching() -> None:
    sel = FieldSelector.parse(r"involvedObject.name=web\,1,reason!=Scheduled,metadata.namespace==shop", EVENT)
    assert sel.terms == (
        ("involvedObject.name", True, "web,1"),
        ("reason", False, "Scheduled"),
        ("metadata.namespace", True, "shop"),
    )
    assert sel.matches(OBJ)
    assert not FieldSelector.parse("reason=Scheduled", EVENT).matches(OBJ)
    assert not FieldSelector.parse("")
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.nodeName"):
        FieldSelector.parse("spec.nodeName=x", EVENT)
    with pytest.raises(SelectorError):
        FieldSelector.parse("reason", EVENT)


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("app=web", True),
        ("app==web,tier=front", True),
        ("app!=web", False),
        ("app in (web, api)", True),
        ("app notin (web)", False),
        ("tier", True),
        ("!tier", False),
        ("!gpu", True),
        ("replicas>2", True),
        ("replicas<2", False),
        ("app=web,missing=x", False),
    ],
)
def test_label_selector(selector: str, matches: bool) -> None:
    obj = {"metadata": {"labels": {"app": "web", "tier": "front", "replicas": "3"}}}
    assert LabelSelector.parse(selector).matches(obj) is matches


def test_bad_label_selector() -> None:
    with pytest.raises(SelectorError):
        LabelSelector.parse("app in web")
