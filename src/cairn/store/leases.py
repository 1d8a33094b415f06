"""Runner leases with fencing tokens: who may drive a job right now."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import sqlalchemy as sa

from cairn.stages import Status
from cairn.store.jobs import get_job
from cairn.store.records import Job
from cairn.store.schema import jobs, utcnow


def claim(
    conn: sa.Connection,
    runner_id: str,
    lease_seconds: float,
    *,
    job_id: int | None = None,
    now: datetime | None = None,
    defer: Callable[[sa.Connection, datetime], sa.ColumnElement[bool]] | None = None,
) -> Job | None:
    """Claim one runnable job (queued, or running under an expired lease) with a new token.

    PostgreSQL skips rows another runner is claiming (`FOR UPDATE SKIP LOCKED`); SQLite
    serializes writers with BEGIN IMMEDIATE, so both give each job to exactly one runner.
    `defer(conn, now)` names jobs this runner leaves to another for now (see `workspace_hosts`).
    """
    now = now or database_now(conn)
    runnable = sa.or_(
        jobs.c.status == Status.queued.value,
        sa.and_(
            jobs.c.status == Status.running.value,
            sa.or_(jobs.c.lease_expires_at.is_(None), jobs.c.lease_expires_at < now),
        ),
    )
    query = sa.select(jobs.c.id, jobs.c.fencing_token).where(runnable)
    if job_id is not None:
        query = query.where(jobs.c.id == job_id)
    if defer is not None:
        query = query.where(sa.not_(defer(conn, now)))
    row = conn.execute(query.order_by(jobs.c.id).limit(1).with_for_update(skip_locked=True)).first()
    if row is None:
        return None
    claimed = conn.execute(
        sa.update(jobs)
        .where(jobs.c.id == row.id, jobs.c.fencing_token == row.fencing_token)
        .values(
            status=Status.running.value,
            lease_owner=runner_id,
            lease_expires_at=now + timedelta(seconds=lease_seconds),
            fencing_token=row.fencing_token + 1,
            updated_at=now,
        )
    )
    return get_job(conn, row.id) if claimed.rowcount == 1 else None


def renew(conn: sa.Connection, job_id: int, fencing_token: int, lease_seconds: float) -> bool:
    """Extend the lease; False when the token is stale or the job left the running status."""
    now = database_now(conn)
    renewed = conn.execute(
        sa.update(jobs)
        .where(
            jobs.c.id == job_id,
            jobs.c.fencing_token == fencing_token,
            jobs.c.status == Status.running.value,
        )
        .values(lease_expires_at=now + timedelta(seconds=lease_seconds), updated_at=now)
    )
    return renewed.rowcount == 1


def database_now(conn: sa.Connection) -> datetime:
    """The store's clock: runners on several hosts agree on lease expiry even if theirs drift."""
    if conn.dialect.name == "postgresql":
        return conn.execute(sa.select(sa.func.now())).scalar_one()
    return utcnow()  # SQLite is on this host: its clock is this host's clock


def release(conn: sa.Connection, job_id: int, fencing_token: int) -> None:
    """Give up a lease early (a runner shutting down cleanly), leaving the job runnable."""
    conn.execute(
        sa.update(jobs)
        .where(
            jobs.c.id == job_id,
            jobs.c.fencing_token == fencing_token,
            jobs.c.status == Status.running.value,
        )
        .values(status=Status.queued.value, lease_owner=None, lease_expires_at=None)
    )
