"""memos carry the person who asked for them, and whether they read as an instruction

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05

A memo an agent sends in a turn is asked for by a person (``asked_by``); one that reads as an
instruction to the assistant is ``flagged``, and the receiving agent is shown it as such
(docs/adr/0035). Existing memos keep an empty ``asked_by`` and are not flagged.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memo") as batch_op:
        batch_op.add_column(
            sa.Column("asked_by", sa.String(length=200), nullable=False, server_default="")
        )
        batch_op.add_column(
            sa.Column("flagged", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("memo") as batch_op:
        batch_op.drop_column("flagged")
        batch_op.drop_column("asked_by")
