"""How to be sure: messages rendered with kube-scheduler's own format strings, for every
supported version (``analyzers.simulator.versions.wording_for`` and ``render.fit_error``:
``FitError.Error`` of ``pkg/scheduler/framework/types.go``, the preemption FitError of
``pkg/scheduler/framework/preemption/preemption.go``), mangled the ways people paste them
(columns, quotes, JSON escapes, word wraps, hard wraps in a box, an end cut by
``truncateMessage``, a start cut at a word boundary), must parse correctly or report
honestly what is missing (``head_missing``, ``truncated``, total None, ``unknown``) —
never a wrong reason, count, total or preemption verdict.
"""

from __future__ import annotations

import os
import textwrap
from collections import Counter
from dataclasses import dataclass

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.messages import (
    SCHEDULING,
    UNKNOWN,
    ParsedMessage,
    Reason,
    classify_reason,
    parse_message_uncached,
)
from analyzers.messages import reasons as r
from analyzers.messages.model import CANNOT_HELP, NOT_ELIGIBLE
from analyzers.simulator import render
from analyzers.simulator.versions import wording_for

# UNSTICK_PROPERTY_EXAMPLES raises the count for a deep local run (CI draws 400 new ones each time).
PROPERTY = settings(
    max_examples=int(os.environ.get("UNSTICK_PROPERTY_EXAMPLES", "400")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Every minor the simulator words (1.18 is the oldest framework scheduler), and 1.34.2
# (the cherry-picked "untolerated taint(s)").
VERSIONS = [f"1.{minor}" for minor in range(18, 36)] + ["1.34.2"]
TAINTS = [("dedicated", "gpu"), ("node-role.kubernetes.io/control-plane", ""), ("example.com/team", "a-b.c")]
RESOURCES = ["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage", "hugepages-2Mi"]
PREFILTER = ["pod has unbound immediate PersistentVolumeClaims", 'persistentvolumeclaim "data-0" not found']


def filter_reasons(version: str) -> list[str]:
    """The filter reasons ``version`` prints (its own wording of each plugin)."""
    w = wording_for(version)
    out = [
        w.node_affinity_reason,
        w.pv_node_conflict_reason,
        "Too many pods",
        "node(s) were unschedulable",
        "node(s) didn't match pod anti-affinity rules",
        "node(s) didn't satisfy existing pods anti-affinity rules",
        "node(s) didn't match pod topology spread constraints",
        "node(s) didn't have free ports for the requested pod ports",
        *(f"Insufficient {res}" for res in RESOURCES),
        *(w.taint_reason(k, v) for k, v in TAINTS),
    ]
    if w.prefilter_result_reason is not None:
        out.append(w.prefilter_result_reason)
    if w.interpod_generic_reason:
        out.append("node(s) didn't match pod affinity/anti-affinity")
    return sorted(set(out))


@dataclass(frozen=True)
class Scenario:
    version: str
    total: int
    histogram: dict[str, int]
    prefilter: str | None
    preemption: dict[str, int] | None  # None: no clause; {}: not eligible
    dra: bool

    def render(self) -> str:
        w = wording_for(self.version)
        postfilter = ""
        if w.preemption_clause and self.preemption is not None:
            if self.preemption:
                postfilter = "preemption: " + render.preemption_fit_error(self.total, self.preemption)
            else:
                postfilter = "preemption: " + render.NOT_ELIGIBLE_NEVER
            if self.dra and w.dra_postfilter:
                postfilter = f"{render.DRA_NO_CLAIMS}, {postfilter}"
        prefilter = (self.prefilter,) if self.prefilter is not None and not w.prefilter_counted else ()
        return render.fit_error(
            self.total, w, reasons=self.histogram, prefilter=prefilter, postfilter=postfilter
        )

    @property
    def has_preemption(self) -> bool:
        return wording_for(self.version).preemption_clause and self.preemption is not None

    @property
    def filter_items(self) -> Counter[tuple[int | None, str]]:
        w = wording_for(self.version)
        if self.prefilter is not None and not w.prefilter_counted:
            return Counter({(None, self.prefilter): 1})
        return Counter({(count, text): 1 for text, count in self.histogram.items()})


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    version = draw(st.sampled_from(VERSIONS))
    total = draw(st.integers(1, 5000))
    texts = draw(st.lists(st.sampled_from(filter_reasons(version)), min_size=1, max_size=6, unique=True))
    histogram = {t: draw(st.integers(1, 5000)) for t in texts}
    prefilter = draw(st.none() | st.sampled_from(PREFILTER))
    preemption = draw(
        st.none()
        | st.just({})
        | st.dictionaries(
            st.sampled_from([render.NO_VICTIMS, render.NOT_HELPFUL]),
            st.integers(1, 5000),
            min_size=1,
            max_size=2,
        )
    )
    return Scenario(version, total, histogram, prefilter, preemption, draw(st.booleans()))


# --- mangles that keep every word ---------------------------------------------------------


def describe_row(m: str) -> str:
    return f"  Warning  FailedScheduling  3m (x25 over 10m)  default-scheduler  {m}"


def get_events_row(m: str) -> str:
    return f"3m11s       Warning   FailedScheduling   pod/web-0   {m}"


def combined(m: str) -> str:
    return f"(combined from similar events): {m} (repeated 3 times)"


def quoted(m: str) -> str:
    return f'"{m}"'


def in_prose(m: str) -> str:
    """Quoted inside a sentence (an issue, a chat), words after the closing quote."""
    return f'the pod says "{m}" since 10:02 (3 times)'


def in_prose_single(m: str) -> str:
    return f"kubectl showed '{m}' and nothing else"


def in_prose_without_stop(m: str) -> str:
    """Quoted without its final full stop: the closing quote still ends it."""
    return f"see `{m.rstrip('.')}` in the events"


def json_escaped(m: str) -> str:
    return orjson.dumps({"message": m}).decode()


def chat_quote(m: str) -> str:
    return "\n".join("> " + line for line in textwrap.wrap(m, 60))


def word_wrapped(m: str) -> str:
    # kubectl describe's continuation lines: indented, broken between words.
    return "\n        ".join(textwrap.wrap(m, 70))


def boxed(m: str, width: int = 48) -> str:
    """A table cell of fixed width (k9s, Lens): the text hard-wrapped inside words."""
    chunks = [m[i : i + width] for i in range(0, len(m), width)]
    rows = ["┌" + "─" * (width + 2) + "┐"]
    rows += [f"│ {c:<{width}} │" for c in chunks]
    rows.append("└" + "─" * (width + 2) + "┘")
    return "\n".join(rows)


def markdown_row(m: str) -> str:
    return f"| Type | Reason | Message |\n|------|--------|---------|\n| Warning | FailedScheduling | {m} |"


def hard_wrapped(m: str, width: int = 40) -> str:
    """A terminal's own wrap at a fixed width, copied with trailing spaces trimmed."""
    return "\n".join(m[i : i + width].rstrip() for i in range(0, len(m), width))


WHOLE = [
    lambda m: m,
    describe_row,
    get_events_row,
    combined,
    quoted,
    in_prose,
    in_prose_single,
    in_prose_without_stop,
    json_escaped,
    chat_quote,
    word_wrapped,
    boxed,
    markdown_row,
]


# --- the oracle ---------------------------------------------------------------------------


def pairs(reasons: tuple[Reason, ...]) -> Counter[tuple[int | None, str]]:
    return Counter((x.count, x.text) for x in reasons)


def assert_never_wrong(parsed: ParsedMessage, s: Scenario, *, unknown_reasons: bool = False) -> None:
    """What a piece of the message may say: only reasons, counts and totals the whole one says.
    With ``unknown_reasons`` (a terminal wrap that may have cut words in two), reasons and notes of
    code ``other`` are let be, and a known reason may differ by the spaces a wrap put in a word, as
    long as its code is right and it names no resource or taint it cannot be sure of."""

    def same(printed: str, original: str) -> bool:
        squeezed = printed.replace(" ", "").rstrip(".")
        return printed == original or (unknown_reasons and squeezed == original.replace(" ", ""))

    assert parsed.kind in (SCHEDULING, UNKNOWN)
    if parsed.kind == UNKNOWN:
        return
    assert parsed.total_nodes in (None, s.total)
    expected = s.filter_items
    for i, reason in enumerate(parsed.reasons):
        assert reason.text and not reason.text.isdigit() and "available" not in reason.text
        assert "preemption" not in reason.text.lower()
        if unknown_reasons and reason.code == r.OTHER:
            continue
        # A bare list ("reasons") may show a reason without its count: not printed is not wrong.
        # Nor may the first reason of a piece that starts after the message's beginning.
        uncounted = reason.count is None and (parsed.format == "reasons" or (parsed.head_missing and i == 0))
        whole = [(c, t) for c, t in expected if same(reason.text, t) and (c == reason.count or uncounted)]
        last_cut = parsed.truncated and i == len(parsed.reasons) - 1
        if whole:
            info = classify_reason(whole[0][1])
            assert reason.code == info.code
            # The last reason of a cut message may end inside its resource name: not named then.
            named = reason.info.resource is None and reason.info.taint is None
            assert reason.info == info or ((last_cut or unknown_reasons) and named)
            continue
        # Only the last reason of a message cut at the end may be a beginning of one (or any
        # reason, after a terminal wrap that broke a name at its dot: "{node-role.kubernetes.| io/...").
        assert last_cut or unknown_reasons, (reason, s)
        begun = [
            (c, t)
            for c, t in expected
            if t.replace(" ", "").startswith(reason.text.replace(" ", ""))
            and (c == reason.count or uncounted)
        ]
        assert begun, (reason, s)
        assert reason.code in (r.OTHER, classify_reason(begun[0][1]).code)
        assert reason.info.resource is None
        assert reason.info.taint in (None, classify_reason(begun[0][1]).taint)
    if parsed.format == "preemption-only":
        assert parsed.reasons == ()
    if parsed.preemption is not None:
        assert s.has_preemption, s
        pre = parsed.preemption
        assert pre.total_nodes in (None, s.total)
        if s.preemption:
            assert pre.note is None or (
                unknown_reasons and pre.note_info is not None and pre.note_info.code == r.OTHER
            )
            for j, reason in enumerate(pre.reasons):
                if unknown_reasons and (
                    reason.code == r.OTHER or any(same(reason.text, t) for t in s.preemption)
                ):
                    continue
                # A piece that starts inside the histogram may show a reason without its count.
                exact = s.preemption.get(reason.text) == reason.count or (
                    reason.count is None and parsed.head_missing and reason.text in s.preemption
                )
                cut = parsed.truncated and j == len(pre.reasons) - 1
                assert exact or (
                    cut
                    and any(t.startswith(reason.text) and c == reason.count for t, c in s.preemption.items())
                ), (reason, s)
            assert pre.verdict in (CANNOT_HELP, "unknown")
        else:
            assert pre.reasons == ()
            assert pre.verdict in (NOT_ELIGIBLE, "unknown")


def assert_exact(parsed: ParsedMessage, s: Scenario) -> None:
    assert parsed.kind == SCHEDULING, parsed
    assert (parsed.total_nodes, parsed.truncated, parsed.head_missing) == (s.total, False, False)
    assert pairs(parsed.reasons) == s.filter_items
    assert all(x.info == classify_reason(x.text) and x.code != r.OTHER for x in parsed.reasons)
    if not s.has_preemption:
        assert parsed.preemption is None
        return
    assert parsed.preemption is not None
    if s.preemption:
        assert {x.text: x.count for x in parsed.preemption.reasons} == s.preemption
        assert parsed.preemption.verdict == CANNOT_HELP
    else:
        assert parsed.preemption.verdict == NOT_ELIGIBLE
    dra = s.dra and wording_for(s.version).dra_postfilter
    assert parsed.notes == ((render.DRA_NO_CLAIMS,) if dra else ())


# --- properties ----------------------------------------------------------------------------


@PROPERTY
@given(scenarios(), st.sampled_from(WHOLE))
def test_every_version_parses_exactly_however_it_is_pasted(s: Scenario, mangle: object) -> None:
    assert callable(mangle)
    assert_exact(parse_message_uncached(mangle(s.render())), s)


def events_table(m: str, width: int) -> str:
    """``kubectl describe`` events in a bordered table whose message column wraps."""
    chunks = [m[i : i + width] for i in range(0, len(m), width)]
    rows = [f"│ {'Warning':<7} │ {'FailedScheduling':<16} │ {chunks[0]:<{width}} │"]
    rows += [f"│ {'':<7} │ {'':<16} │ {c:<{width}} │" for c in chunks[1:]]
    rule = "─" * (width + 2)
    return "\n".join(
        [f"┌─────────┬──────────────────┬{rule}┐", *rows, f"└─────────┴──────────────────┴{rule}┘"]
    )


@PROPERTY
@given(scenarios(), st.integers(12, 60), st.integers(30, 60))
def test_wraps_inside_words_are_undone_in_tables(s: Scenario, cell: int, width: int) -> None:
    message = s.render()
    assert_exact(parse_message_uncached(boxed(message, cell)), s)
    assert_exact(parse_message_uncached(events_table(message, cell)), s)
    # A terminal's own wrap, outside a table, cannot be told from a word break: never wrong, though.
    assert_never_wrong(parse_message_uncached(hard_wrapped(message, width)), s, unknown_reasons=True)


@PROPERTY
@given(scenarios(), st.data())
def test_a_message_cut_at_the_end_is_never_wrong(s: Scenario, data: st.DataObject) -> None:
    message = s.render()
    # truncateMessage (pkg/scheduler/schedule_one.go): the first bytes, then " ...".
    # A cut inside the header leaves no message to read: from its colon on.
    keep = data.draw(st.integers(message.index(":") + 1, len(message) - 1))
    cut = message[:keep] + " ..."
    parsed = parse_message_uncached(describe_row(cut))
    assert parsed.kind == SCHEDULING
    assert parsed.truncated is True
    assert parsed.total_nodes == s.total
    assert_never_wrong(parsed, s)


@PROPERTY
@given(scenarios(), st.data())
def test_a_message_cut_at_the_front_is_never_wrong(s: Scenario, data: st.DataObject) -> None:
    message = s.render()
    starts = [i + 1 for i, ch in enumerate(message) if ch == " "]
    begin = data.draw(st.sampled_from(starts))
    fragment = message[begin:]
    parsed = parse_message_uncached(data.draw(st.sampled_from([quoted, lambda m: m]))(fragment))
    assert_never_wrong(parsed, s)


@PROPERTY
@given(scenarios(), st.data())
def test_cut_at_both_ends_is_never_wrong(s: Scenario, data: st.DataObject) -> None:
    message = s.render()
    starts = [i + 1 for i, ch in enumerate(message) if ch == " "]
    begin = data.draw(st.sampled_from(starts))
    keep = data.draw(st.integers(begin + 1, len(message)))
    parsed = parse_message_uncached(message[begin:keep] + (" ..." if keep < len(message) else ""))
    assert_never_wrong(parsed, s)


@PROPERTY
@given(scenarios(), st.sampled_from(["0/x", "0/X", "0/N", "0/<n>", "0 /{}", "0/ {}", "0 / {}"]))
def test_a_redacted_or_spaced_header_keeps_every_reason(s: Scenario, form: str) -> None:
    message = s.render()
    head = f"0/{s.total}"
    assert message.startswith(head)
    parsed = parse_message_uncached(form.format(s.total) + message[len(head) :])
    assert parsed.kind == SCHEDULING
    assert pairs(parsed.reasons) == s.filter_items
    assert parsed.total_nodes == (s.total if "{}" in form else None)
    assert (parsed.preemption is not None) == s.has_preemption


# Found by random runs; kept as fixed cases so that CI, whose draws are derandomized, holds them.
def test_a_full_stop_wrapped_to_the_next_line_still_ends_the_filter_part() -> None:
    s = Scenario(
        "1.34", 10, {"node(s) had untolerated taint(s)": 100, "Insufficient cpu": 100}, None, {}, True
    )
    for width in range(30, 61):
        assert_never_wrong(parse_message_uncached(hard_wrapped(s.render(), width)), s, unknown_reasons=True)


@pytest.mark.parametrize("reason", [render.NOT_HELPFUL, render.NO_VICTIMS])
def test_a_preemption_histogram_cut_inside_its_first_reason_is_never_a_filter_reason(reason: str) -> None:
    s = Scenario("1.35", 3, {"Insufficient cpu": 3}, None, {reason: 3}, False)
    tail = s.render()[s.render().index("preemption: ") + len("preemption: ") :]
    for keep in range(tail.index(":") + 3, len(tail)):
        parsed = parse_message_uncached(tail[:keep] + " ...")
        assert parsed.reasons == (), (tail[:keep], parsed.reasons)
        assert_never_wrong(parsed, s)


def test_a_bare_piece_cut_at_both_ends_is_not_guessed_from_its_beginning() -> None:
    # "pod affi" begins "pod affinity terms conflict", but this one was cut out of the
    # middle of "node(s) didn't match pod affinity/anti-affinity": never guess.
    s = Scenario("1.18", 1, {"node(s) didn't match pod affinity/anti-affinity": 1}, None, None, False)
    message = s.render()
    start = message.index("pod affinity")
    for keep in range(start + 3, len(message) - 1):
        assert_never_wrong(parse_message_uncached(message[start:keep] + " ..."), s)
