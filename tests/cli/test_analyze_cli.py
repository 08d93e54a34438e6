"""`unstick analyze` end to end, as a subprocess, on the bundled seed dump and on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests/scenarios/rollout-surge-deadlock/gpu-tracker"


def unstick(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_analyze_json_follows_the_output_contract() -> None:
    proc = unstick("analyze", str(SEED), "--json", "--now", "2026-11-20T10:12:00Z")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (pod,) = doc["pods"]
    assert (pod["namespace"], pod["name"]) == ("vision", "vision-object-tracker-7c9d4f8b6-q7wz4")
    sched = pod["scheduling"]
    assert sched["agrees"] is True
    assert sched["message"] == sched["event_message"]
    nodes = {n["node"]: n for n in sched["nodes"]}
    assert len(nodes) == 10 and not any(n["fits"] for n in nodes.values())
    assert nodes["tracker-node"]["filters"][0]["plugin"] == "NodeResourcesFit"
    assert nodes["tracker-node"]["filters"][0]["code"] == "Unschedulable"
    assert nodes["worker-01"]["filters"][0] == {
        **nodes["worker-01"]["filters"][0],
        "plugin": "NodeAffinity",
        "code": "UnschedulableAndUnresolvable",
    }
    (dep,) = doc["deployments"]
    assert (dep["replicas"], dep["max_surge"], dep["max_unavailable"]) == (1, 1, 0)
    (finding,) = doc["findings"]
    assert finding["rule_id"] == "rollout-surge-deadlock"
    assert finding["subject"] == {
        "kind": "Deployment",
        "namespace": "vision",
        "name": "vision-object-tracker",
    }
    assert any(r["verified"] for r in finding["remedies"])
    assert doc["pdbs"] == []


def test_analyze_human_output_puts_findings_first() -> None:
    proc = unstick("analyze", str(SEED), "--now", "2026-11-20T10:12:00Z")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.index("FINDINGS") < out.index("UNSCHEDULED PODS")
    assert "maxUnavailable: 1" in out and "the simulation agrees with the scheduler" in out


def test_analyze_reads_stdin_and_each_file_as_its_own_cluster(tmp_path: Path) -> None:
    data = b"".join((SEED / name).read_bytes() + b"\n---\n" for name in ("nodes.yaml", "workloads.yaml"))
    proc = unstick("analyze", "-", "--json", stdin=data)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["findings"][0]["rule_id"] == "rollout-surge-deadlock"
    (tmp_path / "a.yaml").write_bytes(data)
    (tmp_path / "b.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: lonely}\n")
    proc = unstick("analyze", str(tmp_path), "--each")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [len(d["findings"]) for d in lines] == [1, 0]
    assert lines[0]["source"].endswith("a.yaml")


def test_analyze_pod_filter() -> None:
    proc = unstick("analyze", str(SEED), "--json", "--pod", "vision/vision-object-tracker-7c9d4f8b6-q7wz4")
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["pods"]) == 1
    proc = unstick("analyze", str(SEED), "--pod", "vision/nope")
    assert proc.returncode == 2 and "no such pod" in proc.stderr
    proc = unstick("analyze", str(SEED), "--pod", "justaname")
    assert proc.returncode == 2 and "NAMESPACE/NAME" in proc.stderr


def test_bad_input_gives_one_line_errors_never_a_traceback(tmp_path: Path) -> None:
    proc = unstick("analyze", str(tmp_path / "missing.yaml"))
    assert proc.returncode == 2 and "no such file or folder" in proc.stderr and "Traceback" not in proc.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "List", "items": [')
    proc = unstick("analyze", str(broken))
    assert proc.returncode == 2
    assert "broken.json: invalid JSON" in proc.stderr and "Traceback" not in proc.stderr
    # A bad object beside good ones: a warning naming file and object, and the rest is analysed.
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(
        (SEED / "nodes.yaml").read_text()
        + "\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad, namespace: x}\n"
        + "spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n"
    )
    proc = unstick("analyze", str(mixed), "--json")
    assert proc.returncode == 0
    assert (
        "mixed.yaml: Pod x/bad: spec.containers[0].resources.requests.cpu: invalid quantity 'lots'"
        in proc.stderr
    )
    assert json.loads(proc.stdout)["pods"] == []
    proc = unstick("analyze", str(SEED), "--now", "yesterday")
    assert proc.returncode == 2 and "--now" in proc.stderr


def test_eviction_log_from_a_hanging_drain(tmp_path: Path) -> None:
    dump = ROOT / "tests/scenarios/pdb-blocks-eviction/seed-004-drain-storefront"
    log = tmp_path / "drain.log"
    log.write_text(
        "node/node-2 already cordoned\n"
        "evicting pod shop/storefront-5d8f7c9b6d-k8x2q\n"
        'error when evicting pods/"storefront-5d8f7c9b6d-k8x2q" -n "shop" (will retry after 5s): '
        "Cannot evict pod as it would violate the pod's disruption budget.\n"
    )
    # node-2 no longer cordoned: only the drain's own output says an eviction is refused.
    import yaml

    nodes = yaml.safe_load((dump / "nodes.yaml").read_text())
    for node in nodes["items"]:
        if node["metadata"]["name"] == "node-2":
            node["spec"].pop("unschedulable", None)
            node["spec"].pop("taints", None)
    case = tmp_path / "case"
    case.mkdir()
    (case / "nodes.yaml").write_text(yaml.safe_dump(nodes))
    for name in ("workloads.yaml", "events.yaml"):
        (case / name).write_text((dump / name).read_text())
    args = ("analyze", str(case), "--json", "--now", "2026-11-20T10:32:00Z")
    proc = unstick(*args)
    assert proc.returncode == 0, proc.stderr
    assert [f["rule_id"] for f in json.loads(proc.stdout)["findings"]] == []
    proc = unstick(*args, "--eviction-log", str(log))
    assert proc.returncode == 0, proc.stderr
    (finding,) = json.loads(proc.stdout)["findings"]
    assert finding["rule_id"] == "pdb-blocks-eviction"
    assert "storefront-5d8f7c9b6d-k8x2q" in finding["explanation"]
    quiet = tmp_path / "quiet.log"
    quiet.write_text("node/node-2 cordoned\n")
    proc = unstick("analyze", str(dump), "--eviction-log", str(quiet), "--json")
    assert proc.returncode == 0 and "no eviction errors found" in proc.stderr
    proc = unstick("analyze", "-", "--eviction-log", "-")
    assert proc.returncode == 2 and "stdin cannot be both" in proc.stderr
