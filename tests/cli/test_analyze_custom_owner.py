"""`unstick analyze` on a dump whose PDB selects pods of a custom controller: the budget
is computed from the dumped custom resource at its CRD's specReplicasPath (the Scale
the disruption controller would GET), and said to be unknown -- the PDB's own status
shown, marked as such -- when the dump lacks the resource or its CRD."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_analyze_cli import unstick
from tests.core.helpers import node, pdb, pod
from tests.core.test_disruption_scale import CR_UID, SCALE, crd, database, with_status


def _dump(tmp_path: Path, *, with_cr: bool = True, with_crd: bool = True) -> Path:
    objs: list[dict[str, Any]] = [node("n1", unschedulable=True), node("n2")]
    if with_crd:
        objs.append(crd(scale={**SCALE, "specReplicasPath": ".spec.members"}))
    if with_cr:
        objs.append(database(spec={"members": 5, "replicas": 1}))
    for i in range(3):
        p = pod(
            f"orders-{i}",
            node_name="n1" if i == 0 else "n2",
            labels={"app": "db"},
            ready=True,
            phase="Running",
        )
        p["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "db.example.com/v1",
                "kind": "Database",
                "name": "orders",
                "uid": CR_UID,
                "controller": True,
            }
        ]
        objs.append(p)
    objs.append(
        with_status(pdb("orders", selector={"matchLabels": {"app": "db"}}, max_unavailable=2), 4, 2, 3, 1)
    )
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    return path


def test_the_budget_of_a_custom_controllers_pods_uses_the_custom_resources_scale(tmp_path: Path) -> None:
    proc = unstick("analyze", str(_dump(tmp_path)), "--json", "--now", "2026-11-20T12:00:00Z")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "warning" not in proc.stderr, proc.stderr
    (budget,) = json.loads(proc.stdout)["pdbs"]
    # 5 members (not the 3 pods, not spec.replicas): 5 - 2 = 3 must stay healthy, 3 are.
    assert (budget["expected_pods"], budget["desired_healthy"], budget["current_healthy"]) == (5, 3, 3)
    assert (budget["disruptions_allowed"], budget["figures"], budget["unknown"], budget["error"]) == (
        0,
        "computed",
        None,
        None,
    )
    (finding,) = [f for f in json.loads(proc.stdout)["findings"] if f["rule_id"] == "pdb-blocks-eviction"]
    assert finding["pods"] == ["default/orders-0"]


def test_without_the_custom_resource_the_budget_is_unknown_and_its_status_is_shown(tmp_path: Path) -> None:
    for with_cr, with_crd, why in (
        (False, True, 'Database "orders" (db.example.com) is not in the input'),
        (
            True,
            False,
            'no CustomResourceDefinition for kind "Database" in group "db.example.com" in the input',
        ),
    ):
        dump = _dump(tmp_path, with_cr=with_cr, with_crd=with_crd)
        proc = unstick("analyze", str(dump), "--json", "--now", "2026-11-20T12:00:00Z")
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        (budget,) = json.loads(proc.stdout)["pdbs"]
        assert (budget["unknown"], budget["figures"], budget["error"]) == (why, "status", None)
        # The PDB's status, as the controller last wrote it (1 allowed): the drain of
        # orders-0 is not reported as blocked.
        assert (budget["expected_pods"], budget["desired_healthy"], budget["current_healthy"]) == (4, 2, 3)
        assert budget["disruptions_allowed"] == 1
        assert not [f for f in json.loads(proc.stdout)["findings"] if f["rule_id"] == "pdb-blocks-eviction"]
        human = unstick("analyze", str(dump), "--now", "2026-11-20T12:00:00Z")
        assert human.returncode == 0, human.stderr
        assert (
            f"(unknown: {why}; figures from the PDB's status as the controller last wrote it)" in human.stdout
        )
