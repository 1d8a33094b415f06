"""Decision verdicts get room for `changes_requested` (17 characters; 16 were allowed).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NARROW = "verdict VARCHAR(16)"
_WIDE = "verdict VARCHAR(32)"


def upgrade() -> None:
    _set_width(sa.String(32), _NARROW, _WIDE)


def downgrade() -> None:
    _set_width(sa.String(16), _WIDE, _NARROW)


def _set_width(width: sa.String, old: str, new: str) -> None:
    conn = op.get_bind()
    if conn.dialect.name != "sqlite":
        op.alter_column("decisions", "verdict", type_=width, existing_nullable=False)
        return
    # SQLite never enforces a length, so only the declared type changes: rebuilding the table
    # (batch mode) would trip the foreign keys that point at it, and the rows, hash-chained,
    # must not be copied anyway. The declared text is edited in place, which SQLite documents
    # for changes that leave the stored format as it is (a VARCHAR stays TEXT).
    version = conn.exec_driver_sql("PRAGMA schema_version").scalar_one()
    conn.exec_driver_sql("PRAGMA writable_schema=ON")
    try:
        changed = conn.exec_driver_sql(
            "UPDATE sqlite_master SET sql = replace(sql, ?, ?) "
            "WHERE type = 'table' AND name = 'decisions' AND instr(sql, ?) > 0",
            (old, new, old),
        ).rowcount
        if changed != 1:
            raise RuntimeError("the decisions table does not declare its verdict as expected")
        conn.exec_driver_sql(f"PRAGMA schema_version={int(version) + 1}")
    finally:
        conn.exec_driver_sql("PRAGMA writable_schema=OFF")
