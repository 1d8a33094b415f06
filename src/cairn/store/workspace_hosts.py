"""Which host holds each job's workspace, and which hosts' runners are alive.

A job's workspace lives on one host's disk. The holder row says which; a runner on another
host that claims the job rebuilds the workspace from its checkpoint and becomes the holder.
The runners ledger says which hosts' runners still beat, so a claim elsewhere can wait
briefly for a live holder and never for a dead one.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa

from cairn.store.runners import live_workspace_hosts
from cairn.store.schema import jobs, utcnow, workspace_holders

_JOB: sa.BindParameter[int] = sa.bindparam("job")
_HOLDER = sa.select(workspace_holders.c.host).where(workspace_holders.c.job_id == _JOB)
_HOLD = sa.update(workspace_holders).where(workspace_holders.c.job_id == _JOB)


def holder(conn: sa.Connection, job_id: int) -> str | None:
    """The host whose disk holds the job's workspace; None before any host made one."""
    return conn.execute(_HOLDER, {"job": job_id}).scalar()


def hold(conn: sa.Connection, job_id: int, host: str) -> None:
    """Record that `host` now holds the job's workspace (the caller's transaction is fenced)."""
    values = {"host": host, "at": utcnow()}
    updated = conn.execute(_HOLD, {"job": job_id, **values})
    if updated.rowcount == 0:
        conn.execute(sa.insert(workspace_holders).values(job_id=job_id, **values))


def held_elsewhere(
    conn: sa.Connection, host: str, now: datetime, *, wait_seconds: float
) -> sa.ColumnElement[bool]:
    """A claim condition: the job's workspace is on another host with a runner that is not
    lost (judged by that runner's own lease, as `cairn runners` shows it), and the job became
    runnable less than `wait_seconds` ago: that host should get it first."""
    live = live_workspace_hosts(conn, now) - {host}
    if not live:
        return sa.false()
    live_holder = (
        sa.select(workspace_holders.c.job_id)
        .where(
            workspace_holders.c.job_id == jobs.c.id,
            workspace_holders.c.host.in_(sorted(live)),
        )
        .exists()
    )
    return sa.and_(live_holder, jobs.c.updated_at > now - timedelta(seconds=wait_seconds))
