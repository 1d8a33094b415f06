"""Jobs carry their next actions beside the diagnosis, instead of commands in its text.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable: a job stored before this revision has no next actions recorded (read as none);
    # its diagnosis still names the command as it did when it was written.
    op.add_column("jobs", sa.Column("next_actions", sa.JSON(), nullable=True))


def downgrade() -> None:
    # Not batch mode: rebuilding jobs on SQLite would trip the foreign keys that point at it;
    # SQLite 3.35 and later drop a column in place.
    op.drop_column("jobs", "next_actions")
