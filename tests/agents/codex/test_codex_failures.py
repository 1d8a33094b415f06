"""Codex CLI turns cut off or refused: the outcome is read from the workspace and the final
event (rule 9), and a refused key fails the job saying which variable to fix."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agents.codex.support import (
    LOST_CALL,
    add_file,
    agent_state,
    lost_call,
    point_at,
    submit_codex,
)

from cairn.testing import ScriptedResponsesServer, text_answer, tool_call_answer
from cairn.testing.harness import Cairn


def _outcomes(cairn: Cairn, job_id: int) -> list[object]:
    runs = [s for s in cairn.detail(job_id)["stages"] if s["name"] == "running_agent"]
    return [run["evidence"]["outcome"]["value"] for run in runs]


def test_a_stream_lost_for_good_after_a_patch_goes_on_to_verification_without_a_second_edit(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    marker = "patch then lose the stream"
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


def test_a_stream_lost_before_any_change_starts_a_new_attempt_in_the_same_thread(
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
    first, again = state["invocations"]
    assert "resume" not in first
    assert again[again.index("resume") :][-3] == state["session_id"], "the same thread"
    assert (cairn.workspace(job.id) / "n.txt").read_text() == "n\n"


def test_a_refused_key_fails_the_job_saying_which_variable_to_fix(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    wrong = "sk-wrong-key-00112233445566778899"
    environment = {**cairn.config.environment, "OPENAI_API_KEY": wrong}
    cairn.config = cairn.config.model_copy(update={"environment": environment})
    job = submit_codex(cairn, codex_cli, "refused key")
    responses_server.add_answers("refused key", text_answer("never"))
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    assert "OPENAI_API_KEY" in detail["diagnosis"] and "HTTP 401" in detail["diagnosis"]
    assert wrong not in json.dumps(detail) and "127.0.0.1" not in detail["diagnosis"]


def test_a_missing_binary_fails_the_job_saying_how_to_install_or_name_it(
    cairn: Cairn, responses_server: ScriptedResponsesServer, tmp_path: Path
) -> None:
    point_at(cairn, responses_server)
    job = submit_codex(cairn, tmp_path / "no-such" / "codex", "no binary here")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    assert "codex CLI is not installed on this runner" in detail["diagnosis"]
    assert "--command" in detail["diagnosis"] and str(tmp_path) not in detail["diagnosis"]
    assert responses_server.requests == ()
