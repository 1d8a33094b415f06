"""Schedules and their firings ledger: one firing per schedule and fire time.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A store from before this revision has no schedules: nothing to carry over.
    op.create_table(
        "schedules",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("room_id", sa.Integer(), nullable=False),
        sa.Column("cron", sa.String(length=255), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("agent", sa.JSON(), nullable=False),
        sa.Column("requester_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["room_id"], ["rooms.id"], name=op.f("fk_schedules_room_id_rooms")),
        sa.ForeignKeyConstraint(
            ["requester_id"], ["users.id"], name=op.f("fk_schedules_requester_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
        sa.UniqueConstraint("name", name=op.f("uq_schedules_name")),
    )
    op.create_table(
        "schedule_firings",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("schedule_id", sa.Integer(), nullable=False),
        sa.Column("fire_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name=op.f("fk_schedule_firings_schedule_id_schedules"),
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_schedule_firings_job_id_jobs")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedule_firings")),
        sa.UniqueConstraint(
            "schedule_id", "fire_at", name=op.f("uq_schedule_firings_schedule_id_fire_at")
        ),
    )
    op.create_index(
        op.f("ix_schedule_firings_job_id"), "schedule_firings", ["job_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_schedule_firings_job_id"), table_name="schedule_firings")
    op.drop_table("schedule_firings")
    op.drop_table("schedules")
