"""``unstick demo --once`` end to end, as a user runs it: the seed incidents open and
resolve, and their messages reach real local receivers before the command exits."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from agent.demo import scenario_paths
from tests.notify.conftest import SECRET
from tests.notify.receivers import BOT_TOKEN, FakeSlack, WebhookReceiver

ROOT = Path(__file__).resolve().parents[2]
SEEDS = len(list(scenario_paths()))


async def demo(*args: str, cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent", "demo", "--once", "--db", f"sqlite+aiosqlite:///{cwd}/demo.db", *args,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.slow
async def test_demo_once_delivers_signed_opened_and_resolved_for_every_seed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text(SECRET.decode() + "\n")
    async with WebhookReceiver(SECRET) as receiver:
        code, out, err = await demo("--webhook-url", receiver.hook_url, "--webhook-secret-file", str(secret), cwd=tmp_path)
    assert code == 0, err
    assert receiver.rejected == 0  # every signature verified
    docs = list(receiver.deliveries.values())
    assert len(receiver.seen) == len(receiver.headers)  # unique delivery ids
    by_incident: dict[int, list[str]] = {}
    for h in receiver.headers:
        doc = receiver.deliveries[h["X-Unstick-Delivery"]]
        by_incident.setdefault(doc["incident"]["id"], []).append(doc["event"])
    assert len(by_incident) == SEEDS
    for events in by_incident.values():
        # Opened first, resolved last; between them only what a person acts on (the tracker's
        # `updated`: a new first remedy, a severity change), never one message per event.
        assert events[0] == "opened" and events[-1] == "resolved", events
        assert set(events[1:-1]) <= {"updated"}, events
    assert {d["cluster"] for d in docs} == {p.name for p in scenario_paths()}
    assert all(d["links"]["incident"].startswith("http://127.0.0.1:") for d in docs)
    assert "┌─" not in out  # no console sink when another sink is given


@pytest.mark.slow
async def test_demo_once_with_a_slack_bot_threads_each_incident(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(BOT_TOKEN)
    async with FakeSlack() as slack:
        code, _, err = await demo(
            "--slack-token-file", str(token), "--slack-channel", "#alerts",
            "--slack-route", "pdb-blocks-eviction=#platform", "--slack-api-url", slack.api_url, cwd=tmp_path,
        )
    assert code == 0, err
    roots = slack.roots()
    assert len(roots) == SEEDS  # one root per incident
    for root in roots:
        replies = slack.replies_to(root)  # later messages, in its thread
        assert replies[-1].text.startswith(":white_check_mark: Resolved")
        assert all(r.text.startswith(":pencil2: Updated") for r in replies[:-1])
        assert root.current_blocks is not None
        assert root.current_blocks[0]["text"]["text"].startswith("✅ RESOLVED")  # root edited in place
    channels = sorted(r.channel for r in roots)
    assert channels.count("C0PLATFRM") == 1 and channels.count("C0ALERTS1") == SEEDS - 1
    assert BOT_TOKEN not in err


@pytest.mark.slow
async def test_demo_once_prints_messages_to_the_console_by_default(tmp_path: Path) -> None:
    from agent.demo import SCENARIOS
    from agent.fakecluster.scenario import Scenario

    step = Scenario.load(SCENARIOS / "gpu-rollout-deadlock").timeline[0]
    rolling = next(o for o in step.apply if o["kind"] == "Deployment")["metadata"]["name"]
    code, out, err = await demo("--scenario", "gpu-rollout-deadlock", cwd=tmp_path)
    assert code == 0, err
    assert "┌─ would post to Slack · opened · #1" in out
    assert f"│ [!!] CRITICAL · Rollout of {rolling} is deadlocked" in out
    assert "┌─ would post to Slack · resolved · #1" in out
    assert out.index("· opened ·") < out.index("· resolved ·") < out.index("incident(s):")
