"""What messages say: golden Block Kit JSON and text for every rule and every event,
and Slack's limits.

The payloads come from the real tracker over each rule's golden scenario
(``tests/notify/payloads.py``). To accept a deliberate change of wording, run
``UNSTICK_UPDATE_GOLDEN=1 pytest tests/notify/test_render.py`` and review the diff.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent.notify.render import (
    BLOCKS_MAX,
    CUT_NOTE,
    MESSAGE_MAX,
    TEXT_BLOCK_MAX,
    Renderer,
    code_block,
    cut_lines,
)
from analyzers.rules import RULES
from tests.notify.payloads import golden_cases, tracked_payloads

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UNSTICK_UPDATE_GOLDEN") == "1"
RENDERER = Renderer("https://unstick.example.com")


def rendered(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "blocks": RENDERER.slack_blocks(payload),
        "root_blocks": RENDERER.slack_blocks(payload, root=True) if payload["event"] != "digest" else None,
        "text": RENDERER.slack_text(payload),
        "console": RENDERER.console_text(payload),
        "summary": RENDERER.summary(payload),
    }


def check_golden(name: str, doc: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if UPDATE or not path.exists():
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
        if not UPDATE:
            pytest.fail(f"golden file {path.name} was missing and has been written; review and commit it")
    assert json.loads(path.read_text()) == json.loads(text), (
        f"{path.name} differs (UNSTICK_UPDATE_GOLDEN=1 to accept)"
    )


def test_every_rule_has_a_golden_case() -> None:
    assert set(golden_cases()) == {r.rule_id for r in RULES}


@pytest.mark.parametrize("rule_id", sorted(golden_cases()))
async def test_rule_messages_match_golden(rule_id: str) -> None:
    payloads = await tracked_payloads(golden_cases()[rule_id])
    mine = [p for p in payloads if p["incident"]["rule_id"] == rule_id]
    assert [p["event"] for p in mine][:1] == ["opened"] and mine[-1]["event"] == "resolved"
    check_golden(rule_id, {p["event"]: rendered(p) for p in (mine[0], mine[-1])})


async def base_payload() -> dict[str, Any]:
    payloads = await tracked_payloads(golden_cases()["rollout-surge-deadlock"])
    return payloads[0]


async def test_every_event_matches_golden() -> None:
    opened = await base_payload()
    inc = opened["incident"]
    resolved_inc = {
        **inc,
        "status": "resolved",
        "resolved_at": "2026-11-20T10:40:00Z",
        "resolution": {
            "summary": "the Deployment's strategy changed to maxSurge 0 / maxUnavailable 1",
            "changes": ["spec.strategy.rollingUpdate.maxSurge: 25% → 0", "pod scheduled on tracker-node"],
        },
    }
    other = {
        **inc,
        "id": 7,
        "title": "trainer: nodeSelector gpu-typ=a10g matches no node",
        "severity": "warning",
    }
    events = {
        "opened": opened,
        "updated": {
            **opened,
            "event": "updated",
            "changes": ["severity", "remedy", "pods"],
            "previous": {"severity": "warning", "remedy": "Add a GPU node", "pods": 1},
        },
        "root_cause_changed": {**opened, "event": "root_cause_changed", "replaces": [other]},
        "escalated": {
            **opened,
            "event": "escalated",
            "waited": {"for": "scale-up", "since": "2026-11-20T10:02:00Z"},
        },
        "reminder": {**opened, "event": "reminder", "incident": {**inc, "last_seen": "2026-11-21T10:12:00Z"}},
        "resolved": {**opened, "event": "resolved", "incident": resolved_inc},
        "digest": {"event": "digest", "cluster": "prod-eu1", "incidents": [inc, other]},
    }
    doc = {name: rendered(p) for name, p in events.items()}
    check_golden("events", doc)
    # Spot checks a person reads first.
    assert (
        doc["resolved"]["text"].splitlines()[0]
        == ":white_check_mark: Resolved · Deployment vision/vision-object-tracker"
    )
    assert "What fixed it: the Deployment's strategy changed" in doc["resolved"]["text"]
    assert "Waited for scale-up; it did not bring the capacity." in doc["escalated"]["text"]
    assert doc["reminder"]["text"].startswith(":alarm_clock: Still open after 1d")
    assert doc["digest"]["blocks"][0]["text"]["text"] == ":ocean: 2 new incidents in prod-eu1"


async def test_absent_optional_keys_are_tolerated() -> None:
    bare = {"event": "opened", "incident": {"id": 1}}
    for form in (RENDERER.slack_text, RENDERER.console_text, RENDERER.summary, RENDERER.slack_blocks):
        assert form(bare)  # type: ignore[operator]
    assert RENDERER.slack_blocks({"event": "digest", "incidents": []})


def test_cut_lines_cuts_on_a_line_boundary() -> None:
    text = "\n".join(f"line {i:03d}" for i in range(1000))
    cut = cut_lines(text, 500, CUT_NOTE)
    assert len(cut) <= 500 and cut.endswith("\n" + CUT_NOTE)
    kept = cut.splitlines()[:-1]
    assert kept == text.splitlines()[: len(kept)]  # whole lines only


def test_code_block_keeps_the_fence_and_the_limit() -> None:
    yaml_text = "\n".join(f"  key{i}: value-{i}" for i in range(2000))
    block = code_block(yaml_text)
    assert len(block) <= TEXT_BLOCK_MAX
    assert block.startswith("```\n") and block.endswith("```\n" + CUT_NOTE)


async def test_huge_incidents_stay_within_slack_limits() -> None:
    payload = copy.deepcopy(await base_payload())
    inc = payload["incident"]
    inc["explanation"] = "\n".join(f"Sentence {i} about why the pod waits." for i in range(2000))
    inc["title"] = "T" * 400
    inc["remedies"][0]["yaml"] = "\n".join(f"  k{i}: {'v' * 50}" for i in range(3000))
    inc["remedies"][0]["command"] = "kubectl " + "x" * 5000
    inc["evidence"] = {f"key_{i}": "e" * 5000 for i in range(40)}
    blocks = RENDERER.slack_blocks(payload)
    assert len(blocks) <= BLOCKS_MAX
    assert len(json.dumps(blocks)) < MESSAGE_MAX + 10_000  # JSON overhead on top of the text
    texts = [b["text"]["text"] for b in blocks if isinstance(b.get("text"), dict)]
    assert all(len(t) <= TEXT_BLOCK_MAX for t in texts)
    assert any(t.endswith(CUT_NOTE) and t.startswith("```") for t in texts)
    assert len(blocks[0]["text"]["text"]) <= 150
    assert len(RENDERER.slack_text(payload)) <= 4000
    many = {
        "event": "digest",
        "cluster": "c",
        "incidents": [dict(inc, id=i, title=f"t{i} " * 40) for i in range(400)],
    }
    digest = RENDERER.slack_blocks(many)
    assert len(digest) <= BLOCKS_MAX
    assert "more on <https://unstick.example.com/incidents|the incident list>" in json.dumps(digest)


def test_user_text_is_escaped_for_slack() -> None:
    payload = {
        "event": "opened",
        "cluster": "c",
        "incident": {"id": 1, "title": "a <!channel> & <https://evil|click>", "severity": "critical"},
    }
    text = RENDERER.slack_text(payload)
    assert "<!channel>" not in text and "&lt;!channel&gt; &amp;" in text


def test_a_resolution_lists_only_the_changes_its_summary_does_not_say() -> None:
    from agent.notify.render import resolution_details

    one = {
        "summary": "The Deployment shop/web strategy changed from A to B.",
        "changes": ["the Deployment shop/web strategy changed from A to B"],
    }
    assert resolution_details(one) == []
    two = {
        "summary": "Pod web-1 was scheduled on node-3 after the Deployment shop/web strategy changed from A to B.",
        "changes": [
            "the Deployment shop/web strategy changed from A to B",
            "pod web-1 was scheduled on node-3",
            "pod web-2 was scheduled on node-4",
        ],
    }
    assert resolution_details(two) == ["pod web-2 was scheduled on node-4"]
    assert resolution_details(None) == [] and resolution_details({"summary": "x"}) == []
