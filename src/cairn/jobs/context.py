"""The job's own context: the agent's state, cairn's notes and a reviewer's follow-ups for its
next turn, and the outcome of a turn that ended but is not yet settled."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa

from cairn.agents.base import Outcome
from cairn.store import contexts

_INBOX_LIMIT = 20


@dataclass(frozen=True)
class JobContext:
    agent_state: dict[str, Any] | None = None
    inbox: list[str] = field(default_factory=list)
    outcome: Outcome | None = None
    """A turn's outcome the agent saved, not yet settled by cairn (a crash came in between)."""
    told: list[int] = field(default_factory=list)
    """Dependency requests whose decision the agent has been told (each exactly once)."""
    follow_ups: list[str] = field(default_factory=list)
    """A reviewer's messages (`cairn reply`), masked, not yet handed to a turn."""
    fresh: bool = False
    """The follow-ups asked for a fresh conversation (`cairn reply --fresh`)."""


def load(conn: sa.Connection, job_id: int) -> JobContext:
    """The job's context; an empty one (a fresh context) when it has none yet."""
    stored = contexts.load(conn, job_id)
    if stored is None:
        return JobContext()
    outcome = stored.get("outcome")
    # A context saved before follow-ups existed has neither key: none are pending.
    return JobContext(
        stored.get("agent"),
        list(stored.get("inbox", [])),
        Outcome.from_data(outcome) if outcome else None,
        [int(i) for i in stored.get("told", [])],
        [str(message) for message in stored.get("follow_ups", [])],
        bool(stored.get("fresh", False)),
    )


def save_agent_state(
    conn: sa.Connection, job_id: int, agent: str, state: dict[str, Any], outcome: Outcome | None
) -> None:
    """Replace the agent's state; its notes and follow-ups were delivered with the turn, so
    clear them (in the same transaction: a crash cannot deliver them twice)."""
    told = load(conn, job_id).told
    _save(conn, job_id, agent, JobContext(state, [], outcome, told))


def post_note(
    conn: sa.Connection, job_id: int, agent: str, note: str, *, told: int | None = None
) -> None:
    """Leave a note for the job's next agent turn (marking a dependency decision as told)."""
    current = load(conn, job_id)
    inbox = [*current.inbox, note][-_INBOX_LIMIT:]
    told_ids = [*current.told, told] if told is not None else current.told
    _save(conn, job_id, agent, replace(current, inbox=inbox, told=told_ids))


def post_follow_up(
    conn: sa.Connection, job_id: int, agent: str, message: str, *, fresh: bool
) -> None:
    """Leave a reviewer's (masked) message for the job's next turn; `fresh` asks for a new
    conversation holding it."""
    current = load(conn, job_id)
    follow_ups = [*current.follow_ups, message][-_INBOX_LIMIT:]
    _save(
        conn, job_id, agent, replace(current, follow_ups=follow_ups, fresh=current.fresh or fresh)
    )


def settle(conn: sa.Connection, job_id: int, agent: str) -> None:
    """Drop the pending outcome: cairn recorded what it led to in this same transaction."""
    current = load(conn, job_id)
    if current.outcome is not None:
        _save(conn, job_id, agent, replace(current, outcome=None))


def _save(conn: sa.Connection, job_id: int, agent: str, context: JobContext) -> None:
    state = {
        "agent": context.agent_state,
        "inbox": context.inbox,
        "outcome": context.outcome.to_data() if context.outcome else None,
        "told": context.told,
        "follow_ups": context.follow_ups,
        "fresh": context.fresh,
    }
    contexts.save(conn, job_id, agent, state)
