"""The OpenAPI 3.1 document of ``/api/v1``: every route, parameter and schema.

Built from the same tables the handlers validate with (:mod:`agent.api.params`),
so the document and the server cannot drift apart silently; the schemathesis
test fuzzes the running server against it.
"""

from __future__ import annotations

from typing import Any

import orjson

from agent.api.params import BOOLEANS, MAX_ID, MAX_LENGTHS, MAX_REMEDY, PATTERNS, SEVERITIES, SORTS
from agent.settings import ApiSettings
from storage.models import NotificationStatus, TimelineKind
from storage.queries import STATUSES

VERSION = "1.0.0"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    resp: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": _ref("Error")}},
    }
    if headers:
        resp["headers"] = headers
    return resp


_UNAUTHORIZED = _error(
    "Missing or invalid bearer token.",
    {"WWW-Authenticate": {"schema": {"type": "string"}, "description": 'Bearer realm="unstick"'}},
)
_RATE_LIMITED = _error(
    "Too many failed authentications from this client; wait `Retry-After` seconds.",
    {"Retry-After": {"schema": {"type": "string"}, "description": "seconds"}},
)
_BAD = _error("A parameter is invalid; `error.parameter` names it.")
_NOT_FOUND = _error("No such incident (or remedy).")

_TIME = {"type": "string", "format": "date-time"}
_TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}

_INCIDENT_PROPS: dict[str, Any] = {
    "id": {"type": "integer", "minimum": 1},
    "fingerprint": {
        "type": "string",
        "description": "Stable identity of the root cause: workload + rule + cause.",
    },
    "rule_id": {"type": "string"},
    "severity": {"type": "string", "enum": list(SEVERITIES)},
    "status": {"type": "string", "enum": list(STATUSES)},
    "subject": _ref("Subject"),
    "title": {"type": "string"},
    "explanation": {"type": "string"},
    "evidence": {"type": "object", "description": "The numbers and objects the rule used."},
    "remedies": {"type": "array", "items": _ref("Remedy")},
    "first_seen": _TIME,
    "last_seen": _TIME,
    "resolved_at": _TIME_OR_NULL,
    "occurrences": {"type": "integer", "minimum": 1},
    "waiting": {
        "anyOf": [_ref("Waiting"), {"type": "null"}],
        "description": (
            "Set while an autoscaler is adding the capacity the incident needs and nobody has been paged; "
            "kept on an incident that resolved while waiting (it never paged anyone)."
        ),
    },
    "resolution": {
        "anyOf": [_ref("Resolution"), {"type": "null"}],
        "description": (
            "What fixed it, set when it resolved. Title, explanation, evidence and remedies stay as they "
            "were while it was open."
        ),
    },
}

_DETAIL_PROPS: dict[str, Any] = {
    **_INCIDENT_PROPS,
    "cluster": {"type": "string"},
    "cause": {"type": "string"},
    "pods": {"type": "array", "items": {"type": "string"}},
    "last_message": {"type": "string", "description": "The scheduler's last message about it."},
    "previous_id": {
        "type": ["integer", "null"],
        "description": "The earlier incident of the same root cause, when this one is a recurrence.",
    },
    "timeline": {"type": "array", "items": _ref("TimelineEntry")},
    "notifications": {
        "type": "array",
        "items": _ref("Notification"),
        "description": "What was sent about it, to which sink, and how it went (failed = dead-lettered).",
    },
}


def _count_rows(key: str) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {
            "type": "object",
            "required": [key, "count", "open"],
            "additionalProperties": False,
            "properties": {
                key: {"type": "string"},
                "count": {"type": "integer", "minimum": 0},
                "open": {"type": "integer", "minimum": 0},
            },
        },
    }


_SECONDS = {"type": ["number", "null"]}

_MATCHER = {"type": ["string", "null"], "maxLength": 253}
_SILENCE_PROPS: dict[str, Any] = {
    "id": {"type": "integer", "minimum": 1},
    "cluster": {**_MATCHER, "description": "Exact cluster name; null matches every cluster."},
    "namespace": {**_MATCHER, "description": "Exact namespace; null matches every namespace."},
    "rule_id": {
        "type": ["string", "null"],
        "maxLength": 100,
        "description": "Exact rule id; null: every rule.",
    },
    "subject": {
        **_MATCHER,
        "description": "Shell glob over the subject's name (`trainer-*`); null: every subject.",
    },
    "reason": {"type": "string"},
    "created_by": {"type": "string"},
    "created_at": _TIME,
    "expires_at": _TIME,
    "active": {"type": "boolean", "description": "Not expired yet."},
}

SCHEMAS: dict[str, Any] = {
    "Subject": {
        "type": "object",
        "required": ["kind", "namespace", "name"],
        "additionalProperties": False,
        "properties": {
            "kind": {"type": "string"},
            "namespace": {"type": "string", "description": '"" for cluster-scoped objects'},
            "name": {"type": "string"},
        },
    },
    "Remedy": {
        "type": "object",
        "required": ["title", "kind", "yaml", "command", "verified", "verification"],
        "additionalProperties": False,
        "properties": {
            "title": {"type": "string"},
            "kind": {"type": "string", "description": "patch, manifest or command"},
            "yaml": {"type": "string", "description": "Ready for kubectl apply/patch; empty for a command."},
            "command": {"type": "string"},
            "verified": {
                "type": "boolean",
                "description": "Re-simulating the cluster with the change applied showed it works.",
            },
            "verification": {"type": "string"},
        },
    },
    "Waiting": {
        "type": "object",
        "required": ["for", "since"],
        "additionalProperties": False,
        "properties": {
            "for": {"type": "string", "description": 'What it waits for, e.g. "scale-up".'},
            "since": _TIME,
        },
    },
    "Resolution": {
        "type": "object",
        "required": ["summary", "changes"],
        "additionalProperties": False,
        "properties": {
            "summary": {"type": "string", "description": "One sentence: what changed and what it did."},
            "changes": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Silence": {
        "type": "object",
        "required": list(_SILENCE_PROPS),
        "additionalProperties": False,
        "properties": _SILENCE_PROPS,
    },
    "SilenceCreated": {
        "type": "object",
        "required": [*_SILENCE_PROPS, "silenced_notifications"],
        "additionalProperties": False,
        "properties": {
            **_SILENCE_PROPS,
            "silenced_notifications": {
                "type": "integer",
                "minimum": 0,
                "description": "Pending notifications of matching incidents it silenced at once.",
            },
        },
    },
    "SilenceList": {
        "type": "object",
        "required": ["items"],
        "additionalProperties": False,
        "properties": {"items": {"type": "array", "items": _ref("Silence")}},
    },
    "NewSilence": {
        "type": "object",
        "required": ["reason"],
        "additionalProperties": False,
        "description": (
            "At least one matcher (cluster, namespace, rule_id, subject) and exactly one of duration or "
            "expires_at (in the future, at most 365 days ahead)."
        ),
        "properties": {
            "cluster": _MATCHER,
            "namespace": _MATCHER,
            "rule_id": {"type": ["string", "null"], "maxLength": 100},
            "subject": _MATCHER,
            "reason": {"type": "string", "minLength": 1, "maxLength": 1000, "pattern": r"\S"},
            "duration": {
                "type": "string",
                "maxLength": 64,
                "pattern": r"^(?:[0-9]{1,15}(?:\.[0-9]{1,9})?(?:ms|s|m|h|d|w))+$",
                "description": "30m, 2h, 1h30m, 7d or 2w (at least a minute, at most 365 days).",
            },
            "expires_at": {"type": "string", "format": "date-time"},
            "created_by": {"type": "string", "maxLength": 253},
        },
        "anyOf": [
            {"required": [m], "properties": {m: {"type": "string", "pattern": r"\S"}}}
            for m in ("cluster", "namespace", "rule_id", "subject")
        ],
        "oneOf": [{"required": ["duration"]}, {"required": ["expires_at"]}],
    },
    "Incident": {
        "type": "object",
        "required": list(_INCIDENT_PROPS),
        "additionalProperties": False,
        "properties": _INCIDENT_PROPS,
    },
    "TimelineEntry": {
        "type": "object",
        "required": ["at", "kind", "message", "detail"],
        "additionalProperties": False,
        "properties": {
            "at": _TIME,
            "kind": {"type": "string", "enum": [k.value for k in TimelineKind]},
            "message": {
                "type": "string",
                "description": "The triggering message (e.g. the scheduler's event).",
            },
            "detail": {"type": "object"},
        },
    },
    "Notification": {
        "type": "object",
        "required": [
            "sink", "event", "status", "attempts", "created_at", "sent_at", "next_attempt_at", "last_error", "delivery",
        ],
        "additionalProperties": False,
        "properties": {
            "sink": {"type": "string", "description": "console, slack, slack-webhook, webhook, webhook-2, …"},
            "event": {"type": "string"},
            "status": {
                "type": "string",
                "enum": [str(v) for v in NotificationStatus],
                "description": "failed: dead-lettered; silenced: matched a silence, never sent.",
            },
            "attempts": {"type": "integer", "minimum": 0},
            "created_at": _TIME,
            "sent_at": _TIME_OR_NULL,
            "next_attempt_at": {**_TIME_OR_NULL, "description": "When a pending message is tried again."},
            "last_error": {"type": ["string", "null"], "description": "Why the last attempt failed."},
            "delivery": {"type": "string", "description": "The idempotency key (X-Unstick-Delivery)."},
        },
    },
    "IncidentDetail": {
        "type": "object",
        "required": list(_DETAIL_PROPS),
        "additionalProperties": False,
        "properties": _DETAIL_PROPS,
    },
    "IncidentList": {
        "type": "object",
        "required": ["items", "next_cursor"],
        "additionalProperties": False,
        "properties": {
            "items": {"type": "array", "items": _ref("Incident")},
            "next_cursor": {
                "type": ["string", "null"],
                "description": "Pass as `cursor` for the next page; null on the last.",
            },
        },
    },
    "Stats": {
        "type": "object",
        "required": ["total", "open", "resolved", "by_rule", "by_namespace", "by_day", "time_to_resolve"],
        "additionalProperties": False,
        "properties": {
            "total": {"type": "integer", "minimum": 0},
            "open": {"type": "integer", "minimum": 0},
            "resolved": {"type": "integer", "minimum": 0},
            "by_rule": _count_rows("rule_id"),
            "by_namespace": _count_rows("namespace"),
            "by_day": {
                "type": "array",
                "description": "Incidents opened per UTC day.",
                "items": {
                    "type": "object",
                    "required": ["day", "count"],
                    "additionalProperties": False,
                    "properties": {
                        "day": {"type": "string", "format": "date"},
                        "count": {"type": "integer", "minimum": 0},
                    },
                },
            },
            "time_to_resolve": {
                "type": "object",
                "required": ["count", "mean_seconds", "p50_seconds", "p90_seconds", "max_seconds"],
                "additionalProperties": False,
                "properties": {
                    "count": {"type": "integer", "minimum": 0},
                    "mean_seconds": _SECONDS,
                    "p50_seconds": _SECONDS,
                    "p90_seconds": _SECONDS,
                    "max_seconds": _SECONDS,
                },
            },
        },
    },
    "Error": {
        "type": "object",
        "required": ["error"],
        "additionalProperties": False,
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "additionalProperties": False,
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "parameter": {"type": "string", "description": "The offending parameter, for 400s."},
                },
            }
        },
    },
    "Status": {
        "type": "object",
        "required": ["status"],
        "additionalProperties": False,
        "properties": {"status": {"type": "string"}},
    },
    "Readiness": {
        "type": "object",
        "required": ["status", "role"],
        "additionalProperties": False,
        "properties": {
            "status": {"type": "string"},
            "role": {
                "type": "string",
                "enum": ["standalone", "leader", "follower"],
                "description": "Leader election: only the leader watches, analyses and notifies.",
            },
            "identity": {"type": "string", "description": "This replica's identity (its pod name)."},
            "leader": {"type": ["string", "null"], "description": "Who holds the Lease, as last seen."},
        },
    },
}


def _text_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_LENGTHS[name],
            "pattern": PATTERNS[name],
        },
    }


def _filter_params() -> list[dict[str, Any]]:
    return [
        {"name": "status", "in": "query", "schema": {"type": "string", "enum": list(STATUSES)}},
        {"name": "severity", "in": "query", "schema": {"type": "string", "enum": list(SEVERITIES)}},
        _text_param("cluster", "Cluster name, exact."),
        _text_param("namespace", "Namespace, exact."),
        _text_param("rule_id", "Rule id, exact (e.g. rollout-deadlock)."),
        _text_param("kind", "Subject kind, exact (e.g. Deployment)."),
        _text_param("name", "Subject name, exact."),
        {
            "name": "since",
            "in": "query",
            "description": "Active at or after: still open, or resolved at or after this time (RFC 3339).",
            "schema": {"type": "string", "format": "date-time"},
        },
        {
            "name": "until",
            "in": "query",
            "description": "Active before: first seen before this time (RFC 3339).",
            "schema": {"type": "string", "format": "date-time"},
        },
        _text_param("q", "Case-insensitive text in the title or the explanation."),
        {
            "name": "waiting",
            "in": "query",
            "description": (
                "true: incidents waiting for an autoscaler (open), or resolved while waiting; "
                "false: the others."
            ),
            "schema": {"type": "string", "enum": list(BOOLEANS)},
        },
    ]


def _linked(response: dict[str, Any], **links: dict[str, Any]) -> dict[str, Any]:
    """``response`` with OpenAPI links: what a client (and schemathesis' stateful run) can call
    next with values from this answer (create a silence → list → delete it)."""
    return {**response, "links": links}


def _json_ok(description: str, schema: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}


def _id_param(name: str, description: str) -> dict[str, Any]:
    bounds = {"minimum": 0, "maximum": MAX_REMEDY} if name == "n" else {"minimum": 1, "maximum": MAX_ID}
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "integer", **bounds},
    }


def build_document(settings: ApiSettings) -> dict[str, Any]:
    secured: list[dict[str, list[str]]] = [{"bearer": []}] if settings.auth else []
    protected_errors = {"401": _UNAUTHORIZED, "429": _RATE_LIMITED} if settings.auth else {}
    paths: dict[str, Any] = {
        "/api/v1/incidents": {
            "get": {
                "operationId": "listIncidents",
                "summary": "List incidents, newest first, with filters and cursor pagination.",
                "parameters": [
                    *_filter_params(),
                    {
                        "name": "sort",
                        "in": "query",
                        "schema": {"type": "string", "enum": list(SORTS)},
                        "description": "Default -last_seen; '-' means descending.",
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": settings.max_page_size},
                        "description": f"Page size, default {settings.default_page_size}.",
                    },
                    _text_param("cursor", "`next_cursor` of the previous page (made for the same sort)."),
                ],
                "responses": {
                    "200": _linked(
                        _json_ok("A page of incidents.", "IncidentList"),
                        GetIncident={"operationId": "getIncident", "parameters": {"id": "$response.body#/items/0/id"}},
                    ),
                    "400": _BAD,
                    **protected_errors,
                },
            }
        },
        "/api/v1/incidents/{id}": {
            "get": {
                "operationId": "getIncident",
                "summary": "One incident with its timeline and remedies.",
                "parameters": [_id_param("id", "Incident id.")],
                "responses": {
                    "200": _linked(
                        _json_ok("The incident.", "IncidentDetail"),
                        GetRemedyYaml={
                            "operationId": "getRemedyYaml",
                            "parameters": {"id": "$response.body#/id", "n": 0},
                        },
                    ),
                    "400": _BAD,
                    "404": _NOT_FOUND,
                    **protected_errors,
                },
            }
        },
        "/api/v1/incidents/{id}/remedies/{n}.yaml": {
            "get": {
                "operationId": "getRemedyYaml",
                "summary": "A remedy's YAML, raw, ready for `kubectl apply -f -` (remedies are numbered from 0).",
                "parameters": [
                    _id_param("id", "Incident id."),
                    _id_param("n", "Index of the remedy, from 0."),
                ],
                "responses": {
                    "200": {
                        "description": "The YAML.",
                        # The schema describes the parsed YAML (a Kubernetes object or patch),
                        # not the bytes: "type: string" was wrong for every remedy (schemathesis'
                        # stateful run followed the link here and said so).
                        "content": {
                            "application/yaml": {
                                "schema": {"description": "The manifest or patch, as `kubectl apply -f -` reads it."}
                            }
                        },
                    },
                    "400": _BAD,
                    "404": _NOT_FOUND,
                    **protected_errors,
                },
            }
        },
        "/api/v1/stats": {
            "get": {
                "operationId": "getStats",
                "summary": "Counts per rule, namespace and day, and time to resolve, over the filtered incidents.",
                "parameters": _filter_params(),
                "responses": {"200": _json_ok("Statistics.", "Stats"), "400": _BAD, **protected_errors},
            }
        },
        "/api/v1/silences": {
            "get": {
                "operationId": "listSilences",
                "summary": "Silences, newest first (active ones unless include_expired=true).",
                "parameters": [
                    {
                        "name": "include_expired",
                        "in": "query",
                        "schema": {"type": "string", "enum": ["true", "false"]},
                    }
                ],
                "responses": {
                    "200": _json_ok("The silences.", "SilenceList"),
                    "400": _BAD,
                    **protected_errors,
                },
            },
            "post": {
                "operationId": "createSilence",
                "summary": "Hold back notifications of matching incidents until the silence expires.",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("NewSilence")}},
                },
                "responses": {
                    "201": _linked(
                        _json_ok("The silence.", "SilenceCreated"),
                        ListSilences={"operationId": "listSilences"},
                        DeleteSilence={"operationId": "deleteSilence", "parameters": {"id": "$response.body#/id"}},
                    ),
                    "400": _BAD,
                    "415": _error("The body is not application/json."),
                    **protected_errors,
                },
            },
        },
        "/api/v1/silences/{id}": {
            "delete": {
                "operationId": "deleteSilence",
                "summary": "Remove a silence (notifications it already silenced stay silenced).",
                "parameters": [_id_param("id", "Silence id.")],
                "responses": {
                    "204": _linked({"description": "Deleted."}, ListSilences={"operationId": "listSilences"}),
                    "400": _BAD,
                    "404": _error("No such silence."),
                    **protected_errors,
                },
            }
        },
        "/api/v1/openapi.json": {
            "get": {
                "operationId": "getOpenApi",
                "summary": "This document.",
                "responses": {
                    "200": {
                        "description": "OpenAPI 3.1 document.",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "400": _BAD,
                    **protected_errors,
                },
            }
        },
        "/healthz": {
            "get": {
                "operationId": "healthz",
                "summary": "Liveness: the process answers.",
                "security": [],
                "responses": {"200": _json_ok("Alive.", "Status")},
            }
        },
        "/readyz": {
            "get": {
                "operationId": "readyz",
                "summary": "Readiness: the database answers and the embedding agent is ready; the replica's role.",
                "security": [],
                "responses": {
                    "200": _json_ok("Ready.", "Readiness"),
                    "503": _json_ok("Not ready.", "Readiness"),
                },
            }
        },
        "/metrics": {
            "get": {
                "operationId": "metrics",
                "summary": "Prometheus metrics (text exposition format).",
                "security": [],
                "responses": {
                    "200": {
                        "description": "Metrics.",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
    }
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "unstick incident history API",
            "version": VERSION,
            "description": (
                "Every incident unstick has tracked: why pods stayed Pending, rollouts stalled or drains hung, "
                "with the explanation, the evidence, the timeline and verified remedies. Timestamps are RFC 3339 UTC."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API token from the token file.",
                }
            },
        },
        "security": secured,
    }
    return doc


def document_bytes(settings: ApiSettings) -> bytes:
    return orjson.dumps(build_document(settings), option=orjson.OPT_INDENT_2)
