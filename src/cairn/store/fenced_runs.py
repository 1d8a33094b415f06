"""Stage-run writes that carry their own fencing check: one statement each on PostgreSQL.

A runner writes one or two stage runs per stage. Through `Store.fenced` each write is a
transaction of its own: BEGIN, the guard, the write, COMMIT, each a round trip to a
PostgreSQL server. Here, on PostgreSQL, the guard is a data-modifying CTE of the write itself,
run as one statement that commits on its own: the guard's UPDATE takes the job row's lock
exactly as `Store.fenced` does (a concurrent claim waits for it, or it sees the claim's new
token and matches nothing), and the write takes its rows only from what the guard returned,
so a superseded token writes nothing. SQLite has no data-modifying CTEs and no round trips
(BEGIN IMMEDIATE already holds the write lock for the transaction): there the writes go
through `Store.fenced` unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from cairn.engine.ledger import RunStatus
from cairn.stages import Status
from cairn.store import stage_runs
from cairn.store.records import StageRun
from cairn.store.schema import UTCDateTime, jobs, utcnow
from cairn.store.schema import stage_runs as table
from cairn.store.store import Store, lease_lost

_NOW = sa.bindparam("now", type_=UTCDateTime())

_GUARD = (
    sa.update(jobs)
    .where(
        jobs.c.id == sa.bindparam("job"),
        jobs.c.fencing_token == sa.bindparam("token"),
        jobs.c.status == Status.running.value,
    )
    .values(updated_at=_NOW)
    .returning(jobs.c.id)
    .cte("guard")
)

_ABANDON = (
    sa.update(table)
    .where(
        table.c.job_id.in_(sa.select(_GUARD.c.id)),
        table.c.stage == sa.bindparam("stage_name"),
        table.c.status == RunStatus.running.value,
    )
    .values(status=RunStatus.abandoned.value, ended_at=_NOW)
    .cte("abandoned")
)

_NEXT_ATTEMPT = (
    sa.select(sa.func.coalesce(sa.func.max(table.c.attempt), 0) + 1)
    .where(table.c.job_id == sa.bindparam("job"), table.c.stage == sa.bindparam("stage_name"))
    .scalar_subquery()
)

_INSERT = (
    sa.insert(table)
    .from_select(
        [
            "job_id",
            "stage",
            "attempt",
            "recipe_id",
            "status",
            "content_id",
            "evidence",
            "fencing_token",
            "started_at",
            "ended_at",
        ],
        sa.select(
            _GUARD.c.id,
            sa.bindparam("stage_name", type_=table.c.stage.type),
            _NEXT_ATTEMPT,
            sa.bindparam("recipe", type_=table.c.recipe_id.type),
            sa.bindparam("run_status", type_=table.c.status.type),
            sa.bindparam("content", type_=table.c.content_id.type),
            sa.bindparam("run_evidence", type_=stage_runs.EVIDENCE),
            sa.bindparam("token", type_=sa.Integer()),
            _NOW,
            sa.bindparam("ended", type_=UTCDateTime()),
        ),
    )
    .returning(*table.c)
    .add_cte(_GUARD, _ABANDON)
)
"""The guard, the abandoning of a cut-off attempt and the new attempt, in one statement."""

_FINISH = (
    sa.update(table)
    .where(table.c.id == sa.bindparam("run"), table.c.job_id.in_(sa.select(_GUARD.c.id)))
    .values(
        status=sa.bindparam("run_status"),
        content_id=sa.bindparam("content"),
        evidence=sa.bindparam("run_evidence", type_=stage_runs.EVIDENCE),
        ended_at=_NOW,
    )
    .returning(*table.c)
    .add_cte(_GUARD)
)


def start(
    store: Store,
    job_id: int,
    fencing_token: int,
    stage: str,
    recipe_id: str,
    *,
    abandon: bool = True,
) -> StageRun:
    """`stage_runs.start` under the job's fencing token; LeaseLost if it is no longer current.
    (`abandon` as there; PostgreSQL's one statement always looks, at no extra round trip.)"""
    if store.dialect != "postgresql":
        with store.fenced(job_id, fencing_token) as conn:
            return start_in(conn, job_id, fencing_token, stage, recipe_id, abandon=abandon)
    return _insert(store, _start_fields(job_id, fencing_token, stage, recipe_id))


def start_in(
    conn: sa.Connection,
    job_id: int,
    fencing_token: int,
    stage: str,
    recipe_id: str,
    *,
    abandon: bool = True,
) -> StageRun:
    """`stage_runs.start` in a transaction that a fenced write of the caller already guards
    (on PostgreSQL the one statement, whose own guard finds the job row already held)."""
    if conn.dialect.name != "postgresql":
        return stage_runs.start(conn, job_id, stage, recipe_id, fencing_token, abandon=abandon)
    row = conn.execute(_INSERT, _start_fields(job_id, fencing_token, stage, recipe_id))
    found = row.first()
    if found is None:
        raise lease_lost(job_id)
    return StageRun.from_row(found)


def record(
    store: Store,
    job_id: int,
    fencing_token: int,
    stage: str,
    recipe_id: str,
    *,
    status: RunStatus,
    content_id: str | None,
    evidence: dict[str, Any] | None,
    abandon: bool = True,
) -> StageRun:
    """`stage_runs.record` under the job's fencing token: recipe and outcome in one write."""
    status = RunStatus(status)
    if store.dialect != "postgresql" or status is RunStatus.running:
        with store.fenced(job_id, fencing_token) as conn:
            return stage_runs.record(
                conn,
                job_id,
                stage,
                recipe_id,
                fencing_token,
                status=status,
                content_id=content_id,
                evidence=evidence,
                abandon=abandon,
            )
    fields = _insert_fields(job_id, fencing_token, stage, recipe_id)
    extra = {"run_status": status.value, "content": content_id, "run_evidence": evidence}
    return _insert(store, fields | extra | {"ended": fields["now"]})


def finish(
    store: Store,
    job_id: int,
    fencing_token: int,
    run_id: int,
    *,
    status: RunStatus,
    content_id: str | None,
    evidence: dict[str, Any] | None,
) -> StageRun:
    """`stage_runs.finish` under the job's fencing token; LeaseLost if it is no longer current."""
    if store.dialect == "postgresql":
        fields = {
            "job": job_id,
            "token": fencing_token,
            "run": run_id,
            "run_status": RunStatus(status).value,
            "content": content_id,
            "run_evidence": evidence,
            "now": utcnow(),
        }
        row = _one_statement(store, _FINISH, fields)
        if row is not None:
            return StageRun.from_row(row)
    # Nothing written: a stale token or a run this job does not hold. The plain fenced
    # transaction tells the two apart (LeaseLost, or no such run) and writes nothing either.
    with store.fenced(job_id, fencing_token) as conn:
        return stage_runs.finish(
            conn, run_id, status=status, content_id=content_id, evidence=evidence
        )


def _insert_fields(job_id: int, fencing_token: int, stage: str, recipe_id: str) -> dict[str, Any]:
    return {
        "job": job_id,
        "token": fencing_token,
        "stage_name": stage,
        "recipe": recipe_id,
        "content": None,
        "run_evidence": None,
        "now": utcnow(),
    }


def _start_fields(job_id: int, fencing_token: int, stage: str, recipe_id: str) -> dict[str, Any]:
    """The fields of `_INSERT` for an attempt's intent: running, no outcome yet."""
    fields = _insert_fields(job_id, fencing_token, stage, recipe_id)
    return fields | {"run_status": RunStatus.running.value, "ended": None}


def _insert(store: Store, fields: dict[str, Any]) -> StageRun:
    row = _one_statement(store, _INSERT, fields)
    if row is None:  # the guard matched nothing, so nothing was inserted
        raise lease_lost(fields["job"])
    return StageRun.from_row(row)


def _one_statement(
    store: Store, statement: sa.Executable, fields: Mapping[str, Any]
) -> sa.Row[Any] | None:
    """Run one statement as its own transaction: it commits when it succeeds, else not at all."""
    with store.engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        return conn.execute(statement, fields).first()
