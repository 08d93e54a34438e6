"""Server-rendered pages: the incident list and the incident page.

What an on-call engineer opens from a Slack link: the list with filters and
counts, and for one incident the explanation, the scheduler's message, each
remedy's YAML with a copy button, the evidence and the timeline. Plain HTML,
one small stylesheet and script, no front-end framework.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from aiohttp import web
from markupsafe import Markup
from multidict import MultiDict

from agent.api import auth
from agent.api.charts import day_columns, placement_rows, share, timeline_axis
from agent.api.errors import ApiError
from agent.api.evidence import MAX_ROWS, present, raw_preview
from agent.api.keys import (
    AUTH_FAILURES,
    CLOCK,
    DEMO_APPLY,
    DEMO_CHANGES,
    JINJA,
    LIMITER,
    PROXIES,
    READS,
    SESSIONS,
    SETTINGS,
    SIGNINS,
    TOKENS,
)
from agent.api.params import SEVERITIES, parse_id, parse_list, parse_stats
from agent.api.remedy_view import apply_manifest, remedy_views
from analyzers.grid import GRID_KEY
from storage.outbox import notification_dict, notifications_of
from storage.queries import (
    STATUSES,
    InvalidCursor,
    Sort,
    distinct_values,
    facets,
    get_incident,
    incident_stats,
    list_incidents,
)
from storage.silences import InvalidSilence, delete_silence, list_silences
from storage.views import remedy_dict, rfc3339

log = logging.getLogger(__name__)
routes = web.RouteTableDef()
TEMPLATES = Path(__file__).parent / "templates"
TREND_TOP = 6  # rules and namespaces on the list page's trends


def build_jinja_env() -> jinja2.Environment:
    """The pages' Jinja environment: build it once (StrictUndefined: a typo is an error, not a blank)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("agent.api", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["utc"] = _utc
    env.filters["ago"] = _ago
    env.filters["duration"] = _duration
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    env.filters["raw_preview"] = raw_preview
    env.globals["max_rows"] = MAX_ROWS
    env.tests["scalar"] = lambda v: isinstance(v, str | int | float | bool) or v is None
    return env


def _utc(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, _ = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h" if hours else f"{days}d"


def _ago(value: datetime | None, now: datetime) -> str:
    if value is None:
        return "—"
    delta = (now - value).total_seconds()
    return "just now" if delta < 5 else f"{_duration(delta)} ago"


def render(
    request: web.Request,
    template: str,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    **ctx: Any,
) -> web.Response:
    env = request.app[JINJA]
    settings = request.app[SETTINGS]
    static = request.app.router["static"]

    def static_url(filename: str) -> str:
        return str(static.url_for(filename=filename))

    session = request.cookies.get(auth.COOKIE) if settings.auth else None
    signed_in = bool(session) and request.app[SIGNINS].valid(str(session), request.app[TOKENS])
    form_token = auth.form_token(request)
    body = env.get_template(template).render(
        now=request.app[CLOCK](),
        auth_enabled=settings.auth,
        signed_in=signed_in,
        signout_csrf=form_token,
        # every state-changing form of the pages carries it: {{ csrf_field }}
        csrf_field=Markup(f'<input type="hidden" name="csrf" value="{form_token}">'),
        static=static_url,
        **ctx,
    )
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8", headers=headers)


def login_page(
    request: web.Request, *, status: int, headers: dict[str, str] | None = None, failed: bool = False
) -> web.Response:
    target = auth.safe_next(request.query.get("next") or request.path_qs)
    csrf = auth.new_csrf_token()
    resp = render(
        request, "login.html.j2", status=status, headers=headers, next=target, failed=failed, csrf=csrf
    )
    resp.set_cookie(
        auth.CSRF_COOKIE,
        csrf,
        httponly=True,
        samesite="Strict",
        secure=_tls(request),
        path="/login",
        max_age=3600,
    )
    return resp


def _tls(request: web.Request) -> bool:
    settings = request.app[SETTINGS]
    return auth.came_over_tls(request, proxies=request.app[PROXIES], public_url=settings.public_url)


@routes.get("/")
async def index(request: web.Request) -> web.Response:
    raise web.HTTPFound("/incidents")


@routes.get("/login")
async def login_form(request: web.Request) -> web.Response:
    return login_page(request, status=200)


@routes.post("/login")
async def login(request: web.Request) -> web.Response:
    form = await request.post()
    if not auth.csrf_ok(request.cookies.get(auth.CSRF_COOKIE), str(form.get("csrf", ""))):
        request.app[AUTH_FAILURES]("csrf")
        return login_page(request, status=403, failed=False)
    token = str(form.get("token", "")).strip()
    target = auth.safe_next(str(form.get("next", "")))
    client = request.app[PROXIES].client(request)
    wait = request.app[LIMITER].blocked(client)
    if wait > 0:
        request.app[AUTH_FAILURES]("rate_limited")
        raise web.HTTPTooManyRequests(headers={"Retry-After": f"{int(wait) + 1}"})
    tokens = request.app[TOKENS]
    if not token or not tokens.check_bearer(token):
        request.app[LIMITER].failed(client)
        request.app[AUTH_FAILURES]("sign_in")
        log.warning("sign-in failed from %s", client)  # never the token
        return login_page(
            request, status=401, headers={"WWW-Authenticate": auth.challenge("invalid_token")}, failed=True
        )
    resp = web.HTTPSeeOther(target)
    resp.set_cookie(
        auth.COOKIE,
        request.app[SIGNINS].start(tokens),
        httponly=True,
        samesite="Lax",
        secure=_tls(request),
        path="/",
        max_age=int(request.app[SIGNINS].ttl),
    )
    resp.del_cookie(auth.CSRF_COOKIE, path="/login")
    raise resp


@routes.post("/logout")
async def logout(request: web.Request) -> web.Response:
    """Sign out (a POST with the session's CSRF token): the session is revoked on the server."""
    session = request.cookies.get(auth.COOKIE)
    form = await request.post()
    if session:
        if not auth.csrf_ok(request.app[SIGNINS].csrf_token(session), str(form.get("csrf", ""))):
            raise web.HTTPForbidden(text="sign-out needs the form's CSRF token")
        request.app[SIGNINS].end(session)
    resp = web.HTTPSeeOther("/login")
    resp.del_cookie(auth.COOKIE, path="/")
    raise resp


@routes.get("/incidents")
async def incident_list(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    # "Active in the last …": a page-only shorthand for since=now-window.
    window = request.query.get("window", "")
    query: MultiDict[str] = MultiDict(request.query)
    query.popall("window", None)
    if window in WINDOWS and not query.get("since"):
        query["since"] = rfc3339(request.app[CLOCK]() - WINDOWS[window]) or ""
    elif window not in WINDOWS:
        window = ""
    try:
        params = parse_list(
            query,
            default_limit=settings.default_page_size,
            max_limit=settings.max_page_size,
            strict=False,
        )
    except ApiError as exc:
        return render(request, "error.html.j2", status=400, title="Bad filter", message=exc.message)
    async with request.app[READS]() as session:
        try:
            page = await list_incidents(
                session, params.filter, sort=params.sort, limit=params.limit, cursor=params.cursor
            )
        except InvalidCursor as exc:
            return render(request, "error.html.j2", status=400, title="Bad page link", message=str(exc))
        counts = await facets(session, params.filter)
        namespaces = await distinct_values(session, "namespace")
        rules = await distinct_values(session, "rule_id")
        clusters = await distinct_values(session, "cluster")

    def query_of(**overrides: Any) -> dict[str, str]:
        q = params.query(**overrides)
        if window:
            q.pop("since", None)
            q["window"] = window
        return q

    def link(**overrides: Any) -> str:
        q = query_of(cursor=None, **overrides)
        return "/incidents" + ("?" + urlencode(q) if q else "")

    return render(
        request,
        "list.html.j2",
        items=page.items,
        trends_link="/trends"
        + ("?" + urlencode(q) if (q := query_of(cursor=None, sort=None, limit=None)) else ""),
        params=params,
        f=params.filter,
        counts=counts,
        namespaces=namespaces,
        rules=rules,
        clusters=clusters,
        statuses=STATUSES,
        severities=SEVERITIES,
        sorts=[(s.value, _SORT_LABELS[s]) for s in Sort],
        window=window,
        windows=list(WINDOWS),
        next_link=("/incidents?" + urlencode(query_of(cursor=page.next_cursor)))
        if page.next_cursor
        else None,
        link=link,
        filtered=any(
            v is not None
            for v in (
                params.filter.namespace,
                params.filter.rule_id,
                params.filter.severity,
                params.filter.kind,
                params.filter.name,
                params.filter.text,
                params.filter.cluster,
                params.filter.since,
                params.filter.until,
                params.filter.waiting,
            )
        ),
    )


WINDOWS = {
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}

_SORT_LABELS = {
    Sort.LAST_SEEN_DESC: "Last seen, newest first",
    Sort.LAST_SEEN: "Last seen, oldest first",
    Sort.FIRST_SEEN_DESC: "Opened, newest first",
    Sort.FIRST_SEEN: "Opened, oldest first",
    Sort.OCCURRENCES_DESC: "Most occurrences",
    Sort.OCCURRENCES: "Fewest occurrences",
    Sort.ID_DESC: "Id, descending",
    Sort.ID: "Id, ascending",
}


@routes.get("/trends")
async def trends_page(request: web.Request) -> web.Response:
    """The trends of the incidents a list filter matches (the stats query, drawn): its own
    page, because counting a whole history costs more than a page of the list."""
    query: MultiDict[str] = MultiDict(request.query)
    window = query.pop("window", "")
    if window in WINDOWS and not query.get("since"):
        query["since"] = rfc3339(request.app[CLOCK]() - WINDOWS[window]) or ""
    try:
        flt = parse_stats(query, strict=False)
    except ApiError as exc:
        return render(request, "error.html.j2", status=400, title="Bad filter", message=exc.message)
    async with request.app[READS]() as session:
        trend = (await incident_stats(session, flt, top=TREND_TOP)).as_dict()
    back = {k: v for k, v in request.query.items() if k not in ("cursor", "limit", "sort")}
    return render(
        request,
        "trends.html.j2",
        trend=trend,
        trend_days=day_columns(trend["by_day"], request.app[CLOCK]().date()),
        trend_rules=share(trend["by_rule"][:TREND_TOP]),
        trend_namespaces=share(trend["by_namespace"][:TREND_TOP]),
        filters=back,
        back_link="/incidents" + ("?" + urlencode(back) if back else ""),
    )


@routes.get("/incidents/{id}")
async def incident_page(request: web.Request) -> web.Response:
    try:
        incident_id = parse_id("id", request.match_info["id"])
    except ApiError as exc:
        return render(request, "error.html.j2", status=400, title="Bad incident id", message=exc.message)
    async with request.app[READS]() as session:
        found = await get_incident(session, incident_id)
        notes = await notifications_of(session, incident_id) if found is not None else []
    if found is None:
        return render(
            request,
            "error.html.j2",
            status=404,
            title="Not found",
            message=f"There is no incident {incident_id}.",
        )
    incident, timeline = found
    notification_rows = [notification_dict(n) for n in notes]
    axis = timeline_axis(
        incident.first_seen, incident.resolved_at or request.app[CLOCK](), list(timeline), notification_rows
    )
    remedies = remedy_views([remedy_dict(r) for r in incident.remedies or ()], incident.id)
    demo_applicable: set[int] = set()
    if DEMO_APPLY in request.app and DEMO_CHANGES in request.app:
        changes = request.app[DEMO_CHANGES]
        demo_applicable = {r.index for r in remedies if changes(incident.cluster, r.command)}
    placement = (incident.evidence or {}).get("predicted_placement")
    return render(
        request,
        "incident.html.j2",
        inc=incident,
        placement=placement_rows(placement) if isinstance(placement, dict) and placement.get("before") else None,
        timeline=timeline,
        remedies=remedies,
        evidence=present({k: v for k, v in (incident.evidence or {}).items() if k != GRID_KEY}),
        grids=list((incident.evidence or {}).get(GRID_KEY) or ()),
        grid_key=GRID_KEY,
        notifications=notification_rows,
        axis=axis,
        demo_applicable=demo_applicable,
    )


@routes.get("/incidents/{id}/remedies/{n}.apply.yaml")
async def remedy_apply_manifest(request: web.Request) -> web.Response:
    """A patch remedy as a complete manifest for ``kubectl apply --server-side``, downloadable."""
    try:
        incident_id = parse_id("id", request.match_info["id"])
        n = parse_id("n", request.match_info["n"], minimum=0, maximum=1000)
    except ApiError as exc:
        return render(request, "error.html.j2", status=400, title="Bad remedy", message=exc.message)
    async with request.app[READS]() as session:
        found = await get_incident(session, incident_id)
    remedies = list(found[0].remedies or ()) if found is not None else []
    manifest = None
    if n < len(remedies):
        remedy = remedy_dict(remedies[n])
        if remedy["kind"] == "patch":
            manifest = apply_manifest(remedy["command"], remedy["yaml"], incident_id, n)
    if manifest is None:
        return render(
            request,
            "error.html.j2",
            status=404,
            title="Not found",
            message=f"Incident {incident_id} has no patch remedy {n} with a manifest.",
        )
    filename = f"incident-{incident_id}-remedy-{n}.apply.yaml"
    return web.Response(
        text=manifest.yaml,
        content_type="application/yaml",
        charset="utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def same_origin(request: web.Request) -> None:
    """Forms that change state are posted from these pages only. The app's forms guard
    (``agent.api.app._forms_guard``) already refused anything else before a handler runs;
    this is kept for handlers mounted on other apps (the demo's apply action)."""
    if request.method in ("POST", "PUT", "PATCH", "DELETE"):
        problem = auth.cross_site(request, required="Authorization" not in request.headers)
        if problem is not None:
            raise web.HTTPForbidden(text=problem)


@routes.get("/silences")
async def silences_page(request: web.Request) -> web.Response:
    return await _silences(request)


async def _silences(
    request: web.Request, *, status: int = 200, error: str | None = None, form: dict[str, str] | None = None
) -> web.Response:
    now = request.app[CLOCK]()
    async with request.app[READS]() as session:
        items = await list_silences(session, now=now, include_expired=True)
    return render(
        request,
        "silences.html.j2",
        status=status,
        silences=items,
        error=error,
        form=form or {"duration": "2h"},
        created=request.query.get("created", ""),
    )


@routes.post("/silences")
async def silence_create(request: web.Request) -> web.Response:
    from agent.api.silences import create

    same_origin(request)
    posted = await request.post()
    form = {k: str(v) for k, v in posted.items() if isinstance(v, str)}
    body = {k: (form.get(k, "").strip() or None) for k in ("cluster", "namespace", "rule_id", "subject")}
    body.update(reason=form.get("reason", ""), duration=form.get("duration", "").strip() or None)
    try:
        doc, _ = await create(request, body, created_by="pages")
    except InvalidSilence as exc:
        return await _silences(request, status=400, error=f"{exc.field}: {exc.message}", form=form)
    raise web.HTTPSeeOther(f"/silences?created={doc['id']}")


@routes.post("/silences/{id}/delete")
async def silence_delete(request: web.Request) -> web.Response:
    same_origin(request)
    try:
        silence_id = parse_id("id", request.match_info["id"])
    except ApiError as exc:
        return render(request, "error.html.j2", status=400, title="Bad silence id", message=exc.message)
    async with request.app[SESSIONS].begin() as session:
        await delete_silence(session, silence_id)
    raise web.HTTPSeeOther("/silences")


def add_static(app: web.Application) -> None:
    app.router.add_static("/static/", TEMPLATES / "static", name="static", append_version=True)
