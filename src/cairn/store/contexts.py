"""Agent state, addressed by job id and nothing else (there is no "last conversation").

One small blob per job, replaced whole: the script agent's position, cairn's notes for the
next turn, a pending outcome. All of it is bounded, so a rewrite costs the same every time.
A model conversation grows with every step and is saved append-only in `context_steps`.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.store.schema import contexts, utcnow

# Built once, as every statement a job's drive runs a few times: SQLAlchemy then only binds.
_JOB: sa.BindParameter[int] = sa.bindparam("job")
_LOAD = sa.select(contexts.c.state).where(contexts.c.job_id == _JOB)
_UPDATE = sa.update(contexts).where(contexts.c.job_id == _JOB)


def load(conn: sa.Connection, job_id: int) -> dict[str, Any] | None:
    """The job's own agent state, or None when it has none yet."""
    row = conn.execute(_LOAD, {"job": job_id}).first()
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
    updated = conn.execute(_UPDATE, {"job": job_id, **values})
    if updated.rowcount == 0:
        conn.execute(sa.insert(contexts).values(job_id=job_id, **values))
