"""The deploy artefacts, checked by parsing them (no Docker, cluster or helm here).

RBAC is compared with the kinds table the agent watches from, the container's
args with the real ``unstick`` parser, the chart's templates with its values,
and unstick's own Deployment is run through unstick's own rules.
"""

from __future__ import annotations

import argparse
import copy
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import build_parser
from agent.kube.kinds import ALL_KINDS, METRICS_KINDS, WATCHED_KINDS
from agent.settings import AgentSettings, Settings
from analyzers.ingest import parse_time
from analyzers.report import build_report
from analyzers.snapshot import ClusterSnapshot

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "helm" / "unstick"
READ_ONLY = {"get", "list", "watch"}
NAMESPACE = "unstick"


def _load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


OBJECTS = [obj for path in sorted((DEPLOY / "manifests").glob("*.yaml")) for obj in _load(path)]


def _one(kind: str) -> dict[str, Any]:
    found = [o for o in OBJECTS if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


DEPLOYMENT = _one("Deployment")
POD_SPEC = DEPLOYMENT["spec"]["template"]["spec"]
CONTAINER = POD_SPEC["containers"][0]


def _grants(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


def _helm_rules() -> list[dict[str, Any]]:
    text = (CHART / "templates" / "clusterrole.yaml").read_text()
    return yaml.safe_load(text.split("\nrules:\n", 1)[1])


def _watch_options() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(parser._option_string_actions) | set(sub.choices["watch"]._option_string_actions)


# -- plain manifests -------------------------------------------------------------


def test_every_manifest_is_a_named_object_in_its_namespace() -> None:
    assert OBJECTS
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for obj in OBJECTS:
        assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"]
        expected = None if obj["kind"] in cluster_scoped else NAMESPACE
        assert obj["metadata"].get("namespace") == expected, obj["metadata"]["name"]


@pytest.mark.parametrize("rules", [_one("ClusterRole")["rules"], _helm_rules()], ids=["manifest", "helm"])
def test_rbac_is_read_only_and_covers_exactly_the_watched_kinds(rules: list[dict[str, Any]]) -> None:
    for rule in rules:
        assert set(rule["verbs"]) <= READ_ONLY, rule
        assert "*" not in str(rule.get("apiGroups", [])) + str(rule.get("resources", [])), rule
    # ALL_KINDS = WATCHED_KINDS + Namespace + METRICS_KINDS.
    assert {*WATCHED_KINDS, *METRICS_KINDS} <= set(ALL_KINDS)
    needed = {(k.group, k.plural): READ_ONLY if k.watchable else {"get", "list"} for k in ALL_KINDS}
    assert _grants(rules) == needed


def test_helm_rbac_matches_the_manifests() -> None:
    assert _helm_rules() == _one("ClusterRole")["rules"]


def test_binding_gives_the_role_to_the_pods_service_account() -> None:
    binding, account = _one("ClusterRoleBinding"), _one("ServiceAccount")
    assert binding["roleRef"]["name"] == _one("ClusterRole")["metadata"]["name"]
    assert {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE} in binding[
        "subjects"
    ]
    assert POD_SPEC["serviceAccountName"] == account["metadata"]["name"]


def test_container_args_are_flags_unstick_watch_accepts(tmp_path: Path) -> None:
    args = build_parser().parse_args(CONTAINER["args"])  # exits on an unknown flag
    assert args.command == "watch"
    mounts = {m["mountPath"] for m in CONTAINER["volumeMounts"]}
    assert str(Path(args.api_token_file).parent) in mounts
    assert args.db == "sqlite+aiosqlite:////data/unstick.db" and "/data" in mounts
    tokens = tmp_path / "tokens"
    tokens.write_text("0123456789abcdef0123456789abcdef\n")
    args.api_token_file = str(tokens)
    settings = Settings.from_args(args, environ={})  # raises on any invalid value
    AgentSettings.from_args(args, environ={})
    assert (settings.api.host, settings.api.port) == ("0.0.0.0", 8080)
    assert CONTAINER["ports"][0]["containerPort"] == 8080


def test_single_writer_rollout() -> None:
    assert DEPLOYMENT["spec"]["replicas"] == 1
    assert DEPLOYMENT["spec"]["strategy"] == {"type": "Recreate"}
    assert not [o for o in OBJECTS if o["kind"] == "PodDisruptionBudget"]  # 1 of 1 would block drains


def test_probes() -> None:
    assert CONTAINER["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert CONTAINER["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert CONTAINER["startupProbe"]["httpGet"]["path"] == "/healthz"


def test_resources_have_requests_and_limits() -> None:
    for container in POD_SPEC["containers"]:
        resources = container["resources"]
        assert set(resources["requests"]) >= {"cpu", "memory"}
        assert set(resources["limits"]) >= {"cpu", "memory"}


def test_tokens_come_from_a_mounted_secret_file() -> None:
    env = CONTAINER.get("env", []) + CONTAINER.get("envFrom", [])
    assert "UNSTICK_API_TOKEN" not in str(env) and "secret" not in str(env).lower()
    path = Path(CONTAINER["args"][CONTAINER["args"].index("--api-token-file") + 1])
    mount = next(m for m in CONTAINER["volumeMounts"] if m["mountPath"] == str(path.parent))
    assert mount["readOnly"] is True
    volume = next(v for v in POD_SPEC["volumes"] if v["name"] == mount["name"])
    item = next(i for i in volume["secret"]["items"] if i["path"] == path.name)
    secret = _one("Secret")
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert item["key"] in secret["stringData"]


def test_security_context() -> None:
    pod, box = POD_SPEC["securityContext"], CONTAINER["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
    assert pod["seccompProfile"] == box["seccompProfile"] == {"type": "RuntimeDefault"}
    assert box["readOnlyRootFilesystem"] is True and box["allowPrivilegeEscalation"] is False
    assert box["capabilities"] == {"drop": ["ALL"]}
    assert not POD_SPEC.get("nodeSelector") and "affinity" not in POD_SPEC
    namespace = _one("Namespace")["metadata"]
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


# -- unstick on itself ---------------------------------------------------------------

NOW = "2025-06-02T10:00:00Z"
ZONE = "eu-west-1a"


def _node(name: str, *, cpu: str, memory: str, labels: dict[str, str], taints: list | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "creationTimestamp": "2025-05-01T08:00:00Z",
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": ZONE,
                "node.kubernetes.io/instance-type": "t3.medium",
                **labels,
            },
        },
        "spec": {"taints": taints or []},
        "status": {
            "capacity": {"cpu": "2", "memory": "3943372Ki", "pods": "17", "ephemeral-storage": "20959212Ki"},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "17", "ephemeral-storage": "18242267924"},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "MemoryPressure", "status": "False"},
                {"type": "DiskPressure", "status": "False"},
                {"type": "PIDPressure", "status": "False"},
            ],
        },
    }


def _owner(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": True}


def _metrics(kind: str, name: str, namespace: str | None = None, **fields: Any) -> dict[str, Any]:
    meta = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": kind,
        "metadata": meta,
        "timestamp": NOW,
        "window": "20s",
        **fields,
    }


def _cluster(running: bool) -> list[dict[str, Any]]:
    """The manifests as the API server and controllers would hold them, on a small cluster."""
    worker = "ip-10-0-1-23.eu-west-1.compute.internal"
    nodes = [
        _node(worker, cpu="1930m", memory="3388364Ki", labels={}),
        _node(
            "ip-10-0-0-10.eu-west-1.compute.internal",
            cpu="1930m",
            memory="3388364Ki",
            labels={"node-role.kubernetes.io/control-plane": ""},
            taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        ),
    ]
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "gp3", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
    }
    objects = copy.deepcopy(OBJECTS)
    dep = next(o for o in objects if o["kind"] == "Deployment")
    pvc = next(o for o in objects if o["kind"] == "PersistentVolumeClaim")
    meta = {"namespace": NAMESPACE, "creationTimestamp": "2025-06-02T09:58:00Z"}
    dep["metadata"] |= {"uid": "d-1", "annotations": {"deployment.kubernetes.io/revision": "1"}, **meta}
    template = dep["spec"]["template"]
    labels = {**template["metadata"]["labels"], "pod-template-hash": "6b8f7c9d4"}
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": "unstick-6b8f7c9d4",
            "uid": "rs-1",
            "labels": labels,
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [_owner("Deployment", "unstick", "d-1")],
            **meta,
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {**template, "metadata": {"labels": labels}},
        },
    }
    pod_spec = {**copy.deepcopy(template["spec"]), "schedulerName": "default-scheduler", "priority": 0}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "unstick-6b8f7c9d4-x7k2p",
            "uid": "p-1",
            "labels": labels,
            "ownerReferences": [_owner("ReplicaSet", rs["metadata"]["name"], "rs-1")],
            **meta,
        },
        "spec": pod_spec,
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }
    pvc["metadata"] |= meta
    pvc["spec"]["storageClassName"] = "gp3"
    pvc["status"] = {"phase": "Pending"}
    extra: list[dict[str, Any]] = []
    if running:
        pod_spec["nodeName"] = worker
        pod["status"] = {
            "phase": "Running",
            "qosClass": "Burstable",
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
        }
        pvc["spec"]["volumeName"] = "pvc-0b1c"
        pvc["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
        zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]}
        extra = [
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": "pvc-0b1c"},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "gp3",
                    "claimRef": {"namespace": NAMESPACE, "name": pvc["metadata"]["name"]},
                    "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0a1b2c3d"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}},
                },
                "status": {"phase": "Bound"},
            },
            *(
                _metrics("NodeMetrics", n["metadata"]["name"], usage={"cpu": "310m", "memory": "1210Mi"})
                for n in nodes
            ),
            _metrics(
                "PodMetrics",
                pod["metadata"]["name"],
                namespace=NAMESPACE,
                containers=[{"name": "unstick", "usage": {"cpu": "35m", "memory": "182Mi"}}],
            ),
        ]
    return [*nodes, storage_class, *objects, rs, pod, *extra]


@pytest.mark.parametrize("running", [False, True], ids=["just-applied", "running"])
def test_unstick_passes_its_own_rules(running: bool) -> None:
    snapshot = ClusterSnapshot.from_objects(_cluster(running), kube_version="1.30")
    assert all("is not analysed" in w for w in snapshot.warnings), snapshot.warnings
    assert snapshot.deployments and snapshot.pods
    report = build_report(snapshot, now=parse_time(NOW), kube_version="1.30")
    assert report.rule_errors == ()
    assert report.findings == (), [f.title for f in report.findings]
    if not running:  # the simulator placed the pending pod: the rules did look at it
        assert [p.verdict.fits for p in report.pods] == [True]


# -- container image -------------------------------------------------------------------


def test_dockerfile() -> None:
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())  # join continuation lines
    first: dict[str, list[str]] = {}
    for line in (ln.strip() for ln in text.splitlines()):
        if line and not line.startswith("#"):
            name, _, arg = line.partition(" ")
            first.setdefault(name.upper(), []).append(arg.strip())
    # The base is pinned by digest (a tag moves), the same for both stages.
    (base,) = first["ARG"]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11[.0-9]*-slim(-[a-z]+)?@sha256:[0-9a-f]{64}", base), base
    assert first["FROM"][-1] == "${PYTHON_IMAGE}" and first["FROM"][0].startswith("${PYTHON_IMAGE} ")
    assert len(first["FROM"]) == 2 and first["FROM"][0].endswith(" AS build")  # multi-stage
    # The build stage builds the wheel (as tests/deploy/test_wheel.py does) and installs it.
    # Dependencies come from the hashed runtime lock, the wheel adds no resolution of its own.
    assert any(
        "pip wheel --no-deps -w /wheels ." in run
        and "pip install --require-hashes -r requirements/runtime.txt" in run
        and "pip install --no-deps /wheels/" in run
        for run in first["RUN"]
    )
    assert first["USER"][-1].split(":")[0] not in ("0", "root")
    assert first["ENTRYPOINT"] == ['["unstick"]'] and first["CMD"] == ['["watch"]']
    assert first["EXPOSE"] == ["8080"] and "/data" in first["VOLUME"][0]
    assert "HEALTHCHECK" not in first
    # The folder of every package pyproject.toml installs (alembic/ mapped into storage) is copied.
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {setuptools["package-dir"].get(p, p.replace(".", "/")).split("/")[0] for p in setuptools["packages"]}
    assert "alembic" in folders
    copied = {src for arg in first["COPY"] if not arg.startswith("--from") for src in arg.split()[:-1]}
    assert folders <= copied
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    assert {f"!{folder}/" for folder in folders} <= set(ignore)


# -- Helm chart ----------------------------------------------------------------------------

VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def test_chart_yaml() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "unstick" and chart["type"] == "application"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]


def test_templates_use_only_values_that_exist() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    templates = sorted((CHART / "templates").iterdir())
    assert {"_helpers.tpl", "NOTES.txt", "deployment.yaml", "clusterrole.yaml"} <= {t.name for t in templates}
    used = set()
    for template in templates:
        for match in VALUES_REF.finditer(template.read_text()):
            path = match.group(1).lstrip(".").split(".")
            node = values
            for key in path:
                assert isinstance(node, dict) and key in node, f"{template.name}: .Values.{'.'.join(path)}"
                node = node[key]
            used.add(path[0])
    assert used == set(values), f"values.yaml keys no template reads: {set(values) - used}"


def test_chart_container_flags_exist() -> None:
    text = (CHART / "templates" / "deployment.yaml").read_text()
    flags = set(re.findall(r"^\s*- (--[a-z][a-z-]*)$", text, re.MULTILINE))
    assert flags and flags <= _watch_options(), flags - _watch_options()
    assert "path: /readyz" in text and "path: /healthz" in text
    assert "UNSTICK_API_TOKEN" not in text and "--api-token-file" in flags


def test_templates_are_balanced_and_include_defined_helpers() -> None:
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    defined = set(re.findall(r'\{\{-?\s*define "([^"]+)"', helpers))
    for template in sorted((CHART / "templates").iterdir()):
        text = template.read_text()
        assert text.count("{{") == text.count("}}"), template.name
        opened = len(re.findall(r"\{\{-?\s*(?:if|with|range|define)\b", text))
        assert opened == len(re.findall(r"\{\{-?\s*end\s*-?\}\}", text)), template.name
        assert set(re.findall(r'include "([^"]+)"', text)) <= defined, template.name


# -- sidecar snippet -------------------------------------------------------------------------


def test_sidecar_snippet() -> None:
    """deploy/sidecar/sidecar.yaml: read-only RBAC for the host pod's ServiceAccount, the container's
    args accepted by the real parser with --no-pages, probes only on /healthz (never readiness)."""
    objects = _load(DEPLOY / "sidecar" / "sidecar.yaml")
    (binding,) = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
    (host,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = host["spec"]["template"]["spec"]
    assert binding["roleRef"]["name"] == _one("ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": host["metadata"]["namespace"]}
    ]
    assert pod.get("automountServiceAccountToken", True) is True
    (sidecar,) = [c for c in pod["containers"] if c["name"] == "unstick"]
    args = build_parser("watch").parse_args(sidecar["args"])
    env = {e["name"]: e["value"] for e in sidecar["env"]}
    settings = Settings.from_args(args, env)
    assert settings.api.pages is False and settings.api.port == sidecar["ports"][0]["containerPort"]
    assert "readinessProbe" not in sidecar and sidecar["livenessProbe"]["httpGet"]["path"] == "/healthz"
    sc = sidecar["securityContext"]
    assert sc["readOnlyRootFilesystem"] and sc["runAsNonRoot"] and sc["capabilities"]["drop"] == ["ALL"]
    mounted = {m["name"] for m in sidecar["volumeMounts"]}
    assert mounted <= {v["name"] for v in pod["volumes"]}
    assert env["UNSTICK_DB_URL"].endswith("/data/unstick.db") and {"mountPath": "/data", "name": "unstick-data"} in sidecar["volumeMounts"]
