"""What a notification says: Slack Block Kit, Slack's plain-text fallback, the
console form and the webhook summary, all from the outbox row's payload.

Messages are views of stored state: the payload is the incident as the tracker
stored it (``storage.views.incident_dict``) plus the event, the cluster and
what the event adds (``replaces``, ``waited``, ``resolution``, ``changed``,
``incidents`` for a digest). Nothing here re-analyses anything, and every key
beyond the incident contract is optional.

Block Kit is built with slack-sdk's models (``slack_sdk.models.blocks``), which
validate Slack's limits when serialised; text that could pass a limit is cut
first, on a line boundary, with a pointer to the incident page. The text forms
come from Jinja2 templates in ``templates/`` of one environment built once
(:func:`build_environment`, ``StrictUndefined``).
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
import orjson
from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

# Slack's limits (https://docs.slack.dev/reference/block-kit/blocks).
TEXT_BLOCK_MAX = 3000  # a section's text
FIELD_MAX = 2000  # one section field
HEADER_MAX = 150  # a header's plain text
BLOCKS_MAX = 50  # blocks per message
MESSAGE_MAX = 40_000  # characters of a message's text (and, here, of all block text together)
FALLBACK_TEXT_MAX = 4000  # Slack truncates `text` past this; keep the fallback short anyway

CUT_NOTE = "… full YAML on the incident page"
CUT_NOTE_TEXT = "… more on the incident page"
EVIDENCE_FIELDS = 8
EVIDENCE_VALUE_MAX = 300
_SHOWN_ELSEWHERE = frozenset({"scheduler_message", "message"})  # shown as the scheduler's words

EVENTS = ("opened", "updated", "root_cause_changed", "escalated", "resolved", "reminder", "digest")

_SEVERITY_EMOJI = {
    "critical": ":red_circle:",
    "warning": ":large_orange_circle:",
    "info": ":large_blue_circle:",
}
_SLACK_ICONS = {
    **_SEVERITY_EMOJI,
    "updated": ":pencil2:",
    "root_cause_changed": ":twisted_rightwards_arrows:",
    "escalated": ":rotating_light:",
    "resolved": ":white_check_mark:",
    "reminder": ":alarm_clock:",
    "digest": ":ocean:",
}
_TERMINAL_ICONS = {
    "critical": "[!!]",
    "warning": "[!]",
    "info": "[i]",
    "updated": "[~]",
    "root_cause_changed": "[->]",
    "escalated": "[!!]",
    "resolved": "[ok]",
    "reminder": "[..]",
    "digest": "[**]",
}
CONSOLE_YAML_LINES = 25
CONSOLE_WIDTH = 100
CONSOLE_EXPLANATION_LINES = 8
TEMPLATES = Path(__file__).parent / "templates"


def build_environment() -> jinja2.Environment:
    """The notifier's one Jinja2 environment (text templates: no autoescape; Slack escaping is a filter)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(["html", "htm", "xml"]),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["slack_escape"] = slack_escape
    env.filters["cut"] = lambda text, limit: cut_lines(str(text), int(limit), CUT_NOTE_TEXT)
    env.filters["first_line"] = lambda text: str(text).strip().splitlines()[0] if str(text).strip() else ""
    env.filters["ago"] = duration_words
    env.filters["events"] = lambda n: f"{n} event" if n == 1 else f"{n} events"
    env.filters["details"] = resolution_details
    return env


def slack_escape(text: Any) -> str:
    """Slack's three control characters (https://docs.slack.dev/messaging/formatting-message-text)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cut_lines(text: str, limit: int, note: str = CUT_NOTE) -> str:
    """``text`` if it fits in ``limit`` characters, else its first whole lines and ``note``."""
    if len(text) <= limit:
        return text
    room = limit - len(note) - 1
    if room <= 0:
        return note[:limit]
    head = text[:room]
    cut = head.rfind("\n")
    if cut <= 0:  # one long first line: cut at a word instead
        cut = head.rfind(" ")
        if cut <= 0:
            cut = room
        return head[:cut].rstrip() + " " + note
    return head[:cut].rstrip() + "\n" + note


def code_block(text: str, limit: int = TEXT_BLOCK_MAX, note: str = CUT_NOTE) -> str:
    """A mrkdwn code block of ``text`` within ``limit``: cut on a line, the note after the fence."""
    fence = "```"
    whole = f"{fence}\n{text.rstrip()}\n{fence}"
    if len(whole) <= limit:
        return whole
    inner = limit - len(fence) * 2 - 2 - len(note) - 1
    kept = cut_lines(text.rstrip(), inner, "")
    return f"{fence}\n{kept.rstrip()}\n{fence}\n{note}"


def duration_words(seconds: float | int) -> str:
    """``3d 4h``, ``2h 5m``, ``4m``, ``12s``: two units at most."""
    s = int(max(0, seconds))
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m"
    return f"{secs}s"


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def _short_time(value: Any) -> str:
    at = _parse_time(value)
    return at.strftime("%Y-%m-%d %H:%M UTC") if at else ""


@dataclass(frozen=True, slots=True)
class Links:
    """Where a person reads more: the incident page and each remedy's raw YAML (empty without a public URL)."""

    incident: str | None
    remedies: tuple[str, ...]
    incidents_page: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"incident": self.incident, "remedies": list(self.remedies)}


def links_for(public_url: str | None, incident: Mapping[str, Any]) -> Links:
    if not public_url:
        return Links(None, ())
    base = public_url.rstrip("/")
    inc_id = incident.get("id")
    remedies = tuple(
        f"{base}/api/v1/incidents/{inc_id}/remedies/{n}.yaml"
        for n, r in enumerate(incident.get("remedies") or ())
        if r.get("yaml")
    )
    return Links(f"{base}/incidents/{inc_id}", remedies, f"{base}/incidents")


def resolution_details(resolution: Mapping[str, Any] | None) -> list[str]:
    """The changes of a resolution that its summary does not already say (a summary names
    every cause and the first effect: listing them again repeats the sentence)."""
    if not resolution:
        return []
    summary = str(resolution.get("summary") or "").lower()
    return [str(c) for c in resolution.get("changes") or () if str(c).lower().rstrip(".") not in summary]


def _humanize(key: str) -> str:
    words = key.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:]


def _evidence_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str | int | float):
        text = str(value)
    elif isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        text = ", ".join(str(v) for v in value)
    elif isinstance(value, Mapping) and all(isinstance(v, str | int | float | bool) for v in value.values()):
        text = ", ".join(f"{k}: {v}" for k, v in value.items())
    else:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str).decode()
    return text if len(text) <= EVIDENCE_VALUE_MAX else text[: EVIDENCE_VALUE_MAX - 1] + "…"


def _readable(value: Any) -> bool:
    """A value a field can show in words: a scalar, a flat list or a flat mapping. Nested
    ones (per-term or per-node tables) would show as JSON: they stay on the incident page."""
    flat = str | int | float | bool
    if isinstance(value, flat):
        return True
    if isinstance(value, list):
        return all(isinstance(v, flat) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(v, flat) for v in value.values())
    return False


def key_evidence(evidence: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Up to :data:`EVIDENCE_FIELDS` (label, value) pairs, scalars first, in the rule's own order;
    nested values are left to the incident page."""
    items = [
        (k, v)
        for k, v in evidence.items()
        if v not in (None, "", [], {}) and k not in _SHOWN_ELSEWHERE and _readable(v)
    ]
    scalars = [(k, v) for k, v in items if isinstance(v, str | int | float | bool)]
    others = [(k, v) for k, v in items if not isinstance(v, str | int | float | bool)]
    return [(_humanize(k), _evidence_value(v)) for k, v in (scalars + others)[:EVIDENCE_FIELDS]]


def what_changed(payload: Mapping[str, Any], incident: Mapping[str, Any]) -> list[str]:
    """An ``updated`` event's changes in words: ``changes`` (severity, remedy, pods) with
    ``previous`` values when the tracker gave them (``changed``: plain names)."""
    previous = payload.get("previous") or {}
    words = []
    for name in payload.get("changes") or payload.get("changed") or ():
        was = previous.get(name) if isinstance(previous, Mapping) else None
        if name == "severity":
            now = incident.get("severity", "")
            words.append(f"severity {was} → {now}" if was else f"severity now {now}")
        elif name == "remedy":
            remedy = first_remedy(incident)
            title = remedy[1].get("title", "") if remedy else ""
            words.append(f"new first fix: {title}" + (f" (was: {was})" if was else ""))
        elif name == "pods":
            words.append(f"more pods affected (was {was})" if was is not None else "more pods affected")
        else:
            words.append(str(name))
    return words


def message_remedy(remedy: Mapping[str, Any]) -> dict[str, Any]:
    """The remedy as a message shows it. A ``command`` remedy's YAML only repeats its
    command in comments, so messages show the command alone (the page keeps both)."""
    shown = dict(remedy)
    if shown.get("kind") == "command":
        shown["yaml"] = ""
    return shown


def first_remedy(incident: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
    """The first verified remedy (with its index), else the first remedy, else None."""
    remedies = list(incident.get("remedies") or ())
    for n, r in enumerate(remedies):
        if r.get("verified"):
            return n, r
    return (0, remedies[0]) if remedies else None


def subject_line(incident: Mapping[str, Any]) -> str:
    s = incident.get("subject") or {}
    ns = s.get("namespace") or ""
    return f"{s.get('kind', '')} {ns + '/' if ns else ''}{s.get('name', '')}".strip()


def state_of(incident: Mapping[str, Any]) -> str:
    """``open``, ``waiting`` or ``resolved``: what the root message shows."""
    if incident.get("status") == "resolved":
        return "resolved"
    return "waiting" if incident.get("waiting") else "open"


class Renderer:
    """Renders payloads; built once at start-up with the public URL of the pages."""

    def __init__(self, public_url: str | None = None, env: jinja2.Environment | None = None) -> None:
        self.public_url = public_url.rstrip("/") if public_url else None
        self.env = env or build_environment()
        self._text = self.env.get_template("slack_text.j2")
        self._console = self.env.get_template("console.j2")
        self._summary = self.env.get_template("webhook_summary.j2")
        self._headline = self.env.get_template("headline.j2")

    # -- the view shared by every form -------------------------------------------------
    def view(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The template context: the payload's facts, named for what they say."""
        event = str(payload.get("event") or "opened")
        incident: Mapping[str, Any] = payload.get("incident") or {}
        incidents: Sequence[Mapping[str, Any]] = payload.get("incidents") or ([incident] if incident else [])
        if event == "digest" and not incident and incidents:
            incident = incidents[0]
        remedy = first_remedy(incident)
        resolution = incident.get("resolution") or payload.get("resolution") or None
        waited = payload.get("waited") or None
        first_seen, last_seen = (
            _parse_time(incident.get("first_seen")),
            _parse_time(incident.get("last_seen")),
        )
        resolved_at = _parse_time(incident.get("resolved_at"))
        open_for = None
        if first_seen is not None:
            end = resolved_at or last_seen or first_seen
            open_for = duration_words((end - first_seen).total_seconds())
        severity = str(incident.get("severity") or "info")
        view: dict[str, Any] = {
            "event": event,
            "cluster": str(payload.get("cluster") or incident.get("cluster") or ""),
            "incident": incident,
            "incidents": [
                {**i, "subject_line": subject_line(i), "link": links_for(self.public_url, i).incident}
                for i in incidents
            ],
            "severity": severity,
            "emoji": _SEVERITY_EMOJI.get(severity, ":white_circle:"),
            "subject": subject_line(incident),
            "state": state_of(incident),
            "title": str(incident.get("title") or ""),
            "explanation": str(incident.get("explanation") or ""),
            "last_message": str(
                incident.get("last_message")
                or payload.get("last_message")
                or (incident.get("evidence") or {}).get("scheduler_message")
                or ""
            ),
            "remedy": message_remedy(remedy[1]) if remedy else None,
            "remedy_link": self._remedy_link(incident, remedy[0]) if remedy else None,
            "links": links_for(self.public_url, incident),
            "replaces": list(payload.get("replaces") or ()),
            "waited": dict(waited) if isinstance(waited, Mapping) else None,
            "changed": what_changed(payload, incident),
            "resolution": dict(resolution) if isinstance(resolution, Mapping) else None,
            "open_for": open_for,
            "first_seen": _short_time(incident.get("first_seen")),
            "last_seen": _short_time(incident.get("last_seen")),
            "resolved_at": _short_time(incident.get("resolved_at")),
            "occurrences": incident.get("occurrences"),
        }
        view["headline"] = self._headline.render(view, icon=defaultdict(str, _SLACK_ICONS)).strip()
        return view

    def _console_view(self, payload: Mapping[str, Any], sink_label: str) -> dict[str, Any]:
        v = self.view(payload)
        v["headline"] = self._headline.render(v, icon=defaultdict(str, _TERMINAL_ICONS)).strip()
        v["sink_label"] = sink_label
        lines = textwrap.wrap(v["explanation"], CONSOLE_WIDTH)
        if len(lines) > CONSOLE_EXPLANATION_LINES:
            lines = [*lines[: CONSOLE_EXPLANATION_LINES - 1], CUT_NOTE_TEXT]
        v["wrapped_explanation"] = lines
        v["wrapped_message"] = textwrap.wrap(v["last_message"], CONSOLE_WIDTH - 4)[:6]
        yaml_lines = str((v["remedy"] or {}).get("yaml") or "").rstrip().splitlines()
        if len(yaml_lines) > CONSOLE_YAML_LINES:
            yaml_lines = [*yaml_lines[: CONSOLE_YAML_LINES - 1], CUT_NOTE]
        v["remedy_yaml_lines"] = yaml_lines
        return v

    def _remedy_link(self, incident: Mapping[str, Any], n: int) -> str | None:
        remedies = list(incident.get("remedies") or ())
        if not self.public_url or n >= len(remedies) or not remedies[n].get("yaml"):
            return None
        return f"{self.public_url}/api/v1/incidents/{incident.get('id')}/remedies/{n}.yaml"

    # -- the text forms ---------------------------------------------------------------
    def slack_text(self, payload: Mapping[str, Any]) -> str:
        """Slack's ``text``: the notification line and the fallback when blocks cannot be shown."""
        return cut_lines(self._text.render(self.view(payload)).strip(), FALLBACK_TEXT_MAX, CUT_NOTE_TEXT)

    def console_text(self, payload: Mapping[str, Any], sink_label: str = "slack") -> str:
        """The message as the demo prints it in a terminal (what would go to ``sink_label``)."""
        return self._console.render(self._console_view(payload, sink_label)).rstrip() + "\n"

    def summary(self, payload: Mapping[str, Any]) -> str:
        """One or two lines for a webhook consumer that shows text (the payload's ``summary``)."""
        return self._summary.render(self.view(payload)).strip()

    # -- Block Kit --------------------------------------------------------------------
    def slack_blocks(self, payload: Mapping[str, Any], *, root: bool = False) -> list[dict[str, Any]]:
        """The Block Kit blocks of the message for ``payload`` (validated by slack-sdk).

        ``root=True`` renders the incident's root message as it stands now: the
        incident itself with its state (open / waiting / resolved), occurrences
        and last seen, whatever the event; replies in the thread say what
        happened."""
        v = self.view(payload)
        if v["event"] == "digest" and not root:
            blocks = self._digest_blocks(v)
        elif root:
            blocks = self._root_blocks(v)
        else:
            blocks = self._event_blocks(v)
        return fit_message([b.to_dict() for b in blocks])

    def _header(self, text: str) -> HeaderBlock:
        text = " ".join(text.split())
        if len(text) > HEADER_MAX:
            text = text[: HEADER_MAX - 1] + "…"
        return HeaderBlock(text=PlainTextObject(text=text, emoji=True))

    @staticmethod
    def _md(text: str, limit: int = TEXT_BLOCK_MAX) -> SectionBlock:
        return SectionBlock(text=MarkdownTextObject(text=cut_lines(text, limit, CUT_NOTE_TEXT)))

    def _subject_block(self, v: Mapping[str, Any]) -> SectionBlock:
        inc = v["incident"]
        where = f" in cluster *{slack_escape(v['cluster'])}*" if v["cluster"] else ""
        rule = f" · rule `{slack_escape(inc.get('rule_id', ''))}`" if inc.get("rule_id") else ""
        return self._md(f"*{slack_escape(v['subject'])}*{where}{rule}")

    def _context(self, v: Mapping[str, Any]) -> ContextBlock:
        inc = v["incident"]
        parts = [f"#{inc.get('id')}"]
        state = v["state"]
        if state == "resolved":
            parts.append(
                f"resolved {v['resolved_at']}" + (f" after {v['open_for']}" if v["open_for"] else "")
            )
        elif state == "waiting":
            parts.append(f"waiting for {slack_escape((inc.get('waiting') or {}).get('for', ''))}, not paged")
        else:
            parts.append("open" + (f" for {v['open_for']}" if v["open_for"] else ""))
        if v["occurrences"] is not None:
            parts.append(f"{v['occurrences']} event" + ("" if v["occurrences"] == 1 else "s"))
        if v["last_seen"]:
            parts.append(f"last seen {v['last_seen']}")
        return ContextBlock(elements=[MarkdownTextObject(text=" · ".join(parts))])

    def _button(self, v: Mapping[str, Any]) -> list[Block]:
        url = v["links"].incident
        if not url:
            return []
        elements = [ButtonElement(text="Open incident", url=url, action_id="open_incident", style="primary")]
        if v["remedy_link"] and v["state"] != "resolved":
            elements.append(ButtonElement(text="Fix YAML", url=v["remedy_link"], action_id="remedy_yaml"))
        return [ActionsBlock(elements=elements)]

    def _diagnosis_blocks(self, v: Mapping[str, Any]) -> list[Block]:
        blocks: list[Block] = []
        if v["explanation"]:
            blocks.append(self._md(slack_escape(v["explanation"])))
        if v["last_message"]:
            said = cut_lines(slack_escape(v["last_message"]), TEXT_BLOCK_MAX - 40, CUT_NOTE_TEXT)
            blocks.append(self._md(f"*The scheduler said:*\n> {said}"))
        fields = key_evidence(v["incident"].get("evidence") or {})
        if fields:
            blocks.append(
                SectionBlock(
                    fields=[
                        MarkdownTextObject(
                            text=cut_lines(f"*{slack_escape(k)}*\n{slack_escape(val)}", FIELD_MAX)
                        )
                        for k, val in fields
                    ]
                )
            )
        blocks += self._remedy_blocks(v)
        return blocks

    def _remedy_blocks(self, v: Mapping[str, Any]) -> list[Block]:
        r = v["remedy"]
        if not r:
            return []
        mark = "verified" if r.get("verified") else "not verified"
        blocks: list[Block] = [
            self._md(f"*Fix ({mark}):* {slack_escape(r.get('title', ''))}", TEXT_BLOCK_MAX)
        ]
        if r.get("yaml"):
            blocks.append(SectionBlock(text=MarkdownTextObject(text=code_block(slack_escape(r["yaml"])))))
        if r.get("command"):
            blocks.append(self._md(code_block(slack_escape(r["command"]), TEXT_BLOCK_MAX, CUT_NOTE_TEXT)))
        return blocks

    def _event_blocks(self, v: Mapping[str, Any]) -> list[Block]:
        event = v["event"]
        blocks: list[Block] = [self._header(v["headline"]), self._subject_block(v)]
        if event == "resolved":
            blocks += self._resolution_blocks(v)
        elif event == "updated":
            if v["changed"]:
                blocks.append(self._md("*What changed:* " + slack_escape("; ".join(v["changed"]))))
            blocks += self._diagnosis_blocks(v)
        elif event == "reminder":
            blocks.append(
                self._md(f"*Still open* after {v['open_for'] or 'a while'}: {slack_escape(v['title'])}")
            )
            blocks += self._remedy_blocks(v)
        else:  # opened, root_cause_changed, escalated
            if event == "root_cause_changed" and v["replaces"]:
                was = "\n".join(f"• ~{slack_escape(o.get('title', ''))}~" for o in v["replaces"])
                blocks.append(self._md(f"*The cause moved.* It was:\n{was}"))
            if v["waited"]:
                since = _short_time(v["waited"].get("since"))
                blocks.append(
                    self._md(
                        f"*Escalated:* waited for {slack_escape(v['waited'].get('for', ''))}"
                        + (f" since {since}" if since else "")
                        + "; it did not bring the capacity."
                    )
                )
            if len(" ".join(v["headline"].split())) > HEADER_MAX:  # the header cut the title short
                blocks.append(self._md(f"*{slack_escape(v['title'])}*"))
            blocks += self._diagnosis_blocks(v)
        blocks += [self._context(v), *self._button(v)]
        return blocks

    def _resolution_blocks(self, v: Mapping[str, Any]) -> list[Block]:
        blocks: list[Block] = [self._md(f"Was: {slack_escape(v['title'])}")]
        res = v["resolution"]
        if res:
            lines = []
            if res.get("summary"):
                lines.append(f"*What fixed it:* {slack_escape(res['summary'])}")
            lines += [f"• {slack_escape(c)}" for c in resolution_details(res)]
            if lines:
                blocks.append(self._md("\n".join(lines)))
        return blocks

    def _root_blocks(self, v: Mapping[str, Any]) -> list[Block]:
        state = v["state"]
        head = {
            "resolved": f"✅ RESOLVED · {v['title']}",
            "waiting": f"⏳ WAITING · {v['title']}",
        }.get(state, f"{v['severity'].upper()} · {v['title']}")
        blocks: list[Block] = [self._header(head), self._subject_block(v)]
        if state == "resolved":
            blocks += self._resolution_blocks(v)[1:]
        else:
            blocks += self._diagnosis_blocks(v)
        blocks += [self._context(v), *self._button(v)]
        return blocks

    def _digest_blocks(self, v: Mapping[str, Any]) -> list[Block]:
        incidents = v["incidents"]
        blocks: list[Block] = [self._header(v["headline"])]
        lines = []
        for i in incidents:
            link = f"<{i['link']}|#{i.get('id')}>" if i.get("link") else f"#{i.get('id')}"
            sev = _SEVERITY_EMOJI.get(str(i.get("severity")), "")
            lines.append(
                f"{sev} {link} *{slack_escape(i['subject_line'])}*: {slack_escape(i.get('title', ''))}"
            )
        # Whole lines in sections of at most TEXT_BLOCK_MAX characters, within the block and
        # message budgets (room kept for the header, the "… and N more" line and the context).
        sections: list[list[str]] = [[]]
        size = total = shown = 0
        for line in lines:
            line = cut_lines(line, 500, "…")
            if size + len(line) + 1 > TEXT_BLOCK_MAX:
                if len(sections) >= BLOCKS_MAX - 3:
                    break
                sections.append([])
                size = 0
            if total + len(line) + 1 > MESSAGE_MAX - 2000:
                break
            sections[-1].append(line)
            size += len(line) + 1
            total += len(line) + 1
            shown += 1
        blocks += [self._md("\n".join(chunk)) for chunk in sections if chunk]
        if shown < len(lines):
            more = f"… and {len(lines) - shown} more"
            page = v["links"].incidents_page
            blocks.append(self._md(f"{more} on <{page}|the incident list>" if page else more))
        cluster = f" in cluster *{slack_escape(v['cluster'])}*" if v["cluster"] else ""
        blocks.append(
            ContextBlock(
                elements=[
                    MarkdownTextObject(
                        text=f"Storm protection{cluster}: one message instead of {len(lines)}. Each incident is tracked as usual."
                    )
                ]
            )
        )
        return blocks


def _block_chars(block: Mapping[str, Any]) -> int:
    n = 0
    text = block.get("text")
    if isinstance(text, Mapping):
        n += len(str(text.get("text", "")))
    for f in block.get("fields") or ():
        n += len(str(f.get("text", "")))
    for e in block.get("elements") or ():
        if isinstance(e, Mapping):
            n += len(str(e.get("text", ""))) if isinstance(e.get("text"), str) else 0
    return n


def fit_message(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most :data:`BLOCKS_MAX` blocks and :data:`MESSAGE_MAX` characters: drop from the
    middle (evidence, the scheduler's words) before the header, the subject, the context and the link."""
    if len(blocks) > BLOCKS_MAX:
        blocks = blocks[: BLOCKS_MAX - 2] + blocks[-2:]
    while sum(_block_chars(b) for b in blocks) > MESSAGE_MAX and len(blocks) > 4:
        del blocks[len(blocks) // 2]
    return blocks


# Kept for templates and tests: the view's keys are the template contract.
__all__ = [
    "BLOCKS_MAX",
    "CUT_NOTE",
    "EVENTS",
    "MESSAGE_MAX",
    "TEXT_BLOCK_MAX",
    "Links",
    "Renderer",
    "build_environment",
    "code_block",
    "cut_lines",
    "links_for",
]
