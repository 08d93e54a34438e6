"""Custom resources for the fake API endpoint, served as apiextensions-apiserver serves them.

Applying an apiextensions.k8s.io/v1 CustomResourceDefinition makes its served versions
appear in discovery (``/apis``, ``/apis/GROUP``, ``/apis/GROUP/VERSION``, where the
resource list names ``PLURAL``, ``PLURAL/status`` and, with a scale subresource,
``PLURAL/scale`` as an autoscaling/v1 ``Scale``:
staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/customresource_discovery_controller.go).
Objects of its kind can then be applied and read (GET), and ``GET …/NAME/scale`` answers
the Scale the API server builds from the object at the version's ``specReplicasPath`` and
``statusReplicasPath`` (pkg/registry/customresource/etcd.go scaleFromCustomResource,
v0.35.4): a missing field is 0, a field of another type a 500. List and watch of custom
resources are not served (unstick never lists them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.kube.kinds import Kind

__all__ = ["CustomResources", "CustomVersion"]

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class CustomVersion:
    kind: Kind
    spec_replicas_path: str | None  # None: no scale subresource
    status_replicas_path: str | None
    label_selector_path: str | None


class CustomResources:
    """The CustomResourceDefinitions applied, and their objects."""

    def __init__(self) -> None:
        self.definitions: dict[str, Obj] = {}
        self._versions: dict[tuple[str, str], list[CustomVersion]] = {}  # (group, version) → kinds
        self.objects: dict[
            tuple[str, str], dict[tuple[str, str], Obj]
        ] = {}  # (group, kind) → (ns, name) → obj

    # -- definitions -------------------------------------------------------
    def define(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        group, names = spec["group"], spec.get("names") or {}
        kind, plural = names["kind"], names["plural"]
        namespaced = spec.get("scope", "Namespaced") != "Cluster"
        for versions in self._versions.values():
            versions[:] = [v for v in versions if (v.kind.group, v.kind.kind) != (group, kind)]
        for v in spec.get("versions") or ():
            if not v.get("served", True):
                continue
            scale = (v.get("subresources") or {}).get("scale")
            self._versions.setdefault((group, v["name"]), []).append(
                CustomVersion(
                    Kind(kind, group, v["name"], plural, namespaced, watchable=False),
                    None if scale is None else scale.get("specReplicasPath"),
                    None if scale is None else scale.get("statusReplicasPath"),
                    None if scale is None else scale.get("labelSelectorPath"),
                )
            )
        self.definitions[crd["metadata"]["name"]] = crd
        self.objects.setdefault((group, kind), {})

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for (group, version), kinds in self._versions.items():
            if kinds:
                out.setdefault(group, []).append(version)
        return {g: sorted(vs) for g, vs in out.items()}

    def versions(self, group: str, version: str) -> list[CustomVersion]:
        return self._versions.get((group, version), [])

    def owns(self, kind: Kind | None) -> bool:
        return kind is not None and any(v.kind is kind for v in self.versions(kind.group, kind.version))

    def serves(self, obj: Obj) -> bool:
        """Whether ``obj`` is an object of an applied CRD's kind."""
        group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
        return any(v.kind.kind == obj.get("kind") for v in self.versions(group, version))

    def resource_list(self, group: str, version: str) -> Obj:
        resources: list[Obj] = []
        for v in self.versions(group, version):
            k = v.kind
            resources.append(
                {
                    "name": k.plural,
                    "singularName": k.kind.lower(),
                    "namespaced": k.namespaced,
                    "kind": k.kind,
                    "verbs": [
                        "delete",
                        "deletecollection",
                        "get",
                        "list",
                        "patch",
                        "create",
                        "update",
                        "watch",
                    ],
                    "storageVersionHash": "",
                }
            )
            resources.append(
                {
                    "name": f"{k.plural}/status",
                    "singularName": "",
                    "namespaced": k.namespaced,
                    "kind": k.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
            if v.spec_replicas_path is not None:
                resources.append(
                    {
                        "name": f"{k.plural}/scale",
                        "singularName": "",
                        "namespaced": k.namespaced,
                        "group": "autoscaling",
                        "version": "v1",
                        "kind": "Scale",
                        "verbs": ["get", "patch", "update"],
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}",
            "resources": resources,
        }

    # -- objects -------------------------------------------------------------
    def key(self, obj: Obj) -> tuple[tuple[str, str], tuple[str, str]]:
        group = str(obj.get("apiVersion") or "").rpartition("/")[0]
        meta = obj["metadata"]
        return (group, obj["kind"]), (meta.get("namespace", ""), meta["name"])

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj | None:
        return self.objects.get((kind.group, kind.kind), {}).get((namespace or "", name))

    def scale(self, kind: Kind, obj: Obj) -> tuple[int, Obj]:
        """scaleFromCustomResource: (HTTP status, body) of ``GET …/scale``."""
        version = next(v for v in self.versions(kind.group, kind.version) if v.kind is kind)
        assert version.spec_replicas_path is not None
        try:
            spec_replicas = _nested_int64(obj, version.spec_replicas_path)
            status_replicas = _nested_int64(obj, version.status_replicas_path or "")
        except TypeError as exc:
            return 500, {"message": f"Internal error occurred: {exc}", "reason": "InternalError"}
        meta = obj["metadata"]
        scale: Obj = {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace", ""),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
                "creationTimestamp": meta.get("creationTimestamp"),
            },
            "spec": {"replicas": spec_replicas} if spec_replicas else {},  # json:"replicas,omitempty"
            "status": {"replicas": status_replicas},
        }
        if version.label_selector_path:
            selector = _nested(obj, version.label_selector_path)
            if isinstance(selector, str):
                scale["status"]["selector"] = selector
        return 200, scale


def _nested(obj: Obj, path: str) -> Any:
    value: Any = obj
    for name in path.removeprefix(".").split("."):
        if not isinstance(value, dict) or name not in value:
            return None
        value = value[name]
    return value


def _nested_int64(obj: Obj, path: str) -> int:
    if not path:
        return 0
    value = _nested(obj, path)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{path} accessor error: {value} is of the type {type(value).__name__}, expected int64"
        )
    return (value + 2**31) % 2**32 - 2**31  # Replicas: int32(specReplicas)
