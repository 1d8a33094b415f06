"""Runners (who is working, since when, last heard of) and wake-ups for idle runners.

On PostgreSQL, a trigger NOTIFYs channel `cairn_runnable` in the very transaction that makes
a job runnable (a new job, a decision, a released lease) or a dependency cache ready, so a
notification is never sent for a write that rolled back. SQLite has no such channel: its
runners poll.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen here as they were when this migration was written (cairn.store.wakeups names both).
_CHANNEL = "cairn_runnable"
_NOTIFY_FUNCTION = f"""
CREATE OR REPLACE FUNCTION cairn_notify_runnable() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('{_CHANNEL}', TG_TABLE_NAME || ':' || NEW.id);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
_TRIGGERS = {
    "cairn_job_runnable": (
        "AFTER INSERT OR UPDATE OF status ON jobs FOR EACH ROW "
        "WHEN (NEW.status = 'queued') EXECUTE FUNCTION cairn_notify_runnable()"
    ),
    "cairn_cache_ready": (
        "AFTER INSERT OR UPDATE OF status ON dependency_caches FOR EACH ROW "
        "WHEN (NEW.status = 'ready') EXECUTE FUNCTION cairn_notify_runnable()"
    ),
}


def upgrade() -> None:
    op.create_table(
        "runners",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("workspace_host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("lease_seconds", sa.Float(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runners")),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_NOTIFY_FUNCTION)
    for name, definition in _TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {definition}")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS cairn_cache_ready ON dependency_caches")
        op.execute("DROP TRIGGER IF EXISTS cairn_job_runnable ON jobs")
        op.execute("DROP FUNCTION IF EXISTS cairn_notify_runnable()")
    op.drop_table("runners")
