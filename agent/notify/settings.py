"""The notifier's options: which sinks, where, with which secrets. Built once at
start-up from flags and the environment; every problem is reported at once,
each naming its option, and no secret appears in a message or a repr.

==================================  ================================  ==============================================
flag                                environment                       meaning
==================================  ================================  ==============================================
``--slack-webhook-url-file PATH``   ``UNSTICK_SLACK_WEBHOOK_URL_FILE``  a Slack incoming-webhook URL (a secret)
``--slack-token-file PATH``         ``UNSTICK_SLACK_TOKEN_FILE``      a Slack bot token (``xoxb-…``)
``--slack-channel CH``              ``UNSTICK_SLACK_CHANNEL``         default channel (``#name`` or an ID)
``--slack-route MATCH=CH``          ``UNSTICK_SLACK_ROUTES``          routing, first match wins (``;``-separated)
``--slack-api-url URL``             ``UNSTICK_SLACK_API_URL``         Slack Web API base (``https://slack.com/api``)
``--webhook-url URL``               ``UNSTICK_WEBHOOK_URL``           signed JSON webhook (repeatable / comma list)
``--webhook-secret-file PATH``      ``UNSTICK_WEBHOOK_SECRET_FILE``   the HMAC secret
``--webhook-headers-file PATH``     ``UNSTICK_WEBHOOK_HEADERS_FILE``  extra headers, ``Name: value`` per line
``--webhook-ca-bundle PATH``        ``UNSTICK_WEBHOOK_CA_BUNDLE``     CA certificates to verify the receivers
``--notify-console``                ``UNSTICK_NOTIFY_CONSOLE``        print messages in the terminal
``--notify-max-attempts N``         ``UNSTICK_NOTIFY_MAX_ATTEMPTS``   attempts before a message is dead-lettered (8)
``--public-url URL``                ``UNSTICK_PUBLIC_URL``            where people open the pages (links)
==================================  ================================  ==============================================
"""

from __future__ import annotations

import argparse
import os
import re
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO
from urllib.parse import urlsplit

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.notify.base import Sink
from agent.notify.console import ConsoleSink
from agent.notify.render import Renderer
from agent.notify.slack import (
    DEFAULT_API_URL,
    Router,
    SlackBotSink,
    SlackWebhookSink,
    parse_route,
    routes_from,
)
from agent.notify.webhook import RESERVED_HEADERS, WebhookSink
from agent.notify.worker import OutboxWorker, RetryPolicy
from agent.settings import Secret, SettingsError
from analyzers import bounds

MIN_WEBHOOK_SECRET = 16
MAX_SECRET_FILE = 64 * 1024
_CHANNEL_NAME = re.compile(r"^#[a-z0-9][a-z0-9._\-]{0,79}$")
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{6,}$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True, slots=True)
class NotifySettings:
    slack_webhook_url: Secret | None = None
    slack_token: Secret | None = None
    slack_channel: str | None = None
    slack_routes: tuple[tuple[tuple[tuple[str, str], ...], str], ...] = ()
    slack_api_url: str = DEFAULT_API_URL
    webhook_urls: tuple[Secret, ...] = ()
    webhook_secret: Secret | None = None
    webhook_headers: tuple[tuple[str, Secret], ...] = ()
    webhook_ca_bundle: str | None = None
    console: bool = False
    max_attempts: int = 8
    public_url: str | None = None
    lease_seconds: float = 60.0
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return (
            f"NotifySettings(slack_webhook={'yes' if self.slack_webhook_url else 'no'}, "
            f"slack_bot={'yes' if self.slack_token else 'no'}, slack_channel={self.slack_channel!r}, "
            f"routes={len(self.slack_routes)}, webhooks={len(self.webhook_urls)}, console={self.console}, "
            f"max_attempts={self.max_attempts}, public_url={self.public_url!r})"
        )

    @property
    def any_sink(self) -> bool:
        return bool(self.slack_webhook_url or self.slack_token or self.webhook_urls or self.console)

    def secrets(self) -> list[str]:
        """Every secret value, for the worker to redact from stored errors."""
        values = [self.slack_webhook_url, self.slack_token, self.webhook_secret, *self.webhook_urls]
        values += [v for _, v in self.webhook_headers]
        return [s.reveal() for s in values if s is not None]

    @classmethod
    def from_args(
        cls,
        args: argparse.Namespace | None = None,
        environ: Mapping[str, str] | None = None,
        *,
        console_default: bool = False,
    ) -> NotifySettings:
        """From the ``add_notify_arguments`` flags and ``environ``; ``console_default``: print
        messages in the terminal when no other sink is configured (the demo)."""
        env = os.environ if environ is None else environ
        flags: dict[str, Any] = vars(args) if args is not None else {}
        errors: list[str] = []

        def opt(flag: str, name: str) -> str | None:
            value = flags.get(flag)
            if value is None or value == "":
                value = env.get(name) or None
            return value

        slack_webhook = None
        path = opt("slack_webhook_url_file", "UNSTICK_SLACK_WEBHOOK_URL_FILE")
        if path:
            raw = _read_secret(path, "--slack-webhook-url-file", errors)
            if raw is not None:
                if not _is_http_url(raw):
                    errors.append(f"--slack-webhook-url-file {path}: does not hold an http(s) URL")
                else:
                    slack_webhook = Secret(raw)

        slack_token = None
        path = opt("slack_token_file", "UNSTICK_SLACK_TOKEN_FILE")
        if path:
            raw = _read_secret(path, "--slack-token-file", errors)
            if raw is not None:
                if any(c.isspace() for c in raw):
                    errors.append(f"--slack-token-file {path}: a token is one word (found spaces)")
                else:
                    slack_token = Secret(raw)

        channel = opt("slack_channel", "UNSTICK_SLACK_CHANNEL")
        if channel is not None and not _valid_channel(channel):
            errors.append(
                f"--slack-channel {channel!r}: expected #name (lowercase) or a channel ID such as C0123ABCD"
            )

        route_specs: list[str] = list(flags.get("slack_route") or [])
        if not route_specs and env.get("UNSTICK_SLACK_ROUTES"):
            route_specs = [r.strip() for r in env["UNSTICK_SLACK_ROUTES"].split(";") if r.strip()]
        routes = []
        known_rules = _rule_ids()
        for spec in route_specs:
            try:
                keys, target = parse_route(spec)
            except ValueError as exc:
                errors.append(f"--slack-route {spec!r}: {exc}")
                continue
            problems = []
            rule = keys.get("rule")
            if rule is not None and not any(ch in rule for ch in "*?[") and rule not in known_rules:
                problems.append(f"unknown rule {rule!r} (known: {', '.join(sorted(known_rules))})")
            sev = keys.get("severity")
            if sev is not None and not any(ch in sev for ch in "*?[") and sev not in _SEVERITIES:
                problems.append(f"unknown severity {sev!r} ({', '.join(_SEVERITIES)})")
            if not _valid_channel(target):
                problems.append(
                    f"channel {target!r}: expected #name (lowercase) or a channel ID such as C0123ABCD"
                )
            if problems:
                errors.append(f"--slack-route {spec!r}: " + "; ".join(problems))
            else:
                routes.append((tuple(sorted(keys.items())), target))
        if slack_token is not None and channel is None:
            errors.append(
                "--slack-token-file needs --slack-channel: the channel for incidents no route matches"
            )
        if routes and slack_token is None:
            errors.append(
                "--slack-route needs --slack-token-file (an incoming webhook posts to its one channel)"
            )

        api_url = opt("slack_api_url", "UNSTICK_SLACK_API_URL") or DEFAULT_API_URL
        if not _is_http_url(api_url):
            errors.append(f"--slack-api-url {api_url!r}: not an http(s) URL")

        urls: list[str] = []
        for item in flags.get("webhook_url") or []:
            urls.append(str(item))
        if not urls and env.get("UNSTICK_WEBHOOK_URL"):
            urls = [u.strip() for u in re.split(r"[,\s]+", env["UNSTICK_WEBHOOK_URL"]) if u.strip()]
        webhook_urls = []
        for n, url in enumerate(urls, 1):
            if _is_http_url(url):
                webhook_urls.append(Secret(url))
            else:
                errors.append(f"--webhook-url number {n} ({_safe_url(url)}): not an http(s) URL")
        webhook_secret = None
        path = opt("webhook_secret_file", "UNSTICK_WEBHOOK_SECRET_FILE")
        if path:
            raw = _read_secret(path, "--webhook-secret-file", errors)
            if raw is not None:
                if len(raw) < MIN_WEBHOOK_SECRET:
                    errors.append(
                        f"--webhook-secret-file {path}: shorter than {MIN_WEBHOOK_SECRET} characters"
                    )
                else:
                    webhook_secret = Secret(raw)
        elif urls:
            errors.append("--webhook-url needs --webhook-secret-file: every webhook is signed")
        headers: list[tuple[str, Secret]] = []
        path = opt("webhook_headers_file", "UNSTICK_WEBHOOK_HEADERS_FILE")
        if path:
            headers = _read_headers(path, errors)
        ca_bundle = opt("webhook_ca_bundle", "UNSTICK_WEBHOOK_CA_BUNDLE")
        if ca_bundle:
            try:
                ssl.create_default_context(cafile=ca_bundle)
            except (OSError, ssl.SSLError) as exc:
                errors.append(
                    f"--webhook-ca-bundle {ca_bundle}: {getattr(exc, 'strerror', None) or 'not a PEM CA bundle'}"
                )

        public_url = opt("public_url", "UNSTICK_PUBLIC_URL")
        if public_url is not None and not _is_http_url(public_url):
            errors.append(f"--public-url {public_url!r}: not an http(s) URL")

        max_attempts = 8
        raw_attempts = opt("notify_max_attempts", "UNSTICK_NOTIFY_MAX_ATTEMPTS")
        if raw_attempts is not None:
            try:
                max_attempts = bounds.count(
                    "--notify-max-attempts / UNSTICK_NOTIFY_MAX_ATTEMPTS", raw_attempts, minimum=1, maximum=1000
                )
            except bounds.OutOfBounds as exc:
                errors.append(str(exc))
        lease = 60.0
        raw_lease = env.get("UNSTICK_NOTIFY_LEASE_SECONDS")
        if raw_lease:
            try:
                lease = bounds.seconds("UNSTICK_NOTIFY_LEASE_SECONDS", raw_lease, minimum=2.0, maximum=3600.0)
            except bounds.OutOfBounds as exc:
                errors.append(str(exc))

        console = bool(flags.get("notify_console")) or env.get("UNSTICK_NOTIFY_CONSOLE", "").lower() in (
            "1",
            "true",
        )
        if errors:
            raise SettingsError(errors)
        settings = cls(
            slack_webhook_url=slack_webhook,
            slack_token=slack_token,
            slack_channel=channel,
            slack_routes=tuple(routes),
            slack_api_url=api_url,
            webhook_urls=tuple(webhook_urls),
            webhook_secret=webhook_secret,
            webhook_headers=tuple(headers),
            webhook_ca_bundle=ca_bundle,
            console=console,
            max_attempts=max_attempts,
            public_url=public_url.rstrip("/") if public_url else None,
            lease_seconds=lease,
        )
        if console_default and not settings.any_sink:
            return _replace_console(settings)
        return settings

    async def start_worker(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        base_url: str | None,
        console: TextIO | None = None,
        fence: Callable[[], bool] | None = None,
    ) -> OutboxWorker | None:
        """Build the configured sinks and start draining the outbox into them (None: no
        sink). Links in messages point at ``--public-url``, else at ``base_url``."""
        sinks = self.build_sinks(Renderer(self.public_url or base_url or None), console)
        if not sinks:
            return None
        worker = OutboxWorker(
            sessions,
            sinks,
            policy=RetryPolicy(max_attempts=self.max_attempts),
            lease=self.lease_seconds,
            secrets=self.secrets(),
            fence=fence,
        )
        await worker.start()
        return worker

    def build_sinks(self, renderer: Renderer, console_stream: TextIO | None = None) -> list[Sink]:
        """The configured sinks, named for the outbox (names are stable across restarts)."""
        sinks: list[Sink] = []
        if self.console:
            sinks.append(ConsoleSink(renderer, console_stream))
        if self.slack_webhook_url is not None:
            sinks.append(SlackWebhookSink(self.slack_webhook_url, renderer))
        if self.slack_token is not None and self.slack_channel is not None:
            routes = routes_from([(dict(keys), channel) for keys, channel in self.slack_routes])
            sinks.append(
                SlackBotSink(
                    self.slack_token, Router(self.slack_channel, routes), renderer, api_url=self.slack_api_url
                )
            )
        if self.webhook_secret is not None:
            headers = dict(self.webhook_headers)
            for n, url in enumerate(self.webhook_urls, 1):
                sinks.append(
                    WebhookSink(
                        "webhook" if n == 1 else f"webhook-{n}",
                        url,
                        self.webhook_secret,
                        renderer,
                        headers=headers,
                        ca_bundle=self.webhook_ca_bundle,
                    )
                )
        return sinks


def _replace_console(settings: NotifySettings) -> NotifySettings:
    import dataclasses

    return dataclasses.replace(settings, console=True)


def _rule_ids() -> set[str]:
    from analyzers.rules import RULES

    return {r.rule_id for r in RULES}


def _valid_channel(channel: str) -> bool:
    return bool(_CHANNEL_NAME.fullmatch(channel) or _CHANNEL_ID.fullmatch(channel))


def _is_http_url(value: str) -> bool:
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not any(c.isspace() for c in value)


def _safe_url(value: str) -> str:
    """Scheme and host only: the rest of a webhook URL may be a token."""
    try:
        parts = urlsplit(value)
    except ValueError:
        return "<malformed>"
    if parts.scheme and parts.hostname:
        return f"{parts.scheme}://{parts.hostname}/…"
    return "<not a URL>"


def _read_secret(path: str, option: str, errors: list[str]) -> str | None:
    """The file's content, stripped (a mounted Secret often ends in a newline)."""
    try:
        with open(path, encoding="utf-8") as fh:
            raw = fh.read(MAX_SECRET_FILE + 1)
    except OSError as exc:
        errors.append(f"{option} {path}: {exc.strerror or type(exc).__name__}")
        return None
    except UnicodeDecodeError:
        errors.append(f"{option} {path}: not UTF-8 text")
        return None
    if len(raw) > MAX_SECRET_FILE:
        errors.append(f"{option} {path}: larger than {MAX_SECRET_FILE // 1024} KiB")
        return None
    value = raw.strip()
    if not value:
        errors.append(f"{option} {path}: empty")
        return None
    return value


def _read_headers(path: str, errors: list[str]) -> list[tuple[str, Secret]]:
    raw = _read_secret(path, "--webhook-headers-file", errors)
    if raw is None:
        return []
    headers: list[tuple[str, Secret]] = []
    for n, line in enumerate(raw.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon or not _HEADER_NAME.fullmatch(name):
            errors.append(f"--webhook-headers-file {path}: line {n}: expected 'Name: value'")
        elif name.lower() in RESERVED_HEADERS:
            errors.append(f"--webhook-headers-file {path}: line {n}: {name} is set by unstick itself")
        elif any(c in value for c in "\r\n\0"):
            errors.append(f"--webhook-headers-file {path}: line {n}: control character in the value")
        else:
            headers.append((name, Secret(value.strip())))
    return headers


def add_notify_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("notifications (see README: Notifications)")
    g.add_argument(
        "--slack-webhook-url-file",
        metavar="PATH",
        help="file holding a Slack incoming-webhook URL (no threads)",
    )
    g.add_argument(
        "--slack-token-file", metavar="PATH", help="file holding a Slack bot token: one thread per incident"
    )
    g.add_argument(
        "--slack-channel", metavar="CHANNEL", help="default Slack channel for the bot (#name or an ID)"
    )
    g.add_argument(
        "--slack-route",
        action="append",
        metavar="MATCH=CHANNEL",
        help="route incidents to a channel, first match wins; MATCH: rule id, or namespace:GLOB,rule:ID,severity:LEVEL (repeatable)",
    )
    g.add_argument(
        "--slack-api-url", metavar="URL", help=f"Slack Web API base URL (default {DEFAULT_API_URL})"
    )
    g.add_argument(
        "--webhook-url", action="append", metavar="URL", help="POST signed JSON to this URL (repeatable)"
    )
    g.add_argument(
        "--webhook-secret-file", metavar="PATH", help="file holding the webhooks' HMAC-SHA256 secret"
    )
    g.add_argument(
        "--webhook-headers-file", metavar="PATH", help="extra webhook headers, 'Name: value' per line"
    )
    g.add_argument(
        "--webhook-ca-bundle", metavar="PATH", help="PEM CA certificates to verify webhook receivers"
    )
    g.add_argument(
        "--notify-console",
        action="store_true",
        help="print each message in the terminal, as Slack would show it",
    )
    g.add_argument(
        "--notify-max-attempts", metavar="N", help="attempts before a message is dead-lettered (default 8)"
    )
    g.add_argument(
        "--public-url", metavar="URL", help="the pages' URL as people open it, for links in messages"
    )


def sink_names(sinks: Sequence[Sink]) -> tuple[str, ...]:
    return tuple(s.name for s in sinks)
