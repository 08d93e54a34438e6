"""pdb-blocks-eviction recomputes budgets on a per-namespace view of the snapshot
(``_view``): the view must hold every controller the finders read -- ReplicationControllers,
custom resources and their CRDs, the live agent's /scale readings -- or the budget it
recomputes differs from the one ``budget_status`` gives on the whole snapshot."""

from __future__ import annotations

from typing import Any

import pytest

from analyzers.disruption import budget_status
from analyzers.ingest import parse_time
from analyzers.records import ScaleReading
from analyzers.rules import pdb_blocks_eviction
from analyzers.rules.context import RuleContext
from analyzers.snapshot import ClusterState
from tests.core.helpers import node, pdb, pod
from tests.core.test_disruption_scale import CR_UID, SCALE, crd, database

NOW = parse_time("2026-11-20T11:00:00Z") or 0.0
SEL = {"matchLabels": {"app": "db"}}


def _pods(api_version: str, kind: str, name: str, uid: str) -> list[dict[str, Any]]:
    out = []
    for i in range(3):
        p = pod(f"db-{i}", node_name=f"n{i + 1}", labels={"app": "db"}, ready=True, phase="Running")
        p["metadata"]["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}
        ]
        out.append(p)
    return out


def _rc(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "db", "namespace": "default", "uid": "uid-rc"},
        "spec": {"replicas": replicas},
    }


def _cluster(owner: str, replicas: int) -> tuple[list[dict[str, Any]], list[Any]]:
    objs = [
        node("n1", unschedulable=True),
        node("n2"),
        node("n3"),
        pdb("db", selector=SEL, max_unavailable=1),
    ]
    records: list[Any] = []
    if owner == "rc":
        objs += [_rc(replicas), *_pods("v1", "ReplicationController", "db", "uid-rc")]
    elif owner == "dumped-cr":
        objs += [crd(scale=SCALE), database("db", spec={"replicas": replicas})]
        objs += _pods("db.example.com/v1", "Database", "db", CR_UID)
    else:  # read live
        objs += _pods("db.example.com/v1", "Database", "db", CR_UID)
        records.append(
            ScaleReading("default", "db.example.com", "Database", "db", uid=CR_UID, replicas=replicas)
        )
    return objs, records


@pytest.mark.parametrize("owner", ["rc", "dumped-cr", "live-scale"])
@pytest.mark.parametrize("replicas, blocked", [(3, False), (4, True)])
def test_the_rules_budget_is_the_whole_snapshots(owner: str, replicas: int, blocked: bool) -> None:
    # maxUnavailable 1 of the controller's replicas: 3 → 2 must stay healthy, 3 are, 1
    # allowed (the drain of db-0 proceeds); 4 → 3 must stay healthy, 0 allowed (blocked).
    objs, records = _cluster(owner, replicas)
    state = ClusterState("1.30")
    state.load(objs)
    for record in records:
        state.apply(record)
    snap = state.snapshot()
    whole = budget_status(snap, snap.pdbs[("default", "db")])
    assert (whole.error, whole.expected_pods, whole.disruptions_allowed) == (
        None,
        replicas,
        0 if blocked else 1,
    )
    findings = pdb_blocks_eviction.analyze(RuleContext(snapshot=snap, now=NOW))
    assert bool(findings) is blocked
    if blocked:
        (finding,) = findings
        (budget,) = finding.evidence["pdbs"]
        assert (budget["error"], budget["expected_pods"], budget["desired_healthy"]) == (None, replicas, 3)
