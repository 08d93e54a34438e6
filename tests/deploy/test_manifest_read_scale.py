"""The plain manifests' opt-in /scale grant (deploy/manifests/optional/read-scale.yaml):
not applied with unstick.yaml (the default stays without it), the same rules the chart
renders for ``scaleSubresource: true``, bound to the ServiceAccount unstick.yaml runs as."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "manifests"
OPT_IN = MANIFESTS / "optional" / "read-scale.yaml"
CHART_TEMPLATE = ROOT / "deploy" / "helm" / "unstick" / "templates" / "clusterrole-scale.yaml"


def _load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def _chart_rules() -> list[dict[str, Any]]:
    text = CHART_TEMPLATE.read_text()
    return yaml.safe_load(text.split("\nrules:\n", 1)[1].split("\n---", 1)[0])


def test_the_default_manifests_do_not_grant_scale() -> None:
    default = [o for p in sorted(MANIFESTS.glob("*.yaml")) for o in _load(p)]
    assert not any("scale" in str(rule.get("resources")) for o in default for rule in o.get("rules", ()))


def test_the_opt_in_grants_what_the_chart_grants_to_unsticks_account() -> None:
    objects = _load(OPT_IN)
    role, binding = _by_kind(objects, "ClusterRole"), _by_kind(objects, "ClusterRoleBinding")
    assert (
        role["rules"] == _chart_rules() == [{"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]}]
    )
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    account = _by_kind(_load(MANIFESTS / "unstick.yaml"), "ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]


def test_the_docs_say_how_to_add_it() -> None:
    command = "kubectl apply -f deploy/manifests/optional/read-scale.yaml"
    assert command in (ROOT / "deploy" / "README.md").read_text()
    assert command in (ROOT / "docs" / "architecture.md").read_text()
