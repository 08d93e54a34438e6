"""Each class of issue 10 ("Messages people paste") with fixed examples built from upstream
format strings: pieces of FitErrors, 1.2-1.5 FitErrors, terminal copies, the autoscalers'
words, every evictor's refusal, and the explain command's exit status and escaping."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from agent.commands import explain
from analyzers.messages import (
    AUTOSCALER,
    DO_NOT_DISRUPT,
    EVICTION,
    KUBELET_ADMISSION,
    MULTIPLE_PDBS,
    NODE_CONDITION,
    PDB_VIOLATION,
    SCHEDULING,
    parse_message_uncached,
)
from analyzers.messages import reasons as r
from analyzers.report import messages_agree
from analyzers.simulator import simulate
from tests.simulator.builders import node, pod, pod_of, snapshot

FULL = (
    "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/10 nodes are available: 1 No preemption victims found for "
    "incoming pod, 9 Preemption is not helpful for scheduling."
)


def counted(parsed: object) -> list[tuple[int | None, str]]:
    return [(x.count, x.code) for x in parsed.reasons]  # type: ignore[attr-defined]


def truncate_message(message: str) -> str:
    """kube-scheduler's truncateMessage (pkg/scheduler/schedule_one.go, 1.35): at most
    validation.NoteLengthLimit (1024) bytes, the last four being " ..."."""
    data = message.encode()
    return message if len(data) <= 1024 else data[: 1024 - 4].decode(errors="ignore") + " ..."


# --- 1. pieces -------------------------------------------------------------------------------


def test_an_event_cut_at_1024_bytes_keeps_its_whole_reasons_and_says_it_was_cut() -> None:
    histogram = {f"node(s) had untolerated taint {{team-{i}: x}}": 1 for i in range(40)}
    message = "0/40 nodes are available: " + ", ".join(sorted(f"{c} {t}" for t, c in histogram.items())) + "."
    event = truncate_message(message)
    assert len(event.encode()) == 1024 and event.endswith(" ...")
    parsed = parse_message_uncached(event)
    assert (parsed.kind, parsed.total_nodes, parsed.truncated) == (SCHEDULING, 40, True)
    assert all(x.code == r.UNTOLERATED_TAINT and x.count == 1 for x in parsed.reasons)
    whole = [x for x in parsed.reasons if x.info.taint is not None]
    assert {x.text for x in whole} <= set(histogram)
    assert len(whole) >= len(parsed.reasons) - 1
    assert parse_message_uncached(message).truncated is False  # the condition keeps the whole text


def test_the_preemption_tail_alone_is_never_the_filter_verdict() -> None:
    for text in (
        FULL[FULL.index("preemption:") :],
        '"' + FULL[FULL.index("preemption:") :],
        FULL[FULL.index("emption:") :],
        FULL[FULL.index("preemption:") + 12 :],  # without the marker at all
    ):
        parsed = parse_message_uncached(text)
        assert (parsed.format, parsed.reasons, parsed.total_nodes, parsed.head_missing) == (
            "preemption-only",
            (),
            None,
            True,
        ), text
        assert parsed.preemption is not None and parsed.preemption.verdict == "cannot-help"


def test_a_fragment_keeps_only_its_whole_reasons() -> None:
    parsed = parse_message_uncached(
        "didn't match Pod's node affinity/selector, 3 Insufficient cpu. preemption: 0/12 nodes are available: "
        "12 Preemption is not helpful for scheduling."
    )
    assert (parsed.format, parsed.total_nodes, parsed.head_missing) == ("fit-error", None, True)
    assert counted(parsed) == [(3, r.INSUFFICIENT_RESOURCE)]


@pytest.mark.parametrize(("head", "total"), [("0/x", None), ("0/N", None), ("0 /3", 3), ("0/ 3", 3)])
def test_a_redacted_or_spaced_total(head: str, total: int | None) -> None:
    parsed = parse_message_uncached(FULL.replace("0/10", head, 1).replace("0/10", "0/3"))
    assert parsed.total_nodes == total
    assert counted(parsed) == [(1, r.INSUFFICIENT_RESOURCE), (9, r.NODE_AFFINITY_MISMATCH)]
    assert parsed.preemption is not None and len(parsed.preemption.reasons) == 2


def test_a_header_cut_at_the_front_gives_an_unknown_total() -> None:
    parsed = parse_message_uncached("odes are available: 2 Insufficient cpu, 1 node(s) were unschedulable.")
    assert (parsed.total_nodes, parsed.head_missing) == (None, True)
    assert counted(parsed) == [(2, r.INSUFFICIENT_RESOURCE), (1, r.NODE_UNSCHEDULABLE)]


def test_two_digit_count_after_a_reason_with_a_comma() -> None:
    parsed = parse_message_uncached(
        "0/23 nodes are available: 1 node(s) had taint {a: b}, that the pod didn't tolerate, 22 Insufficient cpu."
    )
    assert [(x.count, x.text) for x in parsed.reasons] == [
        (1, "node(s) had taint {a: b}, that the pod didn't tolerate"),
        (22, "Insufficient cpu"),
    ]


def test_pieces_are_not_compared_with_the_simulation() -> None:
    simulated = FULL
    assert messages_agree(simulated, FULL) is True
    assert messages_agree(simulated, FULL[FULL.index("preemption:") :]) is None
    assert messages_agree(simulated, FULL[:60] + " ...") is None


# --- 2. 1.2-1.5 ------------------------------------------------------------------------------


def test_1_5_summary_with_every_separator() -> None:
    # plugin/pkg/scheduler/generic_scheduler.go (v1.5.8): "pod (%s) failed to fit in any node\n" +
    # "fit failure summary on nodes : %v" of "%v (%v)" strings joined with ", ".
    for sep in (", ", "\n", " ", " - "):
        text = f"pod (web-1) failed to fit in any node\nfit failure summary on nodes : Insufficient cpu (2){sep}MatchNodeSelector (1){sep}PodToleratesNodeTaints (3)"
        parsed = parse_message_uncached(text)
        assert (parsed.format, parsed.pod) == ("legacy-summary", "web-1"), sep
        assert counted(parsed) == [
            (2, r.INSUFFICIENT_RESOURCE),
            (1, r.NODE_AFFINITY_MISMATCH),
            (3, r.UNTOLERATED_TAINT),
        ], sep


def test_1_2_to_1_4_per_node_lines_are_counted() -> None:
    # v1.4.12: "fit failure on node (%s): %s\n" with the reasons joined by ", " (v1.2.7: ",").
    text = (
        "pod (web-1) failed to fit in any node\n"
        "fit failure on node (n1): Insufficient cpu, MatchNodeSelector\n"
        "fit failure on node (n2): Insufficient cpu\n"
        "fit failure on node (n3): PodFitsHostPorts,MatchNodeSelector\n"
    )
    parsed = parse_message_uncached(text)
    assert parsed.format == "legacy-per-node"
    assert sorted((x.text, x.count) for x in parsed.reasons) == [
        ("Insufficient cpu", 2),
        ("MatchNodeSelector", 2),
        ("PodFitsHostPorts", 1),
    ]


# --- 3. terminal copies ------------------------------------------------------------------------


def test_table_borders_aggregation_and_age_columns_are_stripped() -> None:
    text = (
        "┌──────────┬──────────────────┬─────────────────────────────────────────┐\n"
        "│ Warning  │ FailedScheduling │ (combined from similar events): 0/3 nod │\n"
        "│          │                  │ es are available: 3 Insufficient cpu. ( │\n"
        "│          │                  │ repeated 4 times)                       │\n"
        "└──────────┴──────────────────┴─────────────────────────────────────────┘"
    )
    parsed = parse_message_uncached(text)
    assert (parsed.total_nodes, counted(parsed)) == (3, [(3, r.INSUFFICIENT_RESOURCE)])
    assert parsed.message == "0/3 nodes are available: 3 Insufficient cpu."
    row = "| Warning | FailedScheduling | 3m (x25 over 10m) | 0/3 nodes are available: 3 Insufficient cpu. |"
    assert counted(parse_message_uncached(row)) == [(3, r.INSUFFICIENT_RESOURCE)]


# --- 4. autoscalers ----------------------------------------------------------------------------


def test_cluster_autoscaler_one_reason_per_line_and_its_skip_reasons() -> None:
    parsed = parse_message_uncached(
        "pod didn't trigger scale-up:\n2 node(s) didn't match Pod's node affinity/selector\n1 max node group size reached\n"
        "1 not ready for scale-up\n1 in backoff after failed scale-up\n1 max cluster cpu, memory limit reached"
    )
    assert (parsed.kind, parsed.format) == (AUTOSCALER, "ca-no-scale-up")
    assert counted(parsed) == [
        (2, r.NODE_AFFINITY_MISMATCH),
        (1, r.AUTOSCALER_LIMIT),
        (1, r.AUTOSCALER_NOT_READY),
        (1, r.AUTOSCALER_BACKOFF),
        (1, r.AUTOSCALER_LIMIT),
    ]


def test_karpenter_one_clause_per_nodepool_and_nomination() -> None:
    parsed = parse_message_uncached(
        'Failed to schedule pod, incompatible with nodepool "default", daemonset overhead={"cpu":"150m"}, '
        'did not tolerate taint (taint=gpu=true:NoSchedule); incompatible with nodepool "arm", '
        'daemonset overhead={"cpu":"150m"}, incompatible requirements, key kubernetes.io/arch'
    )
    assert (parsed.kind, parsed.format) == (AUTOSCALER, "karpenter-failed")
    assert [(x.count, x.code, x.info.object_name) for x in parsed.reasons] == [
        (1, r.UNTOLERATED_TAINT, "default"),
        (1, r.NODE_AFFINITY_MISMATCH, "arm"),
    ]
    assert parsed.reasons[0].info.taint == r.Taint("gpu", "true")
    nominated = parse_message_uncached("Pod should schedule on: nodeclaim/default-x7k2p, node/ip-10-0-1-2")
    assert nominated.notes == ("nodeclaim/default-x7k2p", "node/ip-10-0-1-2")
    # Karpenter v0.28-v0.31 nominated Machines (the CRD before NodeClaim), as pasted from describe.
    nominated = parse_message_uncached(
        "  Normal   Nominated    14m    karpenter    Pod should schedule on: machine/default-75hvl"
    )
    assert (nominated.format, nominated.notes) == ("karpenter-nominated", ("machine/default-75hvl",))


KARPENTER_ERROR = (
    'incompatible with nodepool "gpu", daemonset overhead={"cpu":"605m","memory":"1288Mi","pods":"12"}, '
    "did not tolerate nvidia.com/gpu=1:NoSchedule; "
    'incompatible with provisioner "app", daemonset overhead={"cpu":"605m","memory":"1288Mi","pods":"12"}, '
    'incompatible requirements, label "eks.amazonaws.com/nodegroup" does not have known values'
)


@pytest.mark.parametrize(
    "wrap",
    [
        lambda e: e,  # the error quoted alone
        lambda e: f"Failed to schedule pod, {e}",  # the FailedScheduling event
        lambda e: f"Could not schedule pod, {e}",  # the provisioner's log message
        # ... inside its JSON log line, with the fields after the message
        lambda e: json.dumps(
            {
                "level": "ERROR",
                "logger": "controller.provisioner",
                "message": f"Could not schedule pod, {e}",
                "commit": "17d6c05",
                "pod": "shop/web-0",
            }
        ),
        lambda e: json.dumps({"message": f"Could not schedule pod, {e}", "pod": "shop/web-0"}, indent=2),
    ],
)
def test_karpenter_errors_however_they_are_quoted(wrap: object) -> None:
    assert callable(wrap)
    parsed = parse_message_uncached(wrap(KARPENTER_ERROR))
    assert (parsed.kind, parsed.format) == (AUTOSCALER, "karpenter-failed")
    assert [(x.count, x.code, x.info.object_name) for x in parsed.reasons] == [
        (1, r.UNTOLERATED_TAINT, "gpu"),
        (1, r.NODE_AFFINITY_MISMATCH, "app"),
    ]
    assert parsed.reasons[0].info.taint == r.Taint("nvidia.com/gpu", "1")
    assert (
        parsed.reasons[1].text
        == 'incompatible requirements, label "eks.amazonaws.com/nodegroup" does not have known values'
    )
    assert "commit" not in parsed.message and "daemonset overhead" not in parsed.reasons[1].text


def markdown_links(text: str) -> str:
    """What GitHub, Slack or a Markdown editor makes of names that look like domains."""
    return re.sub(
        r"(?<![\w.])((?:[a-z0-9-]+\.)+(?:com|io|ca|dev|sh)(?:/[A-Za-z0-9._-]+)?)", r"[\1](http://\1)", text
    )


@pytest.mark.parametrize(
    "message",
    [
        FULL,
        "0/6 nodes are available: 2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, "
        "4 node(s) had untolerated taint {example.com/team: a-b.c}. preemption: 0/6 nodes are available: "
        "6 Preemption is not helpful for scheduling.",
        "pod didn't trigger scale-up: 4 node(s) had taint {node.statcan.gc.ca/purpose: system}, that the pod "
        "didn't tolerate, 1 Insufficient nvidia.com/gpu, 1 max node group size reached",
    ],
)
def test_markdown_autolinks_of_names_are_undone(message: str) -> None:
    linked = markdown_links(message)
    assert linked != message and "](http://" in linked
    assert parse_message_uncached(linked) == parse_message_uncached(message)


# --- 5. evictions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "namespace", "pod", "pdb"),
    [
        (
            "Pdb prevents pod evictions (PodDisruptionBudget=[shop/web-pdb])",
            PDB_VIOLATION,
            "shop",
            None,
            "web-pdb",
        ),
        (
            "Pdb prevents pod evictions (PodDisruptionBudget=shop/web-pdb)",
            PDB_VIOLATION,
            "shop",
            None,
            "web-pdb",
        ),
        ('PDB "shop/web-pdb" prevents pod evictions', PDB_VIOLATION, "shop", None, "web-pdb"),
        (
            "Eviction does not support multiple PDBs (PodDisruptionBudget(s)=[shop/a shop/b])",
            MULTIPLE_PDBS,
            None,
            None,
            None,
        ),
        (
            'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=shop/web-0)',
            DO_NOT_DISRUPT,
            "shop",
            "web-0",
            None,
        ),
        (
            'Cannot disrupt Node: Pod "shop/web-0" has "karpenter.sh/do-not-evict" annotation',
            DO_NOT_DISRUPT,
            "shop",
            "web-0",
            None,
        ),
        (
            "failed to evict pod shop/web-0 within allowed timeout (last error: Cannot evict pod as it would "
            "violate the pod's disruption budget.)",
            PDB_VIOLATION,
            "shop",
            "web-0",
            None,
        ),
        (
            'error when evicting pod (ignoring) "web-0": Cannot evict pod as it would violate the pod\'s disruption budget.',
            PDB_VIOLATION,
            None,
            "web-0",
            None,
        ),
        (
            '"Failed to evict pod" err="Cannot evict pod as it would violate the pod\'s disruption budget." pod="shop/web-0"',
            PDB_VIOLATION,
            "shop",
            "web-0",
            None,
        ),
        ("The node had condition: [DiskPressure]. ", NODE_CONDITION, None, None, None),
        (
            "Node didn't have enough resource: cpu, requested: 100, used: 3900, capacity: 4000",
            KUBELET_ADMISSION,
            None,
            None,
            None,
        ),
    ],
)
def test_every_evictor(text: str, kind: str, namespace: str | None, pod: str | None, pdb: str | None) -> None:
    parsed = parse_message_uncached(text)
    assert parsed.kind == EVICTION and parsed.eviction is not None
    ev = parsed.eviction
    assert (ev.kind, ev.namespace, ev.pod, ev.pdb) == (kind, namespace, pod, pdb)


def test_fail_safe_budget_beside_the_healthy_count_wording() -> None:
    sync = parse_message_uncached(
        "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web-pdb does not "
        'allow evicting pods currently because it failed sync: found no controllers for pod "web-0". Retry.'
    ).eviction
    assert sync is not None and (sync.pdb, sync.sync_failed) == ("web-pdb", True)
    assert sync.detail is not None and sync.detail.endswith('for pod "web-0". Retry.')
    needs = parse_message_uncached(
        "The disruption budget web-pdb needs 2 healthy pods and has 1 currently"
    ).eviction
    assert needs is not None and (needs.sync_failed, needs.desired_healthy, needs.current_healthy) == (
        False,
        2,
        1,
    )


# --- explain -----------------------------------------------------------------------------------


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="unstick")
    explain.register(parser.add_subparsers())
    args = parser.parse_args(["explain", *argv])
    return int(args.func(args))


def test_explain_exits_1_when_nothing_is_recognised(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("Back-off restarting failed container") == 1
    assert "does not recognise" in capsys.readouterr().out
    assert run("--json", "hello") == 1
    assert run(FULL) == 0


def test_explain_shows_terminal_escapes_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("evil \x1b]0;owned\x07 \x1b[2J text \u202e") == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;owned\\x07" in out and "\\x1b[2J" in out and "\\u202e" in out
    assert run("Pdb prevents pod evictions (PodDisruptionBudget=[shop/we\x1bb])") == 0
    assert "\x1b" not in capsys.readouterr().out


@pytest.mark.parametrize("minor", range(18, 36))
def test_a_missing_claim_is_attributed_to_the_plugin_that_printed_it(minor: int) -> None:
    """The parser names the plugin the simulator (and kube-scheduler) ran for every
    version: VolumeBinding while the claim is counted (before 1.26), VolumeRestrictions
    once the PreFilter rejection is printed without count. 1.26 alone prints the same
    uncounted text from VolumeBinding; nothing in the text tells it apart."""
    snap = snapshot(node("a"), node("b"), pod("p", pvcs=["data"]))
    verdict = simulate(snap, pod_of(snap, "p"), kube_version=f"1.{minor}")
    assert verdict.prefilter is not None
    parsed = parse_message_uncached(verdict.message)
    [reason] = parsed.reasons
    assert reason.code == r.PVC_NOT_FOUND
    assert reason.as_dict()["plugin"] == reason.plugin
    if minor == 26:
        assert (verdict.prefilter.plugin, reason.plugin) == ("VolumeBinding", "VolumeRestrictions")
    else:
        assert reason.plugin == verdict.prefilter.plugin


def test_autoscaler_and_kueue_messages_quoted_in_prose_end_at_their_closing_quote() -> None:
    """cluster-autoscaler and Kueue print no final full stop: a quote around the message
    is what ends it, never the words after it (apostrophes inside are not quotes)."""
    parsed = parse_message_uncached(
        "message: 'pod didn't trigger scale-up: 2 max node group size reached' at 10:00"
    )
    assert [(x.count, x.text, x.code) for x in parsed.reasons] == [
        (2, "max node group size reached", r.AUTOSCALER_LIMIT)
    ]
    parsed = parse_message_uncached(
        'kueue: "couldn\'t assign flavors to pod set main: flavor a100 not found" (w-1)'
    )
    assert [x.text for x in parsed.reasons] == ["flavor a100 not found"]
    empty = parse_message_uncached('Event: "pod didn\'t trigger scale-up:" (빈 메시지)')
    assert (empty.format, empty.reasons) == ("ca-no-scale-up", ())
    assert "considered none for the pod" in explain.render_text(empty)
