"""Progress events and usage: what a job's detail view shows besides its ledgers."""

from __future__ import annotations

import sqlalchemy as sa

from cairn.store.records import Event, Usage
from cairn.store.schema import events, usage, utcnow


def events_for_job(conn: sa.Connection, job_id: int) -> list[Event]:
    query = sa.select(events).where(events.c.job_id == job_id).order_by(events.c.id)
    return [Event.from_row(r) for r in conn.execute(query)]


def add_usage(
    conn: sa.Connection,
    job_id: int,
    *,
    agent: str,
    seconds: float,
    run_kind: str = "normal",
    input_tokens: int = 0,
    output_tokens: int = 0,
    model_requests: int = 0,
) -> None:
    """Add one agent run's time, tokens and model requests to the job's usage (corrective too)."""
    conn.execute(
        sa.insert(usage).values(
            job_id=job_id,
            agent=agent,
            run_kind=run_kind,
            seconds=seconds,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            model_requests=model_requests,
            at=utcnow(),
        )
    )


def usage_for_job(conn: sa.Connection, job_id: int) -> list[Usage]:
    query = sa.select(usage).where(usage.c.job_id == job_id).order_by(usage.c.id)
    return [Usage.from_row(r) for r in conn.execute(query)]
