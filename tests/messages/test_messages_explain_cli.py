"""``unstick explain``: in-process through its own parser, and end to end as
``python -m agent explain`` subprocesses (run concurrently to stay fast)."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from agent.cli import UserError
from agent.commands import explain
from analyzers.messages import parse_message, parse_message_uncached

ROOT = Path(__file__).resolve().parents[2]
GPU = (
    "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/10 nodes are available: 1 No preemption victims found for "
    "incoming pod, 9 Preemption is not helpful for scheduling."
)
PDB = (
    'error when evicting pods/"web-0" -n "shop" (will retry after 5s): Cannot evict pod as it would violate '
    "the pod's disruption budget. The disruption budget web-pdb needs 2 healthy pods and has 2 currently"
)


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="unstick")
    explain.register(parser.add_subparsers())
    args = parser.parse_args(["explain", *argv])
    return int(args.func(args))


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(GPU) == 0
    out = capsys.readouterr().out
    assert "0 of 10 nodes can run the pod" in out
    assert "1 node     Insufficient nvidia.com/gpu" in out
    assert "insufficient-resource (NodeResourcesFit)" in out
    assert "9 nodes    node(s) didn't match Pod's node affinity/selector" in out
    assert "node-affinity-mismatch (NodeAffinity)" in out
    assert "Preemption: cannot help" in out


def test_unquoted_words_are_joined(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(*["0/3", "nodes", "are", "available:", "3", "Insufficient", "cpu."]) == 0
    assert "3 nodes    Insufficient cpu" in capsys.readouterr().out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(GPU, "--json") == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc == parse_message_uncached(GPU).as_dict()


def test_message_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(
        sys, "stdin", io.StringIO("Events:\n  Warning  FailedScheduling  3m  default-scheduler  " + GPU)
    )
    assert run("-", "--json") == 0
    assert orjson.loads(capsys.readouterr().out)["total_nodes"] == 10


@pytest.mark.parametrize("argv", [(), ("",), ("  ",)])
def test_empty_message_is_a_usage_error(argv: tuple[str, ...]) -> None:
    with pytest.raises(UserError, match="needs a MESSAGE"):
        run(*argv)


def test_message_and_jsonl_together_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not both"):
        run("x", "--jsonl", str(tmp_path / "a.jsonl"))


def test_missing_jsonl_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read"):
        run("--jsonl", str(tmp_path / "missing.jsonl"))


def test_render_eviction_and_unknown() -> None:
    text = explain.render_text(parse_message_uncached(PDB))
    assert "Eviction refused" in text
    assert "pod: shop/web-0" in text
    assert "PodDisruptionBudget: shop/web-pdb" in text
    assert "needs 2 healthy pods and has 2" in text and "disruptionsAllowed is 0" in text
    multi = explain.render_text(
        parse_message_uncached(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        )
    )
    assert "more than one PodDisruptionBudget" in multi
    assert "does not recognise" in explain.render_text(parse_message_uncached("hello"))


def test_render_prefilter_note_and_truncation() -> None:
    text = explain.render_text(
        parse_message_uncached(
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: "
            "not eligible due to preemptionPolicy=Never."
        )
    )
    assert "Rejected at PreFilter" in text
    assert "PreFilter  pod has unbound immediate PersistentVolumeClaims" in text
    assert "Preemption: not attempted: not eligible due to preemptionPolicy=Never." in text
    cut = explain.render_text(parse_message_uncached("0/3 nodes are available: 3 Insufficient c ..."))
    assert "cut short (kube-scheduler cuts event messages at 1024 bytes)" in cut
    # Without kube-scheduler's mark, a missing full stop is more likely a copy that stopped early.
    copied = explain.render_text(parse_message_uncached("0/3 nodes are available: 3 Insufficient c"))
    assert "ends without its final full stop" in copied and "1024" not in copied


def test_jsonl_batch_keeps_order_and_reports_bad_lines(tmp_path: Path) -> None:
    lines = [
        orjson.dumps(GPU),
        orjson.dumps({"message": PDB, "involvedObject": {"name": "web-0"}}),
        b"not json",
        b"42",
        b'{"reason": "FailedScheduling"}',
        b"",
        orjson.dumps({"note": "0/3 nodes are available: 3 Insufficient cpu."}),
        orjson.dumps("   "),
        orjson.dumps(GPU),
    ]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    out = io.BytesIO()
    assert explain.run_jsonl(str(path), out) == 0
    docs = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert [d["line"] for d in docs] == list(range(1, 10))
    assert docs[0]["kind"] == "scheduling" and docs[0]["total_nodes"] == 10
    assert docs[1]["kind"] == "eviction" and docs[1]["eviction"]["pod"] == "web-0"
    assert docs[2]["error"].startswith("invalid JSON")
    assert "got int" in docs[3]["error"]
    assert docs[4]["error"] == 'object has no string "message"'
    assert docs[5]["error"].startswith("invalid JSON")
    assert docs[6]["reasons"][0]["code"] == "insufficient-resource"
    assert docs[7]["error"] == "empty message"
    assert {k: v for k, v in docs[8].items() if k != "line"} == {
        k: v for k, v in docs[0].items() if k != "line"
    }


def test_jsonl_repeats_are_served_from_the_cache() -> None:
    message = GPU + " (cache test)"
    batch = [orjson.dumps(message)] * 50
    before = parse_message.cache_info()
    out = list(explain.explain_lines(batch))
    after = parse_message.cache_info()
    assert len(out) == 50
    assert after.hits - before.hits >= 49
    assert after.misses - before.misses <= 1


def test_end_to_end_subprocesses(tmp_path: Path) -> None:
    # Two processes at once: `python -m agent` start-up dominates (other commands' imports).
    batch = tmp_path / "batch.jsonl"
    batch.write_bytes(orjson.dumps(GPU) + b"\n" + b"oops\n" + orjson.dumps({"message": PDB}) + b"\n")
    command = [sys.executable, "-m", "agent", "explain"]
    with batch.open("rb") as stdin:
        runs = {
            "text": subprocess.Popen(
                [*command, GPU], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            ),
            "jsonl": subprocess.Popen(
                [*command, "--jsonl", "-"],
                cwd=ROOT,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            ),
        }
        results = {name: (proc.communicate(timeout=60), proc.returncode) for name, proc in runs.items()}

    (out, err), code = results["text"]
    assert code == 0, err
    assert b"0 of 10 nodes can run the pod" in out and b"node-affinity-mismatch (NodeAffinity)" in out

    (out, err), code = results["jsonl"]
    assert code == 0, err
    docs = [orjson.loads(line) for line in out.splitlines()]
    assert [d.get("kind", "error") for d in docs] == ["scheduling", "error", "eviction"]
    assert [d["line"] for d in docs] == [1, 2, 3]
    assert docs[0]["total_nodes"] == 10
    eviction = docs[2]["eviction"]
    assert (eviction["kind"], eviction["pod"], eviction["namespace"]) == ("pdb-violation", "web-0", "shop")
    assert (eviction["pdb"], eviction["desired_healthy"], eviction["current_healthy"]) == ("web-pdb", 2, 2)


def test_usage_error_through_the_cli_main(capsys: pytest.CaptureFixture[str]) -> None:
    from agent.cli import main

    assert main(["explain"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("unstick: error: explain needs a MESSAGE")
    assert err.count("\n") == 1


def test_render_bare_reason_has_no_prefilter_label_or_preemption_line() -> None:
    text = explain.render_text(parse_message_uncached("Insufficient cpu"))
    assert "PreFilter" not in text
    assert "Preemption" not in text
    assert "-          Insufficient cpu" in text
