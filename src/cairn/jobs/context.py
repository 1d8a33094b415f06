"""The job's own context: the agent's state plus cairn's notes for its next turn."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.store import contexts

_INBOX_LIMIT = 20


def load(conn: sa.Connection, job_id: int) -> tuple[dict[str, Any] | None, list[str]]:
    """The agent state (None for a fresh context) and the notes waiting for it."""
    stored = contexts.load(conn, job_id)
    if stored is None:
        return None, []
    return stored.get("agent"), list(stored.get("inbox", []))


def save_agent_state(conn: sa.Connection, job_id: int, agent: str, state: dict[str, Any]) -> None:
    """Replace the agent's state; its pending notes were delivered with the turn, so clear them."""
    contexts.save(conn, job_id, agent, {"agent": state, "inbox": []})


def post_note(conn: sa.Connection, job_id: int, agent: str, note: str) -> None:
    """Leave a note for the job's next agent turn, keeping the agent's state as it is."""
    state, inbox = load(conn, job_id)
    inbox = [*inbox, note][-_INBOX_LIMIT:]
    contexts.save(conn, job_id, agent, {"agent": state, "inbox": inbox})
