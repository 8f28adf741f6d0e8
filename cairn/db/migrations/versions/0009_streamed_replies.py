"""replies streamed into platform messages, edited into their final text

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02

A frontend that shows an answer as it is written records the messages it opened for it, so
that the final reply from the outbox edits them (never a second message), also after that
frontend restarted. Rows are dropped once the reply is posted.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "streamed_reply",
        sa.Column("cause_event_id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["cause_event_id"], ["session_event.id"]),
        sa.PrimaryKeyConstraint("cause_event_id"),
    )


def downgrade() -> None:
    op.drop_table("streamed_reply")
