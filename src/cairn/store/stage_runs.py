"""The execution ledger: every attempt at a stage, its recipe, content and evidence.

Every statement is built once, here, with bound parameters: a runner writes one or two rows per
stage, and building and keying a fresh SQLAlchemy statement cost more than running it. Each
write returns the row it wrote (`RETURNING`) instead of reading it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from cairn.engine.ledger import RunStatus
from cairn.errors import StoreError
from cairn.store.records import StageRun
from cairn.store.schema import stage_runs, utcnow

_RUNNING = RunStatus.running.value
EVIDENCE = sa.JSON(none_as_null=True)
"""How evidence is bound: no evidence is SQL NULL, as in a row that never had any."""

_ABANDON = (
    sa.update(stage_runs)
    .where(
        stage_runs.c.job_id == sa.bindparam("job"),
        stage_runs.c.stage == sa.bindparam("stage_name"),
        stage_runs.c.status == _RUNNING,
    )
    .values(status=RunStatus.abandoned.value, ended_at=sa.bindparam("now"))
)
"""An earlier attempt still marked running was cut off (its runner died)."""

_NEXT_ATTEMPT = (
    sa.select(sa.func.coalesce(sa.func.max(stage_runs.c.attempt), 0) + 1)
    .where(
        stage_runs.c.job_id == sa.bindparam("job"),
        stage_runs.c.stage == sa.bindparam("stage_name"),
    )
    .scalar_subquery()
)

_INSERT = (
    sa.insert(stage_runs)
    .values(
        job_id=sa.bindparam("job"),
        stage=sa.bindparam("stage_name"),
        attempt=_NEXT_ATTEMPT,
        recipe_id=sa.bindparam("recipe"),
        status=sa.bindparam("run_status"),
        content_id=sa.bindparam("content"),
        evidence=sa.bindparam("run_evidence", type_=EVIDENCE),
        fencing_token=sa.bindparam("token"),
        started_at=sa.bindparam("now"),
        ended_at=sa.bindparam("ended"),
    )
    .returning(*stage_runs.c)
)

_FINISH = (
    sa.update(stage_runs)
    .where(stage_runs.c.id == sa.bindparam("run"))
    .values(
        status=sa.bindparam("run_status"),
        content_id=sa.bindparam("content"),
        evidence=sa.bindparam("run_evidence", type_=EVIDENCE),
        ended_at=sa.bindparam("now"),
    )
    .returning(*stage_runs.c)
)

_GET = sa.select(stage_runs).where(stage_runs.c.id == sa.bindparam("run"))
_FOR_JOB = (
    sa.select(stage_runs)
    .where(stage_runs.c.job_id == sa.bindparam("job"))
    .order_by(stage_runs.c.id)
)

_MARK_REUSED = (
    sa.update(stage_runs)
    .where(
        stage_runs.c.job_id == sa.bindparam("job"),
        stage_runs.c.id.in_(sa.bindparam("runs", expanding=True)),
        stage_runs.c.status == RunStatus.accepted.value,
    )
    .values(reused_at=sa.bindparam("now"))
)


def start(
    conn: sa.Connection,
    job_id: int,
    stage: str,
    recipe_id: str,
    fencing_token: int,
    *,
    abandon: bool = True,
) -> StageRun:
    """Record the intent to run `stage` with this recipe, before any work starts.

    An earlier attempt still marked running was cut off (its runner died): mark it abandoned.
    A caller that knows there is none passes `abandon=False` (see `record`).
    """
    return _insert(
        conn, job_id, stage, recipe_id, fencing_token, _RUNNING, None, None, None, abandon
    )


def record(
    conn: sa.Connection,
    job_id: int,
    stage: str,
    recipe_id: str,
    fencing_token: int,
    *,
    status: RunStatus,
    content_id: str | None,
    evidence: dict[str, Any] | None,
    abandon: bool = True,
) -> StageRun:
    """Record an attempt's recipe and its outcome in one go: an effect-free stage, once it ran.

    Written in the caller's transaction, so the recipe is never stored without the outcome:
    use it only for a stage whose work left nothing outside this process to reconcile.
    `abandon=False`: the caller knows no attempt of the stage is left running (the runs it
    read after claiming the job showed none, and it has not started one since; a runner that
    could start one is fenced out), so the look for one is skipped.
    """
    status = RunStatus(status)
    if status is RunStatus.running:
        raise ValueError("a recorded attempt has an outcome; use start() for the intent alone")
    now = utcnow()
    return _insert(
        conn, job_id, stage, recipe_id, fencing_token, status, content_id, evidence, now, abandon
    )


def _insert(
    conn: sa.Connection,
    job_id: int,
    stage: str,
    recipe_id: str,
    fencing_token: int,
    status: str,
    content_id: str | None,
    evidence: dict[str, Any] | None,
    ended_at: datetime | None,
    abandon: bool,
) -> StageRun:
    now = ended_at or utcnow()
    if abandon:
        conn.execute(_ABANDON, {"job": job_id, "stage_name": stage, "now": now})
    row = conn.execute(
        _INSERT,
        {
            "job": job_id,
            "stage_name": stage,
            "recipe": recipe_id,
            "run_status": status,
            "content": content_id,
            "run_evidence": evidence,
            "token": fencing_token,
            "now": now,
            "ended": ended_at,
        },
    ).one()
    return StageRun.from_row(row)


def finish(
    conn: sa.Connection,
    run_id: int,
    *,
    status: RunStatus,
    content_id: str | None,
    evidence: dict[str, Any] | None,
) -> StageRun:
    """Record what the attempt produced and whether its evidence accepted it."""
    row = conn.execute(
        _FINISH,
        {
            "run": run_id,
            "run_status": RunStatus(status).value,
            "content": content_id,
            "run_evidence": evidence,
            "now": utcnow(),
        },
    ).one()
    return StageRun.from_row(row)


def get(conn: sa.Connection, run_id: int) -> StageRun:
    return StageRun.from_row(conn.execute(_GET, {"run": run_id}).one())


def for_job(conn: sa.Connection, job_id: int) -> list[StageRun]:
    return [StageRun.from_row(r) for r in conn.execute(_FOR_JOB, {"job": job_id})]


def mark_reused(conn: sa.Connection, job_id: int, run_ids: Sequence[int]) -> None:
    """Record that a drive took these accepted runs of the job from its snapshot, in one write.

    All or none: a run that is not an accepted run of this job raises StoreError, and the
    caller's transaction rolls back with every mark it made.
    """
    wanted = set(run_ids)
    if not wanted:
        return
    marked = conn.execute(_MARK_REUSED, {"job": job_id, "runs": sorted(wanted), "now": utcnow()})
    if marked.rowcount != len(wanted):
        raise StoreError(
            f"job {job_id} does not hold every run it reused as an accepted run; none was "
            "marked reused. Run the job again: its stages are decided afresh"
        )
