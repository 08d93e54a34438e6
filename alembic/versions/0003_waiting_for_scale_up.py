"""Incidents can wait: ``waiting_for`` (e.g. "scale-up") and ``waiting_since`` are set while
cluster-autoscaler or Karpenter is adding the capacity an incident needs and nobody has been
paged; a small partial index lists the waiting ones newest first.

Revision ID: 0003
Revises: 0002
Create Date: 2024-05-03 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the model's types: a migration must not change when the models do.
Time = sa.DateTime(timezone=True)
WAITING = sa.text("waiting_for IS NOT NULL")


def upgrade() -> None:
    # Nullable columns without a default: SQLite and PostgreSQL add them in place, no table copy.
    op.add_column("incidents", sa.Column("waiting_for", sa.String(length=32), nullable=True))
    op.add_column("incidents", sa.Column("waiting_since", Time, nullable=True))
    op.create_index(
        "ix_incidents_waiting_last_seen",
        "incidents",
        ["last_seen", "id"],
        sqlite_where=WAITING,
        postgresql_where=WAITING,
    )


def downgrade() -> None:
    op.drop_index("ix_incidents_waiting_last_seen", table_name="incidents")
    # SQLite 3.35+ drops a column in place once no index refers to it.
    op.drop_column("incidents", "waiting_since")
    op.drop_column("incidents", "waiting_for")
