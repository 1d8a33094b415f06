"""Schedules and their firings ledger.

A firing is claimed by inserting its (schedule, fire time) row: the unique pair lets exactly
one runner win, on SQLite (writers queue on BEGIN IMMEDIATE) and on PostgreSQL (a second
insert of the same pair waits for the first transaction, then does nothing). The winner
submits the job, or records why it did not, in the same transaction as its claim.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from cairn.errors import NotFound, UsageError
from cairn.store.identity import _check_name
from cairn.store.records import Firing, FiringOutcome, FiringTrigger, Schedule
from cairn.store.schema import schedule_firings, schedules, utcnow


def add(
    conn: sa.Connection,
    *,
    name: str,
    room_id: int,
    cron: str,
    request: str,
    agent: dict[str, Any],
    requester_id: int,
    created_at: datetime | None = None,
) -> Schedule:
    """Record a new schedule; names are unique. `created_at` is when it starts counting."""
    _check_name(name, "schedule")
    if conn.execute(sa.select(schedules.c.id).where(schedules.c.name == name)).first():
        raise UsageError(
            f"schedule {name!r} already exists; pick another name, or remove that schedule first"
        )
    schedule_id = conn.execute(
        sa.insert(schedules)
        .values(
            name=name,
            room_id=room_id,
            cron=cron,
            request=request,
            agent=dict(agent),
            requester_id=requester_id,
            created_at=created_at or utcnow(),
        )
        .returning(schedules.c.id)
    ).scalar_one()
    return get(conn, schedule_id)


def get(conn: sa.Connection, key: int | str) -> Schedule:
    """The schedule with this id or name."""
    column = schedules.c.id if isinstance(key, int) else schedules.c.name
    row = conn.execute(sa.select(schedules).where(column == key)).first()
    if row is None:
        raise NotFound(f"no schedule {key!r}; list the schedules to see which names there are")
    return Schedule.from_row(row)


def find(conn: sa.Connection, schedule_id: int, *, lock: bool = False) -> Schedule | None:
    """The schedule with this id, None when it was removed; `lock` holds its row (PostgreSQL)
    until the transaction ends, so a remove waits for a firing under way, or it for a remove."""
    query = sa.select(schedules).where(schedules.c.id == schedule_id)
    row = conn.execute(query.with_for_update() if lock else query).first()
    return Schedule.from_row(row) if row is not None else None


def list_schedules(conn: sa.Connection) -> list[Schedule]:
    """Every schedule, oldest first."""
    query = sa.select(schedules).order_by(schedules.c.id)
    return [Schedule.from_row(row) for row in conn.execute(query)]


def remove(conn: sa.Connection, name: str) -> Schedule:
    """Drop the schedule and its firings ledger; the jobs it submitted stay as they are."""
    # Locked first: a runner firing it meanwhile either finishes first (its firing is
    # dropped with the rest) or finds the schedule gone, never a firing left pointing at none.
    schedule = get(conn, name)
    find(conn, schedule.id, lock=True)
    conn.execute(sa.delete(schedule_firings).where(schedule_firings.c.schedule_id == schedule.id))
    conn.execute(sa.delete(schedules).where(schedules.c.id == schedule.id))
    return schedule


def claim_firing(
    conn: sa.Connection, schedule_id: int, fire_at: datetime, trigger: FiringTrigger
) -> Firing | None:
    """Claim the firing of `schedule_id` at `fire_at`; None when another runner already did."""
    values = {
        "schedule_id": schedule_id,
        "fire_at": fire_at,
        "trigger": FiringTrigger(trigger).value,
        "outcome": FiringOutcome.pending.value,
        "at": utcnow(),
    }
    dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
    insert = (
        dialect.insert(schedule_firings)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["schedule_id", "fire_at"])
        .returning(schedule_firings)
    )
    row = conn.execute(insert).first()
    return Firing.from_row(row) if row is not None else None


def settle_firing(
    conn: sa.Connection,
    firing_id: int,
    outcome: FiringOutcome,
    *,
    job_id: int | None = None,
    note: str | None = None,
) -> Firing:
    """Record what a claimed firing came to: its job, or why it made none."""
    conn.execute(
        sa.update(schedule_firings)
        .where(schedule_firings.c.id == firing_id)
        .values(outcome=FiringOutcome(outcome).value, job_id=job_id, note=note)
    )
    row = conn.execute(sa.select(schedule_firings).where(schedule_firings.c.id == firing_id))
    return Firing.from_row(row.one())


def last_firing(
    conn: sa.Connection, schedule_id: int, trigger: FiringTrigger | None = None
) -> Firing | None:
    """The schedule's latest firing by fire time, made or skipped (of `trigger` if given)."""
    query = sa.select(schedule_firings).where(schedule_firings.c.schedule_id == schedule_id)
    if trigger is not None:
        query = query.where(schedule_firings.c.trigger == FiringTrigger(trigger).value)
    query = query.order_by(schedule_firings.c.fire_at.desc(), schedule_firings.c.id.desc()).limit(1)
    row = conn.execute(query).first()
    return Firing.from_row(row) if row is not None else None


def firing_of_job(conn: sa.Connection, job_id: int) -> Firing | None:
    """The firing that submitted this job; None for a job no schedule made."""
    query = sa.select(schedule_firings).where(schedule_firings.c.job_id == job_id)
    row = conn.execute(query).first()
    return Firing.from_row(row) if row is not None else None


def earlier_job(conn: sa.Connection, schedule_id: int, before_job: int) -> int | None:
    """The latest job this schedule submitted before job `before_job`; None if it made none."""
    query = sa.select(sa.func.max(schedule_firings.c.job_id)).where(
        schedule_firings.c.schedule_id == schedule_id,
        schedule_firings.c.job_id < before_job,
    )
    found = conn.execute(query).scalar()
    return int(found) if found is not None else None
