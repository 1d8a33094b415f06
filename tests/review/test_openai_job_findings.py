"""Job-level review findings for the openai adapter, through the real runner over real HTTP."""

from __future__ import annotations

from tests.jobs.openai_support import finish, point_at, submit_openai, write

from cairn.testing import ScriptedOpenAIServer, ToolCall, tool_call_answer
from cairn.testing.harness import Cairn


def test_a_bad_dependency_version_from_the_model_does_not_fail_the_job(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    """Contract: tool errors go back to the model as tool results and do not fail the job. A
    `request_dependency` with a range version ends the turn and `_ask_for_dependency` raises
    StageFailed: the job fails, the model never hears why."""
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


def test_a_reply_turn_after_a_corrective_run_is_not_counted_as_corrective(
    cairn: Cairn, openai_server: ScriptedOpenAIServer
) -> None:
    """`_corrective_is_due` looks at every earlier agent stage run of the job, so once rule 7's
    corrective run happened, every later turn (a reviewer's reply) is recorded as corrective
    too: usage's corrective_runs says 2 for one corrective run."""
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
