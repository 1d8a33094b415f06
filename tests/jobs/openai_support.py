"""Openai-adapter jobs in the harness: submit with `--agent openai:MODEL`, point the runner at
a ScriptedOpenAIServer through its environment (OPENAI_BASE_URL, OPENAI_API_KEY)."""

from __future__ import annotations

from typing import Any

from cairn.agents.registry import load_agent_spec
from cairn.jobs.submit import submit_job
from cairn.sanitize import user_sanitizer
from cairn.store import context_steps
from cairn.store.records import Job, StepKind
from cairn.testing import ScriptedOpenAIServer, ToolCall
from cairn.testing.harness import Cairn

MODEL = "qwen-scripted"


def point_at(cairn: Cairn, server: ScriptedOpenAIServer, **more: str) -> None:
    """Give the installation's runners the server's URL and key, as their environment would."""
    environment = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": server.api_key or ""}
    cairn.config = cairn.config.model_copy(update={"environment": {**environment, **more}})


def submit_openai(cairn: Cairn, text: str, actor: str = "alice", **settings: Any) -> Job:
    """Submit an openai job to room `sample`, its spec as `--agent openai:MODEL` stores it."""
    spec = {**load_agent_spec(f"openai:{MODEL}"), **settings}
    with cairn.store.begin() as conn:
        return submit_job(
            conn,
            room="sample",
            text=text,
            agent=spec,
            actor=actor,
            sanitizer=user_sanitizer(cairn.config),
        )


def step_kinds(cairn: Cairn, job_id: int) -> list[str]:
    """The kinds of the job's saved conversation steps, in order."""
    with cairn.store.begin() as conn:
        return [step.kind.value for step in context_steps.steps(conn, job_id)]


def tool_results(cairn: Cairn, job_id: int) -> list[dict[str, Any]]:
    """The payloads of the job's saved tool results."""
    with cairn.store.begin() as conn:
        steps = context_steps.steps(conn, job_id)
    return [step.payload for step in steps if step.kind is StepKind.tool_result]


def write(path: str, content: str) -> ToolCall:
    return ToolCall("write_file", {"path": path, "content": content})


def finish(summary: str) -> ToolCall:
    return ToolCall("finish", {"summary": summary})


def dependency(name: str = "termcolor", version: str = "2.4.0") -> ToolCall:
    arguments = {"ecosystem": "pypi", "name": name, "version": version, "reason": "colour"}
    return ToolCall("request_dependency", arguments)
