"""Checkpoints of job workspaces, the host holding each workspace, and host heartbeats.

Revision ID: 0010
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(length=40), nullable=False),
        sa.Column("baseline", sa.String(length=64), nullable=False),
        sa.Column("head", sa.String(length=64), nullable=False),
        sa.Column("commit", sa.String(length=64), nullable=False),
        sa.Column("tree", sa.String(length=64), nullable=False),
        sa.Column("bundle", sa.LargeBinary(), nullable=False),
        sa.Column("context_state", sa.JSON(), nullable=True),
        sa.Column("context_seq", sa.Integer(), server_default="0", nullable=False),
        sa.Column("context_step_id", sa.Integer(), nullable=True),
        sa.Column("context_step_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("fencing_token", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_checkpoints_job_id_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoints")),
    )
    op.create_index(op.f("ix_checkpoints_job_id"), "checkpoints", ["job_id"], unique=False)
    op.create_table(
        "workspace_holders",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_workspace_holders_job_id_jobs")
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_workspace_holders")),
    )


def downgrade() -> None:
    op.drop_table("workspace_holders")
    op.drop_index(op.f("ix_checkpoints_job_id"), table_name="checkpoints")
    op.drop_table("checkpoints")
