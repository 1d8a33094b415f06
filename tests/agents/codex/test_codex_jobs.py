"""Codex CLI jobs through the real runner: the real CLI against ScriptedResponsesServer."""

from __future__ import annotations

from pathlib import Path

from tests.agents.codex.support import (
    add_file,
    agent_state,
    dependency,
    flags,
    point_at,
    submit_codex,
)

from cairn.stages import Stage, Status
from cairn.testing import ScriptedResponsesServer, text_answer, tool_call_answer
from cairn.testing.harness import Cairn


def test_an_edit_job_patches_with_codex_and_is_delivered(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    job = submit_codex(cairn, codex_cli, "Add a greeting file")
    responses_server.add_answers(
        "Add a greeting file",
        tool_call_answer(add_file("greeting.txt", "hello\n")),
        text_answer("Added greeting.txt."),
    )
    cairn.work()
    review = cairn.detail(job.id)
    assert review["stage"] == "awaiting_review", review["diagnosis"]
    assert "Added greeting.txt." in review["review"]["summary"]
    state = agent_state(cairn, job.id)
    assert state["activity"] == [{"tool": "apply_patch", "target": "greeting.txt", "status": "ok"}]
    calls = review["transcript_summary"]["calls"]
    assert calls == [{"name": "apply_patch", "target": "greeting.txt", "status": "ok"}]
    [first] = state["invocations"]
    assert first[:3] == ["<prompt>", "exec", "--json"] and "resume" not in first
    assert "--dangerously-bypass-approvals-and-sandbox" in first
    seen = responses_server.requests_for("Add a greeting file")
    threads = {request.headers["thread-id"] for request in seen}
    assert threads == {state["session_id"]}, "the thread Codex reported is the job's"
    assert review["usage"]["input_tokens"] > 0
    cairn.approve(job.id)
    cairn.work()
    assert cairn.job(job.id).status is Status.completed
    assert cairn.git("show", "main:greeting.txt") == "hello"


def test_two_jobs_at_dependency_gates_each_resume_their_own_thread(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    a = submit_codex(cairn, codex_cli, "job A wants termcolor")
    b = submit_codex(cairn, codex_cli, "job B wants rich")
    for marker, name, version in (("job A", "termcolor", "2.4.0"), ("job B", "rich", "13.7.1")):
        responses_server.add_answers(
            marker,
            tool_call_answer(dependency(name, version)),
            text_answer(f"Asked for {name}; waiting."),
            tool_call_answer(add_file(f"{marker[-1].lower()}.txt", f"{marker}\n")),
            text_answer(f"{marker} done."),
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
        seen = responses_server.requests_for(marker)
        assert len(seen) == 4
        assert not any(other in request.text for request in seen)
        resumed = seen[2]
        assert resumed.input[: len(seen[1].input)] == seen[1].input, "the same thread, resumed"
        assert version in resumed.text and "approved" in resumed.text
        state = agent_state(cairn, job.id)
        assert "--last" not in flags(state)
        thread = state["session_id"]
        assert {request.headers["thread-id"] for request in seen} == {thread}
        first, second = state["invocations"]
        assert "resume" not in first
        assert second[second.index("resume") :][-3:] == [thread, "--", "<prompt>"]
        assert "--dangerously-bypass-approvals-and-sandbox" in second, "writable on resume too"
    assert agent_state(cairn, a.id)["session_id"] != agent_state(cairn, b.id)["session_id"]


def test_a_reply_resumes_the_same_thread_and_a_fresh_reply_starts_a_new_one(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    marker = "Add a notes file"
    job = submit_codex(cairn, codex_cli, marker)
    responses_server.add_answers(
        marker,
        tool_call_answer(add_file("notes.txt", "n\n")),
        text_answer("added notes.txt"),
        text_answer("kept it short"),
    )
    cairn.work()
    assert cairn.detail(job.id)["stage"] == "awaiting_review"
    thread = agent_state(cairn, job.id)["session_id"]
    cairn.reply(job.id, "Please explain the notes")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    replied = responses_server.requests_for(marker)[2]
    assert "Please explain the notes" in replied.text
    assert replied.headers["thread-id"] == thread
    last = agent_state(cairn, job.id)["invocations"][-1]
    assert last[last.index("resume") :][-3] == thread, "the same thread, by its id"
    responses_server.add_answers(marker, text_answer("started over"))
    cairn.reply(job.id, "Start over: keep it as it is", fresh=True)
    cairn.work()
    fresh = responses_server.requests_for(marker)[3]
    assert "Start over" in fresh.text and fresh.headers["thread-id"] != thread, "a new thread"
    state = agent_state(cairn, job.id)
    assert "resume" not in state["invocations"][-1]
    assert state["session_id"] == fresh.headers["thread-id"]
