"""The lifecycle rules of DESIGN.md on the real Claude Code CLI: the twins of
tests/jobs/test_lifecycle_rules_openai.py, against ScriptedAnthropicServer over real HTTP."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from tests.agents.claude.support import (
    LOST_CALL,
    agent_state,
    dependency,
    lost_call,
    point_at,
    submit_claude,
    write,
)

from cairn.agents.registry import load_agent_spec
from cairn.jobs.agent_turns import CORRECTIVE_NOTE
from cairn.stages import Stage
from cairn.store.records import Job
from cairn.store.schema import contexts
from cairn.testing import ScriptedAnthropicServer, text_reply, tool_use_reply
from cairn.testing.harness import Cairn


def _outcomes(cairn: Cairn, job_id: int) -> list[object]:
    runs = [s for s in cairn.detail(job_id)["stages"] if s["name"] == "running_agent"]
    return [run["evidence"]["outcome"]["value"] for run in runs]


def test_rule_1_job_specific_continuity(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    """A paused job resumes its own session even after another job ran in the room."""
    point_at(cairn, anthropic_server)
    a = submit_claude(cairn, claude_code_cli, "job A")
    anthropic_server.add_answers(
        "job A",
        tool_use_reply(write(cairn, a, "a.txt", "from job A\n"), dependency()),
        text_reply("waiting for termcolor"),
        tool_use_reply(write(cairn, a, "a2.txt", "after approval\n")),
        text_reply("job A done"),
    )
    cairn.work()
    assert cairn.job(a.id).stage is Stage.awaiting_dependency_approval
    b = submit_claude(cairn, claude_code_cli, "job B")
    anthropic_server.add_answers(
        "job B", tool_use_reply(write(cairn, b, "b.txt", "B\n")), text_reply("job B done")
    )
    cairn.work()
    cairn.approve(b.id)
    cairn.work()
    cairn.approve(a.id)
    cairn.work()
    detail = cairn.detail(a.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    seen = anthropic_server.requests_for("job A")
    assert len(seen) == 4 and not any("job B" in request.text for request in seen)
    assert seen[2].messages[0] == seen[0].messages[0], "the same session, resumed"
    assert "job A done" in detail["review"]["summary"]


def test_rule_1_a_job_without_saved_context_starts_fresh_with_one_copy_of_its_request(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    marker = "job with a lost context"
    job = submit_claude(cairn, claude_code_cli, marker)
    anthropic_server.add_answers(
        marker,
        tool_use_reply(dependency()),
        text_reply("waiting"),
        tool_use_reply(write(cairn, job, "fresh.txt", "went on fresh\n")),
        text_reply("went on fresh"),
    )
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_dependency_approval
    with cairn.store.begin() as conn:  # the job's context is lost (an old record, a lost row)
        conn.execute(sa.delete(contexts).where(contexts.c.job_id == job.id))
    cairn.approve(job.id)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    fresh = anthropic_server.requests_for(marker)[2]
    assert [m["role"] for m in fresh.messages] == ["user", "system"], "a new session"
    assert fresh.text.count(marker) == 1, "one sanitized copy of its request"
    assert "termcolor==2.4.0 was approved" in fresh.text
    [flags] = agent_state(cairn, job.id)["invocations"]
    assert "--session-id" in flags and "--resume" not in flags


def test_rule_7_first_edit_must_edit_fails_a_second_unchanged_result(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    marker = "look around only"
    job = submit_claude(cairn, claude_code_cli, marker)
    anthropic_server.add_answers(
        marker, text_reply("looked around"), text_reply("still only looked")
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed" and "second unchanged result" in detail["diagnosis"]
    assert detail["usage"]["agent_runs"] == 2 and detail["usage"]["corrective_runs"] == 1
    first, corrective = anthropic_server.requests_for(marker)
    assert corrective.messages[0] == first.messages[0], "the same session"
    assert CORRECTIVE_NOTE in corrective.text
    assert corrective.tool_names == first.tool_names, "no wider authority"


def test_rule_8_fresh_context_for_scheduled_work(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    """A scheduled run's session holds nothing of an earlier run's: its own id, a fresh start."""
    point_at(cairn, anthropic_server)
    first = _submit_scheduled(cairn, claude_code_cli)
    anthropic_server.add_answers(
        "nightly",
        tool_use_reply(write(cairn, first, "b.txt", "first run secret-ish content\n")),
        text_reply("run 1"),
    )
    cairn.work()
    cairn.approve(first.id)
    cairn.work()
    second = _submit_scheduled(cairn, claude_code_cli)
    anthropic_server.add_answers(
        "nightly", tool_use_reply(write(cairn, second, "c.txt", "second\n")), text_reply("run 2")
    )
    cairn.work()
    assert cairn.job(second.id).stage is Stage.awaiting_review
    opening = anthropic_server.requests_for("nightly")[2]
    assert [m["role"] for m in opening.messages] == ["user", "system"]
    # The bounded reference set: the repository's documents and the earlier run's result...
    assert "--- README.md ---" in opening.text and "The previous run (job 1" in opening.text
    # ...never its session: no call it made, no content it wrote.
    assert "secret-ish" not in opening.text and "toolu_" not in str(opening.body)
    sessions = {agent_state(cairn, job.id)["session_id"] for job in (first, second)}
    assert len(sessions) == 2


def _submit_scheduled(cairn: Cairn, cli: Path) -> Job:
    from cairn.jobs.submit import submit_job
    from cairn.sanitize import user_sanitizer

    with cairn.store.begin() as conn:
        return submit_job(
            conn,
            room="sample",
            text="nightly",
            agent={**load_agent_spec("claude"), "command": str(cli)},
            actor="alice",
            sanitizer=user_sanitizer(cairn.config),
            kind="scheduled",
        )


def test_rule_9_lost_stream_after_changes_continues_the_same_job(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    """A connection lost for good after a file was written: verification of that change,
    never a second edit, and never a `changed` taken at the CLI's word."""
    point_at(cairn, anthropic_server)
    marker = "edit then lose the stream"
    job = submit_claude(cairn, claude_code_cli, marker)
    anthropic_server.add_answers(
        marker, tool_use_reply(write(cairn, job, "log.txt", "once\n")), *lost_call()
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    assert (cairn.workspace(job.id) / "log.txt").read_text() == "once\n"
    assert len(anthropic_server.requests_for(marker)) == 1 + LOST_CALL, "no second turn"
    assert _outcomes(cairn, job.id) == ["interrupted"]
    assert len(agent_state(cairn, job.id)["invocations"]) == 1


def test_rule_9_lost_stream_without_changes_starts_a_new_attempt(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    marker = "lose the stream before any change"
    job = submit_claude(cairn, claude_code_cli, marker)
    anthropic_server.add_answers(
        marker,
        *lost_call(),
        tool_use_reply(write(cairn, job, "n.txt", "n\n")),
        text_reply("wrote n.txt"),
    )
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    assert _outcomes(cairn, job.id) == ["interrupted", "changed"]
    first, again = agent_state(cairn, job.id)["invocations"]
    session = agent_state(cairn, job.id)["session_id"]
    assert first[first.index("--session-id") + 1] == session
    assert again[again.index("--resume") + 1] == session, "the new attempt, same session"
