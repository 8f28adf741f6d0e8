"""the bytes of attached images, kept for a model that reads images

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06

With CAIRN_MODEL_IMAGES on, an attached PNG, JPEG, GIF or WebP image within the Messages
API's limits keeps its bytes beside its card's artifact, so that a worker in any process can
send it to the model with the message it came with (docs/adr/0040). It goes when the artifact
goes: erasure and retention.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "artifact_image",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("media_type", sa.String(length=32), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["sha256"], ["artifact.sha256"]),
        sa.PrimaryKeyConstraint("sha256"),
    )


def downgrade() -> None:
    op.drop_table("artifact_image")
