"""What is said, and when: silences, and what the tracker needs to decide it.

* ``silences``: matchers (cluster, namespace, rule, subject glob), a reason and an expiry.
* ``incidents.resolution`` (what fixed it), ``incidents.notified_at`` (when somebody was last
  told: the re-notify interval counts from it) and ``incidents.peak_pods`` (the pod-count
  thresholds of ``updated`` compare against it). Open incidents that somebody was paged about
  (not waiting) get ``notified_at = first_seen``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the model's types: a migration must not change when the models do.
Time = sa.DateTime(timezone=True)
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "silences",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(length=253), nullable=True),
        sa.Column("namespace", sa.String(length=253), nullable=True),
        sa.Column("rule_id", sa.String(length=100), nullable=True),
        sa.Column("subject", sa.String(length=253), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=253), nullable=False),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("expires_at", Time, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_silences"),
    )
    op.create_index("ix_silences_expires_at", "silences", ["expires_at", "id"])
    # Nullable columns without a default: SQLite and PostgreSQL add them in place, no table copy.
    op.add_column("incidents", sa.Column("resolution", Json, nullable=True))
    op.add_column("incidents", sa.Column("notified_at", Time, nullable=True))
    op.add_column("incidents", sa.Column("peak_pods", sa.Integer(), nullable=True))
    op.execute("UPDATE incidents SET notified_at = first_seen WHERE status = 'open' AND waiting_for IS NULL")


def downgrade() -> None:
    op.drop_column("incidents", "peak_pods")
    op.drop_column("incidents", "notified_at")
    op.drop_column("incidents", "resolution")
    op.drop_index("ix_silences_expires_at", table_name="silences")
    op.drop_table("silences")
