"""`unstick analyze` calls a pod's PersistentVolumeClaim missing only when the dump carries
claims at all (an object, a typed ``PersistentVolumeClaimList`` even empty, or the per-kind
file ``persistentvolumeclaims.json``). A dump made without claims, volumes or classes
(``kubectl get pods,nodes,events -o yaml``) leaves what the pod's volumes need unchecked,
says so in one line, and never blames a claim that may well exist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.cli.inprocess import run
from tests.rules.placement_fixtures import bare_pod, node, template

NOW = "2026-01-01T00:00:00Z"


def _pod_with_claim() -> dict[str, Any]:
    tpl = template()
    tpl["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}]
    return bare_pod("web-0", tpl)


def _write(folder: Path, name: str, doc: Any) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(orjson.dumps(doc).decode())


def _analyse(folder: Path) -> tuple[list[str], str]:
    code, out, err = run("analyze", str(folder), "--json", "--now", NOW)
    assert code == 0, err
    report = json.loads(out)
    texts = [f["explanation"] for f in report["findings"]]
    pods = report.get("pods") or report.get("unscheduled_pods") or []
    return [*texts, json.dumps(pods)], err


def test_a_dump_without_claims_never_calls_one_missing(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "cluster.json",
        {"apiVersion": "v1", "kind": "List", "items": [node("w-0"), _pod_with_claim()]},
    )
    texts, err = _analyse(tmp_path)
    assert not any("data-web-0" in t and "not found" in t for t in texts), texts
    assert "holds no PersistentVolumeClaim, PersistentVolume, StorageClass objects" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "listing",
    [
        ("claims.json", {"apiVersion": "v1", "kind": "PersistentVolumeClaimList", "items": []}),
        ("persistentvolumeclaims.json", {"apiVersion": "v1", "kind": "List", "items": []}),
    ],
)
def test_a_dump_that_lists_claims_judges_the_missing_one(tmp_path: Path, listing: tuple[str, Any]) -> None:
    _write(
        tmp_path,
        "cluster.json",
        {"apiVersion": "v1", "kind": "List", "items": [node("w-0"), _pod_with_claim()]},
    )
    _write(tmp_path, *listing)
    texts, err = _analyse(tmp_path)
    assert any(
        'persistentvolumeclaim "data-web-0" not found' in t or "data-web-0, which does not exist" in t
        for t in texts
    ), texts
    assert "holds no PersistentVolumeClaim" not in err
