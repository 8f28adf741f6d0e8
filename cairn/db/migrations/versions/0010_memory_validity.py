"""facts that change: a memory's subject, end of validity and replacement

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03

A fact ("the on-call for payments is Alice") records what it gives a value for (``subject``);
a newer value of the same subject in the same partition ends it (``valid_until``) and names
its replacement (``superseded_by``). Existing memories keep an empty subject and stay current.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memory") as batch_op:
        batch_op.add_column(
            sa.Column("subject", sa.String(length=200), nullable=False, server_default="")
        )
        batch_op.add_column(sa.Column("valid_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("superseded_by", sa.Integer(), nullable=True))
        batch_op.create_index(
            "ix_memory_subject", ["tenant_id", "scope_key", "subject"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("memory") as batch_op:
        batch_op.drop_index("ix_memory_subject")
        batch_op.drop_column("superseded_by")
        batch_op.drop_column("valid_until")
        batch_op.drop_column("subject")
