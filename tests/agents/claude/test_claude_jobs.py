"""Claude Code jobs through the real runner: the real CLI against ScriptedAnthropicServer."""

from __future__ import annotations

from pathlib import Path

from tests.agents.claude.support import (
    agent_state,
    point_at,
    submit_claude,
    write,
)

from cairn.stages import Status
from cairn.testing import ScriptedAnthropicServer, text_reply, tool_use_reply
from cairn.testing.harness import Cairn


def test_an_edit_job_writes_with_claude_code_and_is_delivered(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    job = submit_claude(cairn, claude_code_cli, "Add a greeting file")
    anthropic_server.add_answers(
        "Add a greeting file",
        tool_use_reply(write(cairn, job, "greeting.txt", "hello\n")),
        text_reply("Added greeting.txt."),
    )
    cairn.work()
    review = cairn.detail(job.id)
    assert review["stage"] == "awaiting_review", review["diagnosis"]
    assert "Added greeting.txt." in review["review"]["summary"]
    state = agent_state(cairn, job.id)
    assert state["activity"] == [{"tool": "Write", "target": "greeting.txt", "status": "ok"}]
    assert "--session-id" in state["invocations"][0]
    assert review["usage"]["input_tokens"] > 0
    cairn.approve(job.id)
    cairn.work()
    assert cairn.job(job.id).status is Status.completed
    assert cairn.git("show", "main:greeting.txt") == "hello"
