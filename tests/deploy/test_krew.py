"""deploy/krew/unstick.yaml is a krew Plugin manifest whose binary is the wheel's entry point."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_krew_manifest_names_the_entry_point() -> None:
    manifest = yaml.safe_load((ROOT / "deploy" / "krew" / "unstick.yaml").read_text())
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "unstick"
    spec = manifest["spec"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert spec["version"] == f"v{project['version']}"
    assert spec["shortDescription"] and len(spec["shortDescription"]) <= 80
    assert spec["platforms"]
    for platform in spec["platforms"]:
        assert platform["bin"] == "kubectl-unstick" == next(
            name for name in project["scripts"] if name.startswith("kubectl-")
        )
        assert platform["selector"]["matchExpressions"][0]["key"] == "os"
        assert len(platform["sha256"]) == 64
    # kubectl derives the command from the binary's name: kubectl-unstick → `kubectl unstick`.
    assert project["scripts"]["kubectl-unstick"] == "agent.commands.kubectl:main"
