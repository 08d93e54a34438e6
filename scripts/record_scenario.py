#!/usr/bin/env python3
"""Record a scenario from a real cluster (e.g. the test control plane) into the
format of tests/scenarios/ (golden cases) or of the demo's scenarios.

The objects are what the API server returns (defaulted and admitted), read with
``kubectl get -o json``; ``managedFields`` are dropped; events are written in time
order. Cluster-scoped objects the scheduler reads (Nodes, PersistentVolumes,
StorageClasses, non-system PriorityClasses) are recorded with the namespace's.

    scripts/record_scenario.py --namespace shop --out tests/scenarios/pdb-blocks-eviction/new-case
    scripts/record_scenario.py --namespace shop --format demo --name my-drain --out /tmp/my-drain \\
        --kubectl ~/.cache/unstick/kube/v1.37.2/bin/kubectl --kubeconfig /tmp/k/admin.kubeconfig

golden: nodes.yaml (cluster-scoped objects), workloads.yaml (the namespace's
objects), events.yaml; write expected.yaml yourself. demo: objects.yaml (a List)
and scenario.yaml (name, description, serverVersion, no timeline).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

CLUSTER_KINDS = (
    "nodes",
    "persistentvolumes",
    "storageclasses.storage.k8s.io",
    "priorityclasses.scheduling.k8s.io",
)
NAMESPACE_KINDS = (
    "deployments.apps",
    "replicasets.apps",
    "statefulsets.apps",
    "daemonsets.apps",
    "jobs.batch",
    "poddisruptionbudgets.policy",
    "persistentvolumeclaims",
    "pods",
)


class RecordError(Exception):
    pass


def kubectl_json(args: argparse.Namespace, *cmd: str) -> Any:
    base = [args.kubectl]
    if args.kubeconfig:
        base.append(f"--kubeconfig={args.kubeconfig}")
    if args.context:
        base.append(f"--context={args.context}")
    proc = subprocess.run([*base, *cmd, "-o", "json"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RecordError(f"kubectl {' '.join(cmd)}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def clean(obj: dict[str, Any]) -> dict[str, Any]:
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


def items(args: argparse.Namespace, kind: str, namespace: str | None) -> list[dict[str, Any]]:
    cmd = ["get", kind] + (["-n", namespace] if namespace else [])
    return [clean(o) for o in kubectl_json(args, *cmd).get("items", [])]


def event_time(event: dict[str, Any]) -> str:
    return str(
        event.get("eventTime")
        or event.get("lastTimestamp")
        or event.get("firstTimestamp")
        or event.get("metadata", {}).get("creationTimestamp")
        or ""
    )


def record(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    cluster: list[dict[str, Any]] = []
    for kind in CLUSTER_KINDS:
        for obj in items(args, kind, None):
            if kind.startswith("priorityclasses") and obj["metadata"]["name"].startswith("system-"):
                continue
            cluster.append(obj)
    namespace = [clean(kubectl_json(args, "get", "namespace", args.namespace))]
    for kind in NAMESPACE_KINDS:
        namespace.extend(items(args, kind, args.namespace))
    events = sorted(items(args, "events", args.namespace), key=event_time)
    return {"cluster": cluster, "namespace": namespace, "events": events}


def dump(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False) if objects else ""


def write_golden(out: Path, recorded: dict[str, list[dict[str, Any]]], header: str) -> list[Path]:
    files = {
        "nodes.yaml": recorded["cluster"],
        "workloads.yaml": recorded["namespace"],
        "events.yaml": recorded["events"],
    }
    written = []
    for name, objs in files.items():
        path = out / name
        path.write_text(header + dump(objs))
        written.append(path)
    return written


def write_demo(
    out: Path, recorded: dict[str, list[dict[str, Any]]], args: argparse.Namespace, header: str
) -> list[Path]:
    everything = recorded["cluster"] + recorded["namespace"] + recorded["events"]
    (out / "objects.yaml").write_text(
        header + yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": everything}, sort_keys=False)
    )
    version = kubectl_json(args, "version").get("serverVersion", {}).get("gitVersion", "")
    scenario = {
        "name": args.name or out.name,
        "description": args.description or f"recorded from namespace {args.namespace}",
        "serverVersion": version,
        "metrics": False,
        "objects": ["objects.yaml"],
        "timeline": [],
    }
    (out / "scenario.yaml").write_text(header + yaml.safe_dump(scenario, sort_keys=False))
    return [out / "objects.yaml", out / "scenario.yaml"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--namespace", "-n", required=True, help="the scenario's namespace")
    p.add_argument("--out", required=True, type=Path, help="the case folder to write (created)")
    p.add_argument("--format", choices=("golden", "demo"), default="golden")
    p.add_argument("--name", help="demo scenario name (default: the folder's name)")
    p.add_argument("--description", help="demo scenario description")
    p.add_argument("--kubectl", default="kubectl", help="kubectl binary (default: kubectl on PATH)")
    p.add_argument("--kubeconfig", help="kubeconfig (default: kubectl's)")
    p.add_argument("--context", help="kubeconfig context")
    args = p.parse_args(argv)
    try:
        recorded = record(args)
    except (RecordError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"record_scenario: error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    header = (
        f"# Recorded by scripts/record_scenario.py from namespace {args.namespace}; re-record, do not edit.\n"
    )
    if args.format == "golden":
        written = write_golden(args.out, recorded, header)
    else:
        written = write_demo(args.out, recorded, args, header)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
