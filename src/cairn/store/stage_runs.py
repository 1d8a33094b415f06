"""The execution ledger: every attempt at a stage, its recipe, content and evidence."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.engine.ledger import RunStatus
from cairn.store.records import StageRun
from cairn.store.schema import stage_runs, utcnow


def start(
    conn: sa.Connection, job_id: int, stage: str, recipe_id: str, fencing_token: int
) -> StageRun:
    """Record the intent to run `stage` with this recipe, before any work starts.

    An earlier attempt still marked running was cut off (its runner died): mark it abandoned.
    """
    conn.execute(
        sa.update(stage_runs)
        .where(
            stage_runs.c.job_id == job_id,
            stage_runs.c.stage == stage,
            stage_runs.c.status == RunStatus.running.value,
        )
        .values(status=RunStatus.abandoned.value, ended_at=utcnow())
    )
    attempt = (
        conn.execute(
            sa.select(sa.func.max(stage_runs.c.attempt)).where(
                stage_runs.c.job_id == job_id, stage_runs.c.stage == stage
            )
        ).scalar()
        or 0
    ) + 1
    result = conn.execute(
        sa.insert(stage_runs).values(
            job_id=job_id,
            stage=stage,
            attempt=attempt,
            recipe_id=recipe_id,
            status=RunStatus.running.value,
            fencing_token=fencing_token,
            started_at=utcnow(),
        )
    )
    key = result.inserted_primary_key
    assert key is not None, "an insert of one row has its key"
    return get(conn, key[0])


def finish(
    conn: sa.Connection,
    run_id: int,
    *,
    status: RunStatus,
    content_id: str | None,
    evidence: dict[str, Any] | None,
) -> StageRun:
    """Record what the attempt produced and whether its evidence accepted it."""
    conn.execute(
        sa.update(stage_runs)
        .where(stage_runs.c.id == run_id)
        .values(
            status=RunStatus(status).value,
            content_id=content_id,
            evidence=evidence,
            ended_at=utcnow(),
        )
    )
    return get(conn, run_id)


def get(conn: sa.Connection, run_id: int) -> StageRun:
    return StageRun.from_row(
        conn.execute(sa.select(stage_runs).where(stage_runs.c.id == run_id)).one()
    )


def for_job(conn: sa.Connection, job_id: int) -> list[StageRun]:
    query = sa.select(stage_runs).where(stage_runs.c.job_id == job_id).order_by(stage_runs.c.id)
    return [StageRun.from_row(r) for r in conn.execute(query)]


def mark_reused(conn: sa.Connection, run_id: int) -> None:
    """Record that a drive took this accepted run from its snapshot instead of running it."""
    conn.execute(sa.update(stage_runs).where(stage_runs.c.id == run_id).values(reused_at=utcnow()))
