"""Golden scenarios: each folder under tests/scenarios/<rule_id>/<case>/ holds a
cluster dump as kubectl prints it (any *.yaml / *.json) and ``expected.yaml``:

    now: RFC 3339 time of the analysis
    kube_version: "1.30"            # optional
    scheduler_config: {...}         # optional: a KubeSchedulerConfiguration, as --scheduler-config gives it
    findings:                       # exactly these (rule_id, subject) pairs; [] for a quiet cluster
    - rule_id: …
      severity: …
      subject: {kind, namespace, name}
      explanation_contains: [...]   # optional
      verified_remedy_contains: "…" # optional: some verified remedy's YAML contains this

Every verified remedy that is a patch of an object in the dump is then applied
to the dump (strategic-merge approximated by a deep merge) and the cluster is
analysed again: the finding must be gone.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from analyzers.ingest import parse_documents, parse_time
from analyzers.report import build_report
from analyzers.snapshot import ClusterState

ROOT = Path(__file__).parent
CASES = sorted(p.parent for p in ROOT.glob("*/*/expected.yaml"))


def load_case(case: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for path in sorted(case.iterdir()):
        if path.suffix in (".yaml", ".json") and path.name != "expected.yaml":
            objects.extend(parse_documents(path.read_text(), str(path)))
    expected = yaml.safe_load((case / "expected.yaml").read_text())
    return objects, expected


def analyse(objects: list[dict[str, Any]], expected: dict[str, Any]):
    state = ClusterState(expected.get("kube_version"))
    state.load(objects)
    assert not state.warnings, state.warnings
    now = parse_time(expected["now"])
    assert now is not None
    profiles = None
    if expected.get("scheduler_config") is not None:
        from analyzers.simulator.schedconfig import parse_config

        profiles = parse_config(expected["scheduler_config"])
    return build_report(state.snapshot(), now=now, profiles=profiles)


def deep_merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            deep_merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def test_every_rule_has_a_positive_and_a_negative_case():
    from analyzers.rules import RULES

    for rule in RULES:
        cases = [load_case(c)[1] for c in CASES if c.parent.name == rule.rule_id]
        assert any(e["findings"] for e in cases), f"{rule.rule_id}: no positive golden case"
        assert any(not e["findings"] for e in cases), f"{rule.rule_id}: no negative golden case"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_golden_scenario(case: Path) -> None:
    objects, expected = load_case(case)
    report = analyse(objects, expected)
    got = {(f.rule_id, f.subject.kind, f.subject.namespace, f.subject.name): f for f in report.findings}
    want = {
        (e["rule_id"], e["subject"]["kind"], e["subject"]["namespace"], e["subject"]["name"]): e
        for e in expected["findings"]
    }
    assert sorted(got) == sorted(want), "\n".join(f"{f.rule_id}: {f.title}" for f in report.findings)
    for key, exp in want.items():
        finding = got[key]
        assert str(finding.severity) == exp["severity"]
        for text in exp.get("explanation_contains", ()):
            assert text in finding.explanation, f"{text!r} not in: {finding.explanation}"
        for remedy in finding.remedies:
            list(yaml.safe_load_all(remedy.yaml))  # valid YAML, always
        if "verified_remedy_contains" in exp:
            assert any(r.verified and exp["verified_remedy_contains"] in r.yaml for r in finding.remedies), [
                (r.title, r.verified, r.verification) for r in finding.remedies
            ]
        # Apply each verified patch to the dump and analyse again: this finding must be gone.
        for remedy in finding.remedies:
            if not (remedy.verified and str(remedy.kind) == "patch" and remedy.target is not None):
                continue
            patched = copy.deepcopy(objects)
            targets = [
                o
                for o in patched
                if o.get("kind") == remedy.target.kind
                and o["metadata"]["name"] == remedy.target.name
                and o["metadata"].get("namespace", "") == remedy.target.namespace
            ]
            assert targets, f"remedy target {remedy.target} is not in the dump"
            deep_merge(targets[0], yaml.safe_load(remedy.yaml))
            again = analyse(patched, expected)
            assert not [f for f in again.findings if f.fingerprint == finding.fingerprint], (
                f"remedy {remedy.title!r} applied, yet the finding remains"
            )
