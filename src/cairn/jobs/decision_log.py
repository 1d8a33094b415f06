"""The decision ledger read back: its entries and its head, for `cairn audit` and the API."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.errors import InvalidState


def decision_rows(
    conn: sa.Connection, *, job: int | None = None, policy_only: bool = False
) -> list[dict[str, Any]]:
    """Decisions oldest first (gate decisions and policy changes), as the CLI and API show them."""
    from cairn.jobs.policy import POLICY_GATE
    from cairn.store.records import Decision
    from cairn.store.schema import decisions as decisions_table

    query = sa.select(decisions_table).order_by(decisions_table.c.id)
    if job is not None:
        query = query.where(decisions_table.c.job_id == job)
    if policy_only:
        query = query.where(decisions_table.c.gate == POLICY_GATE)
    return [_record(Decision.from_row(r)) for r in conn.execute(query)]


def chain_head(conn: sa.Connection) -> dict[str, Any]:
    """The decision count and head hash to keep elsewhere; refused while the chain is broken."""
    from cairn.store import decisions

    report = decisions.verify_chain(conn)
    if not report.ok:
        raise InvalidState(
            f"decision {report.broken_id} is broken ({report.problem}); a broken chain has no "
            "head worth keeping. `cairn audit verify` names what is wrong"
        )
    return {"count": report.checked, "head": report.head}


def _record(decision: Any) -> dict[str, Any]:
    return {
        "id": decision.id,
        "job": decision.job_id,
        "gate": decision.gate,
        "verdict": decision.verdict,
        "actor": decision.actor,
        "reason": decision.reason,
        "policy": decision.policy,
        "at": decision.at.isoformat(),
    }
