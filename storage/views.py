"""Incidents as JSON: the one shape the API, the CLI's ``--json`` and the
notification payloads share.

The contract (other parts and checks rely on it)::

    {"id", "fingerprint", "rule_id", "severity", "status": "open"|"resolved",
     "subject": {"kind", "namespace", "name"}, "title", "explanation",
     "evidence": {}, "remedies": [{"title", "kind", "yaml", "command",
     "verified", "verification"}], "first_seen", "last_seen", "resolved_at",
     "occurrences", "waiting": null | {"for": "scale-up", "since"},
     "resolution": null | {"summary": str, "changes": [str, ...]}}

``waiting`` is set while an autoscaler is adding the capacity the incident
needs and nobody has been paged; a resolved incident keeps it when it resolved
while waiting (it never paged anyone). Timestamps are RFC 3339 in UTC with a
``Z`` suffix. ``resolution`` is set on a resolved incident: what changed in
the cluster that fixed it (title, explanation, evidence and remedies stay as
they were while it was open). The detail view adds ``cluster``, ``cause``, ``pods``,
``last_message``, ``previous_id`` and ``timeline``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from analyzers.lifecycle import IncidentState
from analyzers.lifecycle import rfc3339 as rfc3339  # where it is defined; storage modules import it from here
from storage.models import Incident, TimelineEntry

REMEDY_KEYS = ("title", "kind", "yaml", "command", "verified", "verification")


def remedy_dict(raw: dict[str, Any]) -> dict[str, Any]:
    return {
        "title": str(raw.get("title", "")),
        "kind": str(raw.get("kind", "")),
        "yaml": str(raw.get("yaml", "")),
        "command": str(raw.get("command", "")),
        "verified": bool(raw.get("verified", False)),
        "verification": str(raw.get("verification", "")),
    }


def incident_dict(incident: Incident | IncidentState) -> dict[str, Any]:
    """The incident in the contract's shape, exactly those keys."""
    return {
        "id": incident.id,
        "fingerprint": incident.fingerprint,
        "rule_id": incident.rule_id,
        "severity": incident.severity,
        "status": incident.status,
        "subject": {
            "kind": incident.subject_kind,
            "namespace": incident.namespace,
            "name": incident.subject_name,
        },
        "title": incident.title,
        "explanation": incident.explanation,
        "evidence": dict(incident.evidence or {}),
        "remedies": [remedy_dict(r) for r in incident.remedies or ()],
        "first_seen": rfc3339(incident.first_seen),
        "last_seen": rfc3339(incident.last_seen),
        "resolved_at": rfc3339(incident.resolved_at),
        "occurrences": incident.occurrences,
        "waiting": waiting_dict(incident),
        "resolution": resolution_dict(incident.resolution),
    }


def resolution_dict(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    return {"summary": str(raw.get("summary", "")), "changes": [str(c) for c in raw.get("changes") or ()]}


def waiting_dict(incident: Incident | IncidentState) -> dict[str, Any] | None:
    """``{"for": "scale-up", "since": …}`` while waiting (kept if it resolved waiting); else None."""
    if incident.waiting_for is None:
        return None
    return {"for": incident.waiting_for, "since": rfc3339(incident.waiting_since)}


def timeline_dict(entry: TimelineEntry) -> dict[str, Any]:
    return {
        "at": rfc3339(entry.at),
        "kind": entry.kind,
        "message": entry.message,
        "detail": dict(entry.detail or {}),
    }


def incident_detail_dict(incident: Incident, timeline: Iterable[TimelineEntry]) -> dict[str, Any]:
    """The contract's keys plus where, why and what happened."""
    doc = incident_dict(incident)
    doc.update(
        {
            "cluster": incident.cluster,
            "cause": incident.cause,
            "pods": list(incident.pods or ()),
            "last_message": incident.last_message,
            "previous_id": incident.previous_id,
            "timeline": [timeline_dict(e) for e in timeline],
        }
    )
    return doc
