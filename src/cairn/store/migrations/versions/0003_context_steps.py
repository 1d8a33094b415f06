"""The job's conversation as an append-only ledger: one row per step, keyed by job id.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A store from before this revision has no conversations: every job in it was driven by
    # the script agent, whose small state stays in `contexts`.
    op.create_table(
        "context_steps",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("fencing_token", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_context_steps_job_id_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_context_steps")),
        sa.UniqueConstraint("job_id", "seq", name=op.f("uq_context_steps_job_id_seq")),
    )


def downgrade() -> None:
    op.drop_table("context_steps")
