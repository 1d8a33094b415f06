"""The openai adapter through the real CLI, against ScriptedOpenAIServer over real HTTP.

The runner finds the server through its own environment (OPENAI_BASE_URL, OPENAI_API_KEY),
exactly as it would find vLLM or Ollama.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from subprocess import Popen

import pytest

from cairn.testing import Fault, ScriptedOpenAIServer, ToolCall, fault_answer, tool_call_answer

from .conftest import Cli, wait_for

pytestmark = pytest.mark.acceptance

KEY = "sk-acceptance-key-0123456789"


@pytest.fixture
def server(cli: Cli) -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(api_key=KEY) as running:
        cli.env |= {"OPENAI_BASE_URL": running.base_url, "OPENAI_API_KEY": KEY}
        yield running


def submit(cli: Cli, request: str) -> int:
    out = cli.json("submit", "sample", request, "--agent", "openai:qwen-cli", "--as", "alice")
    return int(out["id"])


def test_an_openai_job_is_submitted_worked_approved_and_delivered(
    cli: Cli, server: ScriptedOpenAIServer
) -> None:
    cli.room()
    write = ToolCall("write_file", {"path": "hello.txt", "content": "hello from the model\n"})
    server.add_answers(
        "Add hello.txt",
        tool_call_answer(write),
        tool_call_answer(ToolCall("finish", {"summary": "Added hello.txt."})),
    )
    job = submit(cli, "Add hello.txt")
    cli.work()
    review = cli.show(job)
    assert review["stage"] == "awaiting_review", review["diagnosis"]
    assert "Added hello.txt." in review["review"]["summary"]
    assert all(request.authorization_matched for request in server.requests)
    assert KEY not in str(review)
    cli("approve", str(job))
    cli.work()
    assert cli.show(job)["status"] == "completed"
    assert cli.git("show", "main:hello.txt") == "hello from the model"


def test_a_runner_killed_while_the_model_holds_its_answer_resumes_at_the_same_step(
    cli: Cli, server: ScriptedOpenAIServer, background: Callable[..., Popen[bytes]]
) -> None:
    cli.room()
    marker = "Append one line"
    server.add_answers(
        marker,
        tool_call_answer(ToolCall("run", {"command": "echo ran >> log.txt"})),
        fault_answer(Fault.hang),
        tool_call_answer(ToolCall("finish", {"summary": "Appended to log.txt."})),
    )
    job = submit(cli, marker)
    runner = background("work")
    wait_for(
        lambda: len(server.requests_for(marker)) == 2,
        timeout=30,
        what="the runner to wait on the model's second answer",
    )
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait(timeout=10)

    cli.work()  # waits out the dead runner's lease, then takes the job over
    review = cli.show(job)
    assert review["stage"] == "awaiting_review", review["diagnosis"]
    held, resumed = server.requests_for(marker)[1:]
    assert resumed.messages == held.messages, "the same step, asked with the same messages"
    assert (cli.workspace(job) / "log.txt").read_text() == "ran\n", "the run ran once"
