"""The chart's Grafana dashboard and PrometheusRule: rendered by helm, shaped as
Grafana's dashboard sidecar and the Prometheus Operator read them, and every
query names metrics (and labels) a real unstick serves on /metrics.

promtool is not built here (the Prometheus module is too large to compile on
the test machine); the rule file is checked against the PrometheusRule
schema's rules (name, alert, expr, for as a Prometheus duration, string
labels and annotations) and its expressions for balanced brackets."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.api.test_pictures_browser import demo  # noqa: F401  (the fixture)
from tests.deploy.test_helm import CHART, TOKEN, _by_kind, helm, render  # noqa: F401

DASHBOARD = CHART / "dashboards" / "unstick.json"
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
METRIC = re.compile(r"\b(unstick_[a-z_]+)\b")
BY = re.compile(r"by \(([^)]*)\)\s*\((?:rate|increase)?\(?\s*(unstick_[a-z_]+)")

VALUES_ALL = {
    "apiTokens": {"tokens": [TOKEN]},
    "prometheusRule": {"enabled": True, "labels": {"release": "prom"}, "openIncidents": {"enabled": True}},
}


def expressions_of_dashboard(doc: dict[str, Any]) -> list[str]:
    out = [t["expr"] for p in doc["panels"] for t in p.get("targets", ())]
    out += [v["query"] for v in doc["templating"]["list"] if v["type"] == "query"]
    return out


def expressions_of_rules(rule: dict[str, Any]) -> list[str]:
    return [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]


def balanced(expr: str) -> bool:
    depth = {"(": 0, "{": 0, "[": 0}
    pairs = {")": "(", "}": "{", "]": "["}
    for ch in expr:
        if ch in depth:
            depth[ch] += 1
        elif ch in pairs:
            depth[pairs[ch]] -= 1
            if depth[pairs[ch]] < 0:
                return False
    return all(v == 0 for v in depth.values())


def test_the_dashboard_configmap_carries_the_sidecar_label(helm: Path, tmp_path: Path) -> None:  # noqa: F811
    objects = render(helm, {"apiTokens": {"tokens": [TOKEN]}}, tmp_path)
    [config_map] = [o for o in _by_kind(objects)["ConfigMap"] if o["metadata"]["name"].endswith("-dashboard")]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["unstick.json"]) == json.loads(DASHBOARD.read_text())
    assert "PrometheusRule" not in _by_kind(objects)  # opt-in
    off = render(helm, {"apiTokens": {"tokens": [TOKEN]}, "grafanaDashboard": {"enabled": False}}, tmp_path)
    assert not [o for o in _by_kind(off).get("ConfigMap", []) if o["metadata"]["name"].endswith("-dashboard")]


def test_the_prometheus_rule_is_well_formed(helm: Path, tmp_path: Path) -> None:  # noqa: F811
    [rule] = _by_kind(render(helm, VALUES_ALL, tmp_path))["PrometheusRule"]
    assert (
        rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["metadata"]["labels"]["release"] == "prom"
    )
    names = set()
    for group in rule["spec"]["groups"]:
        assert group["name"] and group["rules"]
        for r in group["rules"]:
            assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", r["alert"]) and r["alert"] not in names
            names.add(r["alert"])
            assert isinstance(r["expr"], str) and balanced(r["expr"]), r["expr"]
            if "for" in r:
                assert DURATION.fullmatch(r["for"]), r["for"]
            assert all(
                isinstance(v, str) for v in {**r.get("labels", {}), **r.get("annotations", {})}.values()
            )
            assert r["labels"]["severity"] in ("info", "warning", "critical")
    assert names == {
        "UnstickNoAnalysis",
        "UnstickNotSynced",
        "UnstickDeadLetters",
        "UnstickWatchRestarts",
        "UnstickIncidentsOpen",
    }


def test_the_dashboard_is_grafana_json() -> None:
    doc = json.loads(DASHBOARD.read_text())
    assert doc["uid"] and doc["title"] and doc["schemaVersion"] >= 30
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for panel in doc["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24
        for target in panel["targets"]:
            assert balanced(target["expr"]), target["expr"]


@pytest.fixture
async def exposition(demo: str) -> AsyncIterator[str]:  # noqa: F811
    async with aiohttp.ClientSession() as http, http.get(f"{demo}/metrics") as resp:
        assert resp.status == 200
        yield await resp.text()


async def test_every_query_names_metrics_and_labels_metrics_really_exposes(
    exposition: str,
    helm: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    exposed: dict[str, set[str]] = {}
    for line in exposition.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?", line)
        assert match
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', match.group(3) or ""))
        exposed.setdefault(match.group(1), set()).update(labels)
    [rule] = _by_kind(render(helm, VALUES_ALL, tmp_path))["PrometheusRule"]
    expressions = expressions_of_dashboard(json.loads(DASHBOARD.read_text())) + expressions_of_rules(rule)
    missing = sorted({m for e in expressions for m in METRIC.findall(e)} - set(exposed))
    assert missing == []
    for expr in expressions:
        for by, metric in BY.findall(expr):
            wanted = {label.strip() for label in by.split(",")} - {"le"}
            assert wanted <= exposed[metric], (expr, exposed[metric])
