"""Typed application state (``app[SESSIONS]``), shared by the handlers and the factory."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

import jinja2
from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.api.auth import FailureLimiter, ProxyTrust, Sessions, TokenSet
from agent.api.metrics import HttpMetrics
from agent.settings import ApiSettings
from storage.engine import ReadingSessions

Readiness = Callable[[], Awaitable[bool] | bool]
# What /readyz says about this replica's part in leader election ({"role": "leader", ...}).
Role = Callable[[], dict[str, str | None]]
Clock = Callable[[], datetime]
# ``unstick demo`` only: applies remedy n of incident id to the in-process cluster (see agent/commands/demo.py).
DemoApply = Callable[[int, int], Awaitable[str]]
# (cluster, remedy command) -> whether applying it would change that demo cluster
DemoChanges = Callable[[str, str], bool]

SESSIONS = web.AppKey("sessions", async_sessionmaker[AsyncSession])
# Sessions for handlers that only read: autocommit, so a request costs no BEGIN and ROLLBACK
# round trips (storage.engine.reading_sessions); writes use SESSIONS.
READS = web.AppKey("reads", ReadingSessions)
SETTINGS = web.AppKey("settings", ApiSettings)
TOKENS = web.AppKey("tokens", TokenSet)
JINJA = web.AppKey("jinja", jinja2.Environment)
READINESS: web.AppKey[list[Readiness]] = web.AppKey("readiness")
METRICS = web.AppKey("metrics", HttpMetrics)
CLOCK: web.AppKey[Clock] = web.AppKey("clock")
OPENAPI = web.AppKey("openapi", bytes)
ROLE: web.AppKey[Role] = web.AppKey("role")
SIGNINS = web.AppKey("signins", Sessions)
LIMITER = web.AppKey("limiter", FailureLimiter)
PROXIES = web.AppKey("proxies", ProxyTrust)
FORM_KEY = web.AppKey("form_key", bytes)  # signs the pages' CSRF tokens (per process)
AUTH_FAILURES: web.AppKey[Callable[[str], None]] = web.AppKey("auth_failures")
DEMO_APPLY: web.AppKey[DemoApply] = web.AppKey("demo_apply")  # set by the demo alone
DEMO_CHANGES: web.AppKey[DemoChanges] = web.AppKey("demo_changes")  # set by the demo alone
