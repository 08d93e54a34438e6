"""`unstick analyze` judges a named ResourceClaim that is not in the dump only when the dump
shows the claims were collected, as DynamicResources' PreEnqueue would find it missing
(pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go v1.35.4,
foreachPodResourceClaim: ``could not find ResourceClaim``): a dump that carries a
ResourceClaim, a ``ResourceClaimList`` or a ``List`` of claims (even empty), or the
per-kind file ``resourceclaims.json``. Otherwise the claim stays unjudged and the output
says so in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.agent.test_live_resource_claims import claim, claimed_web
from tests.cli.inprocess import run
from tests.rules.placement_fixtures import node

NOW = "2026-01-01T00:00:00Z"  # the pending pod is 10 minutes old


def _list(kind: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    api = "resource.k8s.io/v1" if kind == "ResourceClaimList" else "v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"resourceVersion": "7"}, "items": items}


def _write_text(folder: Path, name: str, text: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)


def _write(folder: Path, name: str, doc: Any) -> None:
    _write_text(folder, name, orjson.dumps(doc).decode())


def _cluster(folder: Path) -> Path:
    _write(folder, "cluster.json", _list("List", [node("w-0"), *claimed_web()]))
    return folder


def _analyse(*args: str) -> tuple[list[dict[str, Any]], str]:
    code, out, err = run("analyze", *args, "--json", "--now", NOW)
    assert code == 0, err
    silent = [f for f in json.loads(out)["findings"] if f["rule_id"] == "scheduler-silent"]
    return silent, err


def _claim_item(name: str) -> dict[str, Any]:
    """A ResourceClaim as a typed list prints it: no kind of its own."""
    item = claim(name, deleting=False)
    del item["kind"], item["apiVersion"]
    return item


COLLECTED = {
    "empty ResourceClaimList": lambda d: _write(d, "claims.json", _list("ResourceClaimList", [])),
    "ResourceClaimList of another claim": lambda d: _write(
        d, "claims.json", _list("ResourceClaimList", [_claim_item("other")])
    ),
    "List of another claim": lambda d: _write(
        d, "claims.json", _list("List", [claim("other", deleting=False)])
    ),
    "another claim alone": lambda d: _write(d, "claim.json", claim("other", deleting=False)),
    "empty List in resourceclaims.json": lambda d: _write(d, "resourceclaims.json", _list("List", [])),
    "empty List in resourceclaims.resource.k8s.io.yaml": lambda d: _write_text(
        d, "resourceclaims.resource.k8s.io.yaml", "apiVersion: v1\nkind: List\nitems: []\n"
    ),
}


@pytest.mark.parametrize("source", list(COLLECTED))
def test_a_dump_that_collected_claims_judges_the_missing_one(tmp_path: Path, source: str) -> None:
    folder = _cluster(tmp_path / "dump")
    COLLECTED[source](folder)
    (finding,), err = _analyse(str(folder))
    assert finding["evidence"]["cause"] == "missing-resourceclaim"
    assert finding["evidence"]["preenqueue_status"] == 'could not find ResourceClaim "default/shared-gpu"'
    assert "claims not in the dump" not in err


NOT_COLLECTED = {
    "no claim at all": lambda d: None,
    "an empty List in a file named for nothing": lambda d: _write(d, "other.json", _list("List", [])),
    "an unreadable resourceclaims.json": lambda d: _write_text(
        d, "resourceclaims.json", '{"kind": "List", "items": ['
    ),
}


@pytest.mark.parametrize("source", list(NOT_COLLECTED))
def test_a_dump_without_claims_leaves_the_named_one_unjudged_and_says_so(tmp_path: Path, source: str) -> None:
    folder = _cluster(tmp_path / "dump")
    NOT_COLLECTED[source](folder)
    silent, err = _analyse(str(folder))
    assert silent == []
    (line,) = [ln for ln in err.splitlines() if "claims not in the dump" in ln]
    assert "names ResourceClaim shared-gpu" in line and "not judged" in line
    assert "kubectl get resourceclaims -A -o json" in line


def test_the_claim_that_is_there_is_judged_on_its_own_terms(tmp_path: Path) -> None:
    folder = _cluster(tmp_path / "dump")
    _write(folder, "claims.json", _list("List", [claim("shared-gpu", deleting=True)]))
    (finding,), err = _analyse(str(folder))
    assert finding["evidence"]["cause"] == "resourceclaim-being-deleted"
    assert "claims not in the dump" not in err


def test_each_file_is_its_own_cluster(tmp_path: Path) -> None:
    """--each: one file with an empty ResourceClaimList judges; the other, alone, does not and
    lists the line among its input warnings."""
    objs = [node("w-0"), *claimed_web()]
    _write(tmp_path, "a.json", [_list("List", objs), _list("ResourceClaimList", [])])
    _write(tmp_path, "b.json", _list("List", objs))
    code, out, err = run(
        "analyze", "--each", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--now", NOW
    )
    assert code == 0, err
    a, b = (json.loads(line) for line in out.splitlines())
    assert [f["evidence"]["cause"] for f in a["findings"] if f["rule_id"] == "scheduler-silent"] == [
        "missing-resourceclaim"
    ]
    assert not any("claims not in the dump" in w for w in a["input_warnings"])
    assert [f for f in b["findings"] if f["rule_id"] == "scheduler-silent"] == []
    assert any("claims not in the dump" in w for w in b["input_warnings"])
