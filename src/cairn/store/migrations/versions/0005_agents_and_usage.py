"""Named agents (installation-wide), a room's default agent, and model requests in usage.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A named agent's spec never holds an API key: only the name of the variable holding it.
    op.create_table(
        "agents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("name", name=op.f("uq_agents_name")),
    )
    # Nullable: a room from before this revision has no default agent (jobs name theirs).
    op.add_column("rooms", sa.Column("default_agent", sa.String(length=40), nullable=True))
    # Runs recorded before this revision made no model requests (the script agent calls none).
    op.add_column(
        "usage",
        sa.Column("model_requests", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    # Not batch mode: rebuilding these tables on SQLite would trip the foreign keys that point
    # at them; SQLite 3.35 and later drop a column in place.
    op.drop_column("usage", "model_requests")
    op.drop_column("rooms", "default_agent")
    op.drop_table("agents")
