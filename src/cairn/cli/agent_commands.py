"""Named agents: `cairn agent add/list/remove`, installation-wide, decided by an admin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from cairn.cli.context import AS_OPTION, JSON_OPTION, command_group, console, print_json, session
from cairn.errors import NotAllowed, UsageError

if TYPE_CHECKING:
    import sqlalchemy as sa

agent_app = command_group("Manage named agents (an adapter, a model and its settings).")
ADAPTERS = ("openai", "claude", "aider")
"""The adapters a named agent can use (the script agent's spec is its script: no name needed)."""


@agent_app.command("add")
def agent_add(
    ctx: typer.Context,
    name: str,
    adapter: str = typer.Option(..., "--adapter", help="The adapter: openai, claude or aider."),
    model: str | None = typer.Option(
        None, "--model", help="The model, as the server names it (claude: optional)."
    ),
    command: str | None = typer.Option(
        None,
        "--command",
        help="claude: the path of the Claude Code binary (default: `claude` on the runner's PATH).",
    ),
    base_url: str | None = typer.Option(
        None,
        "--base-url",
        help="The endpoint, e.g. http://localhost:8000/v1 (default: the "
        "runner's OPENAI_BASE_URL, else the OpenAI API). Never with credentials in it.",
    ),
    api_key_env: str | None = typer.Option(
        None,
        "--api-key-env",
        help="The NAME of the runner's variable holding the API key "
        "(default OPENAI_API_KEY); the key itself is never stored.",
    ),
    max_turn_steps: int | None = typer.Option(
        None, "--max-turn-steps", help="Model steps a turn may take (default 40)."
    ),
    context_tokens: int | None = typer.Option(
        None, "--context-tokens", help="The conversation's token budget (default 32000)."
    ),
    temperature: float | None = typer.Option(
        None, "--temperature", help="Sampling temperature, 0 to 2 (default: the server's)."
    ),
    stream: bool | None = typer.Option(
        None, "--stream/--no-stream", help="Stream the model's answers (default: stream)."
    ),
    tool_protocol: str | None = typer.Option(
        None,
        "--tool-protocol",
        help="auto (default), native tool calls, or text: calls "
        "written as JSON in the answer, for models without native tool calls.",
    ),
    as_user: str | None = AS_OPTION,
) -> None:
    """Add a named agent, to use as `--agent NAME` or a room's default (an admin decides)."""
    from cairn.store import agents

    if adapter not in ADAPTERS:
        raise UsageError(f"--adapter is one of {', '.join(ADAPTERS)} for a named agent")
    agents.check_name(name)
    if adapter == "claude":
        spec = _claude_spec(model, command)
    elif adapter == "aider":
        spec = _aider_spec(model, command)
    else:
        spec = _openai_spec(
            model, base_url, api_key_env, max_turn_steps, context_tokens, temperature, stream,
            tool_protocol, command,
        )  # fmt: skip
    s = session(ctx)
    with s.store() as store, store.begin() as conn:
        require_admin(conn, s.actor(as_user), "add a named agent")
        agents.add_agent(conn, name, spec)
    console.print(f"agent {name} added ({adapter}, model {spec['model'] or 'the CLI default'})")


def _claude_spec(model: str | None, command: str | None) -> dict[str, Any]:
    from cairn.agents.claude_code import claude_spec

    return claude_spec({"model": model, "command": command})


def _aider_spec(model: str | None, command: str | None) -> dict[str, Any]:
    from cairn.agents.aider_cli import aider_spec

    return aider_spec({"model": model, "command": command})


def _openai_spec(
    model: str | None,
    base_url: str | None,
    api_key_env: str | None,
    max_turn_steps: int | None,
    context_tokens: int | None,
    temperature: float | None,
    stream: bool | None,
    tool_protocol: str | None,
    command: str | None,
) -> dict[str, Any]:
    from cairn.agents.openai_spec import openai_spec

    if command is not None:
        raise UsageError("--command is for a CLI adapter (claude); the openai adapter runs none")
    given: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "api_key_env": api_key_env,
        "max_turn_steps": max_turn_steps,
        "context_tokens": context_tokens,
        "temperature": temperature,
        "stream": stream,
        "tool_protocol": tool_protocol,
    }
    return openai_spec({key: value for key, value in given.items() if value is not None})


@agent_app.command("list")
def agent_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List the named agents and their settings (never a key: only the variable's name)."""
    from cairn.store import agents

    with session(ctx).store() as store, store.begin() as conn:
        found = [{"name": a.name, **a.spec} for a in agents.list_agents(conn)]
    if as_json:
        print_json(found)
        return
    if not found:
        console.print("no named agents yet; `cairn agent add NAME --adapter openai --model M`")
    for agent in found:
        if agent["adapter"] == "claude":
            binary = agent.get("command") or "claude on PATH"
            console.print(
                f"{agent['name']:<16} claude {agent.get('model') or '(CLI default)'} via "
                f"{binary} at the runner's ANTHROPIC_BASE_URL (key from ANTHROPIC_API_KEY)"
            )
            continue
        if agent["adapter"] == "aider":
            binary = agent.get("command") or "aider on PATH"
            console.print(
                f"{agent['name']:<16} aider {agent.get('model')} via {binary} at the runner's "
                "OPENAI_API_BASE (key from OPENAI_API_KEY)"
            )
            continue
        where = agent.get("base_url") or "the runner's OPENAI_BASE_URL"
        console.print(
            f"{agent['name']:<16} {agent['adapter']} {agent.get('model')} at {where} "
            f"(key from {agent.get('api_key_env')})"
        )


@agent_app.command("remove")
def agent_remove(ctx: typer.Context, name: str, as_user: str | None = AS_OPTION) -> None:
    """Remove a named agent; jobs that used it keep their own copy of its settings."""
    from cairn.store import agents

    s = session(ctx)
    with s.store() as store, store.begin() as conn:
        require_admin(conn, s.actor(as_user), "remove a named agent")
        agents.remove_agent(conn, name)
    console.print(f"agent {name} removed")


def require_admin(conn: sa.Connection, actor: str, what: str) -> None:
    """Refuse unless `actor` is an admin of some group: named agents serve every group."""
    from cairn.store import identity
    from cairn.store.records import Role

    user = identity.get_user(conn, actor)
    if not any(role == Role.admin for _, role in identity.memberships_of(conn, user.id)):
        raise NotAllowed(f"only an admin of a group can {what}; {actor} is not one")
