"""kube-scheduler's FailedScheduling events that are plugin errors, rendered with the
framework's own wrappers (pkg/scheduler/framework/runtime/framework.go, v1.35.4; the
1.16-1.18 forms from that release's framework.go and scheduler.go)."""

from __future__ import annotations

import pytest

from agent.commands.explain import render_text
from analyzers.messages import SCHEDULER_ERROR, SCHEDULING, parse_message_uncached
from analyzers.messages import reasons as r

ERRORS = [
    "binding volumes: timed out waiting for the condition",
    'Operation cannot be fulfilled on pods/binding "web-0": pod web-0 is already assigned to node "n1"',
    'persistentvolumeclaim "data" not found',
    "rpc error: code = Unavailable desc = connection refused",
]

# (format as upstream writes it, extension point, plugin in the message)
WRAPPERS = [
    ('running PreFilter plugin "{p}": {e}', "PreFilter", True),
    ('running AddPod on PreFilter plugin "{p}": {e}', "PreFilter", True),
    ('running RemovePod on PreFilter plugin "{p}": {e}', "PreFilter", True),
    ('running "{p}" filter plugin: {e}', "Filter", True),
    ('running "{p}" filter plugin for pod "web-0": {e}', "Filter", True),
    ('running PreScore plugin "{p}": {e}', "PreScore", True),
    ("running Score plugins: {e}", "Score", False),
    ("running Normalize on Score plugins: {e}", "Score", False),
    ('running Reserve plugin "{p}": {e}', "Reserve", True),
    ('running Permit plugin "{p}": {e}', "Permit", True),
    ('running PreBind plugin "{p}": {e}', "PreBind", True),
    ('running PreBindPreFlight "{p}": {e}', "PreBindPreFlight", True),
    ('running Bind plugin "{p}": {e}', "Bind", True),
    ('error while running "{p}" prebind plugin for pod "web-0": {e}', "PreBind", True),
    ('error while running "{p}" reserve plugin for pod "web-0": {e}', "Reserve", True),
    ("binding rejected: {e}", "Bind", False),
]


@pytest.mark.parametrize(("wrapper", "point", "named"), WRAPPERS)
@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize(
    "framing", ["{}", "  Warning  FailedScheduling  12s  default-scheduler  {}", 'said "{}" twice']
)
def test_every_wrapper_gives_the_point_the_plugin_and_the_error(
    wrapper: str, point: str, named: bool, error: str, framing: str
) -> None:
    parsed = parse_message_uncached(framing.format(wrapper.format(p="VolumeBinding", e=error)))
    assert (parsed.kind, parsed.format, parsed.notes) == (SCHEDULER_ERROR, "plugin-error", (point,))
    [reason] = parsed.reasons
    assert (reason.text, reason.code) == (error, r.PLUGIN_ERROR)
    assert reason.plugin == ("VolumeBinding" if named else None)
    assert point in render_text(parsed)


def test_a_pod_being_deleted() -> None:
    parsed = parse_message_uncached(
        "Warning FailedScheduling 2s default-scheduler skip schedule deleting pod: shop/web-0"
    )
    assert (parsed.kind, parsed.format, parsed.pod) == (SCHEDULER_ERROR, "pod-deleting", "shop/web-0")
    assert "being deleted" in render_text(parsed)


def test_a_fit_error_that_mentions_a_plugin_stays_a_fit_error() -> None:
    text = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling. running PreBind plugin \"x\": y"
    assert parse_message_uncached(text).kind == SCHEDULING
