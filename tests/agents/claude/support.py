"""Claude Code jobs in the harness: submit with `--agent claude`, the runner's environment
pointing at a ScriptedAnthropicServer (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cairn.agents.claude_code import DEFAULT_MAX_RETRIES
from cairn.agents.registry import load_agent_spec
from cairn.jobs import context
from cairn.jobs.submit import submit_job
from cairn.sanitize import user_sanitizer
from cairn.store.records import Job
from cairn.testing import Fault, Reply, ScriptedAnthropicServer, ToolUse, text_reply
from cairn.testing.harness import Cairn

LOST_CALL = DEFAULT_MAX_RETRIES + 2
"""Requests Claude Code makes for one model call whose connection keeps dropping: the first,
its retries (CLAUDE_CODE_MAX_RETRIES), and one last non-streaming try."""
DEPENDENCY_TOOL = "mcp__cairn__request_dependency"


def point_at(cairn: Cairn, server: ScriptedAnthropicServer) -> None:
    """Give the installation's runners the server's URL and key, as their environment would."""
    environment = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": server.api_key or ""}
    cairn.config = cairn.config.model_copy(update={"environment": environment})


def submit_claude(cairn: Cairn, cli: Path, text: str, actor: str = "alice") -> Job:
    """Submit a claude job to room `sample`, its binary the pinned test CLI."""
    spec = {**load_agent_spec("claude:"), "command": str(cli)}
    with cairn.store.begin() as conn:
        return submit_job(
            conn,
            room="sample",
            text=text,
            agent=spec,
            actor=actor,
            sanitizer=user_sanitizer(cairn.config),
        )


def write(cairn: Cairn, job: Job, path: str, content: str) -> ToolUse:
    """Claude Code's Write tool, its file_path absolute in the job's workspace."""
    return ToolUse("Write", {"file_path": str(cairn.workspace(job.id) / path), "content": content})


def dependency(name: str = "termcolor", version: str = "2.4.0") -> ToolUse:
    ask = {"ecosystem": "pypi", "name": name, "version": version, "reason": "colour"}
    return ToolUse(DEPENDENCY_TOOL, ask)


def lost_call() -> list[Reply]:
    """One model call lost for good: every try Claude Code makes drops mid-answer."""
    dropped = text_reply("never arrives").with_fault(Fault.drop_connection, after_events=1)
    return [dropped] * LOST_CALL


def agent_state(cairn: Cairn, job_id: int) -> dict[str, Any]:
    """The claude agent's saved state in the job's context."""
    with cairn.store.begin() as conn:
        state = context.load(conn, job_id).agent_state
    assert state is not None
    return state
