"""Property tests: garbage never raises; kube-scheduler's own format parses back exactly."""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.messages import (
    ALL_CODES,
    EVICTION,
    SCHEDULING,
    UNKNOWN,
    classify_reason,
    format_fit_error,
    format_preemption,
    parse_message_uncached,
)
from analyzers.messages import reasons as r

FAST = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
# Generating valid taint keys from a regex is slow; fewer examples keep the suite fast.
ROUND_TRIP = settings(
    max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

# Pieces of real messages, for garbage that is close to the real thing.
FRAGMENTS = [
    "0/3 nodes are available:",
    "0/",
    " nodes are ",
    "No nodes are available that match all of the following predicates::",
    "preemption:",
    " preemption: ",
    "all nodes are unavailable:",
    "1 ",
    "9 ",
    "12",
    ", ",
    ",",
    ". ",
    ".",
    "..",
    "Insufficient cpu",
    "Insufficient ",
    "node(s) had taint {a: b}, that the pod didn't tolerate",
    "node(s) had untolerated taint {",
    "}",
    "{",
    "Preemption is not helpful for scheduling",
    "not eligible due to preemptionPolicy=Never",
    'persistentvolumeclaim "x" not found',
    "(3)",
    " (repeated 2 times)",
    "\n   ",
    "\\n",
    '\\"',
    '"',
    "'",
    "# ",
    "> ",
    "\t",
    "\u00a0",
    'error when evicting pods/"web-0" -n "shop" (will retry after 5s): ',
    'error when evicting pod "',
    "evicting pod ",
    "/",
    "Cannot evict pod as it would violate the pod's disruption budget.",
    "The disruption budget p needs 2 healthy pods and has 1 currently",
    "more than one PodDisruptionBudget",
    "The node was low on resource: ",
]


def check(text: str) -> None:
    parsed = parse_message_uncached(text)
    assert parsed.kind in (SCHEDULING, EVICTION, UNKNOWN)
    for reason in parsed.reasons:
        assert reason.code in ALL_CODES
    if parsed.preemption is not None:
        assert parsed.preemption.verdict in ("not-eligible", "cannot-help", "no-candidate", "unknown")
    orjson.dumps(parsed.as_dict())  # always serialisable


@FAST
@given(st.text())
def test_any_text_never_raises(text: str) -> None:
    check(text)


@FAST
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=25).map("".join))
def test_near_miss_text_never_raises(text: str) -> None:
    check(text)


@FAST
@given(st.text())
def test_classify_never_raises(text: str) -> None:
    assert classify_reason(text).code in ALL_CODES


# --- round trip through kube-scheduler's format ------------------------------------------------

# Filter-phase reasons: the preemption verdicts never appear in a filter histogram.
KNOWN = [
    text
    for text, code, _ in r.CATALOGUE
    if code not in (r.PREEMPTION_NOT_ELIGIBLE, r.PREEMPTION_NO_VICTIMS, r.PREEMPTION_NOT_HELPFUL)
]
reason_texts = st.one_of(
    st.sampled_from(KNOWN),
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi", "ephemeral-storage"]).map(
        "Insufficient {}".format
    ),
    # Taint keys are qualified names and values label values (validation.go).
    st.tuples(
        st.from_regex(
            r"([a-z0-9]([-a-z0-9.]{0,15}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?",
            fullmatch=True,
        ),
        st.from_regex(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?)?", fullmatch=True),
    ).flatmap(
        lambda kv: st.sampled_from(
            [
                f"node(s) had untolerated taint {{{kv[0]}: {kv[1]}}}",
                f"node(s) had taint {{{kv[0]}: {kv[1]}}}, that the pod didn't tolerate",
            ]
        )
    ),
)
histograms = st.dictionaries(reason_texts, st.integers(1, 5000), min_size=1, max_size=6)
preemptions = st.dictionaries(
    st.sampled_from(
        ["No preemption victims found for incoming pod", "Preemption is not helpful for scheduling"]
    ),
    st.integers(1, 5000),
    min_size=1,
    max_size=2,
)
prefixes = st.sampled_from(
    [
        "",
        "  Warning  FailedScheduling  3m (x25 over 10m)  default-scheduler  ",
        "3m11s   Warning   FailedScheduling   pod/web-0   ",
        "(combined from similar events): ",
    ]
)


@ROUND_TRIP
@given(
    st.integers(1, 100_000),
    histograms,
    st.none() | preemptions,
    st.sampled_from(["", "no new claims to deallocate, "]),
    prefixes,
    st.booleans(),
)
def test_round_trip(
    total: int,
    histogram: dict[str, int],
    preemption: dict[str, int] | None,
    dra_note: str,
    prefix: str,
    wrap: bool,
) -> None:
    postfilter = dra_note + format_preemption(total, preemption) if preemption else ""
    message = prefix + format_fit_error(total, histogram, postfilter_msg=postfilter)
    if wrap:
        message = message.replace(", ", ",\n      ")
    parsed = parse_message_uncached(message)
    assert parsed.kind == SCHEDULING
    assert parsed.total_nodes == total
    assert parsed.truncated is False
    assert sorted((x.text, x.count) for x in parsed.reasons) == sorted(histogram.items())
    assert all(x.code != r.OTHER for x in parsed.reasons)
    if preemption is None:
        assert parsed.preemption is None
        assert parsed.notes == ()
    else:
        assert parsed.preemption is not None
        assert sorted((x.text, x.count) for x in parsed.preemption.reasons) == sorted(preemption.items())
        assert parsed.notes == (("no new claims to deallocate",) if dra_note else ())


@FAST
@given(st.integers(1, 5000), st.sampled_from(KNOWN))
def test_round_trip_prefilter(total: int, prefilter: str) -> None:
    parsed = parse_message_uncached(format_fit_error(total, prefilter_msg=prefilter))
    assert parsed.format == "fit-error-prefilter"
    assert [(x.count, x.text) for x in parsed.reasons] == [(None, prefilter)]
    assert parsed.reasons[0].info == classify_reason(prefilter)


def test_format_sorts_count_reason_strings_as_strings() -> None:
    # FitError.Error sorts "<count> <reason>" strings: "10 ..." before "9 ...".
    assert format_fit_error(19, {"node(s) were unschedulable": 9, "Insufficient cpu": 10}) == (
        "0/19 nodes are available: 10 Insufficient cpu, 9 node(s) were unschedulable."
    )
    assert format_fit_error(3, prefilter_msg="pod has unbound immediate PersistentVolumeClaims") == (
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )
    assert format_preemption(3, [("Preemption is not helpful for scheduling", 3)]) == (
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
