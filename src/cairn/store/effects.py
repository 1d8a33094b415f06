"""The effect ledger: actions outside cairn, recorded as intended before and done after."""

from __future__ import annotations

import sqlalchemy as sa

from cairn.engine.effects import EffectStatus
from cairn.store.records import Effect
from cairn.store.schema import effects, utcnow


def begin(conn: sa.Connection, job_id: int, kind: str, key: str) -> Effect:
    """Record the intent to perform an effect, or return the record that already exists."""
    existing = find(conn, key)
    if existing is not None:
        return existing
    conn.execute(
        sa.insert(effects).values(
            job_id=job_id,
            kind=kind,
            idempotency_key=key,
            status=EffectStatus.intended,
            intended_at=utcnow(),
        )
    )
    found = find(conn, key)
    assert found is not None
    return found


def mark(
    conn: sa.Connection, key: str, status: EffectStatus, external_ref: str | None = None
) -> Effect:
    """Record that the effect is done (or failed), with what the outside world calls it."""
    done_at = utcnow() if status == EffectStatus.done else None
    conn.execute(
        sa.update(effects)
        .where(effects.c.idempotency_key == key)
        .values(status=EffectStatus(status).value, external_ref=external_ref, done_at=done_at)
    )
    found = find(conn, key)
    assert found is not None
    return found


def find(conn: sa.Connection, key: str) -> Effect | None:
    row = conn.execute(sa.select(effects).where(effects.c.idempotency_key == key)).first()
    return Effect.from_row(row) if row else None


_FOR_JOB = sa.select(effects).where(effects.c.job_id == sa.bindparam("job")).order_by(effects.c.id)


def for_job(conn: sa.Connection, job_id: int) -> list[Effect]:
    return [Effect.from_row(r) for r in conn.execute(_FOR_JOB, {"job": job_id})]
