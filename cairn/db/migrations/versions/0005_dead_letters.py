"""dead letters: events that kept failing, with the reason

Revision ID: 0005
Revises: 0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dead_letter",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("replayed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["event_id"], ["session_event.id"]),
        sa.ForeignKeyConstraint(["session_id"], ["agent_session.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("dead_letter") as batch_op:
        batch_op.create_index("ix_dead_letter_event_id", ["event_id"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("dead_letter") as batch_op:
        batch_op.drop_index("ix_dead_letter_event_id")
    op.drop_table("dead_letter")
