"""FailedScheduling messages of every kube-scheduler generation, as users paste them.

Layouts: ``FitError.Error`` in ``pkg/scheduler/framework/types.go`` (1.19+; before
that ``pkg/scheduler/core/generic_scheduler.go``), the preemption suffix from
``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go``.
"""

from __future__ import annotations

import pytest

from analyzers.messages import SCHEDULING, UNKNOWN, parse_message, parse_message_uncached
from analyzers.messages import reasons as r
from analyzers.messages.model import CANNOT_HELP, NO_CANDIDATE, NOT_ELIGIBLE, VERDICT_UNKNOWN, ParsedMessage
from analyzers.messages.reasons import Taint

SEED_000 = (
    "0/10 nodes are available: 1 Insufficient nvidia.com/gpu, 9 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/10 nodes are available: 1 No preemption victims found for "
    "incoming pod, 9 Preemption is not helpful for scheduling."
)


def pairs(parsed: ParsedMessage) -> list[tuple[int | None, str, str]]:
    return [(x.count, x.text, x.code) for x in parsed.reasons]


def preemption_pairs(parsed: ParsedMessage) -> list[tuple[int | None, str]]:
    assert parsed.preemption is not None
    return [(x.count, x.code) for x in parsed.preemption.reasons]


def test_seed_000_gpu_rollout_deadlock() -> None:
    parsed = parse_message_uncached(SEED_000)
    assert parsed.kind == SCHEDULING
    assert parsed.format == "fit-error"
    assert parsed.total_nodes == 10
    assert pairs(parsed) == [
        (1, "Insufficient nvidia.com/gpu", r.INSUFFICIENT_RESOURCE),
        (9, "node(s) didn't match Pod's node affinity/selector", r.NODE_AFFINITY_MISMATCH),
    ]
    assert parsed.reasons[0].info.resource == "nvidia.com/gpu"
    assert parsed.reasons[1].plugin == "NodeAffinity"
    assert parsed.preemption is not None
    assert parsed.preemption.total_nodes == 10
    assert preemption_pairs(parsed) == [(1, r.PREEMPTION_NO_VICTIMS), (9, r.PREEMPTION_NOT_HELPFUL)]
    assert parsed.preemption.note is None
    assert parsed.preemption.verdict == CANNOT_HELP
    assert parsed.truncated is False
    assert parsed.message == SEED_000


def test_prefilter_reason_without_count_and_double_full_stop_of_1_26() -> None:
    parsed = parse_message_uncached(
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: "
        "0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
    )
    assert parsed.format == "fit-error-prefilter"
    assert pairs(parsed) == [(None, "pod has unbound immediate PersistentVolumeClaims", r.VOLUME_UNBOUND_PVC)]
    assert preemption_pairs(parsed) == [(3, r.PREEMPTION_NOT_HELPFUL)]
    assert parsed.preemption is not None and parsed.preemption.reasons[0].text == (
        "Preemption is not helpful for scheduling"
    )
    assert parsed.notes == ()
    assert parsed.truncated is False


def test_prefilter_reason_printed_with_count_before_1_26() -> None:
    parsed = parse_message_uncached(
        "0/1 nodes are available: 1 pod has unbound immediate PersistentVolumeClaims."
    )
    assert pairs(parsed) == [(1, "pod has unbound immediate PersistentVolumeClaims", r.VOLUME_UNBOUND_PVC)]
    assert parsed.format == "fit-error"


def test_prefilter_pvc_not_found() -> None:
    parsed = parse_message_uncached(
        '0/3 nodes are available: persistentvolumeclaim "data-web-0" not found. preemption: '
        "0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    assert pairs(parsed) == [(None, 'persistentvolumeclaim "data-web-0" not found', r.PVC_NOT_FOUND)]
    assert parsed.reasons[0].info.object_name == "data-web-0"


@pytest.mark.parametrize(
    ("text", "note", "verdict"),
    [
        (
            "0/5 nodes are available: 5 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.",
            "not eligible due to preemptionPolicy=Never",
            NOT_ELIGIBLE,
        ),
        (
            "0/2 nodes are available: 2 Insufficient memory. preemption: not eligible due to a terminating pod "
            "on the nominated node.",
            "not eligible due to a terminating pod on the nominated node",
            NOT_ELIGIBLE,
        ),
        (
            "0/2 nodes are available: 2 Insufficient memory. preemption: no candidate node for preemption",
            "no candidate node for preemption",
            CANNOT_HELP,
        ),
        (
            "0/2 nodes are available: 2 Insufficient memory. preemption: something a plugin said.",
            "something a plugin said",
            VERDICT_UNKNOWN,
        ),
    ],
)
def test_preemption_notes_without_counts(text: str, note: str, verdict: str) -> None:
    parsed = parse_message_uncached(text)
    assert parsed.preemption is not None
    assert parsed.preemption.note == note
    assert parsed.preemption.reasons == ()
    assert parsed.preemption.total_nodes is None
    assert parsed.preemption.verdict == verdict
    assert parsed.reasons[0].code == r.INSUFFICIENT_RESOURCE


def test_preemption_that_finds_nodes_failing_for_other_reasons() -> None:
    parsed = parse_message_uncached(
        "0/4 nodes are available: 4 Insufficient cpu. preemption: 0/4 nodes are available: "
        "1 Insufficient memory, 3 No preemption victims found for incoming pod."
    )
    assert preemption_pairs(parsed) == [(1, r.INSUFFICIENT_RESOURCE), (3, r.PREEMPTION_NO_VICTIMS)]
    assert parsed.preemption is not None and parsed.preemption.verdict == NO_CANDIDATE


def test_taint_reason_with_comma_of_1_18_to_1_23() -> None:
    parsed = parse_message_uncached(
        "0/3 nodes are available: 1 node(s) had taint {node-role.kubernetes.io/master: }, that the pod "
        "didn't tolerate, 2 Insufficient memory."
    )
    assert pairs(parsed) == [
        (
            1,
            "node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't tolerate",
            r.UNTOLERATED_TAINT,
        ),
        (2, "Insufficient memory", r.INSUFFICIENT_RESOURCE),
    ]
    assert parsed.reasons[0].info.taint == Taint("node-role.kubernetes.io/master", "")


def test_two_comma_taints_in_a_row() -> None:
    parsed = parse_message_uncached(
        "0/5 nodes are available: 2 node(s) had taint {a: b}, that the pod didn't tolerate, "
        "3 node(s) had taint {c: }, that the pod didn't tolerate."
    )
    assert [(x.count, x.info.taint) for x in parsed.reasons] == [(2, Taint("a", "b")), (3, Taint("c", ""))]


def test_untolerated_taints_of_1_24_and_newest() -> None:
    parsed = parse_message_uncached(
        "0/2 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling."
    )
    assert [x.info.taint for x in parsed.reasons] == [
        Taint("node-role.kubernetes.io/control-plane", ""),
        Taint("node.kubernetes.io/unreachable", ""),
    ]
    newest = parse_message_uncached(
        "0/17 nodes are available: 17 node(s) had untolerated taint(s). no new claims to deallocate, "
        "preemption: 0/17 nodes are available: 17 Preemption is not helpful for scheduling."
    )
    assert pairs(newest) == [(17, "node(s) had untolerated taint(s)", r.UNTOLERATED_TAINT)]
    assert newest.reasons[0].info.taint is None
    assert newest.notes == ("no new claims to deallocate",)
    assert preemption_pairs(newest) == [(17, r.PREEMPTION_NOT_HELPFUL)]


def test_dra_reasons_and_still_not_schedulable_note() -> None:
    parsed = parse_message_uncached(
        "0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't match Pod's node "
        "affinity/selector. still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is "
        "not helpful for scheduling."
    )
    assert [x.code for x in parsed.reasons] == [r.DRA_CANNOT_ALLOCATE, r.NODE_AFFINITY_MISMATCH]
    assert parsed.reasons[0].plugin == "DynamicResources"
    assert parsed.notes == ("still not schedulable",)


@pytest.mark.parametrize(
    "text",
    [
        # 1.5-1.6: the constant ends with ':' and the format adds ': '
        "No nodes are available that match all of the following predicates:: Insufficient cpu (2), "
        "MatchNodeSelector (1).",
        # 1.7
        "No nodes are available that match all of the predicates: Insufficient cpu (2), MatchNodeSelector (1).",
    ],
)
def test_legacy_predicates_layout(text: str) -> None:
    parsed = parse_message_uncached(text)
    assert parsed.kind == SCHEDULING
    assert parsed.format == "legacy-predicates"
    assert parsed.total_nodes is None
    assert pairs(parsed) == [
        (2, "Insufficient cpu", r.INSUFFICIENT_RESOURCE),
        (1, "MatchNodeSelector", r.NODE_AFFINITY_MISMATCH),
    ]
    assert parsed.reasons[1].plugin == "NodeAffinity"


def test_predicate_names_in_the_counted_layout_of_1_8() -> None:
    parsed = parse_message_uncached(
        "0/6 nodes are available: 1 CheckNodeCondition, 1 NoVolumeZoneConflict, 1 PodToleratesNodeTaints, "
        "2 Insufficient cpu, 1 MatchNodeSelector."
    )
    assert [(x.count, x.code) for x in parsed.reasons] == [
        (1, r.NODE_NOT_READY),
        (1, r.VOLUME_ZONE_CONFLICT),
        (1, r.UNTOLERATED_TAINT),
        (2, r.INSUFFICIENT_RESOURCE),
        (1, r.NODE_AFFINITY_MISMATCH),
    ]


def test_predicate_descriptions_of_1_10_to_1_17() -> None:
    parsed = parse_message_uncached(
        "0/4 nodes are available: 1 node(s) had taints that the pod didn't tolerate, 3 node(s) didn't match "
        "node selector."
    )
    assert [(x.count, x.code) for x in parsed.reasons] == [
        (1, r.UNTOLERATED_TAINT),
        (3, r.NODE_AFFINITY_MISMATCH),
    ]
    assert parsed.preemption is None


def test_kubectl_describe_event_columns() -> None:
    parsed = parse_message_uncached(
        "  Warning  FailedScheduling  3m (x25 over 10m)  default-scheduler  0/3 nodes are available: "
        "3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: "
        "3 Preemption is not helpful for scheduling."
    )
    assert parsed.total_nodes == 3
    assert pairs(parsed) == [
        (3, "node(s) didn't match Pod's node affinity/selector", r.NODE_AFFINITY_MISMATCH)
    ]
    assert parsed.message.startswith("0/3 nodes are available:")


def test_kubectl_get_events_wide_row_with_columns_after_the_message() -> None:
    parsed = parse_message_uncached(
        "3m11s       Warning   FailedScheduling   pod/testdp-7d948bd89d-vc9b9   0/3 nodes are available: "
        "3 Insufficient cpu.   default-scheduler   10m   25   testdp-7d948bd89d-vc9b9.17a2b3c4d5e6f7"
    )
    assert pairs(parsed) == [(3, "Insufficient cpu", r.INSUFFICIENT_RESOURCE)]
    assert parsed.preemption is None
    assert parsed.notes == ()
    assert parsed.truncated is False


def test_get_events_row_with_dra_note_and_mixed_preemption() -> None:
    parsed = parse_message_uncached(
        "3m11s       Warning   FailedScheduling   Pod/testdp-7d948bd89d-vc9b9   0/3 nodes are available: 1 "
        "node(s) had untolerated taint(s), 2 node(s) didn't match pod anti-affinity rules. no new claims to "
        "deallocate, preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No "
        "preemption victims found for incoming pod."
    )
    assert [(x.count, x.code) for x in parsed.reasons] == [
        (1, r.UNTOLERATED_TAINT),
        (2, r.POD_ANTI_AFFINITY_MISMATCH),
    ]
    assert preemption_pairs(parsed) == [(1, r.PREEMPTION_NOT_HELPFUL), (2, r.PREEMPTION_NO_VICTIMS)]


def test_message_wrapped_over_indented_lines() -> None:
    parsed = parse_message_uncached(
        "Warning  FailedScheduling  0/3 nodes are available:\n"
        "                           1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: },\n"
        "                           1 node(s) were unschedulable,\n"
        "                           1 node(s) didn't match PersistentVolume's node affinity.\n"
    )
    assert [(x.count, x.code) for x in parsed.reasons] == [
        (1, r.UNTOLERATED_TAINT),
        (1, r.NODE_UNSCHEDULABLE),
        (1, r.VOLUME_NODE_AFFINITY_CONFLICT),
    ]
    assert parsed.truncated is False


def test_wrapped_lines_behind_comment_markers_and_an_ellipsis() -> None:
    parsed = parse_message_uncached(
        "# Warning  FailedScheduling  ...  0/3 nodes are available: 1 node(s) didn't match Pod's node "
        "affinity/selector,\n#   1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) had untolerated "
        "taint {node-role.kubernetes.io/control-plane: }. ..."
    )
    assert [x.info.taint for x in parsed.reasons] == [
        None,
        Taint("dedicated", "gpu"),
        Taint("node-role.kubernetes.io/control-plane", ""),
    ]


def test_ellipsis_before_preemption() -> None:
    parsed = parse_message_uncached(
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match Pod's node "
        "affinity/selector. ...preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    assert len(parsed.reasons) == 2
    assert parsed.notes == ()
    assert preemption_pairs(parsed) == [(3, r.PREEMPTION_NOT_HELPFUL)]


def test_several_events_pasted_at_once_are_not_mixed_up() -> None:
    parsed = parse_message_uncached(
        "  Warning  FailedScheduling  6h59m (x18 over 8h)  default-scheduler  0/1 nodes are available: 1 "
        "node(s) had untolerated taint {node.kubernetes.io/disk-pressure: }.\n"
        "  Warning  FailedScheduling  149m (x2 over 154m)  default-scheduler  0/2 nodes are available: 2 "
        "Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.\n"
    )
    assert parsed.total_nodes == 1
    assert pairs(parsed) == [
        (1, "node(s) had untolerated taint {node.kubernetes.io/disk-pressure: }", r.UNTOLERATED_TAINT)
    ]
    assert parsed.preemption is None  # the second event's verdict is not ours
    assert "Insufficient cpu" not in parsed.message


@pytest.mark.parametrize(
    "text",
    [
        '"0/1 nodes are available: 1 Too many pods."',
        "'0/1 nodes are available: 1 Too many pods.'",
        '    "message": "0/1 nodes are available: 1 Too many pods.",',
        'message: "0/1 nodes are available: 1 Too many pods."',
        '{\\"message\\": \\"0/1 nodes are available: 1 Too many pods.\\"}',
        "(combined from similar events): 0/1 nodes are available: 1 Too many pods.",
        'I0612 10:00:00.000000 1 schedule_one.go:1000] "Unable to schedule pod" err="0/1 nodes are '
        'available: 1 Too many pods."',
    ],
)
def test_quotes_json_and_log_prefixes(text: str) -> None:
    parsed = parse_message_uncached(text)
    assert parsed.total_nodes == 1
    assert pairs(parsed) == [(1, "Too many pods", r.TOO_MANY_PODS)]
    assert parsed.truncated is False


def test_truncated_message_keeps_what_it_has() -> None:
    parsed = parse_message_uncached(
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes "
        "are available: 1 P"
    )
    assert parsed.truncated is True
    assert pairs(parsed) == [
        (1, "node(s) didn't match Pod's node affinity/selector", r.NODE_AFFINITY_MISMATCH)
    ]
    assert parsed.preemption is not None
    assert [(x.count, x.text, x.code) for x in parsed.preemption.reasons] == [(1, "P", r.OTHER)]
    assert parsed.preemption.verdict == VERDICT_UNKNOWN


def test_truncated_inside_a_known_reason_is_recognised() -> None:
    parsed = parse_message_uncached(
        "0/4 nodes are available: 3 Insufficient cpu, 1 node(s) didn't match Pod's node af"
    )
    assert parsed.truncated is True
    assert [(x.count, x.code) for x in parsed.reasons] == [
        (3, r.INSUFFICIENT_RESOURCE),
        (1, r.NODE_AFFINITY_MISMATCH),
    ]
    assert parsed.reasons[1].text == "node(s) didn't match Pod's node af"


def test_truncated_after_a_comma_drops_the_dangling_count() -> None:
    parsed = parse_message_uncached("0/4 nodes are available: 3 Insufficient cpu, 1")
    assert parsed.truncated is True
    assert pairs(parsed) == [(3, "Insufficient cpu", r.INSUFFICIENT_RESOURCE)]


def test_unknown_reasons_are_kept_verbatim() -> None:
    parsed = parse_message_uncached(
        "0/5 nodes are available: 2 node(s) had a mood, 3 Insufficient cpu. preemption: 0/5 nodes are "
        "available: 5 Preemption is not helpful for scheduling."
    )
    assert pairs(parsed) == [
        (2, "node(s) had a mood", r.OTHER),
        (3, "Insufficient cpu", r.INSUFFICIENT_RESOURCE),
    ]
    assert parsed.reasons[0].plugin is None


def test_other_scheduler_volcano() -> None:
    parsed = parse_message_uncached(
        "0/2060 nodes are unavailable: 2053 task node selector does not match node labels, 7 Insufficient cpu"
    )
    assert parsed.total_nodes == 2060
    assert pairs(parsed) == [
        (2053, "task node selector does not match node labels", r.OTHER),
        (7, "Insufficient cpu", r.INSUFFICIENT_RESOURCE),
    ]
    assert parsed.truncated is False  # Volcano prints no final full stop
    everything = parse_message_uncached("Unschedulable, all nodes are unavailable: 3 Insufficient cpu.")
    assert everything.total_nodes is None
    assert pairs(everything) == [(3, "Insufficient cpu", r.INSUFFICIENT_RESOURCE)]


def test_pod_named_in_an_old_layout() -> None:
    parsed = parse_message_uncached("0/3 nodes are available to run pod web-0: 3 Insufficient cpu.")
    assert parsed.pod == "web-0"
    assert pairs(parsed) == [(3, "Insufficient cpu", r.INSUFFICIENT_RESOURCE)]


@pytest.mark.parametrize(
    ("text", "code", "total"),
    [
        ("Scheduling is blocked due to non-empty scheduling gates", r.SCHEDULING_GATED, None),
        ("waiting for scheduling gates: [example.com/quota]", r.SCHEDULING_GATED, None),
        ("no nodes available to schedule pods", r.NO_NODES, 0),
        ("Insufficient cpu", r.INSUFFICIENT_RESOURCE, None),
        ("node(s) had untolerated taint {dedicated: gpu}", r.UNTOLERATED_TAINT, None),
    ],
)
def test_bare_reasons_and_condition_messages(text: str, code: str, total: int | None) -> None:
    parsed = parse_message_uncached(text)
    assert parsed.kind == SCHEDULING
    assert parsed.format == "reasons"
    assert [(x.count, x.code) for x in parsed.reasons] == [(None, code)]
    assert parsed.total_nodes == total


def test_bare_counted_list() -> None:
    parsed = parse_message_uncached("2 Insufficient cpu, 1 node(s) were unschedulable")
    assert [(x.count, x.code) for x in parsed.reasons] == [
        (2, r.INSUFFICIENT_RESOURCE),
        (1, r.NODE_UNSCHEDULABLE),
    ]


@pytest.mark.parametrize("text", ["", "   ", "hello world", "0/3 nodes", "Warning FailedScheduling 3m"])
def test_text_that_says_nothing_is_unknown(text: str) -> None:
    parsed = parse_message_uncached(text)
    assert parsed.kind == UNKNOWN
    assert parsed.reasons == ()
    assert parsed.total_nodes is None


def test_zero_nodes_with_no_reasons() -> None:
    parsed = parse_message_uncached("0/0 nodes are available: .")
    assert parsed.kind == SCHEDULING
    assert parsed.total_nodes == 0
    assert parsed.reasons == ()


def test_repeated_messages_come_from_the_cache() -> None:
    text = SEED_000 + " "  # a text no other test uses
    first = parse_message(text)
    hits = parse_message.cache_info().hits
    assert parse_message(text) is first
    assert parse_message.cache_info().hits == hits + 1
    assert first == parse_message_uncached(text)


def test_pod_condition_from_kubectl_get_pod_yaml() -> None:
    # A YAML single-quoted scalar: folded over lines, apostrophes doubled.
    parsed = parse_message_uncached(
        "  - lastProbeTime: null\n"
        "    message: '0/3 nodes are available: 3 node(s) didn''t match Pod''s node affinity/selector.\n"
        "      preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.'\n"
        "    reason: Unschedulable\n"
    )
    assert pairs(parsed) == [
        (3, "node(s) didn't match Pod's node affinity/selector", r.NODE_AFFINITY_MISMATCH)
    ]
    assert preemption_pairs(parsed) == [(3, r.PREEMPTION_NOT_HELPFUL)]


def test_typographic_apostrophes_from_chat() -> None:
    parsed = parse_message_uncached(
        "0/2 nodes are available: 2 node(s) didn\u2019t match Pod\u2019s node affinity/selector."
    )
    assert [x.code for x in parsed.reasons] == [r.NODE_AFFINITY_MISMATCH]
