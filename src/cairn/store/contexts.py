"""Agent context, addressed by job id and nothing else (there is no "last conversation")."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.store.schema import contexts, utcnow


def load(conn: sa.Connection, job_id: int) -> dict[str, Any] | None:
    """The job's own agent state, or None when it has none yet."""
    row = conn.execute(sa.select(contexts.c.state).where(contexts.c.job_id == job_id)).first()
    return dict(row.state) if row else None


def save(
    conn: sa.Connection,
    job_id: int,
    agent: str,
    state: dict[str, Any],
    session_id: str | None = None,
) -> None:
    """Replace the job's agent state (it is bounded by the agent, not appended to)."""
    values = {"agent": agent, "state": state, "session_id": session_id, "updated_at": utcnow()}
    updated = conn.execute(sa.update(contexts).where(contexts.c.job_id == job_id).values(**values))
    if updated.rowcount == 0:
        conn.execute(sa.insert(contexts).values(job_id=job_id, **values))
