"""an outbound message keeps the platform id of the message it answers in a column of its own

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06

The platform's id of the message a reply answers (a Slack ts, a Matrix event id) was copied
into the outbox row's gated JSON ``data``, where the secret detector ran on it, a random id,
once per message. It is an identifier, like ``message_ref``, and now has a plain column.
Rows written before keep it in ``data``, which is still read when the column is empty.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("outbound_message") as batch_op:
        batch_op.add_column(
            sa.Column("in_reply_to", sa.String(length=300), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("outbound_message") as batch_op:
        batch_op.drop_column("in_reply_to")
