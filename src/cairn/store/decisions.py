"""The decision ledger: append-only, each row hash-chained to the one before it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from cairn.canonical import digest
from cairn.errors import StoreError
from cairn.stages import Gate, Verdict
from cairn.store.records import Decision
from cairn.store.schema import decisions, utcnow

GENESIS = "0" * 64
_APPEND_TRIES = 8
_CHAIN_LOCK = 0x6361_6972_6E00  # "cairn": one advisory lock key for the decision chain


def content_hash(
    *,
    job_id: int | None,
    gate: str,
    verdict: str,
    actor: str,
    reason: str | None,
    policy: str | None,
    at: datetime,
    prev_hash: str,
) -> str:
    """SHA-256 over the canonical JSON of a decision's content and its predecessor's hash."""
    # Compact canonical JSON, as every stored `hash` was written: the chain verifies unchanged.
    return digest(
        {
            "job_id": job_id,
            "gate": gate,
            "verdict": verdict,
            "actor": actor,
            "reason": reason,
            "policy": policy,
            "at": at.isoformat(timespec="microseconds"),
            "prev_hash": prev_hash,
        }
    )


def append(
    conn: sa.Connection,
    *,
    job_id: int | None,
    gate: Gate,
    verdict: Verdict,
    actor: str,
    reason: str | None = None,
    policy: str | None = None,
) -> Decision:
    """Append a decision at the head of the chain.

    `prev_hash` is unique, so two writers that read the same head cannot both append:
    the loser's insert fails inside its savepoint and it retries on the new head. On
    PostgreSQL, writers first queue on one advisory lock, so they rarely race at all.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_CHAIN_LOCK)))
    for _ in range(_APPEND_TRIES):
        head = conn.execute(
            sa.select(decisions.c.hash).order_by(decisions.c.id.desc()).limit(1)
        ).scalar()
        prev_hash = head or GENESIS
        at = utcnow()
        fields: dict[str, Any] = dict(
            job_id=job_id,
            # Stored and hashed as plain text, as every decision before was.
            gate=Gate(gate).value,
            verdict=Verdict(verdict).value,
            actor=actor,
            reason=reason,
            policy=policy,
            at=at,
            prev_hash=prev_hash,
        )
        try:
            with conn.begin_nested():
                result = conn.execute(
                    sa.insert(decisions).values(**fields, hash=content_hash(**fields))
                )
        except sa.exc.IntegrityError:
            continue
        key = result.inserted_primary_key
        assert key is not None, "an insert of one row has its key"
        row = conn.execute(sa.select(decisions).where(decisions.c.id == key[0])).one()
        return Decision.from_row(row)
    raise StoreError("the decision ledger is too busy right now; try the decision again")


_FOR_JOB = (
    sa.select(decisions).where(decisions.c.job_id == sa.bindparam("job")).order_by(decisions.c.id)
)


def for_job(conn: sa.Connection, job_id: int) -> list[Decision]:
    return [Decision.from_row(r) for r in conn.execute(_FOR_JOB, {"job": job_id})]


@dataclass(frozen=True)
class ChainReport:
    """The outcome of walking the chain: how many rows held, its head, the first row that did not.

    `head_in_chain` answers a verification against an anchor (a head kept elsewhere): None when
    no anchor was given.
    """

    checked: int
    head: str = GENESIS
    broken_id: int | None = None
    problem: str | None = None
    head_in_chain: bool | None = None

    @property
    def ok(self) -> bool:
        return self.broken_id is None and self.head_in_chain is not False


def verify_chain(conn: sa.Connection, anchor: str | None = None) -> ChainReport:
    """Walk the chain from its genesis, recomputing every row's hash.

    A chain cannot see its own tail cut: deleting the newest rows leaves a shorter chain that
    is still intact. Pass `anchor`, a head kept elsewhere (`cairn audit head`), and the chain
    must still hold it.
    """
    # Raw rows, not records: a row edited behind the chain's back may hold a gate or verdict
    # that no longer parses, and it must be reported, not raised.
    rows = list(conn.execute(sa.select(decisions).order_by("id")))
    by_prev = {row.prev_hash: row for row in rows}
    seen: set[int] = set()
    walked = {GENESIS}
    cursor = GENESIS
    while (row := by_prev.get(cursor)) is not None:
        if _recomputed(row) != row.hash:
            return ChainReport(len(seen), cursor, row.id, "its content does not match its hash")
        seen.add(row.id)
        cursor = row.hash
        walked.add(cursor)
    orphan = next((row for row in rows if row.id not in seen), None)
    if orphan is not None:
        return ChainReport(len(seen), cursor, orphan.id, "it does not follow the row before it")
    held = None if anchor is None else anchor in walked
    return ChainReport(len(seen), cursor, head_in_chain=held)


def _recomputed(row: sa.Row[Any]) -> str:
    return content_hash(
        job_id=row.job_id,
        gate=row.gate,
        verdict=row.verdict,
        actor=row.actor,
        reason=row.reason,
        policy=row.policy,
        at=row.at,
        prev_hash=row.prev_hash,
    )
