"""Slack sinks against a local server that answers like Slack's Web API."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.notify.render import Renderer
from agent.notify.slack import Route, Router, SlackBotSink, SlackWebhookSink, parse_route, routes_from
from agent.notify.worker import OutboxWorker, RetryPolicy
from agent.settings import Secret
from analyzers.findings import ObjectRef
from storage.outbox import delivery_id
from storage.tracker import EVERY_SUBJECT, track
from tests.notify.conftest import open_incidents, rows
from tests.notify.receivers import BOT_TOKEN, FakeSlack
from tests.storage.factories import T0, finding

FAST = RetryPolicy(max_attempts=3, base_delay=0.02, max_delay=0.1)


def bot(slack: FakeSlack, *, router: Router | None = None, token: str = BOT_TOKEN) -> SlackBotSink:
    return SlackBotSink(
        Secret(token), router or Router("#alerts"), Renderer("https://u.example"), api_url=slack.api_url
    )


async def drain(sessions: async_sessionmaker[AsyncSession], *sinks: object) -> OutboxWorker:
    worker = OutboxWorker(sessions, list(sinks), policy=FAST)  # type: ignore[arg-type]
    await worker.start()
    try:
        assert await worker.drain(20) == 0
    finally:
        await worker.stop()
    return worker


async def test_one_thread_per_incident_root_edited_to_resolved(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    outbox = await open_incidents(sessions, 3, ["slack"], resolve=True)
    await drain(sessions, bot(slack))
    roots = slack.roots()
    assert len(roots) == 3
    for root in roots:
        [reply] = slack.replies_to(root)
        assert reply.text.startswith(":white_check_mark: Resolved")
        # The root now shows the incident as resolved, in its blocks and its text.
        assert root.edits, "root not edited"
        assert root.current_blocks is not None
        assert root.current_blocks[0]["text"]["text"].startswith("✅ RESOLVED")
        assert "resolved" in root.current_text
        assert root.metadata is not None and root.metadata["event_payload"]["event"] == "opened"
    # The thread reference is kept on the rows.
    stored = await rows(sessions)
    assert {r.status for r in stored} == {"sent"}
    by_incident = {(r.incident_id, r.event): r.thread_ref for r in stored}
    for r in stored:
        assert by_incident[(r.incident_id, "opened")] == by_incident[(r.incident_id, "resolved")]
    keys = {m.metadata["event_payload"]["delivery"] for m in slack.messages if m.metadata}
    assert keys == {delivery_id(r) for r in outbox}


async def test_a_root_cause_change_replies_in_a_new_thread_of_the_new_incident(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    subject = ObjectRef("Deployment", "ml", "trainer")
    await track(sessions, cluster="c", findings=[finding(subject)], now=T0, evaluated=EVERY_SUBJECT, sinks=["slack"])
    moved = finding(subject, cause="taint", title="trainer: untolerated taint gpu=true:NoSchedule")
    await track(
        sessions, cluster="c", findings=[moved], now=T0 + timedelta(minutes=1), evaluated=EVERY_SUBJECT, sinks=["slack"]
    )
    await drain(sessions, bot(slack))
    texts = [m.text.splitlines()[0] for m in slack.messages]
    assert texts[0].startswith(":red_circle: CRITICAL")
    assert texts[1].startswith(":twisted_rightwards_arrows: Root cause changed · trainer: untolerated taint")
    assert "Was: Rollout of ml/trainer cannot progress" in slack.messages[1].text


async def test_refused_blocks_fall_back_to_text_once(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    await open_incidents(sessions, 1, ["slack"])
    slack.fail_next("chat.postMessage", "invalid_blocks")
    await drain(sessions, bot(slack))
    [msg] = slack.messages
    assert msg.blocks is None and msg.text.startswith(":red_circle: CRITICAL")
    posts = [body for method, body in slack.calls if method == "chat.postMessage"]
    assert ["blocks" in b for b in posts] == [True, False]
    [row] = await rows(sessions)
    assert row.status == "sent" and row.attempts == 1


async def test_msg_too_long_falls_back_to_text(sessions: async_sessionmaker[AsyncSession], slack: FakeSlack) -> None:
    await open_incidents(sessions, 1, ["slack"])
    slack.fail_next("chat.postMessage", "msg_too_long")
    await drain(sessions, bot(slack))
    assert [m.blocks is None for m in slack.messages] == [True]


async def test_channel_problems_dead_letter_without_retries(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    await open_incidents(sessions, 1, ["slack"])
    await drain(sessions, bot(slack, router=Router("#nowhere")))
    [row] = await rows(sessions)
    assert (row.status, row.attempts) == ("failed", 1)
    assert row.last_error == "slack chat.postMessage: channel_not_found (channel #nowhere)"
    assert len(slack.calls) == 1


async def test_a_bad_token_dead_letters_and_is_never_shown(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    await open_incidents(sessions, 1, ["slack"])
    wrong = "xoxb-wrong-token-1234567890"
    sink = bot(slack, token=wrong)
    assert wrong not in repr(sink)
    await drain(sessions, sink)
    [row] = await rows(sessions)
    assert row.status == "failed" and row.last_error is not None
    assert "invalid_auth" in row.last_error and wrong not in row.last_error


async def test_ratelimited_waits_for_retry_after_then_sends(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    await open_incidents(sessions, 1, ["slack"])
    slack.fail_next("chat.postMessage", "ratelimited", retry_after=1)
    worker = await drain(sessions, bot(slack))
    [row] = await rows(sessions)
    assert row.status == "sent" and row.attempts == 1
    assert worker.stats()["slack"].rate_limited == 1
    assert len(slack.messages) == 1


async def test_a_server_error_is_retried(sessions: async_sessionmaker[AsyncSession], slack: FakeSlack) -> None:
    await open_incidents(sessions, 1, ["slack"])
    slack.fail_next("chat.postMessage", "http500")
    await drain(sessions, bot(slack))
    [row] = await rows(sessions)
    assert row.status == "sent" and row.attempts == 2


async def test_routing_first_match_wins_then_the_default(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    specs = ["namespace:ml-*,severity:critical=#ml-oncall", "rollout-deadlock=#platform"]
    router = Router("#alerts", routes_from([parse_route(s) for s in specs]))
    await open_incidents(sessions, 1, ["slack"], namespace="ml-train")
    await open_incidents(sessions, 1, ["slack"], namespace="web")
    await drain(sessions, bot(slack, router=router))
    assert [m.channel for m in slack.roots()] == ["C0MLONCAL", "C0PLATFRM"]
    assert Router("#alerts", (Route("#x", rule="other"),)).channel_for({"rule_id": "r"}) == "#alerts"


async def test_incoming_webhook_posts_one_message_per_event(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    await open_incidents(sessions, 2, ["slack-webhook"], resolve=True)
    slack.fail_next("webhook", "invalid_blocks")
    sink = SlackWebhookSink(Secret(slack.webhook_url), Renderer())
    assert "secretwebhookpart" not in repr(sink)
    await drain(sessions, sink)
    assert len(slack.webhook_posts) == 4
    assert sum("blocks" not in p for p in slack.webhook_posts) == 1  # the refused one, as text
    assert {r.status for r in await rows(sessions)} == {"sent"}


async def test_incoming_webhook_channel_gone_is_dead_lettered(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    await open_incidents(sessions, 1, ["slack-webhook"])
    slack.fail_next("webhook", "channel_not_found")
    await drain(sessions, SlackWebhookSink(Secret(slack.webhook_url), Renderer()))
    [row] = await rows(sessions)
    assert (row.status, row.last_error) == ("failed", "slack webhook: channel_not_found")


async def test_a_message_whose_answer_was_lost_is_found_not_posted_again(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    """Every first post (roots and replies) reaches Slack but its answer is lost; each
    redelivery finds its message by the delivery key in the metadata instead of posting."""
    await open_incidents(sessions, 3, ["slack"], resolve=True)
    slack.lose_answers = 6
    await drain(sessions, bot(slack, router=Router("C0ALERTS1")))
    assert slack.lose_answers == 0
    roots = slack.roots()
    assert len(roots) == 3, [m.text for m in roots]
    assert all(len(slack.replies_to(root)) == 1 for root in roots)
    assert len(slack.messages) == 6
    stored = await rows(sessions)
    assert {r.status for r in stored} == {"sent"}
    # The thread reference found on redelivery is the real root's.
    assert {r.thread_ref for r in stored} == {f"{root.channel}:{root.ts}" for root in roots}
    looked = [m for m, _ in slack.calls if m.startswith("conversations.")]
    assert sorted(set(looked)) == ["conversations.history", "conversations.replies"]
    # Resolved replies still edited their roots.
    assert all(root.edits for root in roots)


async def test_when_slack_will_not_show_history_a_lost_answer_is_posted_again(
    sessions: async_sessionmaker[AsyncSession], slack: FakeSlack
) -> None:
    """At least once rather than never: without history scopes (or with a #name channel,
    which history cannot read) a redelivery cannot know, and posts."""
    await open_incidents(sessions, 1, ["slack"])
    slack.lose_answers = 1
    slack.history_error = "missing_scope"
    await drain(sessions, bot(slack, router=Router("C0ALERTS1")))
    assert len(slack.roots()) == 2
    assert {r.status for r in await rows(sessions)} == {"sent"}
