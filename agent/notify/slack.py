"""Slack, both ways people install it.

* **Incoming webhook** (:class:`SlackWebhookSink`): one message per event to
  the webhook's one channel. An incoming webhook cannot reply in a thread nor
  edit a message, so there is no conversation per incident this way.
* **Bot token** (:class:`SlackBotSink`): ``chat.postMessage`` posts the
  incident's root message (on ``opened``, or whatever event comes first); later
  events reply in its thread (``thread_ts``) and the root is edited in place
  (``chat.update``) to show the incident as it stands: open / waiting /
  resolved, occurrences, last seen. The root's ``"<channel id>:<ts>"`` is kept
  as the outbox row's ``thread_ref``. Channels are chosen by :class:`Router`.

Slack answers ``ok: false`` with an error name; they are handled by kind
(https://docs.slack.dev/reference/methods/chat.postMessage): rate limits
(HTTP 429 with ``Retry-After``, or ``ratelimited``) pause the sink and retry;
refused blocks (``invalid_blocks``, ``msg_too_long``, …) are retried once,
at once, as the text-only message; a channel, token or permission problem
dead-letters the row with the reason, without retrying.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson

from agent.notify.base import Delivery, GiveUp, RetryLater, Sent
from agent.notify.http import (
    MAX_RESPONSE_BYTES,
    TRANSPORT_ERRORS,
    client_session,
    describe_transport_error,
    post,
    redirect_refused,
    retry_after_seconds,
)
from agent.notify.render import Renderer
from agent.settings import Secret

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api"
BLOCKS_REFUSED = frozenset(
    {"invalid_blocks", "invalid_blocks_format", "msg_too_long", "msg_blocks_too_long", "too_many_blocks"}
)
PERMANENT = frozenset(
    {
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "channel_is_archived",
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "no_permission",
        "missing_scope",
        "restricted_action",
        "restricted_action_read_only_channel",
        "restricted_action_thread_only_channel",
        "restricted_action_non_threadable_channel",
        "ekm_access_denied",
        "team_access_not_granted",
        "invalid_arguments",
        "invalid_payload",
        "no_service",
        "no_service_id",
        "no_team",
        "team_disabled",
        "invalid_token",
        "action_prohibited",
        "posting_to_general_channel_denied",
        "user_not_found",
    }
)


@dataclass(frozen=True, slots=True)
class Route:
    """``namespace``/``rule``/``severity`` patterns (glob, ``None`` = any) → a channel."""

    channel: str
    namespace: str | None = None
    rule: str | None = None
    severity: str | None = None

    def matches(self, incident: Mapping[str, Any]) -> bool:
        subject = incident.get("subject") or {}
        checks = (
            (self.namespace, str(subject.get("namespace") or "")),
            (self.rule, str(incident.get("rule_id") or "")),
            (self.severity, str(incident.get("severity") or "")),
        )
        return all(pattern is None or fnmatch.fnmatchcase(value, pattern) for pattern, value in checks)


@dataclass(frozen=True, slots=True)
class Router:
    """The first matching route's channel, else the default channel."""

    default: str
    routes: tuple[Route, ...] = ()

    def channel_for(self, incident: Mapping[str, Any]) -> str:
        for route in self.routes:
            if route.matches(incident):
                return route.channel
        return self.default


class SlackError(Exception):
    """``ok: false`` (or a non-200 answer) from Slack: ``error`` is Slack's error name."""

    def __init__(self, error: str, *, status: int, retry_after: float | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.retry_after = retry_after


def _classify(method: str, exc: SlackError, where: str) -> Exception:
    reason = f"slack {method}: {exc.error}{where}"
    if exc.status == 429 or exc.error in ("ratelimited", "rate_limited"):
        return RetryLater(reason, retry_after=exc.retry_after or 1.0, rate_limited=True)
    if exc.error in PERMANENT:
        return GiveUp(reason)
    return RetryLater(reason, retry_after=exc.retry_after)


class SlackBotSink:
    """A Slack app's bot token: one thread per incident, its root edited in place."""

    threaded = True  # deliveries carry the incident's thread reference

    def __init__(
        self,
        token: Secret,
        router: Router,
        renderer: Renderer,
        *,
        api_url: str = DEFAULT_API_URL,
        name: str = "slack",
        concurrency: int = 4,
        session_factory: Callable[[], aiohttp.ClientSession] | None = None,
    ) -> None:
        self.name = name
        self.concurrency = concurrency
        self.router = router
        self._token = token
        self._renderer = renderer
        self._api = api_url.rstrip("/")
        self._session = (session_factory or (lambda: client_session(concurrency=concurrency)))()
        self.root_update_failures = 0

    def __repr__(self) -> str:
        return f"SlackBotSink(name={self.name!r}, token=<secret>, default={self.router.default!r})"

    async def call(self, method: str, body: Mapping[str, Any], *, form: bool = False) -> dict[str, Any]:
        """One Web API call; the answer's JSON when ``ok``, else :class:`SlackError`.
        ``form``: the arguments form-encoded (read methods such as ``conversations.history``
        do not take JSON bodies)."""
        headers = {"Authorization": f"Bearer {self._token.reveal()}"}
        if form:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            data: bytes = urlencode(body).encode()
        else:
            headers["Content-Type"] = "application/json; charset=utf-8"
            data = orjson.dumps(body)
        async with post(self._session, f"{self._api}/{method}", data=data, headers=headers) as resp:
            raw = await resp.content.read(MAX_RESPONSE_BYTES)
            retry_after = retry_after_seconds(resp.headers)
            status = resp.status
            redirected = redirect_refused(status, resp.headers)
        if redirected is not None:
            raise SlackError(redirected, status=status)
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = None
        if not isinstance(doc, dict):
            if status == 429:
                raise SlackError("ratelimited", status=status, retry_after=retry_after)
            raise SlackError(f"HTTP {status}, not a Web API answer", status=status, retry_after=retry_after)
        if status == 429 or not doc.get("ok"):
            raise SlackError(
                str(doc.get("error") or f"HTTP {status}"), status=status, retry_after=retry_after
            )
        return doc

    async def _post(self, method: str, body: dict[str, Any], where: str) -> dict[str, Any]:
        """``method`` with blocks; if Slack refuses the blocks, once more as text only."""
        try:
            try:
                return await self.call(method, body)
            except SlackError as exc:
                if exc.error not in BLOCKS_REFUSED or "blocks" not in body:
                    raise
                log.warning("slack refused the blocks (%s); sending the text-only message", exc.error)
                return await self.call(method, {k: v for k, v in body.items() if k != "blocks"})
        except SlackError as exc:
            raise _classify(method, exc, where) from None
        except TRANSPORT_ERRORS as exc:
            raise RetryLater(f"slack {method}: {describe_transport_error(exc)}") from None

    def _metadata(self, delivery: Delivery) -> dict[str, Any]:
        # Slack has no idempotency key; the delivery id travels in the message's metadata.
        return {
            "event_type": "unstick_notification",
            "event_payload": {
                "delivery": delivery.key,
                "incident_id": delivery.incident_id,
                "event": delivery.event,
            },
        }

    async def posted_before(self, delivery: Delivery, channel: str, thread_ts: str | None) -> str | None:
        """On a redelivery (the first attempt may have posted and then lost its answer, or
        the agent died before recording it): the ``ts`` of the message already carrying this
        delivery's key in its metadata, found among the channel's (or thread's) latest
        messages; None when there is none or Slack will not say (``channels:history`` /
        ``groups:history`` missing, a ``#name`` channel that history cannot read): then the
        message is posted again, at least once rather than never."""
        method = "conversations.replies" if thread_ts is not None else "conversations.history"
        params = {"channel": channel, "limit": "200", "include_all_metadata": "true"}
        if thread_ts is not None:
            params["ts"] = thread_ts
        try:
            answer = await self.call(method, params, form=True)
        except SlackError as exc:
            if exc.error == "ratelimited" or exc.status == 429:
                raise RetryLater(
                    f"slack {method}: rate limited", retry_after=exc.retry_after, rate_limited=True
                ) from None
            log.warning(
                "slack %s: %s; cannot tell whether delivery %s was posted before: posting it",
                method,
                exc.error,
                delivery.key,
            )
            return None
        except TRANSPORT_ERRORS as exc:
            raise RetryLater(f"slack {method}: {describe_transport_error(exc)}") from None
        for message in answer.get("messages") or ():
            meta = message.get("metadata") if isinstance(message, dict) else None
            payload = meta.get("event_payload") if isinstance(meta, dict) else None
            if isinstance(payload, dict) and payload.get("delivery") == delivery.key:
                return str(message.get("ts"))
        return None

    async def deliver(self, delivery: Delivery) -> Sent:
        payload = delivery.payload
        text = self._renderer.slack_text(payload)
        again = delivery.attempt > 1
        if delivery.event == "digest" or not payload.get("incident"):
            channel = self.router.default
            if again and await self.posted_before(delivery, channel, None) is not None:
                return Sent()
            body = {"channel": channel, "text": text, "blocks": self._renderer.slack_blocks(payload)}
            body["metadata"] = self._metadata(delivery)
            await self._post("chat.postMessage", body, f" (channel {channel})")
            return Sent()
        incident = payload["incident"]
        if delivery.thread_ref is None:
            # The first message of the incident is its root: the incident as it stands.
            channel = self.router.channel_for(incident)
            if again and (ts := await self.posted_before(delivery, channel, None)) is not None:
                return Sent(f"{channel}:{ts}")
            root = delivery.event == "opened"
            blocks = self._renderer.slack_blocks(payload, root=root)
            body = {"channel": channel, "text": text, "blocks": blocks, "metadata": self._metadata(delivery)}
            answer = await self._post("chat.postMessage", body, f" (channel {channel})")
            return Sent(f"{answer.get('channel') or channel}:{answer.get('ts')}")
        channel, _, ts = delivery.thread_ref.partition(":")
        if again and await self.posted_before(delivery, channel, ts) is not None:
            await self._update_root(channel, ts, payload)
            return Sent(delivery.thread_ref)
        body = {
            "channel": channel,
            "thread_ts": ts,
            "text": text,
            "blocks": self._renderer.slack_blocks(payload),
            "metadata": self._metadata(delivery),
        }
        await self._post("chat.postMessage", body, f" (thread in {channel})")
        await self._update_root(channel, ts, payload)
        return Sent(delivery.thread_ref)

    async def _update_root(self, channel: str, ts: str, payload: Mapping[str, Any]) -> None:
        """Edit the root to the incident's current state. The reply is out already: a failure
        here is logged and counted, never retried (a retry would post the reply twice)."""
        body = {
            "channel": channel,
            "ts": ts,
            "text": self._renderer.slack_text(payload),
            "blocks": self._renderer.slack_blocks(payload, root=True),
        }
        try:
            await self._post("chat.update", body, f" (root in {channel})")
        except (RetryLater, GiveUp) as exc:
            self.root_update_failures += 1
            log.warning("could not edit the incident's root message: %s", exc)

    async def close(self) -> None:
        await self._session.close()


class SlackWebhookSink:
    """A Slack incoming webhook: one message per event, no threads (the webhook cannot reply or edit)."""

    def __init__(
        self,
        url: Secret,
        renderer: Renderer,
        *,
        name: str = "slack-webhook",
        concurrency: int = 4,
        session_factory: Callable[[], aiohttp.ClientSession] | None = None,
    ) -> None:
        self.name = name
        self.concurrency = concurrency
        self._url = url
        self._renderer = renderer
        self._session = (session_factory or (lambda: client_session(concurrency=concurrency)))()

    def __repr__(self) -> str:
        return f"SlackWebhookSink(name={self.name!r}, url=<secret>)"

    async def _send(self, body: Mapping[str, Any]) -> None:
        try:
            async with post(
                self._session,
                self._url.reveal(),
                data=orjson.dumps(body),
                headers={"Content-Type": "application/json"},
            ) as resp:
                status = resp.status
                said = (await resp.content.read(MAX_RESPONSE_BYTES)).decode("utf-8", "replace").strip()
                retry_after = retry_after_seconds(resp.headers)
                redirected = redirect_refused(status, resp.headers)
        except TRANSPORT_ERRORS as exc:
            raise RetryLater(f"slack webhook: {describe_transport_error(exc)}") from None
        if status == 200:
            return
        if redirected is not None:
            raise RetryLater(f"slack webhook: {redirected}")
        raise SlackError(
            said.split()[0][:80] if said else f"HTTP {status}", status=status, retry_after=retry_after
        )

    async def deliver(self, delivery: Delivery) -> Sent:
        payload = delivery.payload
        text = self._renderer.slack_text(payload)
        blocks = self._renderer.slack_blocks(payload)
        try:
            try:
                await self._send({"text": text, "blocks": blocks})
            except SlackError as exc:
                if exc.error not in BLOCKS_REFUSED:
                    raise
                log.warning("slack refused the blocks (%s); sending the text-only message", exc.error)
                await self._send({"text": text})
        except SlackError as exc:
            if exc.status >= 500:
                raise RetryLater(f"slack webhook: HTTP {exc.status}", retry_after=exc.retry_after) from None
            raise _classify("webhook", exc, "") from None
        return Sent()

    async def close(self) -> None:
        await self._session.close()


def parse_route(spec: str) -> tuple[dict[str, str], str]:
    """``MATCH=CHANNEL`` → ({key: pattern}, channel). MATCH is ``key:pattern`` pairs joined by
    commas (keys ``namespace``, ``rule``, ``severity``), or a bare rule id. Raises ValueError."""
    match, sep, channel = spec.rpartition("=")
    if not sep or not match.strip() or not channel.strip():
        raise ValueError("expected MATCH=CHANNEL, e.g. rule:pdb-blocks-eviction=#platform")
    keys: dict[str, str] = {}
    for part in match.split(","):
        part = part.strip()
        key, colon, pattern = part.partition(":")
        if not colon:
            key, pattern = "rule", part
        key = key.strip()
        if key not in ("namespace", "rule", "severity"):
            raise ValueError(f"unknown match key {key!r} (namespace, rule, severity)")
        if key in keys:
            raise ValueError(f"{key} given twice")
        if not pattern.strip():
            raise ValueError(f"{key}: empty pattern")
        keys[key] = pattern.strip()
    return keys, channel.strip()


def routes_from(specs: Sequence[tuple[dict[str, str], str]]) -> tuple[Route, ...]:
    return tuple(Route(channel, k.get("namespace"), k.get("rule"), k.get("severity")) for k, channel in specs)
