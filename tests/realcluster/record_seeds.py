"""Record the seed incidents (tests/realcluster/seeds.py) from the real control plane
into fixtures: what the API server, the controllers and kube-scheduler really said.

For each seed, in a namespace named after it, three snapshots are taken with
scripts/record_scenario.py's reader (objects as the API server returns them, events
in time order): before (the seed's objects, first rollout done), stuck (the pod
Pending with kube-scheduler's FailedScheduling event) and fixed (the seed's remedy,
the one unstick verified, applied with kubectl; every pod bound). Written:

- a golden case (tests/scenarios/<rule>/recorded/<seed>/, checked by
  tests/scenarios/test_recorded.py as test_golden.py checks its cases): the stuck snapshot as
  nodes.yaml, workloads.yaml, events.yaml, and expected.yaml with the finding the
  seed expects (rule, subject, severity, the remedy that unsticks it) — written from
  the seed, never from unstick's own output;
- with ``--demo-out``, for each seed that names a demo scenario (``Seed.demo``), that
  scenario (agent/demo/scenarios format): the before snapshot as objects.yaml and a
  timeline of what changed: stuck at 2 s, fixed at 12 s.

The harness's scheduler-sync probe pods (``sync-*``, tests/realcluster/conftest.py) and
their events are left out. The control plane runs no containers and no metrics-server:
for a seed with ``usage`` the recorder writes the NodeMetrics/PodMetrics metrics.k8s.io
would serve for the pods where the real scheduler put them (metrics.yaml).

    .venv/bin/python -m tests.realcluster.record_seeds            # every seed, goldens
    .venv/bin/python -m tests.realcluster.record_seeds --demo-out agent/demo/scenarios   # and the demo
    .venv/bin/python -m tests.realcluster.record_seeds --seed untolerated-taint
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from analyzers.findings import Remedy
from analyzers.quantity import format_units, to_units
from analyzers.report import build_report
from analyzers.snapshot import ClusterState
from tests.realcluster.conftest import Cluster
from tests.realcluster.harness import KUBE_VERSION, ControlPlane, build_binaries
from tests.realcluster.replay import (
    all_scheduled,
    apply_remedy,
    create_objects,
    first_rollout,
    set_up_cluster,
    stick,
)
from tests.realcluster.seeds import Seed, recorder_seeds, seeds
from tests.realcluster.verdicts import cluster_objects_with_workloads

REPO = Path(__file__).resolve().parents[2]
GOLDEN_ROOT = REPO / "tests" / "scenarios"
Recorded = dict[str, list[dict[str, Any]]]


def _recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_scenario", REPO / "scripts" / "record_scenario.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()


def snapshot(plane: ControlPlane, namespace: str, seed: Seed) -> Recorded:
    args = argparse.Namespace(
        namespace=namespace,
        kubectl=str(plane.bin_dir / "kubectl"),
        kubeconfig=str(plane.kubeconfig),
        context=None,
    )
    recorded: Recorded = RECORDER.record(args)
    recorded["events"] = [e for e in recorded["events"] if not is_sync_probe(e["involvedObject"])]
    recorded["metrics"] = metrics(recorded, seed.usage)
    return recorded


def is_sync_probe(involved: dict[str, Any]) -> bool:
    """The harness's probe that waits for kube-scheduler to see a test's Nodes."""
    return bool(involved.get("kind") == "Pod" and involved.get("name", "").startswith("sync-"))


# What a node's kubelet and system daemons use, beside the pods (as metrics-server reports it).
NODE_BASE_USAGE = {"cpu": "250m", "memory": "1Gi"}


def metrics(recorded: Recorded, usage: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """NodeMetrics and PodMetrics as metrics.k8s.io/v1beta1 serves them: each running pod whose
    ``app`` label ``usage`` names uses that much; each node its base plus its pods' usage."""
    if not usage:
        return []
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    on_node: dict[str, dict[str, int]] = {}
    out: list[dict[str, Any]] = []
    for pod in recorded["namespace"]:
        used = usage.get(pod["metadata"].get("labels", {}).get("app", ""))
        node_name = pod.get("spec", {}).get("nodeName")
        if pod["kind"] != "Pod" or used is None or not node_name or pod["metadata"].get("deletionTimestamp"):
            continue
        total = on_node.setdefault(node_name, {})
        for resource, quantity in used.items():
            total[resource] = total.get(resource, 0) + to_units(resource, quantity)
        meta = pod["metadata"]
        out.append(
            {
                "apiVersion": "metrics.k8s.io/v1beta1",
                "kind": "PodMetrics",
                "metadata": {
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "labels": meta.get("labels", {}),
                },
                "timestamp": stamp,
                "window": "15s",
                "containers": [{"name": c["name"], "usage": dict(used)} for c in pod["spec"]["containers"]],
            }
        )
    for node in recorded["cluster"]:
        if node["kind"] != "Node":
            continue
        name = node["metadata"]["name"]
        total = {r: to_units(r, q) + on_node.get(name, {}).get(r, 0) for r, q in NODE_BASE_USAGE.items()}
        out.append(
            {
                "apiVersion": "metrics.k8s.io/v1beta1",
                "kind": "NodeMetrics",
                "metadata": {"name": name, "labels": node["metadata"].get("labels", {})},
                "timestamp": stamp,
                "window": "20s",
                "usage": {r: format_units(r, units) for r, units in total.items()},
            }
        )
    return out


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def changes(before: Recorded, after: Recorded) -> dict[str, Any]:
    """One timeline step: the objects created or changed (by resourceVersion) and deleted."""
    old = {_key(o): o for part in before.values() for o in part}
    new = {_key(o): o for part in after.values() for o in part}
    step: dict[str, Any] = {}

    def changed(o: dict[str, Any], was: dict[str, Any]) -> bool:
        version = o["metadata"].get("resourceVersion")
        if version is None:  # metrics carry none: compare what they say, not when
            return _usage(o) != _usage(was)
        return bool(version != was["metadata"].get("resourceVersion"))

    apply = [o for k, o in new.items() if k not in old or changed(o, old[k])]
    # Events last, so the objects they name exist when they are recorded.
    apply.sort(key=lambda o: o["kind"] == "Event")
    if apply:
        step["apply"] = apply
    gone = [{"kind": k[0], "namespace": k[1], "name": k[2]} for k in old if k not in new]
    if gone:
        step["delete"] = gone
    return step


def _usage(metric: dict[str, Any]) -> Any:
    return metric.get("usage", metric.get("containers"))


def subject_kind(seed: Seed) -> str:
    return next(o["kind"] for o in seed.objects + seed.stick_objects if o["metadata"]["name"] == seed.subject)


def expected(seed: Seed, namespace: str, now: str, applied: Remedy) -> dict[str, Any]:
    assert seed.rule_id and seed.subject and seed.remedy_contains
    finding: dict[str, Any] = {
        "rule_id": seed.rule_id,
        "severity": seed.severity,
        "subject": {"kind": subject_kind(seed), "namespace": namespace, "name": seed.subject},
    }
    if seed.remedy_contains in applied.yaml:  # the golden test looks in remedies' YAML only
        finding["verified_remedy_contains"] = seed.remedy_contains
    return {
        "now": now,
        "kube_version": KUBE_VERSION.removeprefix("v").rsplit(".", 1)[0],
        "findings": [finding],
    }


def wait_for_event(plane: ControlPlane, namespace: str, pod: str, reason: str) -> None:
    plane.api.wait_for(
        f"/api/v1/namespaces/{namespace}/events",
        lambda e: e.get("reason") == reason and e.get("involvedObject", {}).get("name") == pod,
        timeout=30,
        what=f"a {reason} event for {pod}",
    )


def record_seed(plane: ControlPlane, seed: Seed, golden: Path | None, demo: Path | None) -> None:
    """Play ``seed`` in its namespace (``seed.namespace``, else its id) and write its fixtures
    (folders replaced)."""
    ns = seed.namespace or seed.id
    plane.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    plane.api.wait_for(
        f"/api/v1/namespaces/{ns}/serviceaccounts", lambda sa: sa["metadata"]["name"] == "default", timeout=30
    )
    cluster = Cluster(plane, ns)
    cleanup = set_up_cluster(cluster, seed)
    try:
        if seed.ready_first:  # the healthy "before": the Deployment rolled out
            create_objects(cluster, seed)
            first_rollout(cluster, seed)
            before = snapshot(plane, ns, seed)
        else:  # the healthy "before": the cluster without the seed's workload
            before = snapshot(plane, ns, seed)
            create_objects(cluster, seed)
        pod = stick(cluster, replace(seed, ready_first=False))
        if seed.pending and not pod["spec"].get("schedulingGates"):  # a gated pod is never tried: no event
            wait_for_event(plane, ns, pod["metadata"]["name"], "FailedScheduling")
        stuck = snapshot(plane, ns, seed)
        stuck_at = time.time()
        state = ClusterState(KUBE_VERSION)
        state.load(cluster_objects_with_workloads(cluster) + stuck["metrics"])
        report = build_report(state.snapshot(), now=stuck_at + seed.waited)
        remedies = [
            r
            for f in report.findings
            if f.rule_id == seed.rule_id and f.subject.namespace == ns
            for r in f.remedies
            if r.verified and seed.remedy_contains in r.yaml + r.command
        ]
        if not remedies:
            found = [
                (f.rule_id, f.subject.name, [(r.title, r.verified, r.verification) for r in f.remedies])
                for f in report.findings
                if f.subject.namespace == ns
            ]
            raise AssertionError(
                f"{seed.id}: no verified remedy with {seed.remedy_contains!r}; found {found}"
            )
        remedy = remedies[0]
        apply_remedy(
            cluster, seed, {"kind": str(remedy.kind), "command": remedy.command, "yaml": remedy.yaml}, cleanup
        )
        if seed.pending:
            all_scheduled(cluster, seed.stuck_label, 60)
        else:  # the workload rolled out again with the remedy's change
            first_rollout(cluster, replace(seed, objects=seed.stick_objects))
        fixed = snapshot(plane, ns, seed)
    finally:
        for path in cleanup:
            plane.api.delete(path)
        plane.delete_namespace(ns)
    header = (
        f"# Recorded by tests/realcluster/record_seeds.py (seed {seed.id}) from a real Kubernetes "
        f"{KUBE_VERSION} control plane; re-record, do not edit.\n"
    )
    if golden is not None:
        shutil.rmtree(golden, ignore_errors=True)
        golden.mkdir(parents=True)
        RECORDER.write_golden(golden, stuck, header)
        if stuck["metrics"]:
            (golden / "metrics.yaml").write_text(header + RECORDER.dump(stuck["metrics"]))
        now = datetime.fromtimestamp(stuck_at + seed.waited, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        (golden / "expected.yaml").write_text(
            header
            + (f"# The real kube-scheduler said: {seed.message}\n" if seed.message else "")
            + f"# Remedy applied (it unstuck the workload): {remedy.command}\n"
            + yaml.safe_dump(expected(seed, ns, now, remedy), sort_keys=False, width=1000)
        )
    if demo is not None:
        shutil.rmtree(demo, ignore_errors=True)
        demo.mkdir(parents=True)
        everything = before["cluster"] + before["namespace"] + before["events"] + before["metrics"]
        (demo / "objects.yaml").write_text(
            header
            + yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": everything}, sort_keys=False)
        )
        scenario = {
            "name": demo.name,
            "description": f"{seed.id}, recorded from Kubernetes {KUBE_VERSION}: stuck, then `{remedy.command}`"
            + (f", then `kubectl {' '.join(seed.after_remedy)}`" if seed.after_remedy else ""),
            "serverVersion": KUBE_VERSION,
            "metrics": bool(seed.usage),
            "objects": ["objects.yaml"],
            "timeline": [{"at": 2, **changes(before, stuck)}, {"at": 12, **changes(stuck, fixed)}],
        }
        (demo / "scenario.yaml").write_text(header + yaml.safe_dump(scenario, sort_keys=False))


def recordable() -> list[Seed]:
    return [s for s in seeds() + recorder_seeds() if s.rule_id and s.subject and s.remedy_contains]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", action="append", help="only these seeds (default: all)")
    p.add_argument("--golden-root", type=Path, default=GOLDEN_ROOT, help="tests/scenarios")
    p.add_argument(
        "--demo-out",
        type=Path,
        help="also write the demo scenarios (Seed.demo) under this folder: agent/demo/scenarios",
    )
    args = p.parse_args(argv)
    chosen = [s for s in recordable() if not args.seed or s.id in args.seed]
    unknown = set(args.seed or ()) - {s.id for s in chosen}
    if unknown:
        print(f"record_seeds: error: --seed: unknown {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="unstick-record-"))
    plane = ControlPlane(bin_dir=build_binaries(work), work=work)
    try:
        plane.start()
        for seed in chosen:
            t0 = time.monotonic()
            golden = args.golden_root / str(seed.rule_id) / "recorded" / seed.id
            demo = args.demo_out / seed.demo if args.demo_out and seed.demo else None
            record_seed(plane, seed, golden, demo)
            print(f"{seed.id}: {golden}{f', {demo}' if demo else ''} ({time.monotonic() - t0:.1f} s)")
    finally:
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
