"""Claude Code jobs through the real runner: the real CLI against ScriptedAnthropicServer."""

from __future__ import annotations

from pathlib import Path

from tests.agents.claude.support import (
    agent_state,
    dependency,
    point_at,
    submit_claude,
    write,
)

from cairn.stages import Stage, Status
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
    calls = review["transcript_summary"]["calls"]
    assert calls == [{"name": "Write", "target": "greeting.txt", "status": "ok"}]
    assert "--session-id" in state["invocations"][0]
    # CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: the model endpoint is all it calls.
    assert {(r.method, r.path) for r in anthropic_server.requests} == {("POST", "/v1/messages")}
    assert all(r.key_matched for r in anthropic_server.requests)
    assert review["usage"]["input_tokens"] > 0 and review["usage"]["model_requests"] == 2
    [agent_run] = [s for s in review["stages"] if s["name"] == "running_agent"]
    assert agent_run["evidence"]["isolation"]["value"] == "held", "run in the sandbox"
    cairn.approve(job.id)
    cairn.work()
    assert cairn.job(job.id).status is Status.completed
    assert cairn.git("show", "main:greeting.txt") == "hello"


def test_two_jobs_at_dependency_gates_each_resume_their_own_session(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    a = submit_claude(cairn, claude_code_cli, "job A wants termcolor")
    b = submit_claude(cairn, claude_code_cli, "job B wants rich")
    for job, marker, name, version in (
        (a, "job A", "termcolor", "2.4.0"),
        (b, "job B", "rich", "13.7.1"),
    ):
        anthropic_server.add_answers(
            marker,
            tool_use_reply(dependency(name, version)),
            text_reply(f"Asked for {name}; waiting."),
            tool_use_reply(write(cairn, job, f"{marker[-1].lower()}.txt", f"{marker}\n")),
            text_reply(f"{marker} done."),
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
        seen = anthropic_server.requests_for(marker)
        assert len(seen) == 4
        assert not any(other in request.text for request in seen)
        resumed = seen[2]
        assert resumed.messages[0] == seen[0].messages[0], "the same conversation, resumed"
        assert version in resumed.text and "approved" in resumed.text
        state = agent_state(cairn, job.id)
        flags = [flag for line in state["invocations"] for flag in line]
        assert "--continue" not in flags and "-c" not in flags
        session = state["session_id"]
        assert state["invocations"][0][state["invocations"][0].index("--session-id") + 1] == session
        assert state["invocations"][1][state["invocations"][1].index("--resume") + 1] == session
    assert agent_state(cairn, a.id)["session_id"] != agent_state(cairn, b.id)["session_id"]


def test_a_reply_resumes_the_same_session_and_a_fresh_reply_starts_a_new_one(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    marker = "Add a notes file"
    job = submit_claude(cairn, claude_code_cli, marker)
    anthropic_server.add_answers(
        marker,
        tool_use_reply(write(cairn, job, "notes.txt", "n\n")),
        text_reply("added notes.txt"),
        tool_use_reply(write(cairn, job, "notes.txt", "notes\n")),
        text_reply("longer notes"),
    )
    cairn.work()
    assert cairn.detail(job.id)["stage"] == "awaiting_review"
    session = agent_state(cairn, job.id)["session_id"]
    cairn.reply(job.id, "Please write the word notes")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    replied = anthropic_server.requests_for(marker)[2]
    assert "Please write the word notes" in replied.text
    assert replied.messages[0] == anthropic_server.requests_for(marker)[0].messages[0]
    assert (cairn.workspace(job.id) / "notes.txt").read_text() == "notes\n"
    last = agent_state(cairn, job.id)["invocations"][-1]
    assert last[last.index("--resume") + 1] == session, "the same session, by its id"
    anthropic_server.add_answers(marker, text_reply("started over"))
    cairn.reply(job.id, "Start over: keep it as it is", fresh=True)
    cairn.work()
    fresh = anthropic_server.requests_for(marker)[4]
    assert [m["role"] for m in fresh.messages] == ["user", "system"], "a new session"
    assert "Start over" in fresh.text
    assert agent_state(cairn, job.id)["session_id"] != session
