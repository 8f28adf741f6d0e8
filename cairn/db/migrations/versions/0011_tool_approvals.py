"""tool calls held for a person's approval, their decisions and their one run

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02

A tool call that needs approval (docs/adr/0031) is kept here from the turn that asked for it:
who asked, when it expires, who decided and when, and, once approved, when it ran, for how
long, its outcome and what the model was given of it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_approval",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("cause_event_id", sa.Integer(), nullable=False),
        sa.Column("tool_use_id", sa.String(length=300), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("tool", sa.String(length=300), nullable=False),
        sa.Column("server", sa.String(length=64), nullable=False),
        sa.Column("server_tool", sa.String(length=300), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("decided_by", sa.String(length=200), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["cause_event_id"], ["session_event.id"]),
        sa.ForeignKeyConstraint(["session_id"], ["agent_session.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("cause_event_id", "tool_use_id", name="uq_approval_call"),
    )
    op.create_index("ix_approval_due", "tool_approval", ["status", "expires_at"], unique=False)
    op.create_index("ix_tool_approval_session_id", "tool_approval", ["session_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_tool_approval_session_id", table_name="tool_approval")
    op.drop_index("ix_approval_due", table_name="tool_approval")
    op.drop_table("tool_approval")
