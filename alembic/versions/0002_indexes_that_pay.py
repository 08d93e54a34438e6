"""Indexes that pay, measured by bench/: the tracker looks a pass's open incidents up by
subject name, (cluster, subject_name, status) replacing (cluster, kind, namespace, name);
the last_seen index carries first_seen and resolved_at so a since/until window filters
in the index; the namespace and rule indexes carry status for counts.

Revision ID: 0002
Revises: 0001
Create Date: 2024-05-02 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_incidents_subject", table_name="incidents")
    op.create_index("ix_incidents_cluster_subject", "incidents", ["cluster", "subject_name", "status"])
    op.drop_index("ix_incidents_last_seen", table_name="incidents")
    op.create_index("ix_incidents_last_seen", "incidents", ["last_seen", "id", "first_seen", "resolved_at"])
    for name, column in (
        ("ix_incidents_namespace_last_seen", "namespace"),
        ("ix_incidents_rule_last_seen", "rule_id"),
    ):
        op.drop_index(name, table_name="incidents")
        op.create_index(name, "incidents", [column, "last_seen", "id", "status"])


def downgrade() -> None:
    for name, column in (
        ("ix_incidents_namespace_last_seen", "namespace"),
        ("ix_incidents_rule_last_seen", "rule_id"),
    ):
        op.drop_index(name, table_name="incidents")
        op.create_index(name, "incidents", [column, "last_seen", "id"])
    op.drop_index("ix_incidents_last_seen", table_name="incidents")
    op.create_index("ix_incidents_last_seen", "incidents", ["last_seen", "id"])
    op.drop_index("ix_incidents_cluster_subject", table_name="incidents")
    op.create_index(
        "ix_incidents_subject", "incidents", ["cluster", "subject_kind", "namespace", "subject_name"]
    )
