"""The stats' time to resolve from an index: ``ix_incidents_resolve_seconds``.

A partial expression index (resolved incidents only) on the time to resolve in seconds,
written per dialect exactly as ``storage.models.RESOLVE_SECONDS`` and the stats query
write it: SQLite ``(julianday(resolved_at) - julianday(first_seen)) * 86400.0``,
PostgreSQL ``EXTRACT(epoch FROM (resolved_at - first_seen))``. The median, p90 and
maximum of ``/api/v1/stats`` become index lookups instead of a sort of every row.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies (a migration must not change when the models do).
RESOLVE_SECONDS = {
    "sqlite": "(julianday(resolved_at) - julianday(first_seen)) * 86400.0",
    "postgresql": "EXTRACT(epoch FROM (resolved_at - first_seen))",
}


def upgrade() -> None:
    expression = RESOLVE_SECONDS[op.get_bind().dialect.name]
    op.execute(
        f"CREATE INDEX ix_incidents_resolve_seconds ON incidents (({expression})) WHERE resolved_at IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_index("ix_incidents_resolve_seconds", table_name="incidents")
