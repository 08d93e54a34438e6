"""`unstick analyze` on input nobody here wrote: hostile or malformed files,
dumps taken long ago, dumps of other kube-scheduler versions, half dumps.

Each runs the command in-process (agent.cli.main): an exception escaping it
fails the test, as a traceback would fail a user."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.dumps import DumpFacts
from analyzers.ingest import MAX_ALIAS_EXPANSION, MAX_DEPTH, MAX_YAML_ALIASES, InputError, parse_documents
from tests.cli.inprocess import run

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests/scenarios/rollout-surge-deadlock/gpu-tracker"


def pod(name: str, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2024-03-01T10:00:00Z"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }
    for key, value in extra.items():
        doc[key] = {**doc.get(key, {}), **value}
    return doc


BILLION_LAUGHS = (
    "apiVersion: v1\nkind: List\n"
    "a: &a [{kind: Pod, metadata: {name: p, namespace: d}, spec: {containers: [{name: c}]}}]\n"
    + "".join(f"{n}: &{n} [{','.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))
    + "items: ["
    + ",".join(["*i"] * 9)
    + "]\n"
)


def long_string_aliased(times_ten: int) -> str:
    lines = ["kind: Pod", "metadata: {name: p, namespace: d, labels: {s: &s " + "x" * 1000 + "}}"]
    lines.append("x0: &a0 [" + ",".join(["*s"] * 10) + "]")
    for i in range(1, times_ten):
        lines.append(f"x{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]")
    lines.append(f"spec: {{nodeSelector: {{k: *a{times_ten - 1}}}, containers: [{{name: c}}]}}")
    return "\n".join(lines) + "\n"


HOSTILE: dict[str, tuple[str, str]] = {
    # file name: (content, what the warning must say)
    "items-int.json": ('{"kind": "List", "items": 5}', "items: expected an array, found integer"),
    "kind-int.json": ('{"kind": 5, "metadata": {"name": "x"}}', "kind: expected a string, found integer"),
    "kind-map.yaml": ("kind: {a: 1}\nmetadata: {name: x}\n", "kind: expected a string, found object"),
    "not-k8s.json": ('{"foo": 1}', "kind: missing (not a Kubernetes object)"),
    "containers-str.json": (
        json.dumps(pod("p1", spec={"containers": "nginx"})),
        "Pod ml/p1: spec.containers: expected an array, found string",
    ),
    "huge-int.json": (
        '{"kind": "Pod", "metadata": {"name": "p2"}, "spec": {"priority": ' + "9" * 5000 + "}}",
        "integer string conversion",
    ),
    "huge-int.yaml": (
        "kind: Pod\nmetadata: {name: p3}\nspec: {priority: " + "9" * 5000 + "}\n",
        "invalid YAML value",
    ),
    "pdb-percent.json": (
        json.dumps(
            {
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "b", "namespace": "ml"},
                "spec": {"minAvailable": "1e400%", "selector": {}},
            }
        ),
        "PodDisruptionBudget ml/b: spec.minAvailable: expected an integer or a percentage",
    ),
    "surge-percent.json": (
        json.dumps(
            {
                "kind": "Deployment",
                "metadata": {"name": "d", "namespace": "ml"},
                "spec": {"strategy": {"rollingUpdate": {"maxSurge": "1e400%"}}},
            }
        ),
        "Deployment ml/d: spec.strategy.rollingUpdate.maxSurge: expected an integer or a percentage",
    ),
    "deep.json": ("[" * 5000 + "]" * 5000, "nested deeper than 1024 levels (the JSON nesting limit)"),
    "deep.yaml": (
        "a: " + "[" * 1000 + "]" * 1000 + "\n",
        f"nested deeper than {MAX_DEPTH} levels (the nesting limit)",
    ),
    "self-alias.yaml": (
        "kind: Pod\nmetadata: &m {name: p4, labels: *m}\n",
        "a YAML alias refers to a node that contains it",
    ),
    "laughs.yaml": (BILLION_LAUGHS, "the alias expansion limit"),
    "long-label.yaml": (long_string_aliased(7), "the alias expansion limit"),
    "negative.json": (
        json.dumps(pod("p5", spec={"containers": [{"name": "c", "resources": {"requests": {"cpu": "-1"}}}]})),
        "Pod ml/p5: spec.containers[0].resources.requests.cpu: negative quantity '-1'",
    ),
    "overflow.json": (
        json.dumps(
            pod("p6", spec={"containers": [{"name": "c", "resources": {"requests": {"memory": "1e400"}}}]})
        ),
        "Pod ml/p6: spec.containers[0].resources.requests.memory: quantity '1e400' is larger than 2^63-1 units",
    ),
    "overflow-node.json": (
        json.dumps(
            {
                "kind": "Node",
                "metadata": {"name": "n9"},
                "status": {"allocatable": {"cpu": "10000000000000000"}},
            }
        ),
        "Node n9: status.allocatable.cpu: quantity '10000000000000000' is larger than 2^63-1 units",
    ),
}


@pytest.fixture
def hostile_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "dump"
    folder.mkdir()
    for name in ("nodes.yaml", "workloads.yaml", "events.yaml"):
        (folder / name).write_bytes((SEED / name).read_bytes())
    for name, (content, _) in HOSTILE.items():
        (folder / name).write_text(content)
    return folder


def test_each_bad_file_is_one_warning_naming_it_and_the_rest_is_analysed(hostile_folder: Path) -> None:
    code, out, err = run("analyze", str(hostile_folder), "--json")
    assert code == 0, err
    lines = err.splitlines()
    assert all(line.startswith("unstick: warning: ") for line in lines), err
    for name, (_, says) in HOSTILE.items():
        about = [line for line in lines if f"/{name}: " in line]
        assert len(about) == 1, (name, err)
        assert says in about[0], (name, about[0])
    assert [f["rule_id"] for f in json.loads(out)["findings"]] == ["rollout-surge-deadlock"]


def test_each_file_its_own_cluster_reports_bad_files_and_goes_on(hostile_folder: Path) -> None:
    code, out, err = run("analyze", str(hostile_folder), "--each")
    assert code == 0, err
    docs = {Path(d["source"]).name: d for d in map(json.loads, out.splitlines())}
    assert set(docs) == {*HOSTILE, "nodes.yaml", "workloads.yaml", "events.yaml"}
    for name, (_, says) in HOSTILE.items():
        assert "error" in docs[name] and any(says in w for w in docs[name]["warnings"]), (name, docs[name])


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        (BILLION_LAUGHS, "alias expansion limit"),
        (long_string_aliased(7), "alias expansion limit"),
        ("a: &a x\nb: [" + ",".join(["*a"] * (MAX_YAML_ALIASES + 1)) + "]\n", "alias limit"),
        ("a: " + "{b: " * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1) + "\n", "nesting limit"),
    ],
)
def test_yaml_limits_are_named_when_hit(text: str, limit: str) -> None:
    with pytest.raises(InputError, match=limit):
        list(parse_documents(text, "x.yaml"))


def test_aliases_within_the_limits_still_read() -> None:
    # A hand-written manifest may share a block by anchor; that is not an attack.
    text = "kind: Pod\nmetadata: {name: p, labels: &l {app: a}}\nspec: {nodeSelector: *l}\n"
    (doc,) = parse_documents(text, "x.yaml")
    assert doc["spec"]["nodeSelector"] == {"app": "a"}
    expanded = "s: &s " + "x" * 1000 + "\nl: [" + ",".join(["*s"] * 1000) + "]\n"
    assert MAX_ALIAS_EXPANSION > 1000 * 1000
    (doc,) = parse_documents(expanded, "x.yaml")
    assert len(doc["l"]) == 1000


def test_a_pod_on_a_node_not_in_the_dump_and_a_dump_without_nodes_say_so(tmp_path: Path) -> None:
    bound = pod("web-1", spec={"nodeName": "ghost-node"}, status={"phase": "Running"})
    pending = pod("trainer-1")
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "List", "items": [bound, pending]}))
    code, out, err = run("analyze", str(tmp_path / "pods.json"))
    assert code == 0, err
    assert "the dump holds 1 pending pod(s) but no Node objects" in err
    assert "not simulated: the dump holds no Node objects" in out
    assert "stale" not in out and "differs" not in out
    # With nodes: the pod on a node that is not there is named, with the node.
    (tmp_path / "nodes.yaml").write_bytes((SEED / "nodes.yaml").read_bytes())
    code, out, err = run("analyze", str(tmp_path))
    assert code == 0, err
    assert "pod ml/web-1 bound to node ghost-node, which is not in the dump" in err
    assert "no Node objects" not in err


def test_ages_count_from_the_dumps_own_latest_timestamp(tmp_path: Path) -> None:
    # Everything in this dump happened in March 2024: the pod waited 19 minutes, not years.
    code, out, err = run("analyze", str(SEED), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["now"]["source"] == "the dump's latest timestamp"
    facts = DumpFacts()
    for name in ("nodes.yaml", "workloads.yaml", "events.yaml"):
        for obj in parse_documents((SEED / name).read_bytes(), name):
            facts.observe(obj)
    assert facts.latest is not None
    from datetime import UTC, datetime

    assert doc["now"]["time"] == datetime.fromtimestamp(facts.latest, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    old = tmp_path / "old.json"
    waiting = pod(
        "trainer-1",
        status={
            "conditions": [
                {"type": "PodScheduled", "status": "False", "lastTransitionTime": "2024-03-01T10:00:01Z"}
            ]
        },
    )
    event = {
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "trainer-1"},
        "reason": "FailedScheduling",
        "message": "0/1 nodes are available: 1 Insufficient cpu.",
        "lastTimestamp": "2024-03-01T10:19:00Z",
    }
    old.write_text(json.dumps({"kind": "List", "items": [waiting, event]}))
    code, out, err = run("analyze", str(old), "--json")
    assert json.loads(out)["now"] == {"time": "2024-03-01T10:19:00Z", "source": "the dump's latest timestamp"}
    code, out, err = run("analyze", str(old), "--json", "--now", "2026-01-01T00:00:00Z")
    assert json.loads(out)["now"] == {"time": "2026-01-01T00:00:00Z", "source": "--now"}


def _facts(*objects: dict[str, Any]) -> DumpFacts:
    facts = DumpFacts()
    for obj in objects:
        facts.observe(obj)
    return facts


def _node(version: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": "n"}, "status": {"nodeInfo": {"kubeletVersion": version}}}


def _failed(message: str) -> dict[str, Any]:
    return {"kind": "Event", "metadata": {"name": "e"}, "reason": "FailedScheduling", "message": message}


def test_the_scheduler_version_is_inferred_from_the_dump_and_says_why() -> None:
    assert DumpFacts().kube_version() == (
        "1.33",
        "the default (the dump names no API server or kubelet version)",
    )
    version, why = _facts(_node("v1.27.4-eks-1"), _node("v1.28.9")).kube_version()
    assert version == "1.28.9" and "kubeletVersion" in why and "v1.28.9" in why
    # The scheduler's own words: "untolerated taint(s)" exists only from 1.34.2 on, and
    # 1.34-1.36 put DynamicResources' PostFilter text in front of the preemption clause.
    newest = _failed(
        "0/3 nodes are available: 3 node(s) had untolerated taint(s). no new claims to deallocate, preemption: …"
    )
    version, why = _facts(newest).kube_version()
    assert version == "1.34.2" and "untolerated taint(s)" in why
    # Without it (dynamicresources.go PostFilter at v1.37.0 returns no reason): 1.37 or later.
    bare = _failed("0/3 nodes are available: 3 node(s) had untolerated taint(s). preemption: …")
    version, why = _facts(bare).kube_version()
    assert version == "1.37" and "preemption without a DRA PostFilter text" in why
    assert (
        _facts(
            _failed(
                "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
            )
        ).kube_version()[0]
        == "1.33"
    )
    found = _failed(
        "0/3 nodes are available: 3 Insufficient cpu. preemption: found a potential placement for pod on node n1, preempting 2 victims"
    )
    assert _facts(found).kube_version()[0] == "1.37"
    # The wording outranks kubelets that lag behind the control plane.
    version, why = _facts(_node("v1.31.0"), newest).kube_version()
    assert version == "1.34.2" and "over the nodes' kubeletVersion v1.31.0" in why
    legacy = _failed("0/3 nodes are available: 3 node(s) had taint {a: b}, that the pod didn't tolerate.")
    assert _facts(legacy).kube_version()[0] == "1.23"
    double_dot = _failed(
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
    )
    assert _facts(double_dot).kube_version()[0] == "1.28"
    # `kubectl version -o json` in the dump: the API server's version decides.
    facts = _facts(_node("v1.28.9"))
    facts.note_server_version({"major": "1", "minor": "30", "gitVersion": "v1.30.2"})
    assert facts.kube_version() == ("1.30.2", "the API server version in the dump (v1.30.2)")
    assert facts.kube_version("1.29") == ("1.29", "--kube-version")


def test_kubectl_version_output_in_the_dump_is_read_not_warned_about(tmp_path: Path) -> None:
    for name in ("nodes.yaml", "workloads.yaml", "events.yaml"):
        (tmp_path / name).write_bytes((SEED / name).read_bytes())
    (tmp_path / "version.json").write_text(
        json.dumps(
            {
                "clientVersion": {"gitVersion": "v1.31.0"},
                "serverVersion": {"major": "1", "minor": "29", "gitVersion": "v1.29.7"},
            }
        )
    )
    code, out, err = run("analyze", str(tmp_path))
    assert code == 0 and err == "", err
    assert "kube-scheduler wording 1.29.7, from the API server version in the dump (v1.29.7)." in out


@pytest.mark.parametrize("bad", ["2", "1.x", "abc", "1.17", "1.99", "2.0", "1.30.1.2"])
def test_a_kube_version_outside_the_supported_range_is_one_line(bad: str) -> None:
    code, out, err = run("analyze", str(SEED), "--kube-version", bad)
    assert code == 2 and out == ""
    assert err.startswith("unstick: error: --kube-version: ") and err.count("\n") == 1, err


def test_terminal_escapes_in_names_and_messages_are_shown_escaped(tmp_path: Path) -> None:
    evil = pod(
        "trainer-1",
        metadata={"name": "evil\x1b]0;pwned\x07"},
        status={
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/10 nodes are available: 10 Insufficient cpu.\x1b[2J\x9b1m",
                }
            ]
        },
    )
    evil["spec"]["nodeName"] = ""
    (tmp_path / "pods.json").write_text(json.dumps(evil))
    (tmp_path / "nodes.yaml").write_bytes((SEED / "nodes.yaml").read_bytes())
    code, out, err = run("analyze", str(tmp_path))
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "ml/evil\\x1b]0;pwned\\x07" in out
    assert "Insufficient cpu.\\x1b[2J\\x9b1m" in out
    # JSON keeps the text as it is (escaped by JSON itself).
    code, out, err = run("analyze", str(tmp_path), "--json")
    assert json.loads(out)["pods"][0]["name"] == "evil\x1b]0;pwned\x07"


def test_kinds_unstick_does_not_read_may_hold_anything(tmp_path: Path) -> None:
    # Not validated (unstick does not read them), so noting their times must assume nothing.
    odd = [
        {"kind": "ConfigMap", "metadata": [1, 2], "data": 5},
        {"kind": "Service", "metadata": {"name": "s", "managedFields": 7}, "status": {"conditions": "x"}},
        {"kind": "Widget", "metadata": "w", "status": [1]},
    ]
    (tmp_path / "odd.json").write_text(json.dumps({"kind": "List", "items": odd}))
    (tmp_path / "nodes.yaml").write_bytes((SEED / "nodes.yaml").read_bytes())
    code, _, err = run("analyze", str(tmp_path))
    assert code == 0 and "internal error" not in err, err
    assert [line for line in err.splitlines() if "Widget" in line] == [
        f"unstick: warning: {tmp_path}/odd.json: Widget ?: kind 'Widget' is not analysed; skipped"
    ]
