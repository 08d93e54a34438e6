"""Parsing kube-scheduler's FailedScheduling events that are errors, not a FitError.

When a plugin returns an error (not "unschedulable"), the event's message is the
error itself, wrapped by the framework with the extension point and plugin
(``pkg/scheduler/framework/runtime/framework.go``, v1.35.4): ``running PreFilter
plugin "<p>": <err>``, ``running AddPod|RemovePod on PreFilter plugin "<p>": …``,
``running "<p>" filter plugin: <err>`` (1.17-1.19: ``… filter plugin for pod "<pod>": …``),
``running PreScore plugin "<p>": …``, ``running Score plugins: …``, ``running Normalize
on Score plugins: …``, ``running Reserve plugin "<p>": …``, ``running Permit plugin
"<p>": …``, ``running PreBind plugin "<p>": …``, ``running PreBindPreFlight "<p>": …``,
``running Bind plugin "<p>": …``; before 1.19 ``error while running "<p>" <point> plugin
for pod "<pod>": …`` and ``binding rejected: …``. A pod being deleted gets ``skip schedule
deleting pod: <ns>/<name>`` (``pkg/scheduler/schedule_one.go``).

The pod stays Pending and is retried with backoff; no node was found wanting, so
the filter simulation has nothing to say about it.
"""

from __future__ import annotations

import re
from typing import Final

from analyzers.messages.model import SCHEDULER_ERROR, ParsedMessage, make_reason
from analyzers.messages.reasons import PLUGIN_ERROR, POD_DELETING, ReasonInfo
from analyzers.messages.text import cut_at_next_event, quoted_until

_POINTS: Final = "PreFilter|Filter|PreScore|Score|Reserve|Permit|PreBind|PreBindPreFlight|Bind"
_CURRENT_RE: Final = re.compile(
    r'running (?:(?:AddPod|RemovePod) on )?(?P<point>PreFilter|PreScore|Reserve|Permit|PreBind|Bind) plugin "(?P<plugin>[^"]+)": '
    r'|running PreBindPreFlight "(?P<preflight>[^"]+)": '
    r'|running "(?P<filter>[^"]+)" filter plugin(?: for pod "[^"]*")?: '
    r"|running (?:Normalize on )?Score plugins: "
)
_OLD_RE: Final = re.compile(
    r'error while running "(?P<plugin>[^"]+)" (?P<point>\w+) plugin for pod "[^"]*": |binding rejected: ',
    re.IGNORECASE,
)
_DELETING_RE: Final = re.compile(r"skip schedule deleting pod: ([^\s/]+)/(\S+)")
_CANONICAL: Final = {p.lower(): p for p in _POINTS.split("|")}


def parse_scheduler_error(text: str) -> ParsedMessage | None:
    """Parse a cleaned kube-scheduler error event; None when ``text`` is not one."""
    deleting = _DELETING_RE.search(text)
    if deleting is not None:
        reason = make_reason(None, deleting.group(0), ReasonInfo(POD_DELETING, None))
        return ParsedMessage(
            kind=SCHEDULER_ERROR,
            format="pod-deleting",
            message=deleting.group(0),
            reasons=(reason,),
            pod=f"{deleting.group(1)}/{deleting.group(2)}",
        )
    match = _CURRENT_RE.search(text) or _OLD_RE.search(text)
    if match is None:
        return None
    groups = match.groupdict()
    if groups.get("preflight"):
        point, plugin = "PreBindPreFlight", groups["preflight"]
    elif groups.get("filter"):
        point, plugin = "Filter", groups["filter"]
    elif groups.get("point"):
        point, plugin = _CANONICAL.get(groups["point"].lower(), groups["point"]), groups["plugin"]
    elif match.group(0).lower().startswith("binding"):
        point, plugin = "Bind", None
    else:
        point, plugin = "Score", None
    end = quoted_until(text, match.start())
    error = cut_at_next_event(text[match.end() : end]).strip()
    reason = make_reason(None, error, ReasonInfo(PLUGIN_ERROR, plugin))
    return ParsedMessage(
        kind=SCHEDULER_ERROR,
        format="plugin-error",
        message=text[match.start() : match.end()] + error,
        reasons=(reason,),
        notes=(point,),
    )
