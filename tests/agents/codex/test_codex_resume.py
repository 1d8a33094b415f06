"""Codex CLI threads survive the runner: a SIGKILLed runner's job resumes the same thread, and
a workspace rebuilt at another path (another host) resumes it from the job's context."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.agents.codex.support import add_file, agent_state, dependency, point_at, submit_codex

from cairn.stages import Stage
from cairn.testing import (
    Fault,
    ScriptedResponsesServer,
    fault_answer,
    text_answer,
    tool_call_answer,
)
from cairn.testing.harness import Cairn

_RUNNER = """
import json, sys
from cairn.config import Config
from cairn.jobs.runner import Runner
from cairn.store import Store
given = json.loads(sys.argv[1])
config = Config(home=given["home"], lease_seconds=2, environment=given["environment"])
Runner(Store.open(given["url"]), config).work(until_idle=True)
"""


def _runner_process(cairn: Cairn, store_url: str) -> subprocess.Popen[bytes]:
    given = {
        "home": str(cairn.config.home),
        "environment": cairn.config.environment,
        "url": store_url,
    }
    return subprocess.Popen(
        [sys.executable, "-c", _RUNNER, json.dumps(given)],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _wait_for(server: ScriptedResponsesServer, marker: str, count: int) -> None:
    deadline = time.monotonic() + 120
    while len(server.requests_for(marker)) < count:
        assert time.monotonic() < deadline, f"{count} requests of {marker!r} never arrived"
        time.sleep(0.1)


def _threads(invocations: list[list[str]]) -> list[str | None]:
    """Each turn's resumed thread id, None for a turn that started a new thread."""
    return [flags[-3] if "resume" in flags else None for flags in invocations]


def test_a_runner_killed_mid_turn_resumes_the_same_thread(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path, store_url: str
) -> None:
    point_at(cairn, responses_server)
    marker = "write then wait on the model"
    job = submit_codex(cairn, codex_cli, marker)
    responses_server.add_answers(
        marker,
        tool_call_answer(add_file("once.txt", "once\n")),
        fault_answer(Fault.hang),
        text_answer("Wrote once.txt."),
    )
    runner = _runner_process(cairn, store_url)
    try:
        _wait_for(responses_server, marker, 2)
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
    cairn.work()  # waits out the dead runner's lease, then takes the job over
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    first, held, resumed = responses_server.requests_for(marker)
    state = agent_state(cairn, job.id)
    thread = state["session_id"]
    assert {r.headers["thread-id"] for r in (first, held, resumed)} == {thread}
    # The same thread, resumed: its opening and the patch it applied before the runner died.
    assert resumed.input[: len(first.input)] == first.input
    assert any(item.get("type") == "custom_tool_call" for item in resumed.input)
    assert _threads(state["invocations"]) == [None, thread]
    assert (cairn.workspace(job.id) / "once.txt").read_text() == "once\n"


def test_a_workspace_rebuilt_at_another_path_resumes_the_same_thread(
    cairn: Cairn, responses_server: ScriptedResponsesServer, codex_cli: Path
) -> None:
    point_at(cairn, responses_server)
    marker = "ask first, then write"
    job = submit_codex(cairn, codex_cli, marker)
    responses_server.add_answers(
        marker, tool_call_answer(dependency()), text_answer("waiting for termcolor")
    )
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_dependency_approval, cairn.detail(job.id)
    old_workspace = cairn.workspace(job.id)
    # Another host: another home, so another workspace path and an empty CLI state folder.
    cairn.config = cairn.config.model_copy(update={"home": cairn.tmp / "other-host"})
    new_workspace = cairn.workspace(job.id)
    assert new_workspace != old_workspace
    responses_server.add_answers(
        marker,
        tool_call_answer(add_file("after.txt", "after approval\n")),
        text_answer("Wrote after.txt."),
    )
    cairn.approve(job.id)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    _, answered, resumed, _ = responses_server.requests_for(marker)
    assert resumed.input[: len(answered.input)] == answered.input, "the same thread"
    assert "termcolor==2.4.0" in resumed.text
    assert (new_workspace / "after.txt").read_text() == "after approval\n"
    state = agent_state(cairn, job.id)
    thread = state["session_id"]
    assert {r.headers["thread-id"] for r in responses_server.requests_for(marker)} == {thread}
    assert _threads(state["invocations"]) == [None, thread]
