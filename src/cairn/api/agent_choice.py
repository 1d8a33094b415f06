"""Which agent a job (or a schedule's jobs) submitted over the API runs: never a server file."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from cairn.errors import UsageError


def agent_spec(
    conn: sa.Connection, room: str, agent: str | None, script: str | None
) -> dict[str, Any]:
    """The spec to store: a script sent as YAML, a named or `openai:` agent, or the room's."""
    from cairn.agents.registry import script_spec
    from cairn.jobs.submit import resolve_agent

    if script is not None and agent is not None:
        raise UsageError("give the job either an agent or a script, not both")
    if agent is not None and agent.partition(":")[0].strip() == "script":
        # script:PATH would read a file of the server's, which no remote user may name.
        raise UsageError(
            "over the API a script agent is sent as YAML in `script`, not as script:PATH"
        )
    return script_spec(script) if script is not None else resolve_agent(conn, room, agent)
