"""Initial schema: incidents, their timeline, the notification outbox, applied event keys.

Revision ID: 0001
Revises:
Create Date: 2024-05-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the model's types: a migration must not change when the models do.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
Time = sa.DateTime(timezone=True)
OPEN = sa.text("status = 'open'")


def upgrade() -> None:
    op.create_table(
        "applied_events",
        sa.Column("cluster", sa.String(length=253), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("applied_at", Time, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "key", name=op.f("pk_applied_events")),
    )
    op.create_index("ix_applied_events_applied_at", "applied_events", ["applied_at"])

    op.create_table(
        "incidents",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("cluster", sa.String(length=253), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("rule_id", sa.String(length=100), nullable=False),
        sa.Column("cause", sa.String(length=253), nullable=False),
        sa.Column("severity", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("subject_kind", sa.String(length=100), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("subject_name", sa.String(length=253), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("explanation", sa.Text(), nullable=False),
        sa.Column("evidence", Json, nullable=False),
        sa.Column("remedies", Json, nullable=False),
        sa.Column("pods", Json, nullable=False),
        sa.Column("first_seen", Time, nullable=False),
        sa.Column("last_seen", Time, nullable=False),
        sa.Column("resolved_at", Time, nullable=True),
        sa.Column("occurrences", sa.Integer(), nullable=False),
        sa.Column("last_message", sa.Text(), nullable=False),
        sa.Column("previous_id", BigId, nullable=True),
        sa.ForeignKeyConstraint(
            ["previous_id"], ["incidents.id"], name=op.f("fk_incidents_previous_id_incidents")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
    )
    op.create_index(
        "uq_incidents_open_fingerprint",
        "incidents",
        ["cluster", "fingerprint"],
        unique=True,
        sqlite_where=OPEN,
        postgresql_where=OPEN,
    )
    op.create_index("ix_incidents_fingerprint", "incidents", ["fingerprint", "cluster", "id"])
    op.create_index(
        "ix_incidents_subject", "incidents", ["cluster", "subject_kind", "namespace", "subject_name"]
    )
    op.create_index("ix_incidents_last_seen", "incidents", ["last_seen", "id"])
    op.create_index("ix_incidents_first_seen", "incidents", ["first_seen", "id"])
    op.create_index("ix_incidents_status_last_seen", "incidents", ["status", "last_seen", "id"])
    op.create_index("ix_incidents_namespace_last_seen", "incidents", ["namespace", "last_seen", "id"])
    op.create_index("ix_incidents_rule_last_seen", "incidents", ["rule_id", "last_seen", "id"])
    op.create_index("ix_incidents_name_last_seen", "incidents", ["subject_name", "last_seen", "id"])

    op.create_table(
        "incident_timeline",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("incident_id", BigId, nullable=False),
        sa.Column("at", Time, nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("detail", Json, nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_incident_timeline_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incident_timeline")),
    )
    op.create_index("ix_incident_timeline_incident", "incident_timeline", ["incident_id", "at", "id"])

    op.create_table(
        "notification_outbox",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("incident_id", BigId, nullable=False),
        sa.Column("sink", sa.String(length=100), nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("payload", Json, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("next_attempt_at", Time, nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("sent_at", Time, nullable=True),
        sa.Column("thread_ref", sa.String(length=255), nullable=True),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_notification_outbox_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_outbox")),
    )
    op.create_index("ix_notification_outbox_due", "notification_outbox", ["status", "next_attempt_at", "id"])
    op.create_index("ix_notification_outbox_incident", "notification_outbox", ["incident_id", "sink"])


def downgrade() -> None:
    op.drop_table("notification_outbox")
    op.drop_table("incident_timeline")
    op.drop_table("incidents")
    op.drop_table("applied_events")
