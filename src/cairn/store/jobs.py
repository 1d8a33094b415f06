"""Requests (intent, written once) and jobs (where each request stands)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.errors import InvalidState, NotFound
from cairn.next_action import Action, NextAction
from cairn.stages import Stage, Status
from cairn.store.records import Job, Request
from cairn.store.schema import events, jobs, requests, utcnow
from cairn.store.store import lease_lost


def submit(
    conn: sa.Connection,
    *,
    room_id: int,
    requester_id: int,
    text: str,
    agent: dict[str, Any],
    scope: dict[str, Any],
    kind: str = "interactive",
    retry_of: int | None = None,
) -> Job:
    """Record the request and its job, queued for the run gate."""
    now = utcnow()
    request_id = conn.execute(
        sa.insert(requests)
        .values(
            room_id=room_id,
            requester_id=requester_id,
            kind=kind,
            text=text,
            agent=agent,
            scope=scope,
            created_at=now,
        )
        .returning(requests.c.id)
    ).scalar_one()
    job_id = conn.execute(
        sa.insert(jobs)
        .values(
            request_id=request_id,
            room_id=room_id,
            retry_of=retry_of,
            stage=Stage.queued.value,
            status=Status.queued.value,
            fencing_token=0,
            created_at=now,
            updated_at=now,
        )
        .returning(jobs.c.id)
    ).scalar_one()
    conn.execute(
        sa.insert(events).values(
            job_id=job_id, stage=Stage.queued.value, status=Status.queued.value, at=now
        )
    )
    return get_job(conn, job_id)


# Built once, as every statement a job's drive runs a few times: SQLAlchemy then only binds.
# A move's SET clause is the columns its parameters name.
_GET = sa.select(jobs).where(jobs.c.id == sa.bindparam("job"))
_MOVE = (
    sa.update(jobs)
    .where(
        jobs.c.id == sa.bindparam("was_id"),
        jobs.c.stage == sa.bindparam("was_stage"),
        jobs.c.status == sa.bindparam("was_status"),
    )
    .returning(jobs)
)
_FENCED_MOVE = _MOVE.where(
    jobs.c.fencing_token == sa.bindparam("was_token"), jobs.c.status == Status.running.value
)
_COLUMNS = frozenset(jobs.c.keys())
_EVENT = sa.insert(events)
_GET_REQUEST = sa.select(requests).where(requests.c.id == sa.bindparam("request"))


def get_job(conn: sa.Connection, job_id: int) -> Job:
    """The job with this id; NotFound when there is none."""
    row = conn.execute(_GET, {"job": job_id}).first()
    if row is None:
        raise _no_job(job_id)
    return Job.from_row(row)


def lock_job(conn: sa.Connection, job_id: int) -> Job:
    """Read the job and hold its row until the transaction ends (PostgreSQL; SQLite is serial)."""
    row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id).with_for_update()).first()
    if row is None:
        raise _no_job(job_id)
    return Job.from_row(row)


def _no_job(job_id: int) -> NotFound:
    return NotFound(f"no job {job_id}", next_actions=[NextAction(Action.list_jobs)])


def get_request(conn: sa.Connection, request_id: int) -> Request:
    row = conn.execute(_GET_REQUEST, {"request": request_id}).first()
    if row is None:
        raise NotFound(f"no request {request_id}")
    return Request.from_row(row)


def list_jobs(conn: sa.Connection, room_id: int | None = None) -> list[Job]:
    """Every job (or a room's), oldest first."""
    query = sa.select(jobs).order_by(jobs.c.id)
    if room_id is not None:
        query = query.where(jobs.c.room_id == room_id)
    return [Job.from_row(r) for r in conn.execute(query)]


def transition(
    conn: sa.Connection,
    job: Job,
    stage: Stage,
    status: Status,
    *,
    fencing_token: int | None = None,
    **fields: Any,
) -> Job:
    """Move the job from where `job` says it is to `stage`/`status`, logging a progress event.

    Compare-and-set: if the job moved meanwhile (another decision, another runner), nothing
    changes and InvalidState says so. With `fencing_token`, the move is also a fenced write
    (see `Store.fenced`): it happens only while the job runs under that token, and LeaseLost
    says when it does not. Leaving the running status also gives up the lease. A diagnosis
    belongs to the state it explains: a move clears it (and its next actions) unless it
    brings its own.
    """
    now = utcnow()
    moves = (stage, status) != (job.stage, job.status)
    values: dict[str, Any] = {"stage": stage.value, "status": status.value, "updated_at": now}
    if status is not Status.running:
        values |= {"lease_owner": None, "lease_expires_at": None}
    if moves:
        values |= {"diagnosis": None, "next_actions": ()}
    if not fields.keys() <= _COLUMNS:  # a SET clause built from parameters would drop them
        raise TypeError(f"jobs have no column {sorted(fields.keys() - _COLUMNS)}")
    values |= fields
    was = {"was_id": job.id, "was_stage": job.stage.value, "was_status": job.status.value}
    if fencing_token is None:
        moved = conn.execute(_MOVE, values | was).first()
    else:
        moved = conn.execute(_FENCED_MOVE, values | was | {"was_token": fencing_token}).first()
    if moved is None:
        now_is = get_job(conn, job.id)
        if fencing_token is not None and (
            now_is.fencing_token != fencing_token or now_is.status is not Status.running
        ):
            raise lease_lost(job.id)
        raise InvalidState(
            f"job {job.id} changed while this was being decided",
            next_actions=[NextAction(Action.show, job=job.id)],
        )
    if moves:
        event = {"job_id": job.id, "stage": stage.value, "status": status.value, "at": now}
        conn.execute(_EVENT, event)
    return Job.from_row(moved)
