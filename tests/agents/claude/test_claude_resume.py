"""Claude Code sessions survive the runner: a SIGKILLed runner's job resumes the same session,
and a workspace rebuilt at another path (another host) resumes it from the job's context."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.agents.claude.support import agent_state, dependency, point_at, submit_claude, write

from cairn.stages import Stage
from cairn.testing import Fault, ScriptedAnthropicServer, fault_reply, text_reply, tool_use_reply
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


def _wait_for(server: ScriptedAnthropicServer, marker: str, count: int) -> None:
    deadline = time.monotonic() + 120
    while len(server.requests_for(marker)) < count:
        assert time.monotonic() < deadline, f"{count} requests of {marker!r} never arrived"
        time.sleep(0.1)


def _history(messages: list[dict[str, Any]]) -> list[Any]:
    """Messages as a conversation's history, without the prompt-cache marks that move along."""

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if k != "cache_control"}
        return [plain(item) for item in value] if isinstance(value, list) else value

    return [plain(message) for message in messages]


def _sessions(invocations: list[list[str]]) -> list[tuple[str, str]]:
    """Each turn's (flag, session id): how it named its session."""
    found = []
    for flags in invocations:
        flag = "--resume" if "--resume" in flags else "--session-id"
        found.append((flag, flags[flags.index(flag) + 1]))
    return found


def test_a_runner_killed_mid_turn_resumes_the_same_session(
    cairn: Cairn,
    anthropic_server: ScriptedAnthropicServer,
    claude_code_cli: Path,
    store_url: str,
) -> None:
    point_at(cairn, anthropic_server)
    marker = "write then wait on the model"
    job = submit_claude(cairn, claude_code_cli, marker)
    anthropic_server.add_answers(
        marker,
        tool_use_reply(write(cairn, job, "once.txt", "once\n")),
        fault_reply(Fault.hang),
        text_reply("Wrote once.txt."),
    )
    runner = _runner_process(cairn, store_url)
    try:
        _wait_for(anthropic_server, marker, 2)
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
    cairn.work()  # waits out the dead runner's lease, then takes the job over
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    _, held, resumed = anthropic_server.requests_for(marker)
    # The same session, resumed: its opening and the Write call. (Killed before it saved the
    # call's result, Claude Code tells the model the result is unknown: the file shows it.)
    opening = len(held.messages) - 1
    assert _history(resumed.messages)[:opening] == _history(held.messages)[:opening]
    assert held.messages[opening - 1]["content"][0]["name"] == "Write"
    state = agent_state(cairn, job.id)
    session = state["session_id"]
    assert _sessions(state["invocations"]) == [("--session-id", session), ("--resume", session)]
    assert (cairn.workspace(job.id) / "once.txt").read_text() == "once\n"


def test_a_workspace_rebuilt_at_another_path_resumes_the_same_session(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    marker = "ask first, then write"
    job = submit_claude(cairn, claude_code_cli, marker)
    anthropic_server.add_answers(marker, tool_use_reply(dependency()), text_reply("waiting"))
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_dependency_approval
    old_workspace = cairn.workspace(job.id)
    # Another host: another home, so another workspace path and an empty CLI state folder.
    cairn.config = cairn.config.model_copy(update={"home": cairn.tmp / "other-host"})
    new_workspace = cairn.workspace(job.id)
    assert new_workspace != old_workspace
    anthropic_server.add_answers(
        marker,
        tool_use_reply(write(cairn, job, "after.txt", "after approval\n")),
        text_reply("Wrote after.txt."),
    )
    cairn.approve(job.id)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    _, answered, resumed, _ = anthropic_server.requests_for(marker)
    earlier = _history(answered.messages)
    assert _history(resumed.messages)[: len(earlier)] == earlier, "the same session"
    assert "termcolor==2.4.0" in resumed.text
    assert (new_workspace / "after.txt").read_text() == "after approval\n"
    state = agent_state(cairn, job.id)
    session = state["session_id"]
    assert _sessions(state["invocations"]) == [("--session-id", session), ("--resume", session)]
