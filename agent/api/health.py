"""``/healthz`` (the process is alive), ``/readyz`` (it can serve: database reachable and
the embedding agent's own check passing; it also says the replica's leader-election role:
``standalone``, ``leader`` or ``follower``, and who leads) and ``/metrics``. All three are open."""

from __future__ import annotations

import asyncio
import inspect
import logging

from aiohttp import web
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.api.errors import json_response
from agent.api.keys import CLOCK, METRICS, READINESS, ROLE, SESSIONS
from storage.silences import silence_counts

log = logging.getLogger(__name__)
routes = web.RouteTableDef()


async def database_ready(sessions: async_sessionmaker[AsyncSession]) -> bool:
    try:
        async with asyncio.timeout(2.0), sessions() as session:
            await session.execute(text("SELECT 1"))
        return True
    except Exception as exc:  # any failure means "not ready"; the reason is logged
        log.warning("readiness: database check failed: %s", exc)
        return False


async def check_ready(app: web.Application) -> tuple[bool, str]:
    for check in app[READINESS]:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if not result:
            return False, "not ready"
    if not await database_ready(app[SESSIONS]):
        return False, "database unavailable"
    return True, "ready"


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    ok, why = await check_ready(request.app)
    return json_response({"status": why, **request.app[ROLE]()}, status=200 if ok else 503)


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    m = request.app[METRICS]
    try:
        async with asyncio.timeout(2.0), request.app[SESSIONS]() as session:
            active, silenced = await silence_counts(session, now=request.app[CLOCK]())
        m.silences_active.set(active)
        m.notifications_silenced.set(silenced)
    except Exception as exc:  # the store's counts are best effort; the process metrics still go out
        log.warning("metrics: could not count silences: %s", exc)
    return m.expose()
