"""context engine: session checkpoints, per-session artifact links, per-turn telemetry

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "context_artifact",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("chars", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["agent_session.id"]),
        sa.ForeignKeyConstraint(["sha256"], ["artifact.sha256"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_id", "sha256", name="uq_context_artifact"),
    )
    with op.batch_alter_table("context_artifact", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_context_artifact_session_id"), ["session_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_context_artifact_sha256"), ["sha256"], unique=False)

    op.create_table(
        "context_checkpoint",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("through_seq", sa.Integer(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["agent_session.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("context_checkpoint", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_context_checkpoint_session_id"), ["session_id"], unique=True
        )

    op.create_table(
        "context_telemetry",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("event_seq", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=False),
        sa.Column("pressure", sa.Float(), nullable=False),
        sa.Column("budget", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("bands", sa.JSON(), nullable=False),
        sa.Column("memories_recalled", sa.Integer(), nullable=False),
        sa.Column("memos_shown", sa.Integer(), nullable=False),
        sa.Column("hydrated", sa.Integer(), nullable=False),
        sa.Column("artifacts_created", sa.Integer(), nullable=False),
        sa.Column("artifacts_retrieved", sa.Integer(), nullable=False),
        sa.Column("compile_ms", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["agent_session.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_id", "event_seq", name="uq_context_telemetry"),
    )
    with op.batch_alter_table("context_telemetry", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_context_telemetry_session_id"), ["session_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("context_telemetry", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_context_telemetry_session_id"))
    op.drop_table("context_telemetry")
    with op.batch_alter_table("context_checkpoint", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_context_checkpoint_session_id"))
    op.drop_table("context_checkpoint")
    with op.batch_alter_table("context_artifact", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_context_artifact_sha256"))
        batch_op.drop_index(batch_op.f("ix_context_artifact_session_id"))
    op.drop_table("context_artifact")
