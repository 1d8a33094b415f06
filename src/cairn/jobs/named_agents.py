"""Named agents as people administer them: listed by anyone, added and removed by an admin.

`cairn agent add/list/remove` and the API's `/api/agents` both call these, so the rule that an
admin of some group decides (named agents serve every group) lives in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from cairn.errors import UsageError
from cairn.jobs.policy import require_an_admin
from cairn.store import agents
from cairn.store.records import NamedAgent

ADAPTERS = ("openai",)
"""The adapters a named agent can use (the script agent's spec is its script: no name needed)."""


def add_named_agent(
    conn: sa.Connection, name: str, adapter: str, settings: Mapping[str, Any], actor: str
) -> NamedAgent:
    """Validate the settings into a spec (never a key) and store it under `name`."""
    from cairn.agents.openai_spec import openai_spec

    if adapter not in ADAPTERS:
        raise UsageError(f"--adapter is one of {', '.join(ADAPTERS)} for a named agent")
    agents.check_name(name)
    spec = openai_spec({key: value for key, value in settings.items() if value is not None})
    require_an_admin(conn, actor, "add a named agent")
    return agents.add_agent(conn, name, spec)


def remove_named_agent(conn: sa.Connection, name: str, actor: str) -> None:
    """Remove a named agent; jobs that used it keep their own copy of its settings."""
    require_an_admin(conn, actor, "remove a named agent")
    agents.remove_agent(conn, name)


def agent_rows(conn: sa.Connection) -> list[dict[str, Any]]:
    """Every named agent as `cairn agent list --json` and `GET /api/agents` show it."""
    return [{"name": a.name, **a.spec} for a in agents.list_agents(conn)]
