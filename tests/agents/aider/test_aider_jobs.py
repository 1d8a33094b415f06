"""Aider jobs through the real runner: the real CLI against a ScriptedOpenAIServer."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agents.aider.support import (
    agent_state,
    dependency,
    edit,
    point_at,
    submit_aider,
    user_texts,
)

from cairn.stages import Stage, Status
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
    assert flags[0] == "<prompt>" and "--message-file" in flags, "the binary is never kept"
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


def test_two_jobs_at_dependency_gates_each_resume_their_own_history(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path
) -> None:
    point_at(cairn, aider_server)
    a = submit_aider(cairn, aider_cli, "job A wants termcolor")
    b = submit_aider(cairn, aider_cli, "job B wants rich")
    for job, marker, name, version in (
        (a, "job A", "termcolor", "2.4.0"),
        (b, "job B", "rich", "13.7.1"),
    ):
        aider_server.add_answers(
            marker,
            dependency(cairn, job, name, version),
            edit(f"{marker[-1].lower()}.txt", f"{marker}\n", f"{marker} done."),
        )
    cairn.work()
    assert cairn.job(a.id).stage is Stage.awaiting_dependency_approval, cairn.detail(a.id)
    assert cairn.job(b.id).stage is Stage.awaiting_dependency_approval, cairn.detail(b.id)
    cairn.approve(b.id)
    cairn.work()
    cairn.approve(a.id)
    cairn.work()
    for job, marker, other, version in (
        (a, "job A", "job B", "termcolor==2.4.0"),
        (b, "job B", "job A", "rich==13.7.1"),
    ):
        detail = cairn.detail(job.id)
        assert detail["stage"] == "awaiting_review", detail["diagnosis"]
        seen = aider_server.requests_for(marker)
        assert len(seen) == 2
        assert not any(other in request.text for request in seen)
        opening = [t for t in user_texts(seen[0]) if t.startswith(marker)]
        restored = [t for t in user_texts(seen[1])[:-1] if t.startswith(marker)]
        assert len(opening) == 1 and len(restored) == 1, "the job's own history, re-sent"
        assert " ".join(opening[0].split()).startswith(" ".join(restored[0].split()))
        replies = [m["content"] for m in seen[1].messages if m["role"] == "assistant"]
        assert not any("You work in a git checkout" in text for text in replies)
        resumed = user_texts(seen[1])
        assert version in resumed[-1] and "approved" in resumed[-1]
        assert (cairn.workspace(job.id) / f"{marker[-1].lower()}.txt").exists()
        state = agent_state(cairn, job.id)
        first, again = state["invocations"]
        assert "--no-restore-chat-history" in first and "--restore-chat-history" in again
        flags = [flag for line in state["invocations"] for flag in line]
        assert not {"--continue", "-c", "--last"} & set(flags)
    assert agent_state(cairn, a.id)["session_file"] != agent_state(cairn, b.id)["session_file"]
