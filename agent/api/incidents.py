"""``/api/v1``: incidents, one incident, a remedy's YAML, stats and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from agent.api.errors import ApiError, bad_parameter, json_response
from agent.api.keys import OPENAPI, READS, SETTINGS
from agent.api.params import MAX_REMEDY, parse_id, parse_list, parse_stats, single_values
from storage.outbox import notification_dict, notifications_of
from storage.queries import InvalidCursor, get_incident, incident_stats, list_incidents
from storage.views import incident_detail_dict, incident_dict, remedy_dict

routes = web.RouteTableDef()


def _no_params(request: web.Request) -> None:
    single_values(request.query, (), strict=True)


@routes.get("/api/v1/incidents")
async def list_(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    params = parse_list(
        request.query, default_limit=settings.default_page_size, max_limit=settings.max_page_size
    )
    async with request.app[READS]() as session:
        try:
            page = await list_incidents(
                session, params.filter, sort=params.sort, limit=params.limit, cursor=params.cursor
            )
        except InvalidCursor as exc:
            raise bad_parameter("cursor", str(exc)) from None
    return json_response({"items": [incident_dict(i) for i in page.items], "next_cursor": page.next_cursor})


@routes.get("/api/v1/incidents/{id}")
async def show(request: web.Request) -> web.Response:
    _no_params(request)
    incident_id = parse_id("id", request.match_info["id"])
    async with request.app[READS]() as session:
        found = await get_incident(session, incident_id)
        notes = await notifications_of(session, incident_id) if found is not None else []
    if found is None:
        raise ApiError(404, f"no incident {incident_id}")
    doc = incident_detail_dict(*found)
    doc["notifications"] = [notification_dict(n) for n in notes]
    return json_response(doc)


@routes.get("/api/v1/incidents/{id}/remedies/{n}.yaml")
async def remedy_yaml(request: web.Request) -> web.Response:
    _no_params(request)
    incident_id = parse_id("id", request.match_info["id"])
    n = parse_id("n", request.match_info["n"], minimum=0, maximum=MAX_REMEDY)
    async with request.app[READS]() as session:
        found = await get_incident(session, incident_id)
    if found is None:
        raise ApiError(404, f"no incident {incident_id}")
    incident, _ = found
    remedies = incident.remedies or []
    if n >= len(remedies):
        raise ApiError(404, f"incident {incident_id} has {len(remedies)} remedies (numbered from 0)")
    remedy = remedy_dict(remedies[n])
    if not remedy["yaml"]:
        raise ApiError(404, f"remedy {n} of incident {incident_id} is a command, without YAML")
    return web.Response(
        text=remedy["yaml"],
        content_type="application/yaml",
        charset="utf-8",
        headers={"Content-Disposition": f'inline; filename="incident-{incident_id}-remedy-{n}.yaml"'},
    )


@routes.get("/api/v1/stats")
async def stats(request: web.Request) -> web.Response:
    flt = parse_stats(request.query)
    async with request.app[READS]() as session:
        result = await incident_stats(session, flt)
    return json_response(result.as_dict())


@routes.get("/api/v1/openapi.json")
async def openapi_json(request: web.Request) -> web.Response:
    _no_params(request)
    return web.Response(body=request.app[OPENAPI], content_type="application/json")
