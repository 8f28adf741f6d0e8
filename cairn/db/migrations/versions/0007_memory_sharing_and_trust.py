"""memory audit (share / unshare) and untrusted authors

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memory") as batch_op:
        batch_op.add_column(
            sa.Column("untrusted", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "memory_audit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("memory_id", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["memory_id"], ["memory.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("memory_audit") as batch_op:
        batch_op.create_index("ix_memory_audit_memory_id", ["memory_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("memory_audit") as batch_op:
        batch_op.drop_index("ix_memory_audit_memory_id")
    op.drop_table("memory_audit")
    with op.batch_alter_table("memory") as batch_op:
        batch_op.drop_column("untrusted")
