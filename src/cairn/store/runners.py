"""The runners ledger: which runner processes work on this store, and which are lost."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import sqlalchemy as sa

from cairn.stages import Status
from cairn.store.leases import database_now
from cairn.store.schema import jobs, runners

FORGET_LOST_AFTER = timedelta(days=1)
"""A runner lost this long ago is dropped from the list when another runner starts."""


@dataclasses.dataclass(frozen=True)
class RunnerView:
    """One runner as `cairn runners` shows it."""

    id: str
    host: str
    pid: int
    concurrency: int
    started_at: datetime
    heartbeat_at: datetime
    lost: bool
    """Not heard from for a whole lease: dead, frozen or cut off; its jobs can be claimed."""
    jobs: tuple[int, ...]
    """Jobs whose lease this runner holds (for a lost runner: held last, now claimable)."""


def register(
    conn: sa.Connection,
    runner_id: str,
    *,
    host: str,
    workspace_host: str,
    pid: int,
    concurrency: int,
    lease_seconds: float,
) -> None:
    """Enter a starting runner in the ledger, forgetting runners lost long ago."""
    now = database_now(conn)
    conn.execute(sa.delete(runners).where(runners.c.heartbeat_at < now - FORGET_LOST_AFTER))
    conn.execute(
        sa.insert(runners).values(
            id=runner_id,
            host=host,
            workspace_host=workspace_host,
            pid=pid,
            concurrency=concurrency,
            lease_seconds=lease_seconds,
            started_at=now,
            heartbeat_at=now,
        )
    )


def beat(conn: sa.Connection, runner_id: str) -> bool:
    """Record that the runner is alive; False if its row is gone (then register it again)."""
    done = conn.execute(
        sa.update(runners).where(runners.c.id == runner_id).values(heartbeat_at=database_now(conn))
    )
    return done.rowcount == 1


def unregister(conn: sa.Connection, runner_id: str) -> None:
    """Remove a runner that stopped cleanly (it handed its jobs back first)."""
    conn.execute(sa.delete(runners).where(runners.c.id == runner_id))


def live_workspace_hosts(conn: sa.Connection, now: datetime) -> frozenset[str]:
    """The workspace hosts with a runner not lost at `now`, each judged by its own lease."""
    rows = conn.execute(
        sa.select(runners.c.workspace_host, runners.c.heartbeat_at, runners.c.lease_seconds)
    )
    return frozenset(
        row.workspace_host for row in rows if not _lost(row.heartbeat_at, row.lease_seconds, now)
    )


def _lost(heartbeat_at: datetime, lease_seconds: float, now: datetime) -> bool:
    """Not heard from for a whole lease of its own (a runner's lease is its own setting)."""
    return heartbeat_at + timedelta(seconds=lease_seconds) < now


def list_runners(conn: sa.Connection) -> list[RunnerView]:
    """Every runner in the ledger, oldest first, each with the jobs it holds."""
    now = database_now(conn)
    held: dict[str, list[int]] = {}
    owned = (
        sa.select(jobs.c.lease_owner, jobs.c.id)
        .where(jobs.c.status == Status.running.value, jobs.c.lease_owner.is_not(None))
        .order_by(jobs.c.id)
    )
    for owner, job_id in conn.execute(owned):
        held.setdefault(owner, []).append(job_id)
    rows = conn.execute(sa.select(runners).order_by(runners.c.started_at, runners.c.id))
    return [
        RunnerView(
            id=row.id,
            host=row.host,
            pid=row.pid,
            concurrency=row.concurrency,
            started_at=row.started_at,
            heartbeat_at=row.heartbeat_at,
            lost=_lost(row.heartbeat_at, row.lease_seconds, now),
            jobs=tuple(held.get(row.id, ())),
        )
        for row in rows
    ]


def hand_back(conn: sa.Connection, runner_id: str) -> int:
    """Make every job the runner holds runnable again (it is stopping); how many there were.

    Each job goes back under the token it was claimed with: the runner's threads still
    driving them find their next fenced write refused (the job left `running`).
    """
    handed = conn.execute(
        sa.update(jobs)
        .where(jobs.c.lease_owner == runner_id, jobs.c.status == Status.running.value)
        .values(status=Status.queued.value, lease_owner=None, lease_expires_at=None)
    )
    return int(handed.rowcount)


JUST_RAN_OUT_SECONDS = 0.5
"""A lease that ran out this recently still counts as running out now (0 s)."""


def seconds_until_a_lease_expires(conn: sa.Connection) -> float | None:
    """How long until the next lease of a running job runs out (it is then claimable); None
    when no lease is still to run out.

    A lease long past is not counted: the job was claimable, and a runner that did not claim
    it leaves it to another host for a while (affinity). Counting it would end every idle
    wait at once, and the runner would claim nothing over and over. One that ran out in the
    last `JUST_RAN_OUT_SECONDS` counts as running out now: it may have run out between this
    runner's last claim and this look.
    """
    now = database_now(conn)
    recently = now - timedelta(seconds=JUST_RAN_OUT_SECONDS)
    first = conn.execute(
        sa.select(sa.func.min(jobs.c.lease_expires_at)).where(
            jobs.c.status == Status.running.value, jobs.c.lease_expires_at > recently
        )
    ).scalar()
    if first is None:
        return None
    return max(0.0, float((first - now).total_seconds()))
