"""The checkpoints ledger: a job's workspace as a git bundle, kept where every host can read it.

A checkpoint is written after an accepted stage that changed the job's workspace. It holds the
job branch relative to the job's baseline (so it stays as small as the job's own work), the
commit and tree it must reproduce, and the position the job's agent context had reached at
that moment. While a job can still run, its rows are only ever added; the latest one is the one
a host rebuilds from. Once the job has ended nothing can resume it, and `cairn gc` drops them.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from cairn.stages import TERMINAL_STATUSES
from cairn.store.records import Record
from cairn.store.schema import checkpoints, jobs, utcnow, workspace_holders


@dataclasses.dataclass(frozen=True)
class Checkpoint(Record):
    id: int
    job_id: int
    stage: str
    """The stage whose accepted result this checkpoint holds."""
    baseline: str
    head: str
    """Where the job's branch pointed."""
    commit: str
    """The bundle's one ref: `head`, or a commit on top of it holding uncommitted files."""
    tree: str
    """The content identity the rebuilt workspace must have."""
    bundle: bytes
    context_state: dict[str, Any] | None
    """The job's agent state (`contexts.state`) when the checkpoint was taken."""
    context_seq: int
    """How many conversation steps (`context_steps`) were saved then."""
    context_step_id: int | None
    """The row id of that last step: with its time, tells whether the conversation was
    replaced since (SQLite hands a deleted row's id out again)."""
    context_step_at: datetime | None
    host: str
    fencing_token: int
    created_at: datetime


_ADD = sa.insert(checkpoints).returning(checkpoints)


def add(
    conn: sa.Connection,
    job_id: int,
    *,
    stage: str,
    baseline: str,
    head: str,
    commit: str,
    tree: str,
    bundle: bytes,
    context_state: dict[str, Any] | None,
    context_seq: int,
    context_step_id: int | None,
    context_step_at: datetime | None,
    host: str,
    fencing_token: int,
) -> Checkpoint:
    """Store one checkpoint (the caller's transaction is fenced by the job's lease)."""
    values = {
        "job_id": job_id,
        "stage": stage,
        "baseline": baseline,
        "head": head,
        "commit": commit,
        "tree": tree,
        "bundle": bundle,
        "context_state": context_state,
        "context_seq": context_seq,
        "context_step_id": context_step_id,
        "context_step_at": context_step_at,
        "host": host,
        "fencing_token": fencing_token,
        "created_at": utcnow(),
    }
    return Checkpoint.from_row(conn.execute(_ADD, values).one())


def latest(conn: sa.Connection, job_id: int, *, bundle: bool = True) -> Checkpoint | None:
    """The job's newest checkpoint, the one a host rebuilds its workspace from.

    Without `bundle` its bytes are left in the store (read as empty): a runner compares
    positions before every pass, and only a rebuild needs the bundle itself.
    """
    row = conn.execute(_LATEST[bundle], {"job": job_id}).first()
    if row is None:
        return None
    return Checkpoint.from_row(row) if bundle else Checkpoint(**{**row._mapping, "bundle": b""})


def _latest(bundle: bool) -> sa.Select[Any]:
    columns = [c for c in checkpoints.c if bundle or c.name != "bundle"]
    query = sa.select(*columns).where(checkpoints.c.job_id == sa.bindparam("job"))
    return query.order_by(checkpoints.c.id.desc()).limit(1)


_LATEST = {bundle: _latest(bundle) for bundle in (True, False)}


def for_job(conn: sa.Connection, job_id: int) -> list[Checkpoint]:
    """Every checkpoint of the job, oldest first."""
    query = sa.select(checkpoints).where(checkpoints.c.job_id == job_id).order_by(checkpoints.c.id)
    return [Checkpoint.from_row(row) for row in conn.execute(query)]


def drop_ended(conn: sa.Connection) -> list[int]:
    """Delete the checkpoints (and workspace holders) of jobs that have ended; their ids.

    An ended job never runs again (a retry is a new job, a reply needs a job at review), so
    no host will rebuild its workspace: its bundles are only weight in the store.
    """
    ended = sa.select(jobs.c.id).where(jobs.c.status.in_([s.value for s in TERMINAL_STATUSES]))
    held = sa.select(checkpoints.c.job_id).where(checkpoints.c.job_id.in_(ended)).distinct()
    ids = sorted(conn.execute(held).scalars())
    if ids:
        conn.execute(sa.delete(checkpoints).where(checkpoints.c.job_id.in_(ids)))
    conn.execute(sa.delete(workspace_holders).where(workspace_holders.c.job_id.in_(ended)))
    return ids
