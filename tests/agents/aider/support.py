"""Aider jobs in the harness: submit with `--agent aider:MODEL`, the runner's environment
pointing at a ScriptedOpenAIServer (OPENAI_API_BASE, OPENAI_API_KEY); answers are plain text
in Aider's `whole` edit format (a file's path on its own line, then its whole new content in a
fence)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from cairn.agents.cli_turn import REQUESTS_FOLDER
from cairn.agents.mcp_tools import REQUEST_FILE
from cairn.agents.registry import load_agent_spec
from cairn.jobs import context
from cairn.jobs.submit import submit_job
from cairn.sanitize import user_sanitizer
from cairn.store.records import Job
from cairn.testing import Answer, Fault, ScriptedOpenAIServer, text_answer
from cairn.testing.harness import Cairn
from cairn.testing.openai_script import TEXT_PIECE

MODEL = "cairn-scripted"
GIVE_UP = 9
"""Requests Aider 0.86.2 makes for one model call whose connection keeps dropping: the first
and its retries, 0.25 s doubling while under 60 s."""


def point_at(cairn: Cairn, server: ScriptedOpenAIServer) -> None:
    """Give the installation's runners the server's URL and key, as their environment would."""
    environment = {"OPENAI_API_BASE": server.base_url, "OPENAI_API_KEY": server.api_key or ""}
    cairn.config = cairn.config.model_copy(update={"environment": environment})


def submit_aider(cairn: Cairn, cli: Path, text: str, actor: str = "alice") -> Job:
    """Submit an aider job to room `sample`, its binary the pinned test CLI."""
    spec = {**load_agent_spec(f"aider:{MODEL}"), "command": str(cli), "edit_format": "whole"}
    with cairn.store.begin() as conn:
        return submit_job(
            conn,
            room="sample",
            text=text,
            agent=spec,
            actor=actor,
            sanitizer=user_sanitizer(cairn.config),
        )


def whole(path: str, content: str) -> str:
    """One file in Aider's whole edit format."""
    return f"{path}\n```\n{content}```\n"


def edit(path: str, content: str, summary: str = "Done.") -> Answer:
    """An answer that writes `path` whole, then says `summary`."""
    return text_answer(f"Here is the file.\n\n{whole(path, content)}\n{summary}\n")


def request_file(cairn: Cairn, job: Job) -> Path:
    """Where the job's prompt tells Aider to write a dependency request."""
    home = cairn.config.agent_state_path(cairn.store.installation_id, job.id)
    return home / REQUESTS_FOLDER / REQUEST_FILE


def dependency(cairn: Cairn, job: Job, name: str = "termcolor", version: str = "2.4.0") -> Answer:
    """An answer that asks for a package by writing the request file the prompt names."""
    ask = {"ecosystem": "pypi", "name": name, "version": version, "reason": "colour"}
    return text_answer(
        f"I need {name}.\n\n{whole(str(request_file(cairn, job)), json.dumps(ask) + chr(10))}"
    )


def dropped(text: str, upto: str) -> Answer:
    """`text` streamed until just after `upto`, then the connection drops."""
    sent = text[: text.index(upto) + len(upto)]
    return text_answer(text).with_fault(
        Fault.drop_connection, after_chunks=1 + math.ceil(len(sent) / TEXT_PIECE)
    )


def agent_state(cairn: Cairn, job_id: int) -> dict[str, Any]:
    """The aider agent's saved state in the job's context."""
    with cairn.store.begin() as conn:
        state = context.load(conn, job_id).agent_state
    assert state is not None
    return state


def user_texts(request: Any) -> list[str]:
    """The user messages of a recorded request, in order."""
    return [m["content"] for m in request.messages if m["role"] == "user"]
