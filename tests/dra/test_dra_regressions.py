"""Disagreements of the DRA differential run with the real v1.37.2 kube-scheduler, kept
as regression cases (tests/dra/data/regressions/<seed>-<probe>/: the cluster as listed
before the probe, and the real outcome). Each must now agree: fits-or-not and the
scheduler's message."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from analyzers.snapshot import ClusterState

ROOT = Path(__file__).parent / "data" / "regressions"
CASES = sorted(p for p in ROOT.iterdir() if p.is_dir())


def _inputs(case: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    objects = list(yaml.safe_load_all((case / "objects.yaml").read_text()))
    real = yaml.safe_load((case / "expected.yaml").read_text())["pod"]
    probe = copy.deepcopy(real)
    probe["spec"].pop("nodeName", None)
    statuses = (real.get("status") or {}).get("resourceClaimStatuses") or []
    probe["status"] = {"phase": "Pending", "resourceClaimStatuses": statuses}
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    # The generated claim, as the resourceclaim controller made it from the template (runs
    # recorded before the inputs were written whole lack it).
    for entry, status in zip(probe["spec"].get("resourceClaims") or (), statuses, strict=False):
        template = entry.get("resourceClaimTemplateName")
        claim = status.get("resourceClaimName")
        if template and claim and ("ResourceClaim", claim) not in names:
            spec = next(
                o
                for o in objects
                if o["kind"] == "ResourceClaimTemplate" and o["metadata"]["name"] == template
            )
            objects.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {
                        "name": claim,
                        "namespace": real["metadata"]["namespace"],
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "Pod",
                                "name": real["metadata"]["name"],
                                "uid": real["metadata"]["uid"],
                                "controller": True,
                            }
                        ],
                    },
                    "spec": spec["spec"]["spec"],
                }
            )
    if ("Pod", real["metadata"]["name"]) not in names:
        objects.append(probe)
    return objects, real


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_recorded_dra_disagreement_now_agrees(case: Path) -> None:
    from analyzers.simulator.engine import simulate

    objects, real = _inputs(case)
    state = ClusterState("v1.37.2")
    state.load(objects)
    snap = state.snapshot()
    verdict = simulate(
        snap, snap.pods[(real["metadata"]["namespace"], real["metadata"]["name"])], kube_version="v1.37.2"
    )
    real_fits = bool(real["spec"].get("nodeName"))
    message = next(
        (c["message"] for c in real["status"].get("conditions", []) if c["type"] == "PodScheduled"), ""
    )
    assert verdict.fits == real_fits
    if not real_fits:
        assert verdict.message == message
