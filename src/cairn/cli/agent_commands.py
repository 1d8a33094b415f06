"""Named agents: `cairn agent add/list/remove`, installation-wide, decided by an admin; and
`cairn agent check`, run on a runner's machine."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import typer

from cairn.cli.context import (
    AS_OPTION,
    JSON_OPTION,
    Session,
    command_group,
    console,
    print_json,
    session,
)

agent_app = command_group("Manage named agents (an adapter, a model and its settings).")


@agent_app.command("add")
def agent_add(
    ctx: typer.Context,
    name: str,
    adapter: str = typer.Option(
        ..., "--adapter", help="The adapter: openai, claude, codex or aider."
    ),
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
    from cairn.jobs.named_agents import add_named_agent

    given: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "api_key_env": api_key_env,
        "max_turn_steps": max_turn_steps,
        "context_tokens": context_tokens,
        "temperature": temperature,
        "stream": stream,
        "tool_protocol": tool_protocol,
        "command": command,
    }
    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        spec = remote.post("/api/agents", {"name": name, "adapter": adapter, **given})
    else:
        with s.store() as store, store.begin() as conn:
            spec = add_named_agent(conn, name, adapter, given, s.actor(as_user)).spec
    console.print(f"agent {name} added ({adapter}, model {spec['model'] or 'the CLI default'})")


@agent_app.command("list")
def agent_list(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List the named agents and their settings (never a key: only the variable's name)."""
    from cairn.jobs.named_agents import agent_rows

    remote = session(ctx).client()
    if remote is not None:
        found = list(remote.get("/api/agents"))
    else:
        with session(ctx).store() as store, store.begin() as conn:
            found = agent_rows(conn)
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
        if agent["adapter"] == "codex":
            binary = agent.get("command") or "codex on PATH"
            console.print(
                f"{agent['name']:<16} codex {agent.get('model') or '(CLI default)'} via "
                f"{binary} at the runner's OPENAI_BASE_URL (key from OPENAI_API_KEY)"
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
    from cairn.jobs.named_agents import remove_named_agent

    s = session(ctx)
    remote = s.client(as_user)
    if remote is not None:
        remote.delete(f"/api/agents/{quote(name, safe='')}")
    else:
        with s.store() as store, store.begin() as conn:
            remove_named_agent(conn, name, s.actor(as_user))
    console.print(f"agent {name} removed")


@agent_app.command("check")
def agent_check(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="The named agent to check."),
    agent: str | None = typer.Option(
        None,
        "--agent",
        help="Check an unnamed agent instead: openai:MODEL, claude, codex:MODEL or aider:MODEL.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Check that this machine can run the agent: its key, endpoint, model or binary, sandbox.

    Run it on a runner's machine, with the runner's environment: it takes one no-op turn
    against the configured endpoint with the runner's own keys, and lists each need as passed
    or failed, with what to do. It writes nothing to the store (a check is not a job). There
    is no API route for it: the server may not be a runner, nor hold a runner's keys. Exit
    code 0 when every check passed, 1 otherwise.
    """
    from cairn.agents.checks import check_agent
    from cairn.errors import UsageError
    from cairn.sanitize import user_sanitizer

    if (name is None) == (agent is None):
        raise UsageError("name one agent: `cairn agent check NAME` or `--agent openai:MODEL`")
    s = session(ctx)
    spec = _spec_to_check(s, name) if name is not None else _unnamed_spec(agent or "")
    report = check_agent(spec, s.config)
    mask = user_sanitizer(s.config).mask
    data = report.to_data()
    for check in data["checks"]:
        check["reason"] = mask(check["reason"])
        check["fix"] = None if check["fix"] is None else mask(check["fix"])
    if as_json:
        print_json({"agent": name, **data})
    else:
        _print_checks(name, data)
    if not report.ok:
        raise typer.Exit(1)


def _spec_to_check(s: Session, name: str) -> dict[str, Any]:
    """A named agent's spec, from the server when the CLI is its client, else the store."""
    from cairn.agents.registry import load_agent_spec

    remote = s.client()
    if remote is not None:
        found = {agent["name"]: agent for agent in remote.get("/api/agents")}
        return load_agent_spec(name, named=lambda n: _without_name(found.get(n)))
    from cairn.store.agents import lookup

    with s.store() as store, store.begin() as conn:
        return load_agent_spec(name, named=lookup(conn))


def _without_name(listed: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if listed is None else {k: v for k, v in listed.items() if k != "name"}


def _unnamed_spec(text: str) -> dict[str, Any]:
    from cairn.agents.registry import load_agent_spec

    return load_agent_spec(text)


def _print_checks(name: str | None, data: dict[str, Any]) -> None:
    model = data["model"] or "the CLI default"
    title = f"agent {name}" if name else "agent"
    console.print(f"{title} ({data['adapter']}, model {model})")
    for check in data["checks"]:
        console.print(f"  {check['status']:<8} {check['name']:<11} {check['reason']}")
        if check["fix"]:
            console.print(f"  {'':<8} {'':<11} to do: {check['fix']}")
    verdict = "every check passed" if data["ok"] else "some checks failed: see `to do` above"
    console.print(verdict)
