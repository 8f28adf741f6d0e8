"""an audit row for each person erased on request

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05

``cairn memory erase --person ID`` deletes what a person said and taught and leaves one
``erasure`` row: whom, by whom, when, and counts per kind of row (docs/adr/0043).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "erasure",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("person", sa.String(length=200), nullable=False),
        sa.Column("erased_by", sa.String(length=200), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("erasure")
