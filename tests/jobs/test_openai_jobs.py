"""Openai-adapter jobs through the real runner, over real HTTP to ScriptedOpenAIServer."""

from __future__ import annotations

import pytest
from tests.jobs.openai_support import (
    dependency,
    finish,
    point_at,
    step_kinds,
    submit_openai,
    tool_results,
    write,
)

from cairn.stages import Stage, Status
from cairn.testing import (
    Fault,
    ScriptedOpenAIServer,
    ToolCall,
    fault_answer,
    json_call_answer,
    tool_call_answer,
)
from cairn.testing.harness import Cairn


@pytest.mark.parametrize("stream", [True, False])
def test_an_edit_job_with_parallel_calls_reaches_review_and_is_delivered(
    cairn: Cairn, openai_server: ScriptedOpenAIServer, stream: bool
) -> None:
    point_at(cairn, openai_server)
    read = ToolCall("read_file", {"path": "README.md"})
    openai_server.add_answers(
        "Add a greeting file",
        tool_call_answer(read, write("greeting.txt", "hello\n")),
        tool_call_answer(finish("added greeting.txt")),
    )
    job = submit_openai(cairn, "Add a greeting file", stream=stream)
    cairn.work()
    review = cairn.detail(job.id)
    assert review["stage"] == "awaiting_review", review["diagnosis"]
    assert "added greeting.txt" in review["review"]["summary"]
    first = openai_server.requests_for("Add a greeting file")[0]
    assert bool(first.body.get("stream")) is stream
    assert first.tool_names == [
        "list_files",
        "read_file",
        "write_file",
        "replace_in_file",
        "search",
        "run",
        "request_dependency",
        "finish",
    ]
    cairn.approve(job.id)
    cairn.work()
    assert cairn.job(job.id).status is Status.completed
    assert cairn.git("show", "main:greeting.txt") == "hello"


def test_fenced_json_text_calls_drive_the_same_edit_job_to_review(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    openai_server.add_answers(
        "Add a text-protocol file",
        json_call_answer("write_file", {"path": "t.txt", "content": "t\n"}, preface="Sure."),
        json_call_answer("finish", {"summary": "wrote t.txt"}),
    )
    job = submit_openai(cairn, "Add a text-protocol file")
    cairn.work()
    review = cairn.detail(job.id)
    assert review["stage"] == "awaiting_review", review["diagnosis"]
    assert "wrote t.txt" in review["review"]["summary"]
    assert all(not r.body.get("tools") or r.tool_names for r in openai_server.requests)


def test_a_dependency_asked_through_the_tool_is_installed_and_told_as_its_result(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    marker = "Colour the greeting"
    openai_server.add_answers(
        marker,
        tool_call_answer(write("colour.txt", "c\n"), dependency()),
        tool_call_answer(finish("coloured")),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_dependency_approval
    assert len(openai_server.requests_for(marker)) == 1
    cairn.approve(job.id)
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_review, cairn.detail(job.id)["diagnosis"]
    resumed = openai_server.requests_for(marker)[1]
    told = resumed.messages[-1]
    # cairn's own id for the answer's second call (saved as context step 3).
    assert told["role"] == "tool" and told["tool_call_id"] == "call-3-1"
    assert "termcolor==2.4.0 was approved and installed" in told["content"]
    assert tool_results(cairn, job.id)[1]["target"] == "pypi:termcolor==2.4.0"


def test_two_jobs_at_dependency_gates_resume_each_in_its_own_conversation(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    for marker, name in (("Job alpha", "termcolor"), ("Job beta", "six")):
        version = "2.4.0" if name == "termcolor" else "1.16.0"
        openai_server.add_answers(
            marker,
            tool_call_answer(dependency(name, version)),
            tool_call_answer(write(f"{marker[-4:]}.txt", marker), finish(f"{marker} done")),
        )
    alpha = submit_openai(cairn, "Job alpha")
    beta = submit_openai(cairn, "Job beta")
    cairn.work()
    assert cairn.job(alpha.id).stage is Stage.awaiting_dependency_approval
    assert cairn.job(beta.id).stage is Stage.awaiting_dependency_approval

    cairn.approve(beta.id)
    cairn.work()
    cairn.approve(alpha.id)
    cairn.work()
    for job, mine, other, package in (
        (alpha, "Job alpha", "Job beta", "termcolor==2.4.0"),
        (beta, "Job beta", "Job alpha", "six==1.16.0"),
    ):
        assert cairn.job(job.id).stage is Stage.awaiting_review, cairn.detail(job.id)["diagnosis"]
        seen = openai_server.requests_for(mine)
        assert len(seen) == 2
        assert all(other not in request.text for request in seen)
        assert package in seen[1].messages[-1]["content"]


def test_a_drop_after_a_write_verifies_the_existing_change_without_writing_again(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    marker = "Write then lose the stream"
    openai_server.add_answers(
        marker,
        tool_call_answer(write("kept.txt", "written once\n")),
        tool_call_answer(finish("never seen")).with_fault(Fault.drop_connection, after_chunks=2),
        # The summary repair's request: only finish is offered, so this write is not run.
        tool_call_answer(write("kept.txt", "written twice\n")),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    review = cairn.detail(job.id)
    assert review["stage"] == "awaiting_review", review["diagnosis"]
    requests = openai_server.requests_for(marker)
    assert len(requests) == 3, "no new attempt, only the summary repair, asked the model again"
    assert requests[-1].tool_names == ["finish"]
    assert (cairn.workspace(job.id) / "kept.txt").read_text() == "written once\n"
    assert step_kinds(cairn, job.id) == [
        *("system", "request", "assistant", "tool_result"),
        *("note", "assistant", "tool_result"),  # the summary repair, its write not run
    ]


def test_a_drop_before_any_change_starts_a_new_attempt(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    marker = "Lose the stream first"
    openai_server.add_answers(
        marker,
        fault_answer(Fault.drop_connection),
        tool_call_answer(write("second.txt", "2\n"), finish("second attempt")),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    review = cairn.detail(job.id)
    assert review["stage"] == "awaiting_review", review["diagnosis"]
    seen = openai_server.requests_for(marker)
    assert len(seen) == 2 and seen[0].messages == seen[1].messages
    agent_runs = [s for s in review["stages"] if s["name"] == "running_agent"]
    outcomes = [run["evidence"]["outcome"]["value"] for run in agent_runs]
    assert outcomes[:2] == ["interrupted", "changed"]


def test_an_over_budget_conversation_is_trimmed_and_never_sent_over_the_budget(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    marker = "Read the big file a few times"
    openai_server.add_answers(
        marker,
        tool_call_answer(write("big.txt", "a line of the big file\n" * 150)),
        *[tool_call_answer(ToolCall("read_file", {"path": "big.txt"}))] * 4,
        tool_call_answer(finish("read it four times")),
    )
    job = submit_openai(cairn, marker, context_tokens=3_000)
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_review, cairn.detail(job.id)["diagnosis"]
    seen = openai_server.requests_for(marker)
    assert len(seen) == 6 and max(r.prompt_tokens for r in seen) <= 3_000
    assert marker in seen[-1].text and "[elided: read_file big.txt" in seen[-1].text
    # The stored conversation stays whole: only what is sent is cut down.
    assert len(tool_results(cairn, job.id)) == 6


def test_a_key_the_server_refuses_fails_the_job_naming_the_variable(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server, OPENAI_API_KEY="sk-not-the-servers-key-123")
    openai_server.add_answers("Refused key", tool_call_answer(finish("unused")))
    job = submit_openai(cairn, "Refused key")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    assert "OPENAI_API_KEY" in detail["diagnosis"] and "401" in detail["diagnosis"]
    assert "sk-not-the-servers-key" not in str(detail)


def test_reply_sends_the_reviewers_message_into_the_same_conversation(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    marker = "Add a farewell file"
    openai_server.add_answers(
        marker,
        tool_call_answer(write("farewell.txt", "bye\n"), finish("added farewell.txt")),
        tool_call_answer(write("farewell.txt", "goodbye\n"), finish("said goodbye instead")),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_review, cairn.detail(job.id)["diagnosis"]
    cairn.reply(job.id, "Please write goodbye, not bye")
    cairn.work()
    review = cairn.detail(job.id)
    assert review["stage"] == "awaiting_review", review["diagnosis"]
    assert "said goodbye instead" in review["review"]["summary"]
    first, second = openai_server.requests_for(marker)
    # The same conversation: everything the model saw before, then the reviewer's message.
    assert second.messages[: len(first.messages)] == first.messages
    assert second.messages[-1] == {"role": "user", "content": "Please write goodbye, not bye"}
    assert step_kinds(cairn, job.id).count("follow_up") == 1
    cairn.approve(job.id)
    cairn.work()
    assert cairn.job(job.id).status is Status.completed
    assert cairn.git("show", "main:farewell.txt") == "goodbye"


def test_reply_fresh_starts_a_new_conversation_with_request_message_and_diff(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    marker = "Add a welcome file"
    openai_server.add_answers(
        marker,
        tool_call_answer(write("welcome.txt", "hi\n"), finish("added welcome.txt")),
        tool_call_answer(write("welcome.txt", "welcome\n"), finish("welcomed properly")),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    cairn.reply(job.id, "Say welcome in full", fresh=True)
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_review, cairn.detail(job.id)["diagnosis"]
    _first, second = openai_server.requests_for(marker)
    assert [m["role"] for m in second.messages] == ["system", "user"], "a new conversation"
    opening = second.messages[1]["content"]
    assert marker in opening and "Say welcome in full" in opening and "+hi" in opening
    assert "added welcome.txt" not in second.text, "nothing of the old model text is carried"
    assert step_kinds(cairn, job.id)[:2] == ["system", "request"]


def test_a_bad_dependency_version_from_the_model_does_not_fail_the_job(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    """Tool errors go back to the model as tool results: a `request_dependency` with a range
    version is refused to the model, which goes on without it."""
    point_at(cairn, openai_server)
    marker = "Add colour output"
    ask = ToolCall(
        "request_dependency",
        {"ecosystem": "pypi", "name": "termcolor", "version": "^2.4", "reason": "colour"},
    )
    openai_server.add_answers(
        marker,
        tool_call_answer(ask),
        tool_call_answer(write("c.txt", "no colour\n"), finish("went without termcolor")),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] != "failed", detail["diagnosis"]
    assert detail["stage"] == "awaiting_review"
