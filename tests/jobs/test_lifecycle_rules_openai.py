"""The lifecycle rules of DESIGN.md on real conversations: the twins of test_lifecycle_rules.py
that run the openai adapter against ScriptedOpenAIServer over real HTTP."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from tests.jobs.openai_support import (
    dependency,
    finish,
    point_at,
    step_kinds,
    submit_openai,
    write,
)

from cairn.agents.model_loop import REPAIR_NOTE
from cairn.jobs.agent_turns import CORRECTIVE_NOTE
from cairn.stages import Stage
from cairn.store import context_steps
from cairn.store.schema import context_steps as context_steps_table
from cairn.testing import Fault, ScriptedOpenAIServer, ToolCall, tool_call_answer
from cairn.testing.harness import Cairn


def _agent_evidence(cairn: Cairn, job_id: int) -> list[dict[str, object]]:
    runs = [s for s in cairn.detail(job_id)["stages"] if s["name"] == "running_agent"]
    return [run["evidence"] for run in runs]


def test_rule_1_job_specific_continuity(cairn: Cairn, openai_server: ScriptedOpenAIServer) -> None:
    """A paused job resumes its own conversation even after another job ran in the room."""
    point_at(cairn, openai_server)
    openai_server.add_answers(
        "job A",
        tool_call_answer(write("a.txt", "from job A\n"), dependency()),
        tool_call_answer(write("a2.txt", "after approval\n"), finish("job A done")),
    )
    openai_server.add_answers(
        "job B", tool_call_answer(write("b.txt", "B\n"), finish("job B done"))
    )
    a = submit_openai(cairn, "job A")
    cairn.work()
    assert cairn.job(a.id).stage is Stage.awaiting_dependency_approval
    b = submit_openai(cairn, "job B")
    cairn.work()
    cairn.approve(b.id)
    cairn.work()
    cairn.approve(a.id)
    cairn.work()
    assert cairn.job(a.id).stage is Stage.awaiting_review
    seen = openai_server.requests_for("job A")
    assert len(seen) == 2 and not any("job B" in request.text for request in seen)
    assert seen[1].messages[:2] == seen[0].messages[:2], "the same conversation, resumed"
    assert "job A done" in cairn.detail(a.id)["review"]["summary"]


def test_rule_1_a_job_without_saved_context_starts_fresh_with_one_copy_of_its_request(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    marker = "job with a lost context"
    openai_server.add_answers(
        marker,
        tool_call_answer(write("lost.txt", "1\n"), dependency()),
        tool_call_answer(finish("went on fresh")),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    with cairn.store.begin() as conn:  # the job's steps are lost (an old record, a lost row)
        conn.execute(sa.delete(context_steps_table).where(context_steps_table.c.job_id == job.id))
    cairn.approve(job.id)
    cairn.work()
    fresh = openai_server.requests_for(marker)[1]
    assert [m["role"] for m in fresh.messages] == ["system", "user", "user"]
    assert fresh.text.count(marker) == 1, "one sanitized copy of its request"
    assert "termcolor==2.4.0 was approved" in fresh.messages[-1]["content"]
    with cairn.store.begin() as conn:
        assert context_steps.steps(conn, job.id)[1].payload["content"] == marker


def test_rule_7_first_edit_must_edit_fails_a_second_unchanged_result(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    marker = "look around only"
    openai_server.add_answers(
        marker,
        tool_call_answer(finish("looked around")),
        tool_call_answer(finish("still only looked")),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed" and "second unchanged result" in detail["diagnosis"]
    assert detail["usage"]["agent_runs"] == 2 and detail["usage"]["corrective_runs"] == 1
    first, corrective = openai_server.requests_for(marker)
    assert corrective.messages[: len(first.messages)] == first.messages, "the same context"
    assert corrective.messages[-1] == {"role": "user", "content": CORRECTIVE_NOTE}
    assert corrective.tool_names == first.tool_names, "no wider authority"


def test_rule_8_fresh_context_for_scheduled_work(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    """A scheduled run's first request holds nothing of an earlier run's conversation."""
    point_at(cairn, openai_server)
    openai_server.add_answers(
        "nightly",
        tool_call_answer(write("b.txt", "first run secret-ish content\n"), finish("run 1")),
        tool_call_answer(write("c.txt", "second\n"), finish("run 2")),
    )
    first = _submit_scheduled(cairn)
    cairn.work()
    cairn.approve(first)
    cairn.work()
    second = _submit_scheduled(cairn)
    cairn.work()
    assert cairn.job(second).stage is Stage.awaiting_review
    earlier, opening = openai_server.requests_for("nightly")
    assert (earlier.answer_index, opening.answer_index) == (0, 1)
    assert [m["role"] for m in opening.messages] == ["system", "user"]
    request = opening.messages[1]["content"]
    # The bounded reference set: the repository's documents and the earlier run's result...
    assert request.startswith("nightly") and "--- README.md ---" in request
    assert "The previous run (job 1" in request and "run 1" in request and "b.txt | 1 +" in request
    # ...never its conversation: no call it made, no content it wrote, no result it saw.
    assert "secret-ish" not in json.dumps(opening.body)
    assert "write_file" not in request and "tool_call" not in json.dumps(opening.messages)


def _submit_scheduled(cairn: Cairn) -> int:
    from cairn.agents.registry import load_agent_spec
    from cairn.jobs.submit import submit_job
    from cairn.sanitize import user_sanitizer

    with cairn.store.begin() as conn:
        job = submit_job(
            conn,
            room="sample",
            text="nightly",
            agent=load_agent_spec("openai:qwen-scripted"),
            actor="alice",
            sanitizer=user_sanitizer(cairn.config),
            kind="scheduled",
        )
    return job.id


def test_rule_9_lost_stream_after_changes_continues_the_same_job(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    marker = "edit then lose the stream"
    openai_server.add_answers(
        marker,
        tool_call_answer(ToolCall("run", {"command": "echo once >> log.txt"})),
        tool_call_answer(finish("x")).with_fault(Fault.drop_connection, after_chunks=1),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    assert (cairn.workspace(job.id) / "log.txt").read_text() == "once\n"
    # The two answers, then the summary repair's request (the server has no answer left).
    assert len(openai_server.requests_for(marker)) == 3
    assert [e["outcome"]["value"] for e in _agent_evidence(cairn, job.id)] == ["interrupted"]


@pytest.mark.parametrize("fault", [Fault.drop_connection, Fault.server_error])
def test_rule_9_lost_stream_without_changes_starts_a_new_attempt(
    cairn: Cairn, openai_server: ScriptedOpenAIServer, fault: Fault
) -> None:
    point_at(cairn, openai_server)
    marker = "lose the stream before any change"
    # A failing server fails the SDK's two retries as well; a dropped stream is not retried.
    lost = tool_call_answer(finish("x")).with_fault(fault, after_chunks=1)
    failures = [lost] * (3 if fault is Fault.server_error else 1)
    openai_server.add_answers(
        marker, *failures, tool_call_answer(write("n.txt", "n\n"), finish("ok"))
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    outcomes = [e["outcome"]["value"] for e in _agent_evidence(cairn, job.id)]
    assert outcomes == ["interrupted", "changed"]


def test_summary_repair_leaves_tree_effects_and_feed_unchanged(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    point_at(cairn, openai_server)
    marker = "change without a summary"
    sneaky = write("sneaky.txt", "written during the repair\n")
    openai_server.add_answers(
        marker,
        tool_call_answer(write("real.txt", "r\n"), ToolCall("finish", {"summary": ""})),
        tool_call_answer(sneaky, finish("Added real.txt.")),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    repair = openai_server.requests_for(marker)[1]
    assert repair.tool_names == ["finish"] and repair.messages[-1]["content"] == REPAIR_NOTE
    assert not (cairn.workspace(job.id) / "sneaky.txt").exists()
    [evidence] = _agent_evidence(cairn, job.id)
    assert evidence["summary_repair"]["value"] == "repaired"
    assert "Added real.txt." in detail["review"]["summary"]
    assert detail["effects"] == [] and detail["feed"] == f"{marker}\n\n[awaiting_review]"
    assert step_kinds(cairn, job.id)[-4:] == ["note", "assistant", "tool_result", "tool_result"]


def test_secrets_in_run_output_never_reach_the_stored_steps_or_the_summary(
    cairn: Cairn, openai_server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_TEST_DEPLOY_TOKEN", "tok-0a1b2c3d4e5f6a7b")
    key = "sk-runner-key-9f8e7d6c5b4a3210"
    openai_server.api_key = key
    point_at(cairn, openai_server)
    marker = "echo the secrets"
    leak = ToolCall("run", {"command": f"echo {key} tok-0a1b2c3d4e5f6a7b | tee leak.txt"})
    openai_server.add_answers(
        marker, tool_call_answer(leak), tool_call_answer(finish(f"wrote {key} to leak.txt"))
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    with cairn.store.begin() as conn:
        stored = json.dumps([s.payload for s in context_steps.steps(conn, job.id)])
    shown = json.dumps(detail)
    for secret in (key, "tok-0a1b2c3d4e5f6a7b"):
        assert secret not in stored and secret not in shown
        assert secret not in json.dumps([r.body for r in openai_server.requests][1:])


def test_rule_7_a_reply_turn_after_the_corrective_run_is_not_counted_as_corrective(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    """Only the turn rule 7 asked for is corrective: a reviewer's reply turn after it is a
    normal one (usage's corrective_runs stays 1)."""
    point_at(cairn, openai_server)
    marker = "Add a notes file"
    openai_server.add_answers(
        marker,
        tool_call_answer(finish("nothing to do")),  # first job in the room, unchanged: rule 7
        tool_call_answer(write("notes.txt", "n\n"), finish("added notes.txt")),
        tool_call_answer(write("notes.txt", "notes\n"), finish("longer notes")),
    )
    job = submit_openai(cairn, marker)
    cairn.work()
    assert cairn.detail(job.id)["stage"] == "awaiting_review", cairn.detail(job.id)["diagnosis"]
    assert cairn.detail(job.id)["usage"]["corrective_runs"] == 1
    cairn.reply(job.id, "Please write the word notes")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    assert detail["usage"]["agent_runs"] == 3
    assert detail["usage"]["corrective_runs"] == 1
