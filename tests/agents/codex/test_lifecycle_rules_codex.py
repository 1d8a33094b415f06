"""The lifecycle rules of DESIGN.md on the real Codex CLI: the twins of
tests/jobs/test_lifecycle_rules_openai.py, against ScriptedResponsesServer over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa
from tests.agents.codex.support import (
    LOST_CALL,
    MODEL,
    add_file,
    agent_state,
    dependency,
    lost_call,
    point_at,
    submit_codex,
)

from cairn.agents.registry import load_agent_spec
from cairn.jobs.agent_turns import CORRECTIVE_NOTE
from cairn.stages import Stage
from cairn.store.records import Job
from cairn.store.schema import contexts
from cairn.testing import ScriptedResponsesServer, text_answer, tool_call_answer
from cairn.testing.harness import Cairn

_CALL_TYPES = {
    "function_call",
    "custom_tool_call",
    "function_call_output",
    "custom_tool_call_output",
}


def _outcomes(cairn: Cairn, job_id: int) -> list[object]:
    runs = [s for s in cairn.detail(job_id)["stages"] if s["name"] == "running_agent"]
    return [run["evidence"]["outcome"]["value"] for run in runs]


def _resumed(invocations: list[list[str]]) -> list[str | None]:
    """Each turn's resumed thread id (`resume ... THREAD -- PROMPT`), None for a new thread."""
    return [line[-3] if "resume" in line else None for line in invocations]


def _calls(items: list[dict[str, object]]) -> list[dict[str, object]]:
    return [item for item in items if item.get("type") in _CALL_TYPES]


def test_rule_1_job_specific_continuity(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    """A paused job resumes its own thread, by id, even after another job ran in the room."""
    point_at(cairn, responses_server)
    a = submit_codex(cairn, codex_cli, "job A")
    responses_server.add_answers(
        "job A",
        tool_call_answer(add_file("a.txt", "from job A\n"), dependency()),
        text_answer("waiting for termcolor"),
        tool_call_answer(add_file("a2.txt", "after approval\n")),
        text_answer("job A done"),
    )
    cairn.work()
    assert cairn.job(a.id).stage is Stage.awaiting_dependency_approval, cairn.detail(a.id)
    b = submit_codex(cairn, codex_cli, "job B")
    responses_server.add_answers(
        "job B", tool_call_answer(add_file("b.txt", "B\n")), text_answer("job B done")
    )
    cairn.work()
    cairn.approve(b.id)
    cairn.work()
    cairn.approve(a.id)
    cairn.work()
    detail = cairn.detail(a.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    seen = responses_server.requests_for("job A")
    assert len(seen) == 4 and not any("job B" in request.text for request in seen)
    assert seen[2].input[: len(seen[1].input)] == seen[1].input, "the same thread, resumed"
    state = agent_state(cairn, a.id)
    thread = state["session_id"]
    assert {request.headers["thread-id"] for request in seen} == {thread}
    assert _resumed(state["invocations"]) == [None, thread], "by its own id, never --last"
    assert thread != agent_state(cairn, b.id)["session_id"]
    assert "job A done" in detail["review"]["summary"]


def test_rule_1_a_job_without_saved_context_starts_fresh_with_one_copy_of_its_request(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    marker = "job with a lost context"
    job = submit_codex(cairn, codex_cli, marker)
    responses_server.add_answers(
        marker,
        tool_call_answer(dependency()),
        text_answer("waiting"),
        tool_call_answer(add_file("fresh.txt", "went on fresh\n")),
        text_answer("went on fresh"),
    )
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_dependency_approval, cairn.detail(job.id)
    old_thread = agent_state(cairn, job.id)["session_id"]
    with cairn.store.begin() as conn:  # the job's context is lost (an old record, a lost row)
        conn.execute(sa.delete(contexts).where(contexts.c.job_id == job.id))
    cairn.approve(job.id)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    fresh = responses_server.requests_for(marker)[2]
    assert fresh.headers["thread-id"] != old_thread, "a new thread"
    assert _calls(fresh.input) == [], "nothing of the lost thread"
    assert fresh.text.count(marker) == 1, "one sanitized copy of its request"
    assert "termcolor==2.4.0 was approved" in fresh.text
    state = agent_state(cairn, job.id)
    assert _resumed(state["invocations"]) == [None]
    assert state["session_id"] == fresh.headers["thread-id"]


def test_rule_7_first_edit_must_edit_fails_a_second_unchanged_result(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    marker = "look around only"
    job = submit_codex(cairn, codex_cli, marker)
    responses_server.add_answers(
        marker, text_answer("looked around"), text_answer("still only looked")
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed" and "second unchanged result" in detail["diagnosis"]
    assert detail["usage"]["agent_runs"] == 2 and detail["usage"]["corrective_runs"] == 1
    first, corrective = responses_server.requests_for(marker)
    assert corrective.input[: len(first.input)] == first.input, "the same thread"
    assert CORRECTIVE_NOTE in corrective.text
    assert corrective.tool_names == first.tool_names, "no wider authority"
    state = agent_state(cairn, job.id)
    thread = state["session_id"]
    assert {first.headers["thread-id"], corrective.headers["thread-id"]} == {thread}
    assert _resumed(state["invocations"]) == [None, thread]


def test_rule_8_fresh_context_for_scheduled_work(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    """A scheduled run's thread holds nothing of an earlier run's: its own id, a fresh start."""
    point_at(cairn, responses_server)
    first = _submit_scheduled(cairn, codex_cli)
    responses_server.add_answers(
        "nightly",
        tool_call_answer(add_file("b.txt", "first run secret-ish content\n")),
        text_answer("run 1"),
    )
    cairn.work()
    cairn.approve(first.id)
    cairn.work()
    second = _submit_scheduled(cairn, codex_cli)
    responses_server.add_answers(
        "nightly", tool_call_answer(add_file("c.txt", "second\n")), text_answer("run 2")
    )
    cairn.work()
    assert cairn.job(second.id).stage is Stage.awaiting_review, cairn.detail(second.id)
    earlier, _, opening, _ = responses_server.requests_for("nightly")
    # The bounded reference set: the repository's documents and the earlier run's result...
    assert "--- README.md ---" in opening.text and "The previous run (job 1" in opening.text
    # ...never its thread: no call it made, no content it wrote.
    assert _calls(opening.input) == [] and "secret-ish" not in json.dumps(opening.body)
    assert opening.headers["thread-id"] != earlier.headers["thread-id"]
    state = agent_state(cairn, second.id)
    assert _resumed(state["invocations"]) == [None]
    assert state["session_id"] != agent_state(cairn, first.id)["session_id"]


def _submit_scheduled(cairn: Cairn, cli: Path) -> Job:
    from cairn.jobs.submit import submit_job
    from cairn.sanitize import user_sanitizer

    with cairn.store.begin() as conn:
        return submit_job(
            conn,
            room="sample",
            text="nightly",
            agent={**load_agent_spec(f"codex:{MODEL}"), "command": str(cli)},
            actor="alice",
            sanitizer=user_sanitizer(cairn.config),
            kind="scheduled",
        )


def test_rule_9_lost_stream_after_changes_continues_the_same_job(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    """A stream lost for good after a patch: verification of that change, never a second
    edit, and never a `changed` taken at the CLI's word."""
    point_at(cairn, responses_server)
    marker = "edit then lose the stream"
    job = submit_codex(cairn, codex_cli, marker)
    responses_server.add_answers(
        marker, tool_call_answer(add_file("log.txt", "once\n")), *lost_call()
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    assert (cairn.workspace(job.id) / "log.txt").read_text() == "once\n"
    assert len(responses_server.requests_for(marker)) == 1 + LOST_CALL, "no second turn"
    assert _outcomes(cairn, job.id) == ["interrupted"], "never a `changed` at the CLI's word"
    assert len(agent_state(cairn, job.id)["invocations"]) == 1


def test_rule_9_lost_stream_without_changes_starts_a_new_attempt(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    marker = "lose the stream before any change"
    job = submit_codex(cairn, codex_cli, marker)
    responses_server.add_answers(
        marker,
        *lost_call(),
        tool_call_answer(add_file("n.txt", "n\n")),
        text_answer("wrote n.txt"),
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    assert _outcomes(cairn, job.id) == ["interrupted", "changed"]
    state = agent_state(cairn, job.id)
    assert _resumed(state["invocations"]) == [None, state["session_id"]], "the same thread"
    assert (cairn.workspace(job.id) / "n.txt").read_text() == "n\n"
