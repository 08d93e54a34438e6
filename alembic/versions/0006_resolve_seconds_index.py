"""The stats' time to resolve from an index (SQLite): ``ix_incidents_resolve_seconds``.

A partial expression index (resolved incidents only) on the time to resolve in seconds,
written exactly as ``storage.models.RESOLVE_SECONDS["sqlite"]`` and the stats query write
it: ``(julianday(resolved_at) - julianday(first_seen)) * 86400.0``. The mean, median, p90
and maximum of the whole history's ``/api/v1/stats`` are read from the index alone instead
of computing and sorting every row's. PostgreSQL gets no such index: it cannot scan an
expression index without fetching every row, and its one scan and sort are faster.

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

# A frozen copy (a migration must not change when the models do).
RESOLVE_SECONDS = "(julianday(resolved_at) - julianday(first_seen)) * 86400.0"


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            f"CREATE INDEX ix_incidents_resolve_seconds ON incidents (({RESOLVE_SECONDS})) "
            "WHERE resolved_at IS NOT NULL"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index("ix_incidents_resolve_seconds", table_name="incidents")
