"""Structured asks from an agent for one exact package version."""

from __future__ import annotations

import sqlalchemy as sa

from cairn.store.records import DependencyRequest, RequestStatus
from cairn.store.schema import dependency_requests, utcnow


def add(
    conn: sa.Connection, job_id: int, *, ecosystem: str, name: str, version: str, reason: str
) -> DependencyRequest:
    request_id = conn.execute(
        sa.insert(dependency_requests)
        .values(
            job_id=job_id,
            ecosystem=ecosystem,
            name=name,
            version=version,
            reason=reason,
            status=RequestStatus.pending.value,
            created_at=utcnow(),
        )
        .returning(dependency_requests.c.id)
    ).scalar_one()
    return get(conn, request_id)


def decide(conn: sa.Connection, request_id: int, status: RequestStatus, decision_id: int) -> None:
    conn.execute(
        sa.update(dependency_requests)
        .where(dependency_requests.c.id == request_id)
        .values(status=status.value, decision_id=decision_id)
    )


def get(conn: sa.Connection, request_id: int) -> DependencyRequest:
    row = conn.execute(
        sa.select(dependency_requests).where(dependency_requests.c.id == request_id)
    ).one()
    return DependencyRequest.from_row(row)


_FOR_JOB = (
    sa.select(dependency_requests)
    .where(dependency_requests.c.job_id == sa.bindparam("job"))
    .order_by(dependency_requests.c.id)
)


def for_job(conn: sa.Connection, job_id: int) -> list[DependencyRequest]:
    return [DependencyRequest.from_row(r) for r in conn.execute(_FOR_JOB, {"job": job_id})]


def latest(conn: sa.Connection, job_id: int) -> DependencyRequest:
    """The job's most recent dependency request (the one a gate decides)."""
    row = conn.execute(
        sa.select(dependency_requests)
        .where(dependency_requests.c.job_id == job_id)
        .order_by(dependency_requests.c.id.desc())
        .limit(1)
    ).one()
    return DependencyRequest.from_row(row)
