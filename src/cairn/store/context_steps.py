"""A job's conversation, append-only: one row per step, written only under the job's lease.

Saving step k is one indexed insert whatever k is (the whole-blob `contexts.save` rewrote
every earlier step too). Every function is keyed by job id and nothing else: there is no
lookup by room or agent, so a job never reads another job's steps (rule 1).

How a runner uses it: inside `Store.fenced(job_id, token)` it reads `steps()` once when
a turn starts, then `append()`s each model answer and each tool result as it happens, passing
the seq it expects next. A writer that lost the lease is refused with `LeaseLost`; a step that
is not the next one (another writer got there first, or the caller's view is stale) with
`ContextConflict`, so two runners can never interleave one conversation. A person's message
(a reviewer's reply) reaches the conversation through the job's inbox (`jobs.context`): the
runner that next holds the lease appends it as a `follow_up` step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from cairn.errors import ContextConflict, LeaseLost, NotFound
from cairn.stages import Status
from cairn.store.records import ContextStep, StepKind
from cairn.store.schema import context_steps, jobs, utcnow

Opening = Sequence[tuple[StepKind, Mapping[str, Any]]]
"""The steps a fresh context starts with, in order (a system prompt, the request...)."""


def append(
    conn: sa.Connection,
    job_id: int,
    fencing_token: int,
    seq: int,
    kind: StepKind,
    payload: Mapping[str, Any],
) -> ContextStep:
    """Save step `seq` of the job's conversation; it must directly follow the last saved one."""
    _require_lease(conn, job_id, fencing_token)
    last = _last_seq(conn, job_id)
    if seq != last + 1:
        raise ContextConflict(
            f"job {job_id}'s conversation is saved up to step {last}, so step {seq} cannot "
            "follow it; reload the conversation and continue from its last saved step"
        )
    return _insert(conn, job_id, fencing_token, seq, [(kind, payload)])[0]


def replace(
    conn: sa.Connection, job_id: int, fencing_token: int, opening: Opening
) -> list[ContextStep]:
    """Start the job's conversation afresh (rule 1, `reply --fresh`): drop its steps, save these."""
    _require_lease(conn, job_id, fencing_token)
    # Dropped, not kept beside the new one: no copy of the earlier raw model text lingers.
    conn.execute(sa.delete(context_steps).where(context_steps.c.job_id == job_id))
    return _insert(conn, job_id, fencing_token, 1, opening)


def steps(conn: sa.Connection, job_id: int, *, after: int = 0) -> list[ContextStep]:
    """The job's saved steps in order (those after step `after`); empty when it has none."""
    query = (
        sa.select(context_steps)
        .where(context_steps.c.job_id == job_id, context_steps.c.seq > after)
        .order_by(context_steps.c.seq)
    )
    return [ContextStep.from_row(row) for row in conn.execute(query)]


_LAST_STEP = (
    sa.select(context_steps)
    .where(context_steps.c.job_id == sa.bindparam("job"))
    .order_by(context_steps.c.seq.desc())
    .limit(1)
)


def last_step(conn: sa.Connection, job_id: int) -> ContextStep | None:
    """The job's last saved step, where a resumed turn continues from; None when it has none."""
    row = conn.execute(_LAST_STEP, {"job": job_id}).first()
    return ContextStep.from_row(row) if row else None


def _require_lease(conn: sa.Connection, job_id: int, fencing_token: int) -> None:
    # FOR UPDATE (PostgreSQL) holds the job row until commit: a claim that would supersede
    # this token waits, and two appends to one job run one after the other. SQLite's
    # BEGIN IMMEDIATE serializes writers already.
    query = sa.select(jobs.c.fencing_token, jobs.c.status).where(jobs.c.id == job_id)
    row = conn.execute(query.with_for_update()).first()
    if row is None:
        raise NotFound(f"there is no job {job_id}")
    if row.fencing_token != fencing_token or row.status != Status.running.value:
        raise LeaseLost(
            f"job {job_id} is now held by another runner, waits for a person, or has ended; "
            "this runner may not write its conversation"
        )


def _last_seq(conn: sa.Connection, job_id: int) -> int:
    query = sa.select(sa.func.max(context_steps.c.seq)).where(context_steps.c.job_id == job_id)
    return int(conn.execute(query).scalar() or 0)


def _insert(
    conn: sa.Connection, job_id: int, fencing_token: int, first_seq: int, new: Opening
) -> list[ContextStep]:
    """Save `new` as steps `first_seq`, `first_seq + 1`... of the job, read back as stored."""
    saved = []
    for seq, (kind, payload) in enumerate(new, start=first_seq):
        values = {
            "job_id": job_id,
            "seq": seq,
            "kind": StepKind(kind).value,
            "payload": dict(payload),
            "fencing_token": fencing_token,
            "at": utcnow(),
        }
        # RETURNING hands back the row as stored (its payload JSON-decoded, as a load sees it).
        insert = sa.insert(context_steps).values(**values).returning(context_steps)
        try:
            saved.append(ContextStep.from_row(conn.execute(insert).one()))
        except sa.exc.IntegrityError:
            # Reachable only past the lease check: the unique (job_id, seq) still holds.
            raise ContextConflict(
                f"step {seq} of job {job_id}'s conversation was saved by another writer; "
                "reload the conversation and continue from its last saved step"
            ) from None
    return saved
