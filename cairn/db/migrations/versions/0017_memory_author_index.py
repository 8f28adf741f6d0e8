"""memories are found by author within a tenant

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07

Recall reads the names of a tenant's authors (``SELECT DISTINCT author``) to take them out of
the query its dense search embeds (ADR 0048). Without an index that read scans the tenant's
memories; with it, it reads the index alone.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memory") as batch_op:
        batch_op.create_index("ix_memory_author", ["tenant_id", "author"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("memory") as batch_op:
        batch_op.drop_index("ix_memory_author")
