"""Aider turns that cannot succeed fail with a diagnosis that says what to do."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agents.aider.support import edit, point_at, submit_aider

from cairn.testing import ScriptedOpenAIServer
from cairn.testing.harness import Cairn


def test_a_refused_key_fails_the_job_saying_which_variable_to_fix(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, aider_cli: Path
) -> None:
    point_at(cairn, aider_server)
    wrong = "sk-wrong-key-00112233445566"
    environment = {**cairn.config.environment, "OPENAI_API_KEY": wrong}
    cairn.config = cairn.config.model_copy(update={"environment": environment})
    job = submit_aider(cairn, aider_cli, "refused key")
    aider_server.add_answers("refused key", edit("never.txt", "never\n"))
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    assert "OPENAI_API_KEY" in detail["diagnosis"]
    assert wrong not in json.dumps(detail)
    assert not (cairn.workspace(job.id) / "never.txt").exists()


def test_a_missing_binary_or_key_fails_the_job_saying_what_to_set(
    cairn: Cairn, aider_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    point_at(cairn, aider_server)
    job = submit_aider(cairn, tmp_path / "no-such" / "aider", "no binary here")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    assert "aider CLI is not installed on this runner" in detail["diagnosis"]
    assert "--command" in detail["diagnosis"] and str(tmp_path) not in detail["diagnosis"]
    cairn.config = cairn.config.model_copy(update={"environment": {}})
    keyless = submit_aider(cairn, tmp_path / "no-such" / "aider", "no key here")
    cairn.work()
    assert "OPENAI_API_KEY is not set" in cairn.detail(keyless.id)["diagnosis"]
    assert aider_server.requests == ()
