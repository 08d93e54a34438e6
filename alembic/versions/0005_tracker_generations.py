"""The tracker's per-cluster generation: a writer that keeps open incidents in memory knows
when somebody else wrote (``storage.models.TrackerGeneration``).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tracker_generations",
        sa.Column("cluster", sa.String(length=253), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("cluster", name="pk_tracker_generations"),
    )


def downgrade() -> None:
    op.drop_table("tracker_generations")
