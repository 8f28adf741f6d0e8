"""a memory keeps the name of the conversation it was said in

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06

A recalled memory reaches the model with where it was said, by the name people know (a Slack
channel's "#ops", a Matrix room's name, the console's thread), not only an id (docs/adr/0035).
The name is the one the frontend knew when the memory was written. Existing memories keep an
empty name, and are shown without one.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memory") as batch_op:
        batch_op.add_column(
            sa.Column(
                "source_conversation", sa.String(length=80), nullable=False, server_default=""
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("memory") as batch_op:
        batch_op.drop_column("source_conversation")
