"""memories and memos of a private conversation stay there; flagged memories

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02

``private_to`` names the private conversation (DM, private channel, non-public or encrypted
room) a memory was learned in; NULL keeps every existing memory the workspace's, as it was.
The dedupe partition (``scope_key``) gains the conversation, so the same text said in a DM and
in a public channel are two memories, not one that leaks or hides the other.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memory") as batch_op:
        batch_op.add_column(
            sa.Column("flagged", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("private_to", sa.String(length=200), nullable=True))
        batch_op.create_index(
            "ix_memory_hash", ["tenant_id", "content_hash", "retracted"], unique=False
        )
        batch_op.create_index("ix_memory_retracted", ["tenant_id", "retracted", "id"], unique=False)
    op.execute("UPDATE memory SET scope_key = scope_key || '|*'")
    with op.batch_alter_table("memo") as batch_op:
        batch_op.add_column(sa.Column("private_to", sa.String(length=200), nullable=True))


def downgrade() -> None:
    # Private memories would become the workspace's: refuse rather than leak them.
    bind = op.get_bind()
    private = bind.execute(
        sa.text("SELECT count(*) FROM memory WHERE private_to IS NOT NULL")
    ).scalar()
    if private:
        raise RuntimeError(
            f"{private} memories are private to a conversation; downgrading would show them "
            "everywhere. Retract or export them first."
        )
    with op.batch_alter_table("memo") as batch_op:
        batch_op.drop_column("private_to")
    op.execute("UPDATE memory SET scope_key = substr(scope_key, 1, length(scope_key) - 2)")
    with op.batch_alter_table("memory") as batch_op:
        batch_op.drop_index("ix_memory_retracted")
        batch_op.drop_index("ix_memory_hash")
        batch_op.drop_column("private_to")
        batch_op.drop_column("flagged")
