"""Codex CLI jobs in the harness: submit with `--agent codex:MODEL`, the runner's environment
pointing at a ScriptedResponsesServer (OPENAI_BASE_URL, OPENAI_API_KEY)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cairn.agents.codex_cli import DEFAULT_MAX_RETRIES
from cairn.agents.registry import load_agent_spec
from cairn.jobs import context
from cairn.jobs.submit import submit_job
from cairn.sanitize import user_sanitizer
from cairn.store.records import Job
from cairn.testing import (
    Answer,
    CustomToolCall,
    Fault,
    NamespacedToolCall,
    ScriptedResponsesServer,
    text_answer,
)
from cairn.testing.harness import Cairn

MODEL = "cairn-scripted"
LOST_CALL = DEFAULT_MAX_RETRIES + 1
"""Requests Codex CLI makes for one model call whose stream keeps dropping: the first and its
retries (`stream_max_retries`)."""


def point_at(cairn: Cairn, server: ScriptedResponsesServer) -> None:
    """Give the installation's runners the server's URL and key, as their environment would."""
    environment = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key or ""}
    cairn.config = cairn.config.model_copy(update={"environment": environment})


def submit_codex(cairn: Cairn, cli: Path, text: str, actor: str = "alice") -> Job:
    """Submit a codex job to room `sample`, its binary the pinned test CLI."""
    spec = {**load_agent_spec(f"codex:{MODEL}"), "command": str(cli)}
    with cairn.store.begin() as conn:
        return submit_job(
            conn,
            room="sample",
            text=text,
            agent=spec,
            actor=actor,
            sanitizer=user_sanitizer(cairn.config),
        )


def add_file(path: str, content: str) -> CustomToolCall:
    """Codex's freeform `apply_patch` adding one file (a path relative to the workspace)."""
    lines = "".join(f"+{line}\n" for line in content.splitlines())
    patch = f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n"
    return CustomToolCall("apply_patch", patch)


def dependency(name: str = "termcolor", version: str = "2.4.0") -> NamespacedToolCall:
    """cairn's `request_dependency`, as Codex offers MCP tools: in the `mcp__cairn` namespace."""
    ask = {"ecosystem": "pypi", "name": name, "version": version, "reason": "colour"}
    return NamespacedToolCall("request_dependency", ask, namespace="mcp__cairn")


def lost_call() -> list[Answer]:
    """One model call lost for good: every try Codex makes drops mid-answer."""
    dropped = text_answer("never arrives").with_fault(Fault.drop_connection, after_chunks=1)
    return [dropped] * LOST_CALL


def agent_state(cairn: Cairn, job_id: int) -> dict[str, Any]:
    """The codex agent's saved state in the job's context."""
    with cairn.store.begin() as conn:
        state = context.load(conn, job_id).agent_state
    assert state is not None
    return state


def flags(state: dict[str, Any]) -> list[str]:
    """Every flag of every turn's command line, in one list."""
    return [flag for line in state["invocations"] for flag in line]
