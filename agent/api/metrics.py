"""Prometheus metrics of the HTTP side, in a registry of the app's own.

The registry is passed in (the live agent shares one registry between its
pipeline and the API) or created per app, so tests never see each other's
counts. Routes are labelled by their pattern (``/api/v1/incidents/{id}``),
never by the raw path, to keep label cardinality bounded.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class HttpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "unstick_http_requests_total",
            "HTTP requests by route pattern, method and status.",
            ("route", "method", "status"),
            registry=registry,
        )
        self.latency = Histogram(
            "unstick_http_request_duration_seconds",
            "Time to produce the response, by route pattern.",
            ("route",),
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=registry,
        )

        # Read from the store at each scrape (agent.api.health).
        self.silences_active = Gauge(
            "unstick_silences_active", "Silences that have not expired.", registry=registry
        )
        self.notifications_silenced = Gauge(
            "unstick_notifications_silenced",
            "Outbox rows stored silenced (held back by a silence) instead of sent.",
            registry=registry,
        )

    def expose(self) -> web.Response:
        resp = web.Response(body=generate_latest(self.registry))
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp


def route_label(request: web.Request) -> str:
    info = request.match_info
    route = getattr(info, "route", None)
    resource = getattr(route, "resource", None)
    if resource is None or getattr(info, "http_exception", None) is not None:
        return "unmatched"
    return str(resource.canonical)


def metrics_middleware(metrics: HttpMetrics) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        start = time.perf_counter()
        status = 500
        try:
            response: web.StreamResponse = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            route = route_label(request)
            metrics.requests.labels(route, request.method, str(status)).inc()
            metrics.latency.labels(route).observe(time.perf_counter() - start)

    return middleware
