"""The execution ledger: every attempt at a stage, its recipe, content and evidence."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

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
            stage_runs.c.status == "running",
        )
        .values(status="abandoned", ended_at=utcnow())
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
            status="running",
            fencing_token=fencing_token,
            started_at=utcnow(),
        )
    )
    return get(conn, result.inserted_primary_key[0])


def finish(
    conn: sa.Connection,
    run_id: int,
    *,
    status: str,
    content_id: str | None,
    evidence: dict[str, Any],
) -> StageRun:
    """Record what the attempt produced and whether its evidence accepted it."""
    conn.execute(
        sa.update(stage_runs)
        .where(stage_runs.c.id == run_id)
        .values(status=status, content_id=content_id, evidence=evidence, ended_at=utcnow())
    )
    return get(conn, run_id)


def get(conn: sa.Connection, run_id: int) -> StageRun:
    return StageRun.from_row(
        conn.execute(sa.select(stage_runs).where(stage_runs.c.id == run_id)).one()
    )


def for_job(conn: sa.Connection, job_id: int) -> list[StageRun]:
    query = sa.select(stage_runs).where(stage_runs.c.job_id == job_id).order_by(stage_runs.c.id)
    return [StageRun.from_row(r) for r in conn.execute(query)]


def last_accepted(conn: sa.Connection, job_id: int, stage: str) -> StageRun | None:
    """The job's latest accepted run of `stage`, or None when it has none."""
    row = conn.execute(
        sa.select(stage_runs)
        .where(
            stage_runs.c.job_id == job_id,
            stage_runs.c.stage == stage,
            stage_runs.c.status == "accepted",
        )
        .order_by(stage_runs.c.id.desc())
        .limit(1)
    ).first()
    return StageRun.from_row(row) if row else None


def mark_reused(conn: sa.Connection, run_id: int) -> None:
    """Record that a drive took this accepted run from its snapshot instead of running it."""
    conn.execute(sa.update(stage_runs).where(stage_runs.c.id == run_id).values(reused_at=utcnow()))
