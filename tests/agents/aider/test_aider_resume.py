"""Aider's history survives the runner: a SIGKILLed runner's job resumes the same history, and
a workspace rebuilt at another path (another host) resumes it from the job's context."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.agents.aider.support import (
    agent_state,
    dependency,
    edit,
    point_at,
    submit_aider,
    user_texts,
)

from cairn.agents.cli_turn import CONTINUE
from cairn.stages import Stage
from cairn.testing import Fault, ScriptedOpenAIServer, fault_answer
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


def _wait_for(server: ScriptedOpenAIServer, marker: str, count: int) -> None:
    deadline = time.monotonic() + 120
    while len(server.requests_for(marker)) < count:
        assert time.monotonic() < deadline, f"{count} requests of {marker!r} never arrived"
        time.sleep(0.1)


def _restores(invocations: list[list[str]]) -> list[bool]:
    """Each turn: whether it re-sent the job's history."""
    return ["--restore-chat-history" in flags for flags in invocations]


def test_a_runner_killed_mid_turn_resumes_the_same_history(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path, store_url: str
) -> None:
    point_at(cairn, aider_server)
    marker = "wait on the model, then write"
    job = submit_aider(cairn, aider_cli, marker)
    aider_server.add_answers(marker, fault_answer(Fault.hang), edit("once.txt", "once\n"))
    runner = _runner_process(cairn, store_url)
    try:
        _wait_for(aider_server, marker, 1)
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
    cairn.work()  # waits out the dead runner's lease, then takes the job over
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    held, resumed = aider_server.requests_for(marker)
    (opening,) = [t for t in user_texts(held) if t.startswith(marker)]
    restored = [t for t in user_texts(resumed)[:-1] if t.startswith(marker)]
    assert len(restored) == 1, "the job's own history, re-sent once"
    assert " ".join(opening.split()).startswith(" ".join(restored[0].split()))
    assert user_texts(resumed)[-1].startswith(CONTINUE)
    assert _restores(agent_state(cairn, job.id)["invocations"]) == [False, True]
    assert (cairn.workspace(job.id) / "once.txt").read_text() == "once\n"


def test_a_workspace_rebuilt_at_another_path_resumes_the_same_history(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path
) -> None:
    point_at(cairn, aider_server)
    marker = "ask first, then write"
    job = submit_aider(cairn, aider_cli, marker)
    aider_server.add_answers(marker, dependency(cairn, job))
    cairn.work()
    assert cairn.job(job.id).stage is Stage.awaiting_dependency_approval, cairn.detail(job.id)
    old_workspace = cairn.workspace(job.id)
    # Another host: another home, so another workspace path and an empty CLI state folder.
    cairn.config = cairn.config.model_copy(update={"home": cairn.tmp / "other-host"})
    new_workspace = cairn.workspace(job.id)
    assert new_workspace != old_workspace
    aider_server.add_answers(marker, edit("after.txt", "after approval\n"))
    cairn.approve(job.id)
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["stage"] == "awaiting_review", detail["diagnosis"]
    asked, resumed = aider_server.requests_for(marker)
    (opening,) = [t for t in user_texts(asked) if t.startswith(marker)]
    restored = [t for t in user_texts(resumed)[:-1] if t.startswith(marker)]
    assert len(restored) == 1, "the job's own history, from the job's context"
    assert " ".join(opening.split()).startswith(" ".join(restored[0].split()))
    replies = [m["content"] for m in resumed.messages if m["role"] == "assistant"]
    assert any('"termcolor"' in reply for reply in replies), "its own earlier answer too"
    assert "termcolor==2.4.0" in user_texts(resumed)[-1]
    assert (new_workspace / "after.txt").read_text() == "after approval\n"
    assert _restores(agent_state(cairn, job.id)["invocations"]) == [False, True]
