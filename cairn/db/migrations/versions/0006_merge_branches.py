"""merge the context engine, memory and dead-letter branches into one line

Revision ID: 0006
Revises: 0002, 0003, 0005
Create Date: 2026-11-29
"""

from collections.abc import Sequence

revision: str = "0006"
down_revision: str | Sequence[str] | None = ("0002", "0003", "0005")
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Nothing to change: this revision only joins the three branches."""


def downgrade() -> None:
    """Nothing to change: this revision only joins the three branches."""
