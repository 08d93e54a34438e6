"""The GPU schedulers beside kube-scheduler: their verdicts are read as theirs (``scheduler``),
with reason histograms and gang figures, and never taken for kube-scheduler's or an eviction.

Messages are rebuilt from the upstream format strings (files and releases cited in
analyzers.messages.gpu_schedulers) and from pastes in public issues.
"""

from __future__ import annotations

import pytest

from analyzers.messages import SCHEDULING, parse_message_uncached
from analyzers.messages.model import KUBE_SCHEDULER
from analyzers.report import messages_agree


def kai_histogram(counts: dict[str, int], head: str = "no nodes with enough resources were found") -> str:
    """pod_errors.go TasksFitErrors.Error(): sorted "<count> <reason>", joined with ". \\n", final "."."""
    items = sorted(f"{n} {reason}" for reason, n in counts.items())
    return head + ": " + ". \n".join(items) + "."


def kai_gang(found: int, required: int, cause: str) -> str:
    """allocate.go: the gang form."""
    return (
        f"Resources were found for {found} pods while {required} are required for gang scheduling. "
        f"Additional pods cannot be scheduled due to: {cause}"
    )


def volcano_fit(total: int, counts: dict[str, int]) -> str:
    """unschedule_info.go FitErrors.Error(): "0/N nodes are unavailable: <sorted histogram, ', '>."."""
    items = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"0/{total} nodes are unavailable: {', '.join(items)}."


def volcano_gang(unsched: int, total: int, phases: dict[str, int], min_available: int, origin: str) -> str:
    """gang.go + job_info.go FitError()."""
    hist = dict(phases)
    hist["minAvailable"] = min_available
    items = sorted(f"{n} {k}" for k, n in hist.items())
    return (
        f"{unsched}/{total} tasks in gang unschedulable: pod group is not ready, {', '.join(items)}; "
        f"Pending: {phases.get('Pending', 0)} Unschedulable. Origin reason is w-0: {origin}"
    )


def test_kai_histogram_is_kai_with_counts_and_resources() -> None:
    text = kai_histogram(
        {
            "node(s) didn't have enough resources: GPUs": 3,
            "node(s) didn't have enough resources: CPU cores": 1,
            "node(s) didn't match Pod's node affinity/selector": 2,
        }
    )
    parsed = parse_message_uncached(text)
    assert (parsed.kind, parsed.scheduler, parsed.format) == (SCHEDULING, "kai-scheduler", "kai-fit-error")
    got = {(r.count, r.info.resource, r.code) for r in parsed.reasons}
    assert got == {
        (3, "GPUs", "insufficient-resource"),
        (1, "cpu", "insufficient-resource"),
        (2, None, "node-affinity-mismatch"),
    }
    assert not parsed.comparable and not parsed.truncated


def test_the_issue_paste_is_a_verdict_not_an_eviction() -> None:
    parsed = parse_message_uncached(
        "No nodes with enough resources were found: 2 node(s) didn't have enough resources: GPUs."
    )
    assert parsed.kind == SCHEDULING and parsed.scheduler == "kai-scheduler"
    assert [(r.count, r.info.resource) for r in parsed.reasons] == [(2, "GPUs")]


@pytest.mark.parametrize(("found", "required"), [(5, 17), (0, 2), (31, 32)])
def test_kai_gang_figures(found: int, required: int) -> None:
    cause = kai_histogram({"node(s) didn't have enough resources: GPUs": required - found})
    parsed = parse_message_uncached(
        f"Warning  Unschedulable  2m  kai-scheduler  {kai_gang(found, required, cause)}"
    )
    assert parsed.scheduler == "kai-scheduler" and parsed.format == "kai-gang"
    assert parsed.gang is not None and (parsed.gang.found, parsed.gang.required) == (found, required)
    assert [(r.count, r.info.resource) for r in parsed.reasons] == [(required - found, "GPUs")]
    doc = parsed.as_dict()
    assert doc["gang"]["found"] == found and doc["gang"]["required"] == required
    assert doc["scheduler"] == "kai-scheduler" and doc["comparable"] is False


def test_kai_subgroup_and_node_pool_prefix() -> None:
    text = (
        "Node-Pool 'a100': Resources were found for 2 pods from all sub-groups while sub-group workers requires "
        "4 pods for gang scheduling. Additional pods cannot be scheduled in this sub-group due to: "
        + kai_histogram({"node(s) didn't have enough resources: GPU memory": 4})
    )
    parsed = parse_message_uncached(text)
    assert parsed.gang is not None
    assert (parsed.gang.found, parsed.gang.required, parsed.gang.subgroup) == (2, 4, "workers")
    assert "node pool a100" in parsed.notes
    assert parsed.reasons[0].info.resource == "GPU memory"


def test_volcano_fit_error_is_volcano() -> None:
    text = volcano_fit(5, {"Insufficient nvidia.com/gpu": 3, "node(s) pod number exceeded": 2})
    parsed = parse_message_uncached(text)
    assert (parsed.scheduler, parsed.total_nodes) == ("volcano", 5)
    assert {(r.count, r.info.resource) for r in parsed.reasons} == {(3, "nvidia.com/gpu"), (2, None)}


def test_volcano_gang_message() -> None:
    origin = volcano_fit(3, {"Insufficient nvidia.com/gpu": 3})
    text = volcano_gang(1, 4, {"Pending": 1, "Running": 3}, 4, origin)
    parsed = parse_message_uncached(text)
    assert parsed.scheduler == "volcano" and parsed.format == "volcano-gang"
    gang = parsed.gang
    assert gang is not None
    assert (gang.required, gang.unschedulable, gang.total) == (4, 1, 4)
    assert dict(gang.phases) == {"Pending": 1, "Running": 3}
    assert parsed.total_nodes == 3 and [r.count for r in parsed.reasons] == [3]


@pytest.mark.parametrize(
    ("text", "total"),
    [
        ("no available node, 3 nodes do not meet", 3),  # scheduler.go v2.10.0
        ("no available node, all node scores do not meet", None),  # HAMi issue #591 (v2.4.0)
    ],
)
def test_hami_filtering_failed(text: str, total: int | None) -> None:
    parsed = parse_message_uncached(f"Warning  FilteringFailed  12s  hami-scheduler  {text}")
    assert (parsed.scheduler, parsed.total_nodes) == ("hami-scheduler", total)


def test_hami_reason_codes_name_nodes() -> None:
    # score.go recordFilteringFailures: "%d nodes %s(%s)"
    parsed = parse_message_uncached("2 nodes CardInsufficientMemory(gpu-a,gpu-b)")
    assert parsed.scheduler == "hami-scheduler"
    assert [(r.count, r.text, r.info.resource) for r in parsed.reasons] == [
        (2, "CardInsufficientMemory", "device memory")
    ]
    assert parsed.notes == ("CardInsufficientMemory: gpu-a, gpu-b",)


@pytest.mark.parametrize(
    ("text", "found", "required", "unit"),
    [
        ('topology "default" allows to fit only 3 out of 4 pod(s)', 3, 4, "pod"),
        ('topology "rack" doesn\'t allow to fit any of 2 slice(s)', 0, 2, "slice"),
    ],
)
def test_kueue_tas(text: str, found: int, required: int, unit: str) -> None:
    alone = parse_message_uncached(text)
    assert alone.scheduler == "kueue" and alone.gang is not None
    assert (alone.gang.found, alone.gang.required, alone.gang.unit) == (found, required, unit)
    inside = parse_message_uncached(f"couldn't assign flavors to pod set main: {text}")
    assert inside.kind == "queue" and inside.gang == alone.gang


def test_kube_scheduler_stays_kube_scheduler() -> None:
    parsed = parse_message_uncached("0/3 nodes are available: 3 Insufficient cpu.")
    assert parsed.scheduler == KUBE_SCHEDULER and parsed.comparable


def test_another_schedulers_verdict_is_never_compared() -> None:
    simulated = "0/5 nodes are available: 3 Insufficient nvidia.com/gpu, 2 Too many pods."
    assert messages_agree(simulated, simulated) is True
    volcano = volcano_fit(5, {"Insufficient nvidia.com/gpu": 3, "Too many pods": 2})
    assert messages_agree(simulated, volcano) is None
