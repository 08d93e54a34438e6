"""``/api/v1/silences``: list, create and delete silences (token-protected like every ``/api/v1`` route).

A silence holds back the notifications of matching incidents until it expires
(``storage.silences``); creating one also silences the matching notifications
still pending. The body of a POST is a JSON object::

    {"namespace": "ml", "subject": "trainer-*", "reason": "GPU pool migration", "duration": "2h"}

with at least one of ``cluster``, ``namespace``, ``rule_id``, ``subject`` and
exactly one of ``duration`` (``30m``, ``2h``, ``7d``) or ``expires_at`` (RFC 3339).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import orjson
from aiohttp import web

from agent.api.errors import ApiError, bad_parameter, json_response
from agent.api.keys import CLOCK, READS, SESSIONS
from agent.api.params import parse_id, parse_time, single_values
from analyzers.bounds import OutOfBounds
from storage.silences import (
    InvalidSilence,
    SilenceSpec,
    create_silence,
    delete_silence,
    list_silences,
    parse_duration,
    silence_dict,
)

routes = web.RouteTableDef()

BODY_FIELDS: Final = (
    "cluster",
    "namespace",
    "rule_id",
    "subject",
    "reason",
    "expires_at",
    "duration",
    "created_by",
)


def spec_from(body: Any, *, now: datetime, created_by: str) -> SilenceSpec:
    """A :class:`SilenceSpec` from a request body (a dict of strings); ``InvalidSilence`` names the field."""
    if not isinstance(body, dict):
        raise InvalidSilence("body", "expected a JSON object")
    for key, value in body.items():
        if key not in BODY_FIELDS:
            raise InvalidSilence(str(key)[:100], f"unknown field; known: {', '.join(BODY_FIELDS)}")
        if value is not None and not isinstance(value, str):
            raise InvalidSilence(key, "must be a string")
    duration, expires = body.get("duration"), body.get("expires_at")
    if bool(duration) == bool(expires):
        raise InvalidSilence("duration", "give exactly one of duration (e.g. 2h) or expires_at (RFC 3339)")
    if duration:
        try:
            expires_at = now + parse_duration(duration)
        except OutOfBounds as exc:
            raise InvalidSilence("duration", exc.message) from None
    else:
        try:
            expires_at = parse_time("expires_at", str(expires)[:64])
        except ApiError:
            raise InvalidSilence(
                "expires_at", f"{str(expires)[:64]!r} is not an RFC 3339 timestamp such as 2026-01-02T15:04:05Z"
            ) from None
    return SilenceSpec(
        reason=body.get("reason") or "",
        expires_at=expires_at,
        cluster=body.get("cluster"),
        namespace=body.get("namespace"),
        rule_id=body.get("rule_id"),
        subject=body.get("subject"),
        created_by=body.get("created_by") or created_by,
    )


async def create(request: web.Request, body: Any, *, created_by: str) -> tuple[dict[str, Any], int]:
    """Validate and store a silence; (its JSON, how many pending notifications it silenced)."""
    now = request.app[CLOCK]()
    spec = spec_from(body, now=now, created_by=created_by)
    async with request.app[SESSIONS].begin() as session:
        silence, silenced = await create_silence(session, spec, now=now)
        doc = silence_dict(silence, now=now)
    return doc, silenced


@routes.get("/api/v1/silences")
async def list_(request: web.Request) -> web.Response:
    query = single_values(request.query, ("include_expired",), strict=True)
    flag = query.get("include_expired", "false")
    if flag not in ("true", "false"):
        raise bad_parameter("include_expired", "must be true or false")
    now = request.app[CLOCK]()
    async with request.app[READS]() as session:
        items = await list_silences(session, now=now, include_expired=flag == "true")
    return json_response({"items": [silence_dict(s, now=now) for s in items]})


@routes.post("/api/v1/silences")
async def post(request: web.Request) -> web.Response:
    single_values(request.query, (), strict=True)
    if request.content_type != "application/json":
        raise ApiError(415, "send the silence as application/json")
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        raise bad_parameter("body", "not valid JSON") from None
    try:
        doc, silenced = await create(request, body, created_by="api")
    except InvalidSilence as exc:
        raise bad_parameter(exc.field, exc.message) from None
    return json_response({**doc, "silenced_notifications": silenced}, status=201)


@routes.delete("/api/v1/silences/{id}")
async def delete(request: web.Request) -> web.Response:
    single_values(request.query, (), strict=True)
    silence_id = parse_id("id", request.match_info["id"])
    async with request.app[SESSIONS].begin() as session:
        found = await delete_silence(session, silence_id)
    if not found:
        raise ApiError(404, f"no silence {silence_id}")
    return web.Response(status=204)
