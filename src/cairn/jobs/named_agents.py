"""Named agents as people administer them: listed by anyone, added and removed by an admin.

`cairn agent add/list/remove` and the API's `/api/agents` both call these, so the rule that an
admin of some group decides (named agents serve every group) lives in one place.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa

from cairn.errors import UsageError
from cairn.jobs.policy import require_an_admin
from cairn.store import agents
from cairn.store.records import NamedAgent

ADAPTERS = ("openai", "claude", "codex", "aider")
"""The adapters a named agent can use (the script agent's spec is its script: no name needed)."""
CLI_ADAPTERS = {
    "claude": "cairn.agents.claude_code:claude_spec",
    "codex": "cairn.agents.codex_cli:codex_spec",
    "aider": "cairn.agents.aider_cli:aider_spec",
}
"""Adapters that drive a coding CLI, and the function that validates each one's spec: a model
and the CLI's binary (`command`) are all they take."""


def add_named_agent(
    conn: sa.Connection, name: str, adapter: str, settings: Mapping[str, Any], actor: str
) -> NamedAgent:
    """Validate the settings into a spec (never a key) and store it under `name`."""
    if adapter not in ADAPTERS:
        raise UsageError(f"--adapter is one of {', '.join(ADAPTERS)} for a named agent")
    agents.check_name(name)
    spec = agent_spec(adapter, {key: value for key, value in settings.items() if value is not None})
    require_an_admin(conn, actor, "add a named agent")
    return agents.add_agent(conn, name, spec)


def agent_spec(adapter: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The storable spec of `adapter` from the settings given (None values already left out)."""
    if adapter in CLI_ADAPTERS:
        extra = sorted(set(given) - {"model", "command"})
        if extra:
            option = "--" + extra[0].replace("_", "-")
            raise UsageError(
                f"{option} is for the openai adapter; {adapter} takes --model, --command"
            )
        module, function = CLI_ADAPTERS[adapter].split(":")
        validate: Callable[[Mapping[str, Any]], dict[str, Any]]
        validate = getattr(importlib.import_module(module), function)
        return validate(given)
    from cairn.agents.openai_spec import openai_spec

    if "command" in given:
        raise UsageError("--command is for a CLI adapter (claude, codex, aider); openai runs none")
    return openai_spec(given)


def remove_named_agent(conn: sa.Connection, name: str, actor: str) -> None:
    """Remove a named agent; jobs that used it keep their own copy of its settings."""
    require_an_admin(conn, actor, "remove a named agent")
    agents.remove_agent(conn, name)


def agent_rows(conn: sa.Connection) -> list[dict[str, Any]]:
    """Every named agent as `cairn agent list --json` and `GET /api/agents` show it."""
    return [{"name": a.name, **a.spec} for a in agents.list_agents(conn)]
