"""Claude Code turns that cannot succeed fail with a diagnosis that says what to do."""

from __future__ import annotations

import json
from pathlib import Path

from tests.agents.claude.support import point_at, submit_claude

from cairn.testing import ScriptedAnthropicServer, text_reply
from cairn.testing.harness import Cairn


def test_a_refused_key_fails_the_job_saying_which_variable_to_fix(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, claude_code_cli: Path
) -> None:
    point_at(cairn, anthropic_server)
    wrong = "sk-ant-wrong-key-00112233445566"
    environment = {**cairn.config.environment, "ANTHROPIC_API_KEY": wrong}
    cairn.config = cairn.config.model_copy(update={"environment": environment})
    job = submit_claude(cairn, claude_code_cli, "refused key")
    anthropic_server.add_answers("refused key", text_reply("never"))
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    assert "ANTHROPIC_API_KEY" in detail["diagnosis"]
    assert wrong not in json.dumps(detail)


def test_a_missing_binary_fails_the_job_saying_how_to_install_or_name_it(
    cairn: Cairn, anthropic_server: ScriptedAnthropicServer, tmp_path: Path
) -> None:
    point_at(cairn, anthropic_server)
    job = submit_claude(cairn, tmp_path / "no-such" / "claude", "no binary here")
    cairn.work()
    detail = cairn.detail(job.id)
    assert detail["status"] == "failed"
    assert "claude CLI is not installed on this runner" in detail["diagnosis"]
    assert "--command" in detail["diagnosis"] and str(tmp_path) not in detail["diagnosis"]
    assert anthropic_server.requests == ()
