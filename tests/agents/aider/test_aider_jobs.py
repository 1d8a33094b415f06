"""Aider jobs through the real runner: the real CLI against a ScriptedOpenAIServer."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agents.aider.support import (
    agent_state,
    edit,
    point_at,
    submit_aider,
)

from cairn.stages import Status
from cairn.testing import ScriptedOpenAIServer
from cairn.testing.harness import Cairn


def test_an_edit_job_writes_with_aider_and_is_delivered(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path
) -> None:
    point_at(cairn, aider_server)
    job = submit_aider(cairn, aider_cli, "Add a greeting file")
    aider_server.add_answers("Add a greeting file", edit("greeting.txt", "hello\n"))
    cairn.work()
    review = cairn.detail(job.id)
    assert review["stage"] == "awaiting_review", review["diagnosis"]
    state = agent_state(cairn, job.id)
    assert state["activity"] == [{"tool": "edit", "target": "greeting.txt", "status": "ok"}]
    flags = state["invocations"][0]
    assert "--no-restore-chat-history" in flags and "--no-git" in flags
    assert flags.count("<prompt>") == 2, "the binary and the message, never kept"
    assert str(cairn.tmp) not in json.dumps(state["invocations"]), "no local path kept"
    assert review["usage"]["input_tokens"] > 0 and review["usage"]["output_tokens"] > 0
    (request,) = aider_server.requests_for("Add a greeting file")
    assert request.body["model"] == "cairn-scripted" and request.authorization_matched
    workspace = cairn.workspace(job.id)
    assert sorted(p.name for p in workspace.iterdir() if p.name.startswith(".aider")) == []
    cairn.approve(job.id)
    cairn.work()
    assert cairn.job(job.id).status is Status.completed
    assert cairn.git("show", "main:greeting.txt") == "hello"
    assert aider_server.api_key is not None
    assert aider_server.api_key not in json.dumps(cairn.detail(job.id))
