"""The chart, rendered by the real `helm` (built from its Go module by scripts/build-helm):
`helm lint` and `helm template` for the default values and every documented variant, the values
schema and the impossible combinations refused with a message naming the value, and every
rendered object validated against the OpenAPI schema of the Kubernetes release the real
control plane tier runs (k8s.io/kubernetes api/openapi-spec/swagger.json from the Go module
cache), strictly: an unknown field is an error, as `kubectl apply --validate=strict` says."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import yaml

from agent.cli import build_parser
from agent.settings import LeaderSettings, Settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "unstick"
# The release tests/realcluster pins for the real control plane (its one pin file).
KUBE_RELEASE = (ROOT / "tests" / "realcluster" / "kube-version").read_text().strip()
TOKEN = "0123456789abcdef0123456789abcdef"
NS = "unstick"

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {"apiTokens": {"tokens": [TOKEN]}},
    "existing-token-secret": {"apiTokens": {"existingSecret": "unstick-api-tokens"}},
    "postgresql": {"apiTokens": {"tokens": [TOKEN]}, "database": {"existingSecret": "unstick-db"}},
    "postgresql-url": {
        "apiTokens": {"tokens": [TOKEN]},
        "database": {"url": "postgresql+asyncpg://unstick:s3cret@db:5432/unstick"},
        "replicas": 1,
    },
    "ha": {
        "apiTokens": {"tokens": [TOKEN]},
        "database": {"existingSecret": "unstick-db"},
        "replicas": 3,
        "leaderElection": {"leaseDuration": "20s", "renewDeadline": "15s", "retryPeriod": "3s"},
    },
    "slack-webhook-secrets": {
        "apiTokens": {"tokens": [TOKEN]},
        "slack": {"webhookUrl": "https://hooks.slack.com/services/T0/B0/xyz"},
        "webhook": {"urls": ["https://hooks.example.com/unstick"], "secret": "hmac-key-0123456789"},
        "publicUrl": "https://unstick.example.com",
    },
    "slack-existing-secrets": {
        "apiTokens": {"existingSecret": "tokens"},
        "slack": {"existingSecret": "slack-bot", "channel": "#platform"},
        "webhook": {"urls": ["https://hooks.example.com/u"], "existingSecret": "hmac"},
    },
    "scheduler-config": {
        "apiTokens": {"tokens": [TOKEN]},
        "schedulerConfig": {"configMap": "kube-scheduler-config", "key": "scheduler.yaml"},
    },
    "networkpolicy": {
        "apiTokens": {"tokens": [TOKEN]},
        "database": {"existingSecret": "unstick-db"},
        "networkPolicy": {
            "enabled": True,
            "ingressFrom": [
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}
            ],
            "apiServerCIDRs": ["10.0.0.1/32"],
            "databaseCIDRs": ["10.1.0.0/24"],
            "notifyCIDRs": ["0.0.0.0/0"],
        },
    },
    "servicemonitor": {
        "apiTokens": {"tokens": [TOKEN]},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
    },
    "prometheusrule": {
        "apiTokens": {"tokens": [TOKEN]},
        "prometheusRule": {"enabled": True, "openIncidents": {"enabled": True, "severity": "critical"}},
        "grafanaDashboard": {"folder": "Platform"},
    },
    "sidecar": {
        "mode": "sidecar",
        "sidecar": {"serviceAccount": {"name": "platform-controller", "namespace": "platform"}},
    },
    "scale-subresource": {"apiTokens": {"tokens": [TOKEN]}, "scaleSubresource": True},
}


@pytest.fixture(scope="session")
def helm() -> Path:
    built = subprocess.run(
        [str(ROOT / "scripts" / "build-helm")], capture_output=True, text=True, timeout=3600
    )
    assert built.returncode == 0, built.stderr[-2000:]
    return Path(built.stdout.strip())


def _values_file(values: dict[str, Any], tmp: Path) -> Path:
    path = tmp / "values.json"
    path.write_text(json.dumps(values))
    return path


def helm_run(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HELM_CACHE_HOME": "/tmp/unstick-helm/cache",
        "HELM_CONFIG_HOME": "/tmp/unstick-helm/config",
        "HELM_DATA_HOME": "/tmp/unstick-helm/data",
    }
    # --kube-version: render for the release the real control plane tier runs (a helm built
    # without the Makefile's ldflags would assume v1.20).
    return subprocess.run(
        [str(helm), *args, "--kube-version", KUBE_RELEASE],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def render(helm: Path, values: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    done = helm_run(
        helm, "template", "unstick", str(CHART), "--namespace", NS, "-f", str(_values_file(values, tmp))
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def refused(helm: Path, values: dict[str, Any], tmp: Path) -> str:
    done = helm_run(
        helm, "template", "unstick", str(CHART), "--namespace", NS, "-f", str(_values_file(values, tmp))
    )
    assert done.returncode != 0, f"accepted: {values}"
    return done.stderr


# -- the Kubernetes OpenAPI schema ------------------------------------------------------------


@functools.cache
def swagger() -> dict[str, Any]:
    """swagger.json of KUBE_RELEASE from the Go module cache (downloaded once when missing)."""
    modcache = subprocess.run(
        ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = Path(modcache, f"k8s.io/kubernetes@{KUBE_RELEASE}", "api", "openapi-spec", "swagger.json")
    if not path.exists():
        subprocess.run(
            ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{KUBE_RELEASE}"],
            check=True,
            capture_output=True,
            env={**os.environ, "GOFLAGS": "-mod=mod"},
            timeout=1800,
        )
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


@functools.cache
def strict_definitions() -> dict[str, Any]:
    """The definitions with unknown fields forbidden, IntOrString and Quantity as the API decodes them."""
    defs = json.loads(json.dumps(swagger()["definitions"]))
    for schema in defs.values():
        if schema.get("type") == "object" and "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
    defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = {"type": ["integer", "string"]}
    defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = {"type": ["string", "number"]}
    return defs


@functools.cache
def validator(api_version: str, kind: str) -> Any:
    group, _, version = api_version.rpartition("/")
    for name, schema in swagger()["definitions"].items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            if (gvk["group"], gvk["version"], gvk["kind"]) == (group, version, kind):
                return jsonschema_rs.Draft4Validator(
                    {"$ref": f"#/definitions/{name}", "definitions": strict_definitions()}
                )
    raise AssertionError(f"{api_version} {kind} is not in Kubernetes {KUBE_RELEASE}")


def schema_errors(obj: dict[str, Any]) -> list[str]:
    check = validator(obj["apiVersion"], obj["kind"])
    return [
        f"{obj['kind']}/{obj['metadata']['name']} {'/'.join(map(str, e.instance_path))}: {e.message}"
        for e in check.iter_errors(obj)
    ]


# -- lint and render ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_lint_and_render_valid_objects(helm: Path, variant: str, tmp_path: Path) -> None:
    values = VARIANTS[variant]
    lint = helm_run(
        helm, "lint", "--strict", str(CHART), "--namespace", NS, "-f", str(_values_file(values, tmp_path))
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    objects = render(helm, values, tmp_path)
    assert objects
    errors = [e for o in objects if o["apiVersion"] != "monitoring.coreos.com/v1" for e in schema_errors(o)]
    assert not errors, errors
    for obj in objects:
        cluster_scoped = obj["kind"] in ("ClusterRole", "ClusterRoleBinding")
        assert obj["metadata"].get("namespace") == (None if cluster_scoped else NS), obj["metadata"]["name"]


def test_a_schema_error_is_a_schema_error(tmp_path: Path) -> None:
    """The strict validator does catch a misspelt field and a wrong type (so a pass means something)."""
    bad = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "replica": 2,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}]}
            },
        },
    }
    errors = schema_errors(bad)
    assert any("replica" in e for e in errors) and any("containerPort" in e or "80" in e for e in errors), (
        errors
    )


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        out.setdefault(obj["kind"], []).append(obj)
    return out


def _container(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    (dep,) = _by_kind(objects)["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    return dep, next(c for c in pod["containers"] if c["name"] == "unstick")


def _settings_of(container: dict[str, Any], tmp: Path) -> tuple[Settings, LeaderSettings]:
    args = build_parser("watch").parse_args(container["args"])
    tokens = tmp / "tokens"
    tokens.write_text(TOKEN + "\n")
    args.api_token_file = str(tokens)
    env = {e["name"]: e.get("value", "from-a-secret") for e in container.get("env", [])}
    env["UNSTICK_DB_URL"] = "postgresql+asyncpg://u:p@db/unstick" if "UNSTICK_DB_URL" in env else ""
    env = {k: v for k, v in env.items() if v}
    return Settings.from_args(args, env), LeaderSettings.from_args(args, env, hostname="h")


def test_default_is_one_sqlite_replica_without_budget(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, VARIANTS["default"], tmp_path)
    kinds = _by_kind(objects)
    dep, container = _container(objects)
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    assert "PodDisruptionBudget" not in kinds and "Role" not in kinds and "NetworkPolicy" not in kinds
    settings, leader = _settings_of(container, tmp_path)
    assert settings.db.url == "sqlite+aiosqlite:////data/unstick.db" and not leader.enabled
    assert "PersistentVolumeClaim" in kinds and container["image"] == "unstick:0.1.0"


@pytest.mark.parametrize("variant", ["postgresql", "ha"])
def test_postgresql_is_highly_available(helm: Path, variant: str, tmp_path: Path) -> None:
    objects = render(helm, VARIANTS[variant], tmp_path)
    kinds = _by_kind(objects)
    dep, container = _container(objects)
    replicas = VARIANTS[variant].get("replicas", 2)  # the default with PostgreSQL
    assert dep["spec"]["replicas"] == replicas
    pod = dep["spec"]["template"]["spec"]
    (spread,) = pod["topologySpreadConstraints"]
    assert (
        spread["topologyKey"] == "kubernetes.io/hostname" and spread["whenUnsatisfiable"] == "ScheduleAnyway"
    )
    assert spread["labelSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    (pdb,) = kinds["PodDisruptionBudget"]
    assert pdb["spec"]["maxUnavailable"] == 1 and pdb["spec"]["selector"] == dep["spec"]["selector"]
    settings, leader = _settings_of(container, tmp_path)
    assert settings.db.url.startswith("postgresql+asyncpg://") and leader.enabled and leader.name == "unstick"
    timings = VARIANTS[variant].get("leaderElection", {"leaseDuration": "15s"})
    assert leader.lease_duration == float(timings["leaseDuration"].rstrip("s"))
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["UNSTICK_DB_URL"]["valueFrom"]["secretKeyRef"] == {"name": "unstick-db", "key": "url"}
    # The Lease: a namespaced Role on that one name (create cannot be limited by name), nothing cluster-wide.
    (role,) = kinds["Role"]
    rules = {tuple(r["verbs"]): r for r in role["rules"]}
    assert rules[("get", "update")]["resourceNames"] == [leader.name]
    assert rules[("create",)]["resources"] == ["leases"] and "resourceNames" not in rules[("create",)]
    (binding,) = kinds["RoleBinding"]
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]
    assert all(
        r.get("apiGroups") != ["coordination.k8s.io"] for c in kinds["ClusterRole"] for r in c["rules"]
    )
    assert "PersistentVolumeClaim" not in kinds
    (service,) = kinds["Service"]
    assert service["spec"]["sessionAffinity"] == "ClientIP"  # sign-in sessions live in one replica


def test_database_url_never_on_the_command_line(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, VARIANTS["postgresql-url"], tmp_path)
    dep, container = _container(objects)
    assert "postgresql" not in json.dumps(container["args"]) and "s3cret" not in json.dumps(dep)
    secret_name = next(e for e in container["env"] if e["name"] == "UNSTICK_DB_URL")["valueFrom"][
        "secretKeyRef"
    ]["name"]
    (secret,) = [o for o in _by_kind(objects)["Secret"] if o["metadata"]["name"] == secret_name]
    import base64

    assert base64.b64decode(secret["data"]["url"]).decode().endswith("@db:5432/unstick")
    assert dep["spec"]["replicas"] == 1


def test_notification_secrets_are_mounted_files(helm: Path, tmp_path: Path) -> None:
    for variant, file_env in (
        ("slack-webhook-secrets", "UNSTICK_SLACK_WEBHOOK_URL_FILE"),
        ("slack-existing-secrets", "UNSTICK_SLACK_TOKEN_FILE"),
    ):
        objects = render(helm, VARIANTS[variant], tmp_path)
        dep, container = _container(objects)
        env = {e["name"]: e.get("value") for e in container["env"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        for name in (file_env, "UNSTICK_WEBHOOK_SECRET_FILE"):
            folder = str(Path(env[name]).parent)
            assert mounts[folder]["readOnly"] is True
        rendered = json.dumps(objects)
        assert "hooks.slack.com/services" not in json.dumps(dep)  # only inside the Secret, base64
        if variant == "slack-existing-secrets":
            assert env["UNSTICK_SLACK_CHANNEL"] == "#platform" and "hmac" in rendered
            assert "Secret" not in _by_kind(objects)  # every Secret is the user's


def test_networkpolicy_allows_only_what_unstick_talks_to(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, VARIANTS["networkpolicy"], tmp_path)
    (policy,) = _by_kind(objects)["NetworkPolicy"]
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = spec["ingress"]
    assert ingress["ports"] == [{"port": "http", "protocol": "TCP"}] and ingress["from"]
    egress = {
        (p["port"], tuple(t.get("ipBlock", {}).get("cidr", "dns") for t in rule["to"]))
        for rule in spec["egress"]
        for p in rule["ports"]
    }
    assert egress == {
        (53, ("dns",)),
        (443, ("10.0.0.1/32",)),
        (5432, ("10.1.0.0/24",)),
        (443, ("0.0.0.0/0",)),
    }


def test_servicemonitor_scrapes_metrics(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, VARIANTS["servicemonitor"], tmp_path)
    (monitor,) = _by_kind(objects)["ServiceMonitor"]
    (service,) = _by_kind(objects)["Service"]
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "prom"


def test_sidecar_mode_renders_only_read_rbac_for_the_host(helm: Path, tmp_path: Path) -> None:
    objects = render(helm, VARIANTS["sidecar"], tmp_path)
    assert sorted(o["kind"] for o in objects) == ["ClusterRole", "ClusterRoleBinding"]
    (binding,) = _by_kind(objects)["ClusterRoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "platform-controller", "namespace": "platform"}
    ]
    # The container snippet is in the release notes (rendered by `helm lint` above; `helm install
    # --dry-run` would need this helm built with a Kubernetes version, see helm_run).
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    assert "--no-pages" in notes and 'include "unstick.image"' in notes


def test_restricted_pod_security_and_resources(helm: Path, tmp_path: Path) -> None:
    for variant in ("default", "ha"):
        dep, container = _container(render(helm, VARIANTS[variant], tmp_path))
        pod = dep["spec"]["template"]["spec"]
        sc = container["securityContext"]
        assert (
            pod["securityContext"]["runAsNonRoot"]
            and pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        )
        assert (
            sc["allowPrivilegeEscalation"] is False
            and sc["capabilities"]["drop"] == ["ALL"]
            and sc["readOnlyRootFilesystem"]
        )
        assert {"cpu", "memory"} <= set(container["resources"]["requests"]) and "memory" in container[
            "resources"
        ]["limits"]


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"replicas": "two"}, "replicas"),
        ({"graceSeconds": "a minute"}, "graceSeconds"),
        ({"unknownKey": 1}, "unknownKey"),
        ({"database": {"password": "x"}}, "password"),
        ({"networkPolicy": {"enabled": "yes"}}, "enabled"),
        ({"mode": "daemonset"}, "mode"),
        ({"leaderElection": {"leaseDuration": 15}}, "leaseDuration"),
        ({"apiTokens": {"tokens": ["short"]}}, "tokens"),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else v,
)
def test_values_schema_rejects_wrong_types_and_unknown_keys(
    helm: Path, values: dict[str, Any], named: str, tmp_path: Path
) -> None:
    err = refused(
        helm, {"apiTokens": {"tokens": [TOKEN]}, **values} if "apiTokens" not in values else values, tmp_path
    )
    assert "values don't meet the specifications of the schema" in err and named in err, err


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"replicas": 2}, "replicas=2 needs PostgreSQL"),
        ({"replicas": 2, "database": {"existingSecret": ""}}, "database.existingSecret"),
        ({"mode": "sidecar"}, "sidecar.serviceAccount.name"),
        (
            {
                "mode": "sidecar",
                "sidecar": {"serviceAccount": {"name": "x"}, "automountServiceAccountToken": False},
            },
            "sidecar.automountServiceAccountToken",
        ),
        ({"apiTokens": {"tokens": []}}, "apiTokens.existingSecret"),
        ({"slack": {"botToken": "xoxb-1"}}, "slack.channel"),
        ({"webhook": {"urls": ["https://x.example"]}}, "webhook.secret"),
        # An enabled NetworkPolicy with the defaults would allow DNS alone: refused, naming the values.
        ({"networkPolicy": {"enabled": True}}, "set networkPolicy.apiServerCIDRs and networkPolicy.apiServerPort"),
        ({"networkPolicy": {"enabled": True}}, "kubectl get endpointslices -n default"),
        (
            {"networkPolicy": {"enabled": True, "apiServerCIDRs": ["10.0.0.1/32"]}, "database": {"existingSecret": "db"}},
            "networkPolicy.databaseCIDRs",
        ),
        (
            {"networkPolicy": {"enabled": True, "apiServerCIDRs": ["10.0.0.1/32"]}, "slack": {"existingSecret": "s", "channel": "#a"}},
            "networkPolicy.notifyCIDRs",
        ),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else v,
)
def test_impossible_combinations_fail_naming_the_value(
    helm: Path, values: dict[str, Any], named: str, tmp_path: Path
) -> None:
    base: dict[str, Any] = {"apiTokens": {"tokens": [TOKEN]}}
    err = refused(helm, {**base, **values}, tmp_path)
    assert named in err and "Traceback" not in err, err


def test_reading_scale_subresources_is_an_opt_in_read_only_grant(helm: Path, tmp_path: Path) -> None:
    """scaleSubresource: one more ClusterRole with `get` on `*/scale` only (PDB arithmetic of
    custom controllers, agent/scales.py), bound to the agent's ServiceAccount; absent by default."""
    default = _by_kind(render(helm, VARIANTS["default"], tmp_path))
    assert not [r for r in default["ClusterRole"] if r["metadata"]["name"].endswith("-read-scale")]
    kinds = _by_kind(render(helm, VARIANTS["scale-subresource"], tmp_path))
    (role,) = [r for r in kinds["ClusterRole"] if r["metadata"]["name"].endswith("-read-scale")]
    assert role["rules"] == [{"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]}]
    (binding,) = [b for b in kinds["ClusterRoleBinding"] if b["roleRef"]["name"] == role["metadata"]["name"]]
    (account,) = kinds["ServiceAccount"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NS}]
